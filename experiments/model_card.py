#!/usr/bin/env python3
"""Writes the model card (README.md, a Hugging Face hub card) of a released model folder from
the files of the pretraining run that made it: its config, arguments, metrics, perplexity,
the CPUs it ran on (RUN/sessions.tsv, written by experiments/release.sh) and the finetuning
evaluations of experiments/release.sh's finetune stage. Every figure in the card comes from
those files; nothing is typed in by hand. scripts/check_model_card.py checks the result.

    experiments/model_card.py --name NAME --run RUN --out MODEL_DIR
        [--finetune 'GLOB'] [--twin NAME=RUN] [--parent NAME] [--storage bf16|f32]

  --finetune   eval.json files of the model's finetunings, e.g.
               'runs/release/cls/*-linformer-mini-s*/eval.json' (task = the folder's first
               dash-separated word: sst2, imdb)
  --twin       the model it is compared with (its run folder), e.g. standard-mini=runs/...
  --parent     the model it was converted from (linformer-mini-4k: standard-mini)
  --storage    the dtype of MODEL_DIR/model.safetensors (experiments/export_model.py)

Python's standard library only.
"""
import argparse
import csv
import glob
import json
import math
import os
import statistics
import sys


def load_json(path):
    with open(path) as f:
        return json.load(f)


def metrics(run):
    """(train lines, valid lines) of RUN/metrics.jsonl."""
    train, valid = [], []
    with open(os.path.join(run, "metrics.jsonl")) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            m = json.loads(line)
            (valid if m.get("split") == "valid" else train).append(m)
    return train, valid


def wall_seconds(lines):
    """Training time over every resumed segment: elapsed_s restarts at each resume."""
    total, last = 0.0, 0.0
    for m in lines:
        e = m.get("elapsed_s", 0.0)
        if e < last:  # a new segment began
            total += last
        last = e
    return total + last


def sessions(run):
    path = os.path.join(run, "sessions.tsv")
    if not os.path.isfile(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def precision_history(sess, args):
    """What the run trained in, from its sessions: 'f32' or 'f32 to step 4,272, then bf16'."""
    spans = []  # [precision, first step]
    for row in sess:
        p = row.get("precision") or args.get("precision", "f32")
        if not spans or spans[-1][0] != p:
            spans.append([p, int(row.get("from_step") or 0)])
    if len(spans) <= 1:
        return spans[0][0] if spans else args.get("precision", "f32")
    parts = [f"{p} to step {spans[i + 1][1]:,}" for i, (p, _) in enumerate(spans[:-1])]
    return ", then ".join(parts) + f", then {spans[-1][0]}"


def test_perplexities(run):
    """[(n, ppl of the f32 weights, ppl of the released bf16 copy or None, tokens)] from the
    RUN/test-nN.json and RUN/test-nN-bf16.json files of `linformer perplexity` on the held-out
    test part (experiments/release.sh release)."""
    out = []
    for path in glob.glob(os.path.join(run, "test-n*.json")):
        base = os.path.basename(path)[len("test-n"):-len(".json")]
        if not base.isdigit():
            continue
        f32 = load_json(path)
        b = os.path.join(run, f"test-n{base}-bf16.json")
        out.append((int(base), f32["ppl"], load_json(b)["ppl"] if os.path.isfile(b) else None,
                    f32.get("tokens", 0)))
    return sorted(out)


def describe(cfg):
    size = (f"{cfg['n_layers']} layers, d_model {cfg['d_model']}, {cfg['n_heads']} heads, "
            f"d_ff {cfg['d_ff']}, vocabulary {cfg.get('vocab_size', '?')}, "
            f"max_len {cfg['max_len']}")
    if cfg["attention"] == "linformer":
        attn = (f"Linformer attention: keys and values projected along the sequence from n to "
                f"k = {cfg['k']} ({cfg.get('sharing', 'layerwise')} sharing, "
                f"{cfg.get('projection', 'linear')} projection)")
    else:
        attn = "standard (full softmax) attention"
    return size, attn


def finetune_table(pattern):
    """task -> [accuracy of each seed] from the eval.json files PATTERN matches."""
    out = {}
    for path in sorted(glob.glob(pattern)) if pattern else []:
        task = os.path.basename(os.path.dirname(path)).split("-")[0]
        out.setdefault(task, []).append(load_json(path)["accuracy"] * 100)
    return out


def finetune_recipe(pattern):
    """The finetuning recipe, read from the first finetuning run's train_args.json."""
    for path in sorted(glob.glob(pattern)) if pattern else []:
        args_path = os.path.join(os.path.dirname(path), "train_args.json")
        if os.path.isfile(args_path):
            t = load_json(args_path)
            lr = t.get("lr")
            lr = f"{lr:g}" if isinstance(lr, (int, float)) else "?"
            return ("Finetuning recipe (every released model alike): `experiments/release.sh "
                    f"finetune`, AdamW lr {lr}, {t.get('epochs', '?')} epoch(s), "
                    "seeds as counted above.")
    return "Not finetuned yet: `experiments/release.sh finetune`."


def mean_spread(values):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    return f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} ({len(values)} seeds)"


