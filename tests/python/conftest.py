"""Fixtures of the Python module's tests: the `linformer` program of the same build, small
model folders made with it, and the data they are trained on, all created here (nothing is
read from outside the repository). ctest sets PYTHONPATH to build/python, LINFORMER_BIN to
the program and OMP_NUM_THREADS; run by hand:

    PYTHONPATH=build/python LINFORMER_BIN=build/linformer /usr/bin/python3 -m pytest tests/python
"""
import json
import os
import random
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("LINFORMER_SOURCE_DIR", os.path.dirname(os.path.dirname(HERE)))
BIN = os.environ.get("LINFORMER_BIN", os.path.join(SOURCE_DIR, "build", "linformer"))

# A model small enough that every run takes a fraction of a second.
TINY_SETS = ["d_model=32", "n_heads=2", "d_ff=64", "n_layers=2", "max_len=32", "k=8",
             "sharing=kv", "dropout=0", "attention_dropout=0"]


def run_cli(*args, stdin=None, check=True):
    """Runs the program; returns (stdout, stderr). A failure shows both."""
    p = subprocess.run([BIN, *map(str, args)], input=stdin, capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"linformer {' '.join(map(str, args))} failed ({p.returncode}):\n"
                             f"{p.stdout}\n{p.stderr}")
    return p.stdout, p.stderr


def separable_tsv(path, n, seed):
    """Sentences of filler words with exactly one of "good" / "bad", the label (as in
    tests/test_classify_train.cpp)."""
    filler = ["the", "movie", "was", "very", "and", "plot", "it", "acting", "film", "really"]
    rng = random.Random(seed)
    lines = ["label\tsentence"]
    texts = []
    for _ in range(n):
        y = rng.randrange(2)
        words = [rng.choice(filler) for _ in range(2 + rng.randrange(6))]
        words.insert(rng.randrange(len(words) + 1), "good" if y else "bad")
        texts.append(" ".join(words))
        lines.append(f"{y}\t{texts[-1]}")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return texts


# ---- safetensors, enough to feed `linformer forward` and read what it writes ----
_DTYPES = {"F32": np.float32, "I32": np.int32, "I64": np.int64, "F64": np.float64}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        code = {np.dtype(v): k for k, v in _DTYPES.items()}[a.dtype]
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + b:8 + n + e],
                                  dtype=_DTYPES[info["dtype"]]).reshape(info["shape"])
    return out


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("lf")


@pytest.fixture(scope="session")
def data(workdir):
    """train.tsv, dev.tsv (separable good/bad sentences) and texts.txt (one per line)."""
    d = {"train": str(workdir / "train.tsv"), "dev": str(workdir / "dev.tsv"),
         "texts": str(workdir / "texts.txt")}
    separable_tsv(d["train"], 320, 11)
    d["dev_texts"] = separable_tsv(d["dev"], 64, 12)
    with open(d["texts"], "w") as f:
        f.write("\n".join(d["dev_texts"][:40]) + "\n")
    return d


@pytest.fixture(scope="session")
def classifier(workdir, data):
    """A classifier folder (RUN/best) finetuned from scratch by the program."""
    run = workdir / "run"
    args = ["finetune", "--train", data["train"], "--dev", data["dev"], "--out", run,
            "--vocab-size", 40, "--batch-size", 16, "--epochs", 2, "--lr", 3e-3, "--seed", 3,
            "--quiet"]
    for s in TINY_SETS:
        args += ["--set", s]
    run_cli(*args)
    return str(run / "best")


@pytest.fixture(scope="session")
def tiny_model(workdir):
    """A model folder without a tokenizer (linformer init), vocabulary 37, max_len 16."""
    out = workdir / "tiny"
    run_cli("init", "--set", "vocab_size=37", "--set", "max_len=16", "--set", "d_model=16",
            "--set", "n_heads=2", "--set", "d_ff=32", "--set", "n_layers=2", "--set", "k=4",
            "--seed", 7, "--out", out)
    return str(out)


def pytest_report_header(config):
    return f"linformer program: {BIN}; python: {sys.executable}"
