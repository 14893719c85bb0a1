#!/usr/bin/env python3
"""How far a learned Linformer projection E has moved from mean pooling (docs/results.md,
"Classification from the pretrained models").

    experiments/projection_stats.py MODEL_DIR...

MODEL_DIR holds config.json and model.safetensors (e.g. runs/quality/pre/lin-k128-n512/model).
For every projection tensor ([k, n] or [heads, k, n]) prints: the share of |E| inside each
row's own window of positions [j n / k, (j+1) n / k) (the mean-pooling windows E starts from),
the same share expected at the start (the pooling matrix plus N(0, (noise)^2 / n) noise, from
the config's projection_init_noise), the fraction of negative entries, and the mean row sum
(1 for pooling, near 0 for a signed mix). Only the standard library.
"""
import array
import json
import math
import pathlib
import struct
import sys


def read_f32_tensors(path):
    raw = path.read_bytes()
    (hlen,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + hlen])
    base = 8 + hlen
    for name, info in header.items():
        if name == "__metadata__" or info.get("dtype") != "F32":
            continue
        a, b = info["data_offsets"]
        values = array.array("f")
        values.frombytes(raw[base + a:base + b])
        if sys.byteorder != "little":
            values.byteswap()
        yield name, info["shape"], values


def expected_start_share(k, n, noise):
    """E|own-window mass| / E|row mass| for pooling + N(0, s^2) noise, s = noise / sqrt(n)."""
    s = noise / math.sqrt(n)
    w = n / k
    if s == 0:
        return 1.0

    def mean_abs(mu):  # E|X| for X ~ N(mu, s^2)
        return s * math.sqrt(2 / math.pi) * math.exp(-mu * mu / (2 * s * s)) + \
            mu * math.erf(mu / (s * math.sqrt(2)))

    own = w * mean_abs(1 / w)
    return own / (own + (n - w) * mean_abs(0.0))


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for d in map(pathlib.Path, sys.argv[1:]):
        cfg = json.loads((d / "config.json").read_text())
        noise = cfg.get("projection_init_noise", 0.1)
        found = False
        for name, shape, v in read_f32_tensors(d / "model.safetensors"):
            proj = name.endswith(("key_proj.weight", "value_proj.weight", "kv_proj.weight"))
            if not proj or len(shape) not in (2, 3):
                continue
            found = True
            k, n = shape[-2], shape[-1]
            rows = len(v) // n
            own = total = row_sum = 0.0
            neg = 0
            for r in range(rows):
                j = r % k
                t0, t1 = j * n // k, (j + 1) * n // k
                row = v[r * n:(r + 1) * n]
                total += sum(abs(x) for x in row)
                own += sum(abs(x) for x in row[t0:t1])
                row_sum += sum(row)
                neg += sum(1 for x in row if x < 0)
            print(f"{d} {name} {shape}: own-window share of |E| {own / total:.2f} "
                  f"(start ~{expected_start_share(k, n, noise):.2f}), negative entries "
                  f"{neg / len(v):.2f}, mean row sum {row_sum / rows:.2f}")
        if not found:
            print(f"{d}: no learned projection tensor")


if __name__ == "__main__":
    main()
