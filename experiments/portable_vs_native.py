#!/usr/bin/env python3
"""Portable against native build: `linformer bench` (inference or --train) of two binaries,
alternating A B A B ... in one process tree, so both see the same machine state; prints each
configuration's median and fastest time per build and the ratios portable / native (above 1:
the portable build is slower); on a shared machine the fastest of the rounds is the steadier
figure. Run it with nothing else running (docs/benchmarks.md, "Portable and native
builds").

usage: experiments/portable_vs_native.py NATIVE_BIN PORTABLE_BIN ROUNDS -- BENCH_ARGS...
e.g.   experiments/portable_vs_native.py build-native/linformer build/linformer 3 -- \
           --layers 1 --n 512,2048 --k 128 --attention linformer,streaming --precision int8
"""
import json
import statistics
import subprocess
import sys


def main():
    if len(sys.argv) < 5 or sys.argv[4] != "--":
        sys.exit(__doc__)
    native, portable, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    args = sys.argv[5:]
    train = "--train" in args
    key = "seconds_per_step" if train else "seconds_per_sequence"
    times = {"native": {}, "portable": {}}
    phases = {"native": {}, "portable": {}}  # --train: (cfg, phase) -> seconds per step
    info = {}
    for r in range(rounds):
        for name, binary in (("native", native), ("portable", portable)):
            out = subprocess.run([binary, "bench", "--json", *args], check=True,
                                 capture_output=True, text=True).stdout
            doc = json.loads(out)
            runs = doc["runs"] if isinstance(doc, dict) and "runs" in doc else doc
            for run in runs:
                if run.get("status") != "ok":
                    continue
                cfg = (run.get("attention", "train"), run.get("n"), run.get("k"),
                       run.get("compute", run.get("precision")))
                times[name].setdefault(cfg, []).append(run[key])
                for ph, v in run.get("phases", {}).items():
                    phases[name].setdefault((cfg, ph), []).append(v["seconds"])
            if r == 0:
                info[name] = subprocess.run([binary, "--version"], capture_output=True,
                                            text=True).stdout.strip().splitlines()[-1]
    for name in ("native", "portable"):
        print(f"{name}: {info[name]}")
    print()
    print(f"| configuration | native {key}, median of {rounds} | portable | portable / native "
          f"(medians) | native, fastest | portable, fastest | portable / native (fastest) |")
    print("|---|---|---|---|---|---|---|")
    for cfg in times["native"]:
        if cfg not in times["portable"]:
            continue
        a = statistics.median(times["native"][cfg])
        b = statistics.median(times["portable"][cfg])
        label = " ".join(str(c) for c in cfg if c is not None)
        fa, fb = min(times["native"][cfg]), min(times["portable"][cfg])
        print(f"| {label} | {a:.4g} | {b:.4g} | {b / a:.3f} | {fa:.4g} | {fb:.4g} | {fb / fa:.3f} |")
    if phases["native"]:
        print()
        print("| configuration | phase | native s | portable s | portable / native |")
        print("|---|---|---|---|---|")
        for (cfg, ph), v in phases["native"].items():
            w = phases["portable"].get((cfg, ph))
            if not w:
                continue
            a, b = statistics.median(v), statistics.median(w)
            label = " ".join(str(c) for c in cfg if c is not None)
            print(f"| {label} | {ph} | {a:.4g} | {b:.4g} | {b / a if a else float('nan'):.3f} |")


if __name__ == "__main__":
    main()
