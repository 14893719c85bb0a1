#!/usr/bin/env python3
"""Finetune a text classifier from Python, with progress reported to a callback, then
evaluate the best model on the dev data.

    python3 examples/python/finetune.py TRAIN.tsv DEV.tsv OUT [KEY=VALUE ...]

TRAIN/DEV: TSV files with a header (GLUE SST-2, QNLI, QQP, or any TSV with `label` and `text`
columns). Without --init-from the model is trained from scratch with the default config and a
tokenizer trained on the data; KEY=VALUE pairs are any option of `linformer finetune` (e.g.
init_from=runs/mlm/model epochs=3 max_len=128, or sets=d_model=64 for a config override).
Ctrl-C stops the run at the end of a step with a checkpoint; resume with resume=1.
"""
import sys

import linformer


def parse(value):
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    options = {"train": argv[1], "dev": argv[2], "out": argv[3]}
    sets = []
    for arg in argv[4:]:
        key, _, value = arg.partition("=")
        if key == "sets":
            sets.append(value)
        else:
            options[key] = parse(value)
    if sets:
        options["sets"] = sets

    def progress(record):
        if record["split"] == "train":
            print(f"step {record['step']}: loss {record['loss']:.4f}, "
                  f"{record['examples_per_s']:.0f} examples/s", flush=True)
        else:
            print(f"step {record['step']}: dev accuracy "
                  f"{record.get('accuracy', float('nan')):.4f}", flush=True)

    result = linformer.finetune(callback=progress, **options)
    print(f"best dev {result['metric']} {result['best_metric']:.4f} at step {result['best_step']}")
    best = linformer.Model(f"{options['out']}/best")
    metrics = best.evaluate(options["dev"])
    print(f"evaluate {options['out']}/best: accuracy {metrics['accuracy']:.4f} "
          f"on {metrics['count']} examples")


if __name__ == "__main__":
    main(sys.argv)
