#!/usr/bin/env python3
"""The tables of docs/results.md ("Quality at convergence") from the runs of experiments/quality.sh.

    experiments/quality_report.py OUT [SVG]

OUT is the folder quality.sh wrote (its OUT, runs/quality by default), or its archive
(experiments/results/quality, written by `quality.sh archive`). Prints markdown: the
pretraining runs (tokens, steps, time, last validation perplexity of the run's own evaluation,
and the perplexity of `linformer perplexity` on the validation text with fixed masks), the
initialisation study, and the classification runs with the mean of their seeds. With SVG,
also draws the validation-perplexity curves of the pretraining runs into that file. Only the
standard library; runs that have not finished are shown with what they have so far.
"""
import json
import math
import pathlib
import re
import sys


def records(path):
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line cut by a kill
    return out


def load_json(path):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def fmt(x, spec):
    return "–" if x is None else format(x, spec)


def finished(run, steps):
    """The run reached its last step (a --time-limit stop also writes run/model). quality.sh
    writes perplexity.json only then, which is all an archived run (`quality.sh archive`) has."""
    if (run / "perplexity.json").exists():
        return True
    ckpts = [int(p.name[5:]) for p in (run / "checkpoints").glob("step-*") if p.name[5:].isdigit()]
    return (run / "model").is_dir() and steps is not None and max(ckpts, default=0) >= steps


def pretrain_rows(out):
    rows = []
    for run in sorted((out / "pre").glob("*/")):
        args = load_json(run / "train_args.json") or {}
        recs = records(run / "metrics.jsonl")
        valid = [r for r in recs if r.get("split") == "valid"]
        train = [r for r in recs if r.get("split") == "train"]
        steps = args.get("steps")
        done = (valid or train or [{}])[-1].get("step")
        per_step = args.get("batch_size", 0) * args.get("seq_len", 0) * args.get("grad_accum", 1)
        tokens = per_step * (done or 0)
        elapsed = max((r.get("elapsed_s", 0) for r in recs), default=None)
        ppl = load_json(run / "perplexity.json") or {}
        rows.append(dict(name=run.name, steps=steps, done=done, tokens=tokens, per_step=per_step,
                         seconds=elapsed,
                         valid=[(r["step"], math.exp(r["loss"])) for r in valid],
                         ppl=ppl.get("ppl"), bf16=args.get("bf16", False),
                         seq_len=args.get("seq_len"), finished=finished(run, steps)))
    return rows


def print_pretrain(rows, imdb=None):
    """imdb: run name -> IMDB accuracy of the model it pretrained (the initialisation study)."""
    extra = " IMDB accuracy |" if imdb is not None else ""
    print("| run | n | steps | tokens | bf16 | time | last valid ppl | `perplexity` (fixed masks) |"
          + extra)
    print("|---|---|---|---|---|---|---|---|" + ("---|" if extra else ""))
    for r in rows:
        last = r["valid"][-1][1] if r["valid"] else None
        status = "" if r["finished"] else " (unfinished)"
        hours = None if r["seconds"] is None else r["seconds"] / 3600
        ppl = r["ppl"] if r["finished"] else None
        line = (f"| {r['name']}{status} | {r['seq_len']} | {r['done']}/{r['steps']} | "
                f"{r['tokens'] / 1e6:.1f}M | {'yes' if r['bf16'] else 'no'} | "
                f"{fmt(hours, '.2f')} h | {fmt(last, '.1f')} | {fmt(ppl, '.1f')} |")
        if imdb is not None:
            acc = imdb.get("imdb-" + r["name"])
            line += f" {fmt(None if acc is None else acc * 100, '.2f')} |"
        print(line)


def classification(out):
    res = {}
    for run in sorted((out / "cls").glob("*/")):
        ev = load_json(run / "eval.json")
        res[run.name] = None if ev is None else ev.get("accuracy")
    return res


def finetune_time(out, name):
    """(wall time, examples/s) of a finished finetuning run, from the summary line of its log
    ("finetune: S/S steps in 3m24s, 49.0 examples/s, ..."), or None."""
    try:
        text = (out / "cls" / f"{name}.log").read_text(errors="replace")
    except OSError:
        return None
    m = re.findall(r"steps in (\S+), ([\d.]+) examples/s", text)
    return m[-1] if m else None


