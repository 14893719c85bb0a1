#!/usr/bin/env python3
"""Classify texts with a finetuned model folder (RUN/best of `linformer finetune`).

    python3 examples/python/classify.py runs/sst2/best "a gripping , beautiful film" "dull"
    cat texts.txt | python3 examples/python/classify.py runs/sst2/best

Prints one line per text: the label, its probability and the text.
"""
import sys

import linformer


def main(argv):
    if len(argv) < 2:
        sys.exit(__doc__)
    model = linformer.Model(argv[1])
    texts = argv[2:] or [line.rstrip("\n") for line in sys.stdin if line.strip()]
    probs = model.classify(texts)  # [len(texts), len(model.labels)], float32
    for text, p in zip(texts, probs):
        best = int(p.argmax())
        print(f"{model.labels[best]}\t{p[best]:.3f}\t{text}")


if __name__ == "__main__":
    main(sys.argv)