def card(a):
    cfg = load_json(os.path.join(a.run, "config.json"))
    args = load_json(os.path.join(a.run, "train_args.json"))
    train, valid = metrics(a.run)
    if not train:
        sys.exit(f"model_card: {a.run}/metrics.jsonl has no training lines")
    step = train[-1]["step"]
    tokens = step * args["batch_size"] * args["seq_len"] * args.get("grad_accum", 1)
    hours = wall_seconds(train) / 3600
    ppl = None
    ppl_path = os.path.join(a.run, "perplexity.json")
    if os.path.isfile(ppl_path):
        ppl = load_json(ppl_path)
    size, attn = describe(cfg)
    sess = sessions(a.run)
    cpus = sorted({s["cpu"] for s in sess}) or ["not recorded"]
    kernels = sorted({s["kernels"] for s in sess})
    precision = precision_history(sess, args)
    threads = sorted({s["threads"] for s in sess})
    ft = finetune_table(a.finetune)
    twin_ft, twin_ppl, twin_name, twin_test = {}, None, None, {}
    if a.twin:
        twin_name, twin_run = a.twin.split("=", 1)
        twin_ft = finetune_table(a.finetune.replace(a.name, twin_name)) if a.finetune else {}
        p = os.path.join(twin_run, "perplexity.json")
        twin_ppl = load_json(p) if os.path.isfile(p) else None
        if twin_ppl and ppl and twin_ppl.get("seq_len") != ppl.get("seq_len"):
            twin_ppl = None  # measured at another length: not comparable
        twin_test = {n: f32 for n, f32, _, _ in test_perplexities(twin_run)}

    tags = ["linformer", "fill-mask", "feature-extraction", "efficient-attention"]
    lines = ["---", "license: gpl-3.0", "language:", "- en", "library_name: linformer",
             "tags:"] + [f"- {t}" for t in tags] + [
        "datasets:", "- project-gutenberg", "- gcide", "pipeline_tag: fill-mask", "---", "",
        f"# {a.name}", "", "## Model description", "",
        f"A masked-language-model encoder ({size}) with {attn}. Pretrained from scratch by the "
        "`linformer` program on 2-core CPUs"
        + (f", converted from `{a.parent}` (position table extended by copying its learned "
           "rows, then pretrained further at the new length)" if a.parent else "")
        + ". Its outputs are contextual token vectors (`linformer embed`) and masked-token "
        "predictions; finetune it for classification.", "",
        "## How to use", "", "```sh",
        f"linformer embed --model {a.name} --input texts.txt --output vectors.jsonl",
        f"linformer finetune --init-from {a.name} --train train.tsv --dev dev.tsv --out runs/cls",
        "linformer serve --model runs/cls      # the finetuned model behind a TEI-style HTTP API",
        "```", "", "```python", "import linformer",
        f"m = linformer.Model(\"{a.name}\")",
        "vectors = m.embed([\"A sentence.\", \"Another one.\"])", "```", "",
        "## Training data", "",
        "The release corpus of the `linformer` repository (docs/corpus.md): about 178M words of "
        "English, 91% Project Gutenberg books (public domain in the USA), the rest Debian's "
        "dictionaries (GCIDE, FOLDOC, Jargon File, The Devil's Dictionary), fortunes, "
        "legitimate SpamAssassin mailing-list mail, and small public corpora (Brown, PTB, "
        "State of the Union addresses, the King James Bible, Shakespeare, the SST-2 and IMDB "
        "*training* texts). Deduplicated; validation and test parts held out by document. "
        "`experiments/build_release_corpus.sh` rebuilds it; its checksums are in "
        "`experiments/release-state/corpus.sha256`.", "",
        "## Training procedure", "",
        "| | |", "|---|---|",
        f"| objective | masked LM, {args.get('mask_prob', 0.15) * 100:.0f}% of tokens masked |",
        f"| tokens | {tokens:,} ({step:,} steps of {args['batch_size']} x {args['seq_len']} tokens) |",
        f"| optimiser | AdamW, lr {args['lr']:g}, {args['warmup_steps']} warm-up steps then linear "
        f"decay, weight decay {args['weight_decay']:g}, gradient clipping {args['clip_norm']:g} |",
        f"| precision | {precision} |",
        f"| time | {hours:.1f} hours of training ({tokens / max(hours * 3600, 1e-9):,.0f} tokens/s), "
        + (f"resumed exactly across {len(sess)} session(s) |" if sess else "one run |"),
        f"| hardware | {'; '.join(cpus)} (CPU only, {', '.join(threads) or '?'} thread(s); "
        f"kernels {', '.join(kernels) or 'not recorded'}) |",
        f"| seed | {args.get('seed', 1)} |", "",
        "## Evaluation", "",
        "| metric | this model |" + (f" {twin_name} |" if twin_name else ""),
        "|---|---|" + ("---|" if twin_name else "")]
    if ppl:
        row = f"| validation perplexity (n {ppl['seq_len']}, {ppl['tokens']:,} tokens) | {ppl['ppl']:.2f} |"
        lines.append(row + (f" {twin_ppl['ppl']:.2f} |" if twin_ppl else (" - |" if twin_name else "")))
    for n, f32, bf16, ntok in test_perplexities(a.run):
        twin = f" {twin_test[n]:.2f} |" if n in twin_test else (" - |" if twin_name else "")
        lines.append(f"| test perplexity (n {n}, {ntok:,} tokens, f32 weights) | {f32:.2f} |" + twin)
        if bf16 is not None:
            lines.append(f"| test perplexity (n {n}), the released {a.storage} weights | "
                         f"{bf16:.2f} ({(bf16 / f32 - 1) * 100:+.2f}%) |" + (" - |" if twin_name else ""))
    for task in sorted(set(ft) | set(twin_ft)):
        label = {"sst2": "SST-2 dev accuracy, %", "imdb": "IMDB validation accuracy, %"}.get(
            task, f"{task} accuracy, %")
        row = f"| {label} | {mean_spread(ft.get(task, []))} |"
        lines.append(row + (f" {mean_spread(twin_ft.get(task, []))} |" if twin_name else ""))
    lines += ["", finetune_recipe(a.finetune), "",
              "## Intended uses", "",
              "Research on efficient attention and a starting point for English text "
              "classification or embeddings on CPUs, where a small encoder that reads long "
              "inputs at linear cost matters more than the last point of accuracy.", "",
              "## Limitations", "",
              "- Small (BERT-Mini size) and trained on far less text than public BERT/RoBERTa "
              "checkpoints: expect lower accuracy than those on most tasks.",
              "- The corpus is mostly 19th- and early 20th-century books: modern vocabulary, "
              "web text and dialogue are under-represented, and the books carry the biases "
              "of their time.",
              "- English only; the 8192-piece vocabulary splits rare words into many pieces.",
              "- Not evaluated for safety-critical use or fairness.", "",
              "## License", "",
              "GPL-3.0 (the weights are derived in part from GPL-licensed dictionary text, "
              "GCIDE); the other parts of the corpus are public domain or under permissive "
              "licences (docs/corpus.md lists each). Stored as "
              f"{a.storage} safetensors.", ""]
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True)
    p.add_argument("--run", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--finetune", default="")
    p.add_argument("--twin", default="")
    p.add_argument("--parent", default="")
    p.add_argument("--storage", default="bf16", choices=["bf16", "f32"])
    a = p.parse_args()
    for f in ("config.json", "train_args.json", "metrics.jsonl"):
        if not os.path.isfile(os.path.join(a.run, f)):
            sys.exit(f"model_card: {a.run} has no {f} (not a pretraining run folder?)")
    if a.twin and "=" not in a.twin:
        sys.exit("model_card: --twin takes NAME=RUN")
    os.makedirs(a.out, exist_ok=True)
    text = card(a)
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(text)
    print(f"model_card: wrote {os.path.join(a.out, 'README.md')}")


if __name__ == "__main__":
    main()
