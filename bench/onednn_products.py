#!/usr/bin/env python3
"""Per-product time of a training step, from oneDNN's verbose log of `linformer bench --train`.

    ONEDNN_VERBOSE=1 build/linformer bench --train --n 512 --bf16 --warmup 2 --reps 3 > LOG
    python3 bench/onednn_products.py LOG --warmup 2 --reps 3

The bench's reference product (4096x3072x768, and its weight reorder) is dropped; the other
primitive executions are split into warmup + reps equal steps (every step runs the same
products in the same order), the warm-up steps are dropped (their first-touch page faults
make them slower), and each shape's time per step is the median over the timed steps.
"""
import argparse
import collections
import math
import statistics
import sys


def flops(shape):
    """2 M N K of a matmul problem 'AxB...:...:C...' (batched shapes multiply out), else 0."""
    parts = shape.split(":")
    if len(parts) != 3:
        return 0
    a = [int(x) for x in parts[0].split("x")]
    c = [int(x) for x in parts[2].split("x")]
    return 2 * math.prod(c) * a[-1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--top", type=int, default=20)
    a = ap.parse_args()
    rows = []
    with open(a.log, errors="replace") as f:
        for line in f:
            if not line.startswith("onednn_verbose,exec"):
                continue
            r = line.strip().split(",")
            if "768x3072" in r[-2] or "4096x3072" in r[-2]:
                continue  # the reference product
            rows.append((r[3], r[-2], float(r[-1])))
    steps = a.warmup + a.reps
    if not rows or len(rows) % steps:
        sys.exit(f"{a.log}: {len(rows)} executions do not split into {steps} equal steps "
                 "(give the bench's --warmup and --reps; run one configuration)")
    per = len(rows) // steps
    timed = [rows[i * per:(i + 1) * per] for i in range(a.warmup, steps)]
    per_step = collections.defaultdict(list)
    calls = collections.Counter((p, s) for p, s, _ in timed[0])
    for step in timed:
        acc = collections.defaultdict(float)
        for p, s, t in step:
            acc[(p, s)] += t
        for k, v in acc.items():
            per_step[k].append(v)
    med = {k: statistics.median(v) for k, v in per_step.items()}
    total = sum(med.values())
    print(f"{per} primitive executions per step; {total:.1f} ms per step in oneDNN "
          f"(median of {a.reps} steps)\n")
    print("| primitive | shape | calls | ms/step | GFLOP/s |")
    print("|---|---|---|---|---|")
    for (p, s), t in sorted(med.items(), key=lambda kv: -kv[1])[:a.top]:
        fl = flops(s) * calls[(p, s)] if p == "matmul" else 0
        rate = f"{fl / t / 1e6:.0f}" if fl and t > 0 else ""
        print(f"| {p} | {s} | {calls[(p, s)]} | {t:.2f} | {rate} |")


if __name__ == "__main__":
    main()
