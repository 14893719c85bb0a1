#!/usr/bin/python3
"""PyTorch peer comparison for `linformer bench`.

Times the same inference configurations in PyTorch (Debian python3-torch, CPU, the same
thread count) with a straightforward RoBERTa-style encoder (post-norm, exact GELU) using
standard attention or Linformer attention (layerwise-shared linear E, the input projected
along the sequence axis before the key/value maps, as in fairseq's Linformer), and prints
PyTorch's time per sequence next to ours (from `linformer bench --json`) with the ratio.

  /usr/bin/python3 bench/pytorch/bench_torch.py --binary build/linformer
  /usr/bin/python3 bench/pytorch/bench_torch.py --ours ours.json   # reuse a bench JSON
  /usr/bin/python3 bench/pytorch/bench_torch.py --dtype f32-mkldnn bf16   # a row per dtype

--dtype (one or more; PyTorch's best set-up in each precision):
  f32           plain eager f32, matrix products through the OpenBLAS build of --blas (default)
  f32-mkldnn    f32, the nn.Linear layers made MkldnnLinear (torch.utils.mkldnn.to_mkldnn, oneDNN)
  bf16          torch.autocast("cpu", bfloat16): bf16 products (softmax, GELU on them), LayerNorm f32
  bf16-weights  the whole model .to(torch.bfloat16): weights and activations all bf16
f32 rows are compared with our f32 records, bf16 rows with our `"compute": "bf16"` records
(`linformer bench --bf16`, run as well when a bf16 dtype is asked for and --ours is not given).

Batch = max(1, batch_tokens // n) sequences (the timed batch of `linformer bench`), random
token ids, no padding; median of --reps runs after one warm-up, under torch.inference_mode().
"""
import argparse
import contextlib
import json
import math
import os
import subprocess
import sys
import time


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_setup  # noqa: E402

if __name__ == "__main__":
    torch_setup.select(blas_default="openmp", malloc_default="system")

import torch  # noqa: E402
import torch.nn.functional as Fn
import torch.utils.mkldnn  # noqa: E402

DTYPES = ["f32", "f32-mkldnn", "bf16", "bf16-weights"]


def compute(dtype):  # the precision of ours to compare with: "f32" or "bf16"
    return "bf16" if dtype.startswith("bf16") else "f32"


def prepare(model, dtype):
    """The model in the --dtype set-up, and the context its forward runs under."""
    if dtype == "f32-mkldnn":
        model = torch.utils.mkldnn.to_mkldnn(model)  # nn.Linear -> MkldnnLinear, dense in/out
    elif dtype == "bf16-weights":
        model = model.to(torch.bfloat16)
    if dtype == "bf16":
        return model, lambda: torch.autocast("cpu", dtype=torch.bfloat16)
    return model, contextlib.nullcontext


class Layer(torch.nn.Module):
    def __init__(self, d, h, dff, attention, n, k, shared_E):
        super().__init__()
        self.h, self.dh = h, d // h
        self.q = torch.nn.Linear(d, d)
        self.k = torch.nn.Linear(d, d)
        self.v = torch.nn.Linear(d, d)
        self.o = torch.nn.Linear(d, d)
        self.ln1 = torch.nn.LayerNorm(d)
        self.inter = torch.nn.Linear(d, dff)
        self.out = torch.nn.Linear(dff, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.attention = attention
        self.E = shared_E  # [k, n] for Linformer, shared by every layer

    def forward(self, x):  # x [B, n, d]
        B, n, d = x.shape
        q = self.q(x).view(B, n, self.h, self.dh).transpose(1, 2)  # [B, h, n, dh]
        if self.attention == "linformer":
            xp = torch.matmul(self.E[:, :n], x)  # [B, k, d]: E x, then the key/value maps
            kk, vv = self.k(xp), self.v(xp)
            L = xp.shape[1]
        else:
            kk, vv = self.k(x), self.v(x)
            L = n
        kk = kk.view(B, L, self.h, self.dh).transpose(1, 2)
        vv = vv.view(B, L, self.h, self.dh).transpose(1, 2)
        s = torch.matmul(q, kk.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh))
        p = torch.softmax(s, dim=-1)
        ctx = torch.matmul(p, vv).transpose(1, 2).reshape(B, n, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.out(Fn.gelu(self.inter(x))))


