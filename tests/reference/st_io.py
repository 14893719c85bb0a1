"""Minimal safetensors reading and writing for the PyTorch references (torch_reference.py)."""

import json
import os
import struct

import numpy as np


class RefError(Exception):
    """An input/config problem; reported on stderr with a non-zero exit status."""


# --------------------------------------------------------------------------------------------
# Minimal safetensors I/O
# --------------------------------------------------------------------------------------------

_ST_DTYPES = {
    "F32": np.dtype("<f4"),
    "F64": np.dtype("<f8"),
    "I32": np.dtype("<i4"),
    "I64": np.dtype("<i8"),
    "F16": np.dtype("<f2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
}


def read_safetensors(path):
    """Returns (tensors: dict name -> numpy array (native byte order), metadata dict)."""
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise RefError(f"{path}: too short for a safetensors file")
    (hlen,) = struct.unpack("<Q", raw[:8])
    if 8 + hlen > len(raw):
        raise RefError(f"{path}: header length {hlen} exceeds file size {len(raw)}")
    try:
        header = json.loads(raw[8:8 + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RefError(f"{path}: bad JSON header: {e}")
    if not isinstance(header, dict):
        raise RefError(f"{path}: header is not a JSON object")
    buf = raw[8 + hlen:]
    metadata = header.pop("__metadata__", None) or {}
    tensors = {}
    for name, info in header.items():
        try:
            dtype_name = info["dtype"]
            shape = [int(s) for s in info["shape"]]
            begin, end = (int(o) for o in info["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise RefError(f"{path}: malformed header entry for '{name}'")
        if dtype_name not in _ST_DTYPES:
            raise RefError(f"{path}: tensor '{name}' has unsupported dtype {dtype_name}")
        dt = _ST_DTYPES[dtype_name]
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if any(s < 0 for s in shape):
            raise RefError(f"{path}: tensor '{name}' has a negative dimension")
        if not (0 <= begin <= end <= len(buf)) or end - begin != count * dt.itemsize:
            raise RefError(f"{path}: tensor '{name}' has inconsistent data_offsets "
                           f"[{begin}, {end}] for shape {shape} {dtype_name}")
        arr = np.frombuffer(buf, dtype=dt, count=count, offset=begin).reshape(shape)
        tensors[name] = arr.astype(dt.newbyteorder("="), copy=True)
    return tensors, metadata


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> numpy array of float32/float64/int32/int64 (written in order)."""
    to_name = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64",
               np.dtype(np.int32): "I32", np.dtype(np.int64): "I64"}
    header = {}
    chunks = []
    offset = 0
    for name, arr in tensors.items():
        arr = np.asarray(arr)
        if arr.dtype not in to_name:
            raise RefError(f"cannot write tensor '{name}' of dtype {arr.dtype}")
        dname = to_name[arr.dtype]
        data = np.ascontiguousarray(arr, dtype=_ST_DTYPES[dname]).tobytes()
        header[name] = {"dtype": dname, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hbytes = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hbytes += b" " * ((8 - len(hbytes) % 8) % 8)  # align the data buffer to 8 bytes
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(hbytes)))
        f.write(hbytes)
        for c in chunks:
            f.write(c)
    os.replace(tmp, path)
