#!/usr/bin/python3
"""ONNX Runtime peer comparison for `linformer bench`: the same encoders, the same timed batch,
f32 and int8, ONNX Runtime and ours in the same run, one markdown table.

Run (from the repository root, after scripts/setup.sh --bench and a Release build):

  /usr/bin/python3 bench/ort/compare.py --quick      # 1 layer d 512, n 512 and 2048 (minutes)
  /usr/bin/python3 bench/ort/compare.py              # the whole grid (estimate: an hour or more
                                                     # on 2 cores; ~12 GB of exports in --cache-dir)
  /usr/bin/python3 bench/ort/compare.py --models 1x512 --n 4096 8192 --precision f32 --details

Needs: Debian's python3-torch, python3-onnx, python3-numpy, libopenblas0-openmp (the PyTorch
reference of the export check), node and npm, and ONNX Runtime from npm, installed once with
  (cd bench/ort && ONNXRUNTIME_NODE_INSTALL=skip npm ci)
(onnxruntime-node ships its CPU library in the package; the variable keeps its install script
from downloading anything).

What it measures: inference time per sequence of a RoBERTa-style encoder (post-norm, exact
GELU; bench/pytorch/bench_torch.py's model) with Linformer attention (k = 128, one projection
E shared by all layers, `linformer bench --sharing layerwise`, the default) or exact attention,
on random token ids, at the batch `linformer bench` times: max(1, 8192 // n) sequences; the
median of --reps runs after a warm-up. The grid (--models, --n):
  1x512   1 layer, d 512, 8 heads, d_ff 2048 at n = 512, 1024, 2048, 4096, 8192, 16384
  12x768  12 layers, d 768, 12 heads, d_ff 3072 (RoBERTa-base) at n = 512, 4096
each with --attention linformer standard and --precision f32 int8.

The peers:
  ONNX Runtime  onnxruntime-node (bench_ort.js) on the CPU execution provider, graph
                optimisation level "all", intraOpNumThreads = --threads (all cores),
                interOpNumThreads 1, sequential execution. Each model is exported by export.py
                (torch.onnx.export, opset 17) in two graphs (--ort-variants), both timed:
                  plain  attention as PyTorch writes it: [B, h, n, L] scores, Softmax, MatMul
                  mha    attention as one com.microsoft MultiHeadAttention node: ORT's CPU
                         flash attention (no [B, h, n, L] tensor)
                int8: the linear maps as com.microsoft DynamicQuantizeMatMul (int8 weights per
                output channel, activations quantized at run time), as ORT's quantize_dynamic
                (per_channel) would leave them; attention, E, LayerNorm and embeddings f32.
                On a CPU without VNNI the weights take 7 bits (quantize_dynamic's reduce_range,
                ORT's advice there: MLAS's AVX2 u8 x s8 product sums pairs in saturating 16-bit
                lanes; with 8-bit weights a 1-layer model's output was 10x further from f32).
                Every exported model is checked against PyTorch f32 before it is timed
                (export.py; f32: max difference <= 1e-3 of the output scale; int8: cosine
                >= 0.99); exports are cached under --cache-dir with their check report.
                The flash path of the mha graphs shows in its memory: with
                ORT_DISABLE_FLASH_ATTENTION=1 in the environment, ORT's MultiHeadAttention
                falls back to [B, h, n, L] scores and the peak RSS (--details) grows.
  ours          `linformer bench --json` with the same model sizes, --n, --k 128,
                --precision f32|int8, --reps, --batch-tokens; exact attention runs our
                standard (materialized [B, h, n, n]), tiled and streaming paths (--ours-exact).
The table keeps, for each side, its fastest set-up (named in the table): ORT's best graph
against our best path. ratio = ORT ms / ours ms (> 1: ours faster). With --runs R everything
is repeated R times and each side's fastest time kept (noise on a shared machine only adds
time). If the binary rejects --precision int8, our int8 cells are left empty with a note.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

MODELS = {  # name: (layers, d_model, heads, d_ff, sequence lengths)
    "1x512": (1, 512, 8, 2048, [512, 1024, 2048, 4096, 8192, 16384]),
    "12x768": (12, 768, 12, 3072, [512, 4096]),
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def cpu_name():
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def has_vnni():
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((l for l in f if l.startswith("flags")), "").split()
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def model_file(a, spec, attention, n, variant, precision):
    L, d, h, f, _ = MODELS[spec]
    name = "L%d_d%d_h%d_f%d_v%d_%s%s_n%d_%s_%s%s_s%d.onnx" % (
        L, d, h, f, a.vocab, attention, "%d" % a.k if attention == "linformer" else "", n, variant,
        precision, "_rr" if precision == "int8" and a.reduce_range else "", a.seed)
    return os.path.join(a.cache_dir, name)


def export(a, spec, attention, n, variant, precision, batch):
    """The cached, checked model: (path, report) or (None, report) when export or check failed."""
    path = model_file(a, spec, attention, n, variant, precision)
    meta = path + ".json"
    if not a.force_export and os.path.exists(path) and os.path.exists(meta):
        with open(meta) as f:
            rep = json.load(f)
        if rep["check"]["status"] in ("ok", "skipped") or (a.no_check and rep["check"]["status"] == "not run"):
            return path, rep
    L, d, h, f, _ = MODELS[spec]
    cmd = ["/usr/bin/python3", os.path.join(HERE, "export.py"), "--layers", str(L), "--d-model", str(d),
           "--heads", str(h), "--d-ff", str(f), "--vocab", str(a.vocab), "--n", str(n), "--k", str(a.k),
           "--attention", attention, "--variant", variant, "--precision", precision, "--seed", str(a.seed),
           "--threads", str(a.threads), "--check-batch", str(min(2, batch)), "--out", path]
    if a.no_check:
        cmd.append("--no-check")
    if precision == "int8" and a.reduce_range:
        cmd.append("--reduce-range")
    log("export:", " ".join(cmd[1:]))
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    log("  %s(%.0f s)" % (p.stderr.strip().splitlines()[-1] + " " if p.stderr.strip() else "", time.time() - t0))
    if not os.path.exists(meta):
        return None, {"check": {"status": "export failed", "why": p.stderr.strip()[-500:]}}
    with open(meta) as fh:
        rep = json.load(fh)
    return (path if p.returncode == 0 else None), rep


def time_ort(a, path, n, batch):
    cmd = ["node", os.path.join(HERE, "bench_ort.js"), "--model", path, "--n", str(n), "--batch", str(batch),
           "--vocab", str(a.vocab), "--reps", str(a.reps), "--threads", str(a.threads)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        return None, "ORT failed (rc %d): %s" % (p.returncode, p.stderr.strip()[-300:])
    return json.loads(p.stdout), ""


def run_ours(a, spec, n, precision, kinds):
    """Our records for one (model, n, precision): {attention kind: record}, and a note."""
    L, d, h, f, _ = MODELS[spec]
    cmd = [a.binary, "bench", "--json", "--layers", str(L), "--d-model", str(d), "--heads", str(h),
           "--d-ff", str(f), "--vocab", str(a.vocab), "--n", str(n), "--k", str(a.k), "--attention"] + kinds + [
           "--precision", precision, "--reps", str(a.reps), "--batch-tokens", str(a.batch_tokens)]
    log("ours:", " ".join(cmd))
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        err = p.stderr.strip().splitlines()
        why = err[0] if err else "rc %d" % p.returncode
        if precision != "f32" and precision in p.stderr:
            return {}, "the binary rejects --precision %s (%s)" % (precision, why)
        return {}, "linformer bench failed: " + why
    doc = json.loads(p.stdout)
    a.sgemm = a.sgemm or doc["meta"].get("sgemm_gflops")
    wrong = sorted({r.get("compute", "f32") for r in doc["runs"]} - {precision})
    if wrong:  # a binary that took the option but ran another precision
        return {}, "linformer bench ran %s for --precision %s" % (", ".join(wrong), precision)
    return {r["attention"]: r for r in doc["runs"]}, ""


def fmt_ms(s):
    return "-" if s is None else ("%.1f" % s if s >= 10 else "%.2f" % s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="1x512 at n 512 and 2048 only (a few minutes)")
    ap.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    ap.add_argument("--n", type=int, nargs="+", help="only these sequence lengths (of each model's grid)")
    ap.add_argument("--attention", nargs="+", choices=["linformer", "standard"], default=["linformer", "standard"])
    ap.add_argument("--precision", nargs="+", choices=["f32", "int8"], default=["f32", "int8"])
    ap.add_argument("--ort-variants", nargs="+", choices=["plain", "mha"], default=["plain", "mha"])
    ap.add_argument("--ours-exact", nargs="+", choices=["standard", "tiled", "streaming"],
                    default=["standard", "tiled", "streaming"],
                    help="our exact-attention paths to time against ORT's standard attention")
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=50265)
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--seed", type=int, default=0, help="seed of the exported weights")
    ap.add_argument("--binary", default=os.path.join(ROOT, "build", "linformer"))
    ap.add_argument("--cache-dir", default=os.path.join(HERE, "cache"))
    ap.add_argument("--force-export", action="store_true", help="export again even when cached")
    ap.add_argument("--no-check", action="store_true", help="skip the ORT-against-PyTorch check")
    ap.add_argument("--ort-memory-gib", type=float, default=12.0,
                    help="skip ORT's plain standard attention when its [B,h,n,n] scores and "
                         "probabilities need more")
    ap.add_argument("--int8-reduce-range", choices=["auto", "on", "off"], default="auto",
                    help="ORT int8 weights in 7 bits (quantize_dynamic's reduce_range); auto: on when the "
                         "CPU has no VNNI, where MLAS's u8s8 AVX2 product can saturate its 16-bit sums")
    ap.add_argument("--details", action="store_true", help="also print every set-up's time (both sides)")
    ap.add_argument("--markdown", help="also write the table(s) to this file")
    ap.add_argument("--json", help="write every measurement and check report to this file")
    a = ap.parse_args()
    if a.quick:
        a.models, a.n = ["1x512"], a.n or [512, 2048]
    if not os.access(a.binary, os.X_OK):
        sys.exit("compare.py: no %s: build it (cmake --build build --target linformer) or give --binary" % a.binary)
    a.sgemm = None
    a.reduce_range = a.int8_reduce_range == "on" or (a.int8_reduce_range == "auto" and not has_vnni())
    start_load = os.getloadavg()
    notes, checks, detail = [], [], []
    best = {}  # (spec, attention, n, precision) -> row
    for run in range(a.runs):
        for spec in a.models:
            for n in [n for n in MODELS[spec][4] if not a.n or n in a.n]:
                B = max(1, a.batch_tokens // n)
                for precision in a.precision:
                    kinds = [k for k in (["linformer"] if "linformer" in a.attention else []) +
                             (a.ours_exact if "standard" in a.attention else []) if k != "linformer" or a.k < n]
                    mine, note = run_ours(a, spec, n, precision, kinds)
                    if note and note not in notes:
                        notes.append(note)
                        log("  note:", note)
                    for attention in a.attention:
                        if attention == "linformer" and a.k >= n:
                            continue
                        row = best.setdefault((spec, attention, n, precision), {
                            "model": spec, "attention": attention, "n": n, "batch": B, "precision": precision,
                            "ort_ms": None, "ort_setup": "", "ours_ms": None, "ours_setup": "", "why": []})
                        # ours
                        for kind in (["linformer"] if attention == "linformer" else a.ours_exact):
                            r = mine.get(kind)
                            if r and r.get("status") == "ok":
                                ms = r["seconds_per_sequence"] * 1e3
                                detail.append((spec, attention, n, precision, "ours", kind, ms, r.get("peak_rss_bytes")))
                                if row["ours_ms"] is None or ms < row["ours_ms"]:
                                    row["ours_ms"], row["ours_setup"] = ms, kind
                            elif r:
                                detail.append((spec, attention, n, precision, "ours", kind, None, r.get("status")))
                        # ORT
                        h = MODELS[spec][2]
                        for variant in a.ort_variants:
                            need = 2 * B * h * n * n * 4
                            if attention == "standard" and variant == "plain" and need > a.ort_memory_gib * 2**30:
                                w = "ORT plain n=%d: [B,h,n,n] scores need %.0f GiB" % (n, need / 2**30)
                                detail.append((spec, attention, n, precision, "ORT", variant, None, "skipped"))
                                if w not in row["why"]:
                                    row["why"].append(w)
                                continue
                            path, rep = export(a, spec, attention, n, variant, precision, B)
                            if run == 0:
                                checks.append((spec, attention, n, variant, precision, rep.get("check", {})))
                            if not path:
                                row["why"].append("ORT %s: check %s" % (variant, rep["check"]["status"]))
                                continue
                            res, err = time_ort(a, path, n, B)
                            if not res:
                                row["why"].append(err)
                                log("  " + err)
                                continue
                            ms = res["ms_per_sequence"]
                            a.ort_version = res["ort_version"]
                            detail.append((spec, attention, n, precision, "ORT", variant, ms, res["peak_rss_bytes"]))
                            if row["ort_ms"] is None or ms < row["ort_ms"]:
                                row["ort_ms"], row["ort_setup"] = ms, variant
                        log("run %d %-6s %-9s n=%5d B=%3d %-4s ORT %s ms%s  ours %s ms%s" % (
                            run + 1, spec, attention, n, B, precision,
                            fmt_ms(row["ort_ms"]), " (%s)" % row["ort_setup"] if row["ort_setup"] else "",
                            fmt_ms(row["ours_ms"]), " (%s)" % row["ours_setup"] if row["ours_setup"] else ""))

    L = {s: MODELS[s] for s in a.models}
    lines = [
        "ONNX Runtime %s (onnxruntime-node, CPU EP, graph optimisation 'all', %d intra-op threads, "
        "sequential) against `linformer bench` (%s), %s, %d cores; load average %.1f before the run "
        "(%s). Time per sequence (ms) at batch max(1, %d // n), median of %d reps%s; "
        "ratio = ORT / ours in the same precision." % (
            getattr(a, "ort_version", "?"), a.threads, os.path.relpath(a.binary, os.getcwd()), cpu_name(),
            os.cpu_count(), start_load[0],
            "other processes shared the cores" if start_load[0] > 0.5 else "the machine was idle",
            a.batch_tokens, a.reps, ", fastest of %d runs" % a.runs if a.runs > 1 else ""),
        "Models: " + "; ".join("%s = %d layer%s, d %d, %d heads, d_ff %d" % (
            s, v[0], "s" if v[0] > 1 else "", v[1], v[2], v[3]) for s, v in L.items()) +
        ". ORT set-up: plain = attention as exported ops, mha = com.microsoft MultiHeadAttention "
        "(flash); ORT int8 weights %s; ours: linformer, or the fastest of our exact paths (standard = "
        "materialized, tiled, streaming)." % ("7-bit (reduce_range: no VNNI on this CPU)" if a.reduce_range and
                                              a.int8_reduce_range == "auto" else
                                              "7-bit (reduce_range)" if a.reduce_range else "8-bit"),
        "",
        "| config | precision | ORT ms/seq | ours ms/seq | ratio ORT/ours |",
        "|---|---|---|---|---|"]
    for row in best.values():
        name = "%s %s n=%d (batch %d)" % (row["model"], "linformer k=%d" % a.k if row["attention"] == "linformer"
                                          else "standard", row["n"], row["batch"])
        o, m = row["ort_ms"], row["ours_ms"]
        lines.append("| %s | %s | %s | %s | %s |" % (
            name, row["precision"], fmt_ms(o) + (" (%s)" % row["ort_setup"] if o else ""),
            fmt_ms(m) + (" (%s)" % row["ours_setup"] if m else ""),
            "%.2fx" % (o / m) if o and m else "; ".join(row["why"]) or "-"))
    if notes:
        lines += [""] + ["Note: ours " + x + "." for x in notes]
    lines += ["", "Export checks (ORT against PyTorch f32 on min(2, batch) sequences of random ids):", "",
              "| config | graph | precision | max abs diff | relative | cosine | ORT fused ops | status |",
              "|---|---|---|---|---|---|---|---|"]
    for spec, attention, n, variant, precision, c in checks:
        lines.append("| %s %s n=%d | %s | %s | %s | %s | %s | %s | %s |" % (
            spec, attention, n, variant, precision,
            "%.2g" % c["max_abs_diff"] if "max_abs_diff" in c else "-",
            "%.2g" % c["rel_diff"] if "rel_diff" in c else "-",
            "%.6f" % c["cosine"] if "cosine" in c else "-",
            ", ".join("%s x%d" % (k.split("::")[1], v) for k, v in c.get("ort_contrib_ops", {}).items()) or "-",
            c.get("status", "?") + (": " + c["why"] if c.get("why") else "")))
    if a.details:
        lines += ["", "Every set-up timed:", "", "| config | precision | side | set-up | ms/seq | peak RSS MiB |",
                  "|---|---|---|---|---|---|"]
        for spec, attention, n, precision, side, setup, ms, rss in detail:
            lines.append("| %s %s n=%d | %s | %s | %s | %s | %s |" % (
                spec, attention, n, precision, side, setup, fmt_ms(ms),
                "%.0f" % (rss / 2**20) if isinstance(rss, (int, float)) and rss else (rss or "-")))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"rows": list(best.values()), "checks": checks, "detail": detail, "notes": notes,
                       "cpu": cpu_name(), "threads": a.threads, "sgemm_gflops": a.sgemm,
                       "ort_version": getattr(a, "ort_version", None)}, f, indent=1)


if __name__ == "__main__":
    main()
