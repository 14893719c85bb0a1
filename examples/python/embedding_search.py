#!/usr/bin/env python3
"""Semantic search: embed every line of a text file, then find the lines nearest to a query.

    python3 examples/python/embedding_search.py runs/mlm/model corpus.txt "query text" [TOP]

Vectors are the mean of the model's hidden states over each text's tokens, scaled to unit
length, so a dot product is the cosine similarity. Prints the TOP (default 5) nearest lines
with their similarity.
"""
import sys

import numpy as np

import linformer


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    model = linformer.Model(argv[1])
    with open(argv[2], encoding="utf-8") as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    top = int(argv[4]) if len(argv) > 4 else 5
    index = model.embed(lines, pooling="mean", normalize=True)      # [n, d_model]
    query = model.embed([argv[3]], pooling="mean", normalize=True)  # [1, d_model]
    scores = index @ query[0]
    for i in np.argsort(-scores)[:top]:
        print(f"{scores[i]:.4f}\t{lines[i]}")


if __name__ == "__main__":
    main(sys.argv)