class Encoder(torch.nn.Module):
    def __init__(self, layers, d, h, dff, vocab, attention, n, k):
        super().__init__()
        self.word = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(n + 2, d)
        self.ln = torch.nn.LayerNorm(d)
        E = torch.nn.Parameter(torch.randn(k, n) / math.sqrt(n)) if attention == "linformer" else None
        self.E = E
        self.layers = torch.nn.ModuleList(
            [Layer(d, h, dff, attention, n, k, E) for _ in range(layers)])

    def forward(self, ids):
        n = ids.shape[1]
        x = self.ln(self.word(ids) + self.pos(torch.arange(2, n + 2)))
        for l in self.layers:
            x = l(x)
        return x


def layer_flops(attention, n, k, d, dff):
    f = 2 * n * (2 * d * d) + 2 * n * (2 * d * dff)
    if attention == "linformer":
        f += 2 * k * n * d + 2 * k * (2 * d * d) + 4 * n * k * d
    else:
        f += 2 * n * (2 * d * d) + 4 * n * n * d
    return f


def time_torch(args, attention, n, k, layers, dtype):
    torch.manual_seed(0)
    B = max(1, args.batch_tokens // n)
    if attention == "standard":  # scores and probabilities: two [B, h, n, n] float tensors
        need = 2 * B * args.heads * n * n * 4
        if need > args.torch_memory_gib * 2**30:
            return None, B, "needs %.1f GiB for [B,h,n,n] scores" % (need / 2**30)
    model = Encoder(layers, args.d_model, args.heads, args.d_ff, args.vocab, attention, n, k).eval()
    ids = torch.randint(0, args.vocab, (B, n))
    model, ctx = prepare(model, dtype)
    with torch.inference_mode(), ctx():
        t0 = time.perf_counter()
        model(ids)
        warm = time.perf_counter() - t0
        reps = 1 if warm > 20 else args.reps
        ts = []
        for _ in range(reps):
            t0 = time.perf_counter()
            model(ids)
            ts.append(time.perf_counter() - t0)
    ts.sort()
    return ts[len(ts) // 2] / B, B, ""


def ours(args, layers):
    """Our bench records for these layers; "compute" (absent: f32) tells f32 from bf16."""
    if args.ours:
        with open(args.ours) as f:
            doc = json.load(f)
        return [r for r in doc["runs"] if r.get("layers") == layers]
    cmd = [args.binary, "bench", "--json", "--layers", str(layers), "--reps", str(args.reps),
           "--batch-tokens", str(args.batch_tokens), "--attention"] + args.attention + [
           "--d-model", str(args.d_model), "--heads", str(args.heads), "--d-ff", str(args.d_ff),
           "--vocab", str(args.vocab), "--n"] + [str(n) for n in args.n] + ["--k", str(args.k)]
    runs = []
    for c in sorted({compute(d) for d in args.dtype}, reverse=True):  # f32 first
        run = cmd + (["--bf16"] if c == "bf16" else [])
        print("running:", " ".join(run), file=sys.stderr)
        doc = json.loads(subprocess.run(run, check=True, stdout=subprocess.PIPE).stdout)
        if c == "f32":
            args.sgemm = doc["meta"]["sgemm_gflops"]
        runs += [dict(r, compute=r.get("compute", c)) for r in doc["runs"]]
    return runs


def torch_gemm_gflops(dtype):
    """The 4096x3072x768 product (a Linear 768 -> 3072 on 4096 rows) in the --dtype set-up."""
    lin, ctx = prepare(torch.nn.Linear(768, 3072).eval(), dtype)
    a = torch.randn(4096, 768, dtype=torch.bfloat16 if dtype == "bf16-weights" else torch.float)
    best = 1e9
    with torch.inference_mode(), ctx():
        for _ in range(5):
            t0 = time.perf_counter()
            lin(a)
            best = min(best, time.perf_counter() - t0)
    return 2 * 4096 * 3072 * 768 / best / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "../../build/linformer"))
    ap.add_argument("--ours", help="JSON from `linformer bench --json` instead of running it")
    ap.add_argument("--layers", type=int, nargs="+", default=[1, 12])
    ap.add_argument("--n", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--attention", nargs="+", default=["linformer", "standard"])
    ap.add_argument("--dtype", nargs="+", choices=DTYPES, default=["f32"],
                    help="PyTorch set-up(s) to time, a row each (see above; default f32)")
    ap.add_argument("--d-model", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--d-ff", type=int, default=3072)
    ap.add_argument("--vocab", type=int, default=50265)
    ap.add_argument("--batch-tokens", type=int, default=8192)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=1,
                    help="repeat everything (ours and PyTorch) this many times and keep each "
                         "side's fastest time per row (the machine is shared: noise only adds time)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--blas", choices=["openmp", "pthread", "system"], default="openmp",
                    help="OpenBLAS build PyTorch uses (default openmp, its best set-up here)")
    ap.add_argument("--malloc", choices=["system", "jemalloc"], default="system",
                    help="allocator (see torch_setup.py; default system)")
    ap.add_argument("--torch-memory-gib", type=float, default=12.0,
                    help="skip PyTorch standard attention whose score tensors need more")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    args.sgemm = None
    tg = {d: torch_gemm_gflops(d) for d in args.dtype}
    print("PyTorch matmul 4096x3072x768 GFLOP/s: %s" % ", ".join(
        "%s %.0f" % (d, g) for d, g in tg.items()), file=sys.stderr)
    if tg.get("f32", 1e9) < 20:
        print("warning: PyTorch's BLAS is very slow (Debian's default libblas3 is the reference "
              "BLAS); install libopenblas0-openmp (scripts/setup.sh --bench) for a fair comparison", file=sys.stderr)
    best = {}  # (layers, attention, n, dtype) -> [layers, attention, n, B, dtype, t, o, fl, note]
    for run in range(args.runs):
        for layers in args.layers:
            mine = ours(args, layers)
            for n in args.n:
                for attention in args.attention:
                    if attention == "linformer" and args.k >= n:
                        continue
                    for dtype in args.dtype:
                        r = next((r for r in mine if r["attention"] == attention and r["n"] == n and
                                  r.get("compute", "f32") == compute(dtype) and
                                  (attention != "linformer" or r.get("k") == args.k)), None)
                        o = r["seconds_per_sequence"] if r and r.get("status") == "ok" else None
                        t, B, note = time_torch(args, attention, n, args.k, layers, dtype)
                        fl = layers * layer_flops(attention, n, args.k, args.d_model, args.d_ff)
                        print("run %d layers %2d %-9s n=%5d B=%3d %-12s torch %s  ours %s  %s" % (
                            run + 1, layers, attention, n, B, dtype,
                            "%9.2f ms" % (t * 1e3) if t else "    -    ",
                            "%9.2f ms" % (o * 1e3) if o else "    -    ",
                            "ratio %.2fx" % (t / o) if t and o else note), file=sys.stderr, flush=True)
                        row = best.setdefault((layers, attention, n, dtype),
                                              [layers, attention, n, B, dtype, t, o, fl, note])
                        # Keep each side's fastest run: on a shared machine noise only adds time.
                        row[5] = min(x for x in (row[5], t) if x) if (row[5] or t) else None
                        row[6] = min(x for x in (row[6], o) if x) if (row[6] or o) else None
    rows = list(best.values())
    lines = ["PyTorch %s, %d threads, OpenBLAS %s build (f32), matmul 4096x3072x768 GFLOP/s: %s%s. "
             "Time per sequence (ms), the fastest of %d run(s) for each side; ratio = PyTorch / ours in the same precision (f32 or bf16)." % (
        torch.__version__, args.threads, args.blas, ", ".join("%s %.0f" % (d, g) for d, g in tg.items()),
        "; oneDNN sgemm peak in our run %.0f GFLOP/s" % args.sgemm if args.sgemm else "",
        args.runs), "",
        "| layers | attention | n | batch | dtype | PyTorch ms | PyTorch GFLOP/s | ours ms | ours GFLOP/s | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|"]
    for layers, attention, n, B, dtype, t, o, fl, note in rows:
        name = attention + (" k=%d" % args.k if attention == "linformer" else "")
        lines.append("| %d | %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
            layers, name, n, B, dtype, "%.1f" % (t * 1e3) if t else "-", "%.0f" % (fl / t / 1e9) if t else "-",
            "%.1f" % (o * 1e3) if o else "-", "%.0f" % (fl / o / 1e9) if o else "-",
            "%.2fx" % (t / o) if t and o else note))
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
