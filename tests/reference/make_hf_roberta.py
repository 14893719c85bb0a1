#!/usr/bin/python3
"""Writes a small safetensors file laid out like a Hugging Face RoBERTa checkpoint.

Usage:
  /usr/bin/python3 tests/reference/make_hf_roberta.py --out FILE [--dtype F32|F16|BF16]
      [--vocab 37] [--max-pos 18] [--hidden 16] [--ffn 24] [--layers 2] [--seed 1] [--bare]

The file holds what RobertaForMaskedLM's state dict holds: the `roberta.*` encoder tensors,
the MLM head (`lm_head.dense`, `lm_head.layer_norm`, `lm_head.bias`, plus the tied copies
`lm_head.decoder.weight` / `lm_head.decoder.bias`), and the extras a real checkpoint carries
(`roberta.embeddings.position_ids` as I64, `roberta.pooler.dense.*`). It has no Linformer
projections and no classification head. Metadata is {"format": "pt"}, as written by PyTorch.
With --bare the file is laid out like Hugging Face's bare RobertaModel instead: the encoder
tensors without the "roberta." prefix ("embeddings.*", "encoder.*", "pooler.*") and no MLM head.

The values are random but rounded to bfloat16 precision (and kept out of the float16
subnormal range), so the same --seed gives exactly the same numbers in every --dtype: a file
written as F16 or BF16 must load to the same float32 values as the F32 one.

Only numpy and the standard library are used: the writer is independent of the engine's.
"""

import argparse
import json
import struct
import sys

import numpy as np


def bf16_exact(a):
    """Rounds float32 values to the nearest bfloat16 (ties to even) and flushes values below
    the float16 normal range to zero, so they are exact in F32, F16 and BF16 alike."""
    a = np.asarray(a, dtype=np.float32)
    bits = a.view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    out = bits.astype(np.uint32).view(np.float32)
    out = np.where(np.abs(out) < 2.0 ** -14, np.float32(0), out).astype(np.float32)
    return out


def encode(a, dtype):
    a = np.ascontiguousarray(a)
    if dtype == "F32":
        return a.astype("<f4").tobytes()
    if dtype == "F16":
        h = a.astype("<f2")
        assert np.array_equal(h.astype(np.float32), a), "value not exact in float16"
        return h.tobytes()
    if dtype == "BF16":
        bits = a.astype(np.float32).view(np.uint32)
        assert np.all(bits & 0xFFFF == 0), "value not exact in bfloat16"
        return (bits >> 16).astype("<u2").tobytes()
    if dtype == "I64":
        return a.astype("<i8").tobytes()
    raise ValueError(dtype)


def build(args):
    rng = np.random.default_rng(args.seed)
    D, F, V, P = args.hidden, args.ffn, args.vocab, args.max_pos
    tensors = {}  # name -> (numpy array, dtype name)

    def weight(name, shape, std=0.05):
        tensors[name] = (bf16_exact(rng.normal(0.0, std, size=shape)), args.dtype)

    def layernorm(prefix):
        tensors[prefix + ".weight"] = (bf16_exact(1.0 + rng.normal(0.0, 0.1, size=(D,))), args.dtype)
        tensors[prefix + ".bias"] = (bf16_exact(rng.normal(0.0, 0.1, size=(D,))), args.dtype)

    def linear(prefix, out_f, in_f):
        weight(prefix + ".weight", (out_f, in_f))
        weight(prefix + ".bias", (out_f,), std=0.02)

    weight("roberta.embeddings.word_embeddings.weight", (V, D))
    weight("roberta.embeddings.position_embeddings.weight", (P, D))
    weight("roberta.embeddings.token_type_embeddings.weight", (1, D))
    layernorm("roberta.embeddings.LayerNorm")
    tensors["roberta.embeddings.position_ids"] = (np.arange(P, dtype=np.int64)[None, :], "I64")
    for i in range(args.layers):
        p = f"roberta.encoder.layer.{i}."
        linear(p + "attention.self.query", D, D)
        linear(p + "attention.self.key", D, D)
        linear(p + "attention.self.value", D, D)
        linear(p + "attention.output.dense", D, D)
        layernorm(p + "attention.output.LayerNorm")
        linear(p + "intermediate.dense", F, D)
        linear(p + "output.dense", D, F)
        layernorm(p + "output.LayerNorm")
    linear("roberta.pooler.dense", D, D)
    if args.bare:
        return {name[len("roberta."):]: t for name, t in tensors.items()}
    linear("lm_head.dense", D, D)
    layernorm("lm_head.layer_norm")
    weight("lm_head.bias", (V,), std=0.02)
    # Tied copies, as in RobertaForMaskedLM's state dict.
    tensors["lm_head.decoder.weight"] = tensors["roberta.embeddings.word_embeddings.weight"]
    tensors["lm_head.decoder.bias"] = tensors["lm_head.bias"]
    return tensors


def write_safetensors(path, tensors, metadata):
    size = {"F32": 4, "F16": 2, "BF16": 2, "I64": 8}
    # Largest element size first, then by name: every tensor starts aligned to its dtype.
    order = sorted(tensors, key=lambda n: (-size[tensors[n][1]], n))
    header = {"__metadata__": metadata}
    blobs = []
    offset = 0
    for name in order:
        array, dtype = tensors[name]
        blob = encode(array, dtype)
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--dtype", choices=["F32", "F16", "BF16"], default="F32")
    ap.add_argument("--vocab", type=int, default=37)
    ap.add_argument("--max-pos", type=int, default=18)
    ap.add_argument("--hidden", type=int, default=16)
    ap.add_argument("--ffn", type=int, default=24)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--bare", action="store_true",
                    help="RobertaModel layout: no 'roberta.' prefix, no MLM head")
    args = ap.parse_args()
    write_safetensors(args.out, build(args), {"format": "pt"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