def print_classification(res, out):
    groups = {}
    for name, acc in res.items():
        base, _, seed = name.rpartition("-s")
        if not seed.isdigit():
            base, seed = name, ""
        groups.setdefault(base, []).append((seed, acc, finetune_time(out, name)))
    print("| run | accuracy per seed | mean | time per seed (examples/s) |")
    print("|---|---|---|---|")
    for base, seeds in groups.items():
        accs = [a for _, a, _ in seeds if a is not None]
        mean = sum(accs) / len(accs) * 100 if accs else None
        per = ", ".join(f"s{s}: {fmt(None if a is None else a * 100, '.2f')}" if s else
                        fmt(None if a is None else a * 100, '.2f') for s, a, _ in seeds)
        times = ", ".join("–" if t is None else f"{t[0]} ({float(t[1]):.0f})" for _, _, t in seeds)
        print(f"| {base} | {per} | {fmt(mean, '.2f')} | {times} |")


def svg_curves(rows, path):
    curves = [(r["name"], r["valid"], r["per_step"])
              for r in rows if r["valid"] and not r["name"].startswith("init-")]
    if not curves:
        return
    W, H, L, B = 640, 400, 60, 40
    xs = [s * tps / 1e6 for _, v, tps in curves for s, _ in v]
    ys = [math.log(p) for _, v, _ in curves for _, p in v]
    x1, y0, y1 = max(xs), min(ys), max(ys)
    sx = lambda x: L + (W - L - 20) * x / x1
    sy = lambda y: H - B - (H - B - 20) * (y - y0) / max(y1 - y0, 1e-9)
    colours = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             'font-family="sans-serif" font-size="12">',
             f'<rect width="{W}" height="{H}" fill="white"/>',
             f'<line x1="{L}" y1="{H - B}" x2="{W - 20}" y2="{H - B}" stroke="black"/>',
             f'<line x1="{L}" y1="20" x2="{L}" y2="{H - B}" stroke="black"/>',
             f'<text x="{W / 2}" y="{H - 8}" text-anchor="middle">training tokens (millions)</text>',
             f'<text x="14" y="{H / 2}" transform="rotate(-90 14 {H / 2})" '
             'text-anchor="middle">validation perplexity (log scale)</text>']
    for t in range(0, int(x1) + 1, max(1, int(x1) // 8)):
        parts.append(f'<text x="{sx(t):.1f}" y="{H - B + 15}" text-anchor="middle">{t}</text>')
    for p in [50, 70, 100, 150, 200, 300, 500, 700, 1000, 1500, 2000, 3000]:
        if y0 <= math.log(p) <= y1:
            parts.append(f'<text x="{L - 5}" y="{sy(math.log(p)) + 4:.1f}" '
                         f'text-anchor="end">{p}</text>')
    for i, (name, v, tps) in enumerate(curves):
        c = colours[i % len(colours)]
        pts = " ".join(f"{sx(s * tps / 1e6):.1f},{sy(math.log(p)):.1f}" for s, p in v)
        parts.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5" points="{pts}"/>')
        parts.append(f'<text x="{W - 180}" y="{30 + 16 * i}" fill="{c}">{name}</text>')
    parts.append("</svg>")
    pathlib.Path(path).write_text("\n".join(parts) + "\n")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    if not (out / "pre").is_dir():
        sys.exit(f"{out}: no pretraining runs (pre/) here; give the OUT of experiments/quality.sh")
    rows = pretrain_rows(out)
    print("### Pretraining\n")
    print_pretrain([r for r in rows if not r["name"].startswith("init-")])
    cls = classification(out)
    print("\n### Projection initialisation (short pretraining, then IMDB)\n")
    print_pretrain([r for r in rows if r["name"].startswith("init-")], cls)
    print("\n### Classification (dev/val accuracy, %)\n")
    print_classification({k: v for k, v in cls.items() if not k.startswith("imdb-init-")}, out)
    if len(sys.argv) == 3:
        svg_curves(rows, sys.argv[2])


if __name__ == "__main__":
    main()
