#!/usr/bin/python3
"""The compact form of a training checkpoint that experiments/release.sh commits (stage save).

A checkpoint is model.safetensors (f32 master weights), optimizer.safetensors (AdamW's first
and second moments, f32, as m.NAME and v.NAME) and state.json. Kept whole, one BERT-Mini
checkpoint is ~72 MB, and every save replaces the last one in git. The compact form keeps the
weights and state.json as they are, drops the first moment m (beta1 = 0.9 rebuilds it within
~20 steps; it restarts from zero, which makes the first steps after a resume smaller, not
larger) and stores the second moment v in bf16 (round to nearest even): ~36 MB.

    state_pack.py pack CHECKPOINT_DIR OUT_DIR      checkpoint -> compact form
    state_pack.py unpack SAVED_DIR CHECKPOINT_DIR  compact form -> checkpoint the engine resumes

A resume from the compact form continues the run with m = 0 and v rounded to bf16: not bitwise
the run that was never interrupted, and docs/models.md gives the measured difference.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np

V_FILE = "optimizer-v.bf16.safetensors"


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, t in header.items():
        a, b = t["data_offsets"]
        dtype = {"F32": np.float32, "BF16": np.uint16}[t["dtype"]]
        tensors[name] = (t["dtype"], np.frombuffer(data[a:b], dtype=dtype).reshape(t["shape"]))
    return meta, tensors


def write_safetensors(path, meta, tensors):
    """tensors: list of (name, dtype name, array); written in that order."""
    header, offset = {"__metadata__": meta}, 0
    for name, dtype, arr in tensors:
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for _, _, arr in tensors:
            f.write(np.ascontiguousarray(arr).tobytes())
    os.replace(tmp, path)  # never a torn file under the final name


def to_bf16(x):
    """f32 -> bf16 bits, round to nearest even (finite values)."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


def pack(src, out):
    meta, opt = read_safetensors(os.path.join(src, "optimizer.safetensors"))
    vs = [(n, "BF16", to_bf16(a)) for n, (_, a) in opt.items() if n.startswith("v.")]
    if len(vs) * 2 != len(opt):
        sys.exit(f"state_pack: {src}/optimizer.safetensors is not m./v. pairs")
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(src):
        if f != "optimizer.safetensors":
            shutil.copy2(os.path.join(src, f), os.path.join(out, f))
    write_safetensors(os.path.join(out, V_FILE), meta, vs)


def unpack(saved, out):
    meta, vs = read_safetensors(os.path.join(saved, V_FILE))
    os.makedirs(out, exist_ok=True)
    for f in os.listdir(saved):
        if f != V_FILE:
            shutil.copy2(os.path.join(saved, f), os.path.join(out, f))
    tensors = []
    for name, (dtype, bits) in vs.items():
        if dtype != "BF16":
            sys.exit(f"state_pack: {saved}/{V_FILE}: {name} is {dtype}, not BF16")
        tensors.append(("m." + name[2:], "F32", np.zeros(bits.shape, np.float32)))
        tensors.append((name, "F32", from_bf16(bits)))
    write_safetensors(os.path.join(out, "optimizer.safetensors"), meta, tensors)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__)
    (pack if sys.argv[1] == "pack" else unpack)(sys.argv[2], sys.argv[3])
