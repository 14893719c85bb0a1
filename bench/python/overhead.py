#!/usr/bin/env python3
"""The Python module's overhead against the program on the same batch (docs/python.md).

    PYTHONPATH=build/python /usr/bin/python3 bench/python/overhead.py build/linformer MODEL [B N REPS]

For REPS rounds, alternately: `linformer forward --random-batch B N --no-logits` (the program
times its model->forward call and prints it), and in this process Model.forward on the same
ids (int64 numpy array in, float32 hidden_states out: the check and conversion of the ids, the
forward pass with the GIL released, the copy of the hidden states into a new array), cold
(a new Model, as the program's one call is) and warm (a second call on the same Model): the
whole Python call against the program's timed forward. Prints the medians and the fastest
rounds (the better estimate on a machine shared with other work).
"""
import re
import statistics
import subprocess
import sys
import time

import numpy as np

import linformer


def main(argv):
    binary, model = argv[1], argv[2]
    B, N, reps = (int(x) for x in (argv[3:6] + ["32", "512", "7"][len(argv) - 3:]))
    cli, cold, warm = [], [], []
    m0 = linformer.Model(model)
    ids = np.random.default_rng(0).integers(0, m0.vocab_size, size=(B, N))
    del m0
    for _ in range(reps):
        p = subprocess.run([binary, "forward", "--model", model, "--random-batch", str(B), str(N),
                            "--no-logits", "--out", "/dev/shm/overhead.safetensors"],
                           capture_output=True, text=True, check=True)
        cli.append(float(re.search(r"in ([0-9.]+) s", p.stderr).group(1)))
        m = linformer.Model(model)
        t = time.perf_counter()
        out = m.forward(ids, logits=False)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = m.forward(ids, logits=False)
        warm.append(time.perf_counter() - t)
        assert out["hidden_states"].shape == (B, N, m.d_model)
        del m
    for name, f in (("median", statistics.median), ("fastest", min)):
        print(f"batch {B} x {N}, {reps} rounds, {name}:")
        print(f"  program (linformer forward, its timed forward call): {f(cli) * 1e3:.1f} ms")
        print(f"  Python Model.forward, cold (new Model): {f(cold) * 1e3:.1f} ms "
              f"({(f(cold) / f(cli) - 1) * 100:+.1f}%)")
        print(f"  Python Model.forward, warm (second call): {f(warm) * 1e3:.1f} ms "
              f"({(f(warm) / f(cli) - 1) * 100:+.1f}%)")
    # What the Python path adds besides the forward pass, timed alone: the copy of the hidden
    # states into a new array (first touch of its pages included) and the id check/conversion.
    h = out["hidden_states"]
    t = time.perf_counter()
    for _ in range(10):
        np.copyto(np.empty(h.shape, np.float32), h)
    copy = (time.perf_counter() - t) / 10
    t = time.perf_counter()
    for _ in range(10):
        np.asarray(ids, np.int32)
    conv = (time.perf_counter() - t) / 10
    print(f"  alone: a copy of hidden_states ({h.nbytes >> 20} MiB) into a new array "
          f"{copy * 1e3:.2f} ms, a conversion of the ids {conv * 1e3:.3f} ms")
    print("  all (ms): program", [round(x * 1e3) for x in cli], "cold",
          [round(x * 1e3) for x in cold], "warm", [round(x * 1e3) for x in warm])


if __name__ == "__main__":
    main(sys.argv)
