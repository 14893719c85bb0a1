#!/usr/bin/python3
"""Writes a release copy of a model folder: config.json, the tokenizer files, labels.json if
any, and model.safetensors with every F32 tensor stored as BF16 (round to nearest even), the
file's metadata kept. The program reads BF16 files as they are (widened to f32 on load), so
the copy is half the size; `linformer perplexity` on both measures what the rounding costs.

    experiments/export_model.py SRC_MODEL_DIR DEST_DIR [--dtype bf16|f32]

numpy only (python3-numpy), no torch.
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

COPY = ["config.json", "tokenizer.model", "tokenizer.json", "vocab.json", "merges.txt",
        "vocab.txt", "labels.json"]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    return header, memoryview(data)[8 + n:]


def to_bf16(x):
    """float32 array -> uint16 bf16 bits, round to nearest even (NaN kept a NaN)."""
    bits = x.astype("<f4").view("<u4")
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype("<u2")
    nan = np.isnan(x)
    out[nan] = ((bits[nan] >> 16) | 0x40).astype("<u2")
    return out


def export(src, dest, dtype):
    header, body = read_safetensors(os.path.join(src, "model.safetensors"))
    meta = header.pop("__metadata__", None)
    names = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    out_header, chunks, offset = {}, [], 0
    for name in names:
        t = header[name]
        b, e = t["data_offsets"]
        raw = bytes(body[b:e])
        if dtype == "bf16" and t["dtype"] == "F32":
            raw = to_bf16(np.frombuffer(raw, dtype="<f4")).tobytes()
            t = dict(t, dtype="BF16")
        out_header[name] = {"dtype": t["dtype"], "shape": t["shape"],
                            "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if meta is not None:
        out_header["__metadata__"] = meta
    text = json.dumps(out_header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    os.makedirs(dest, exist_ok=True)
    tmp = os.path.join(dest, "model.safetensors.tmp")
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for c in chunks:
            f.write(c)
    os.replace(tmp, os.path.join(dest, "model.safetensors"))
    for name in COPY:
        if os.path.isfile(os.path.join(src, name)):
            shutil.copy2(os.path.join(src, name), os.path.join(dest, name))
    return offset


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dest")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.src, "model.safetensors")):
        sys.exit(f"export_model: {a.src} has no model.safetensors")
    if os.path.abspath(a.src) == os.path.abspath(a.dest):
        sys.exit("export_model: DEST_DIR must differ from SRC_MODEL_DIR")
    n = export(a.src, a.dest, a.dtype)
    print(f"export_model: {a.dest}/model.safetensors, {n / 1e6:.1f} MB of tensors ({a.dtype})")


if __name__ == "__main__":
    main()
