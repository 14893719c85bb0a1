#!/usr/bin/env python3
"""Summarises experiments/ptb_sweep.sh runs: a markdown table of validation perplexity and
SVG curves of validation loss against step (written next to the docs).

Usage: python3 experiments/ptb_report.py RUNS_DIR IMG_DIR > table.md
"""
import json
import math
import os
import sys


def load(run_dir):
    recs = []
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.exists(path):
        return recs
    with open(path) as f:
        for line in f:
            try:
                recs.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return recs


def svg(series, title, path, ylabel="validation loss (nats)"):
    W, H, L, R, T, B = 760, 440, 70, 190, 40, 50
    pts = [(x, y) for _, xs, ys in series for x, y in zip(xs, ys)]
    if not pts:
        return
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    pad = 0.05 * (y1 - y0 or 1)
    y0, y1 = y0 - pad, y1 + pad
    sx = lambda x: L + (W - L - R) * (x - x0) / ((x1 - x0) or 1)
    sy = lambda y: T + (H - T - B) * (1 - (y - y0) / ((y1 - y0) or 1))
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
              "#7f7f7f", "#bcbd22", "#17becf"]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="{(W - R + L) / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>',
           f'<rect x="{L}" y="{T}" width="{W - L - R}" height="{H - T - B}" fill="none" stroke="#333"/>']
    for i in range(6):
        yv = y0 + (y1 - y0) * i / 5
        out.append(f'<text x="{L - 6}" y="{sy(yv) + 4:.1f}" text-anchor="end">{yv:.2f}</text>')
        xv = x0 + (x1 - x0) * i / 5
        out.append(f'<text x="{sx(xv):.1f}" y="{H - B + 16}" text-anchor="middle">{xv:.0f}</text>')
    out.append(f'<text x="{(W - R + L) / 2}" y="{H - 12}" text-anchor="middle">step</text>')
    out.append(f'<text transform="translate(16,{(H - B + T) / 2}) rotate(-90)" '
               f'text-anchor="middle">{ylabel}</text>')
    for k, (name, xs, ys) in enumerate(series):
        c = colors[k % len(colors)]
        p = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(xs, ys))
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.8" points="{p}"/>')
        ly = T + 14 + 18 * k
        out.append(f'<line x1="{W - R + 10}" y1="{ly}" x2="{W - R + 34}" y2="{ly}" stroke="{c}" '
                   'stroke-width="2"/>')
        out.append(f'<text x="{W - R + 40}" y="{ly + 4}">{name}</text>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    runs_dir, img_dir = sys.argv[1], sys.argv[2]
    os.makedirs(img_dir, exist_ok=True)
    rows, curves = [], {}
    for name in sorted(os.listdir(runs_dir)):
        d = os.path.join(runs_dir, name)
        if not os.path.isdir(d) or name in ("cache", "configs"):
            continue
        recs = load(d)
        valid = [r for r in recs if r.get("split") == "valid"]
        train = [r for r in recs if r.get("split") == "train"]
        if not valid:
            continue
        cfg = json.load(open(os.path.join(d, "config.json")))
        last = valid[-1]
        tps = [r["tokens_per_s"] for r in train if "tokens_per_s" in r]
        rows.append((name, cfg["attention"], cfg.get("k") if cfg["attention"] == "linformer" else "-",
                     cfg.get("sharing") if cfg["attention"] == "linformer" else "-", cfg["max_len"],
                     last["step"], last["loss"], last["ppl"], last.get("elapsed_s", float("nan")),
                     sorted(tps)[len(tps) // 2] if tps else float("nan")))
        curves[name] = ([r["step"] for r in valid], [r["loss"] for r in valid])
    print("| run | attention | k | sharing | n | steps | valid loss | valid ppl | time (s) | tokens/s (median) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]} | {r[6]:.4f} | {r[7]:.1f} | "
              f"{r[8]:.0f} | {r[9]:.0f} |")
    groups = {
        "ptb_k.svg": ("Validation loss, n = 512: standard vs Linformer k (headwise)",
                      ["standard-n512", "lin-k32-n512", "lin-k64-n512", "lin-k128-n512", "lin-k256-n512"]),
        "ptb_sharing.svg": ("Validation loss, n = 512, k = 64: sharing",
                            ["lin-k64-none", "lin-k64-n512", "lin-k64-kv", "lin-k64-layer"]),
        "ptb_n.svg": ("Validation loss at k = 128 as n grows (same tokens)",
                      ["lin-k128-n512", "lin-k128-n1024", "lin-k128-n2048", "standard-n512",
                       "standard-n1024", "standard-n2048"]),
    }
    for fname, (title, names) in groups.items():
        series = [(n, *curves[n]) for n in names if n in curves]
        svg(series, title, os.path.join(img_dir, fname))


if __name__ == "__main__":
    main()
