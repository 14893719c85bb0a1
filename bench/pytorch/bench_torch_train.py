#!/usr/bin/python3
"""PyTorch peer for `linformer bench --train`: the same MLM training step, side by side.

Runs `linformer bench --train --json` (f32, and --bf16) and times the same step in PyTorch
(Debian python3-torch, CPU, the same thread count), then prints tokens/s of each and the ratio
ours / PyTorch (higher: we are faster):

  /usr/bin/python3 bench/pytorch/bench_torch_train.py --binary build/linformer --n 512 2048
  /usr/bin/python3 bench/pytorch/bench_torch_train.py --attention standard --n 512

The step, on both sides: a batch of --batch sequences of n random tokens (<s> ... </s>) with
15% of the inner positions chosen for MLM (80% [MASK], 10% random, 10% kept), forward, mean
cross-entropy over the chosen positions (the head runs on those rows only), backward, global
gradient-norm clipping at 1, AdamW (lr 5e-4, betas 0.9/0.98, eps 1e-6, weight decay 0.01 except
on biases and LayerNorm); dropout 0. The model is ours (docs/model.md): RoBERTa-style post-norm
encoder with learned positions (offset 2) and a token-type row, exact GELU, the MLM head
(dense, GELU, LayerNorm, output tied to the word embeddings, bias) and the classification head's
parameters, which get no gradient but are decayed by AdamW, as ours are. Linformer attention
(linear projections) follows our evaluation order: for sharing headwise / kv / layerwise the
layer input is projected along the sequence axis first (E X, F X: k rows), then the key/value
maps, with their bias scaled by the row sums of E (the exact function E (X W^T + 1 b^T));
sharing none projects each head's keys and values after the maps. The parameter counts of the
two models are printed and must match.

PyTorch's best CPU set-up in each precision (torch_setup.py): OpenBLAS's OpenMP build for the
f32 products (--blas), jemalloc (--malloc), torch.set_num_threads(--threads); f32, and bf16 as
torch.autocast("cpu", dtype=torch.bfloat16) (oneDNN bf16 products, f32 weights and optimiser).
AdamW runs its multi-tensor (foreach) implementation unless --no-foreach.
Ratios: ours f32 / PyTorch f32; ours --bf16 / PyTorch f32 and / PyTorch bf16 autocast.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_setup  # noqa: E402

if __name__ == "__main__":
    SETUP = torch_setup.select(blas_default="openmp", malloc_default="jemalloc")

import torch  # noqa: E402
import torch.nn.functional as Fn  # noqa: E402
from bench_torch import torch_gemm_gflops  # noqa: E402  (the inference peer's, same product)

MASK_ID, FIRST_NORMAL = 4, 5  # our tokenizer's [MASK] and first ordinary id


class Layer(torch.nn.Module):
    def __init__(self, d, h, dff, attention, n, k, sharing, shared_E):
        super().__init__()
        self.h, self.dh, self.attention, self.sharing = h, d // h, attention, sharing
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.ln1 = torch.nn.LayerNorm(d)
        self.inter = torch.nn.Linear(d, dff)
        self.out = torch.nn.Linear(dff, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.E = self.F = None
        if attention == "linformer":
            def proj(*shape):
                return torch.nn.Parameter(torch.randn(*shape) / math.sqrt(n))
            if sharing == "none":
                self.E, self.F = proj(h, k, n), proj(h, k, n)
            elif sharing == "headwise":
                self.E, self.F = proj(k, n), proj(k, n)
            elif sharing == "kv":
                self.E = proj(k, n)
            self.shared_E = shared_E  # layerwise: the model's one matrix (not registered here)

    def kv_inputs(self, x):
        """Keys and values [B, L, d] (L = n, or k for Linformer)."""
        if self.attention != "linformer":
            return self.k(x), self.v(x)
        n = x.shape[1]
        if self.sharing == "none":  # per head, after the maps
            B = x.shape[0]
            kk = self.k(x).view(B, n, self.h, self.dh)
            vv = self.v(x).view(B, n, self.h, self.dh)
            kp = torch.einsum("hkn,bnhd->bkhd", self.E[:, :, :n], kk)
            vp = torch.einsum("hkn,bnhd->bkhd", self.F[:, :, :n], vv)
            return kp.reshape(B, -1, self.h * self.dh), vp.reshape(B, -1, self.h * self.dh)
        E = self.shared_E if self.sharing == "layerwise" else self.E
        F = self.F if self.sharing == "headwise" else E
        E, F = E[:, :n], F[:, :n]
        xe = torch.matmul(E, x)  # [B, k, d]
        xf = xe if F is E else torch.matmul(F, x)
        kk = Fn.linear(xe, self.k.weight) + E.sum(1)[:, None] * self.k.bias
        vv = Fn.linear(xf, self.v.weight) + F.sum(1)[:, None] * self.v.bias
        return kk, vv

    def forward(self, x):  # x [B, n, d]
        B, n, d = x.shape
        q = self.q(x).view(B, n, self.h, self.dh).transpose(1, 2)  # [B, h, n, dh]
        kk, vv = self.kv_inputs(x)
        kk = kk.view(B, -1, self.h, self.dh).transpose(1, 2)
        vv = vv.view(B, -1, self.h, self.dh).transpose(1, 2)
        s = torch.matmul(q, kk.transpose(-1, -2)) * (1.0 / math.sqrt(self.dh))
        ctx = torch.matmul(torch.softmax(s, dim=-1), vv).transpose(1, 2).reshape(B, n, d)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.out(Fn.gelu(self.inter(x))))


class MlmModel(torch.nn.Module):
    def __init__(self, a, attention, n, k):
        super().__init__()
        d = a.d_model
        self.word = torch.nn.Embedding(a.vocab, d)
        self.pos = torch.nn.Embedding(n + 2, d)
        self.tok_type = torch.nn.Embedding(1, d)
        self.ln = torch.nn.LayerNorm(d)
        self.E = None
        if attention == "linformer" and a.sharing == "layerwise":
            self.E = torch.nn.Parameter(torch.randn(k, n) / math.sqrt(n))
        self.layers = torch.nn.ModuleList(
            [Layer(d, a.heads, a.d_ff, attention, n, k, a.sharing, self.E) for _ in range(a.layers)])
        self.lm_dense = torch.nn.Linear(d, d)
        self.lm_ln = torch.nn.LayerNorm(d)
        self.lm_bias = torch.nn.Parameter(torch.zeros(a.vocab))
        # The classification head: no gradient from the MLM loss, decayed by AdamW (as ours).
        self.cls_dense = torch.nn.Linear(d, d)
        self.cls_out = torch.nn.Linear(d, a.num_classes)
        for m in self.modules():  # RoBERTa-like initialisation
            if isinstance(m, (torch.nn.Linear, torch.nn.Embedding)):
                torch.nn.init.normal_(m.weight, std=0.02)

    def cls_params(self):
        return list(self.cls_dense.parameters()) + list(self.cls_out.parameters())

    def loss(self, ids, labels):
        n = ids.shape[1]
        x = self.word(ids) + self.pos(torch.arange(2, n + 2)) + self.tok_type.weight[0]
        x = self.ln(x)
        for layer in self.layers:
            x = layer(x)
        rows = labels.view(-1) != -100
        hsel = x.reshape(-1, x.shape[-1])[rows]  # the head runs on the labelled rows only
        t = self.lm_ln(Fn.gelu(self.lm_dense(hsel)).float())  # LayerNorm in f32 (autocast)
        logits = Fn.linear(t, self.word.weight, self.lm_bias)
        return Fn.cross_entropy(logits.float(), labels.view(-1)[rows])


def no_decay(name):
    return name.endswith("bias") or ".ln" in name or name.startswith("ln.") or "lm_ln" in name


def mlm_batch(B, n, vocab, gen):
    """Random sequences <s> t_1 .. t_{n-2} </s>; round(15%) of the inner positions chosen."""
    ids = torch.randint(FIRST_NORMAL, vocab, (B, n), generator=gen)
    ids[:, 0], ids[:, -1] = 0, 2
    labels = torch.full((B, n), -100, dtype=torch.long)
    m = max(1, int(0.15 * (n - 2) + 0.5))  # as our lround
    for b in range(B):
        pos = torch.randperm(n - 2, generator=gen)[:m] + 1
        labels[b, pos] = ids[b, pos]
        r = torch.rand(m, generator=gen)
        ids[b, pos[r < 0.8]] = MASK_ID
        rnd = pos[(r >= 0.8) & (r < 0.9)]
        ids[b, rnd] = torch.randint(FIRST_NORMAL, vocab, (len(rnd),), generator=gen)
    return ids, labels


def time_torch(a, attention, n, k, dtype):
    """(median seconds per step, parameter count, final loss)."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = MlmModel(a, attention, n, k).train()
    count = sum(p.numel() for p in model.parameters())
    named = list(model.named_parameters())
    opt = torch.optim.AdamW(
        [{"params": [p for nm, p in named if not no_decay(nm)], "weight_decay": 0.01},
         {"params": [p for nm, p in named if no_decay(nm)], "weight_decay": 0.0}],
        lr=5e-4, betas=(0.9, 0.98), eps=1e-6, foreach=a.foreach)
    cls = {id(p) for p in model.cls_params()}
    for p in model.cls_params():
        p.grad = torch.zeros_like(p)
    trained = [p for p in model.parameters() if id(p) not in cls]
    times, loss = [], None
    for step in range(a.warmup + a.reps):
        t0 = time.perf_counter()
        ids, labels = mlm_batch(a.batch, n, a.vocab, gen)
        for p in trained:
            p.grad = None
        if dtype == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model.loss(ids, labels)
        else:
            loss = model.loss(ids, labels)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    times.sort()
    m = len(times) // 2
    med = times[m] if len(times) % 2 else 0.5 * (times[m - 1] + times[m])
    return med, count, float(loss)


def ours(a, compute):
    cmd = [a.binary, "bench", "--train", "--json", "--layers", str(a.layers), "--d-model",
           str(a.d_model), "--heads", str(a.heads), "--d-ff", str(a.d_ff), "--vocab", str(a.vocab),
           "--batch", str(a.batch), "--reps", str(a.reps), "--warmup", str(a.warmup),
           "--sharing", a.sharing, "--attention"] + a.attention + [
           "--n"] + [str(n) for n in a.n] + ["--k", str(a.k)] + (["--bf16"] if compute == "bf16" else [])
    print("running:", " ".join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, stdout=subprocess.PIPE).stdout
    if a.save_ours:  # `linformer bench --from-json FILE` prints its tables with the phases
        os.makedirs(a.save_ours, exist_ok=True)
        with open(os.path.join(a.save_ours, "bench_train_%s_run%d.json" % (compute, a.run)), "wb") as f:
            f.write(out)
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(os.path.dirname(__file__), "../../build/linformer"))
    ap.add_argument("--n", type=int, nargs="+", default=[512])
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--attention", nargs="+", choices=["linformer", "standard"], default=["linformer"])
    ap.add_argument("--sharing", choices=["none", "headwise", "kv", "layerwise"], default="headwise")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--d-ff", type=int, default=1024)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--num-classes", type=int, default=2, help="our config's default")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5, help="timed steps (median)")
    ap.add_argument("--runs", type=int, default=1,
                    help="repeat everything this many times and keep each side's fastest "
                         "(the machine is shared: noise only adds time)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--blas", choices=["openmp", "pthread", "system"], default="openmp")
    ap.add_argument("--malloc", choices=["jemalloc", "system"], default="jemalloc")
    ap.add_argument("--no-foreach", dest="foreach", action="store_false",
                    help="AdamW's per-tensor loop instead of its multi-tensor implementation")
    ap.add_argument("--markdown", help="also write the table to this file")
    ap.add_argument("--save-ours", metavar="DIR",
                    help="keep our JSON documents there (bench_train_<f32|bf16>_run<R>.json)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tg = {d: torch_gemm_gflops(d) for d in ("f32", "bf16")}
    print("PyTorch %s (%s), %d threads; matmul 4096x3072x768 GFLOP/s: f32 %.0f, bf16 %.0f" % (
        torch.__version__, SETUP, a.threads, tg["f32"], tg["bf16"]), file=sys.stderr)
    best = {}  # (attention, n) -> {"ours f32": tok/s, ..., "params": ...}
    peaks = {}
    for run in range(a.runs):
        a.run = run + 1
        docs = {c: ours(a, c) for c in ("f32", "bf16")}
        for c, doc in docs.items():
            peaks[c] = max(peaks.get(c, 0), doc["meta"]["peak_gflops"])
        for n in a.n:
            for attention in a.attention:
                if attention == "linformer" and a.k >= n:
                    continue
                row = best.setdefault((attention, n), {})
                this_run = {}  # ours in this run, for the per-run ratio
                for c, doc in docs.items():
                    r = next(r for r in doc["runs"] if r["attention"] == attention and r["n"] == n)
                    if r.get("status") != "ok":
                        sys.exit("ours failed: %s" % r.get("error"))
                    row["params ours"] = r["params"]
                    this_run[c] = r["tokens_per_second"]
                    row["ours " + c] = max(row.get("ours " + c, 0), this_run[c])
                for dtype in ("f32", "bf16"):
                    t, count, loss = time_torch(a, attention, n, a.k, dtype)
                    tps = a.batch * n / t
                    row["torch " + dtype] = max(row.get("torch " + dtype, 0), tps)
                    row["params torch"] = count
                    print("run %d %-9s n=%5d %-4s PyTorch %8.0f tok/s (loss %.3f) ours %8.0f tok/s  ratio %.2fx"
                          % (run + 1, attention, n, dtype, tps, loss, this_run[dtype],
                             this_run[dtype] / tps), file=sys.stderr, flush=True)
                if row["params ours"] != row["params torch"]:
                    sys.exit("parameter counts differ: ours %d, PyTorch %d (%s n=%d)" % (
                        row["params ours"], row["params torch"], attention, n))
    lines = ["PyTorch %s (%s), %d threads, AdamW foreach=%s; PyTorch matmul 4096x3072x768 GFLOP/s: "
             "f32 %.0f, bf16 autocast %.0f; ours (same product): f32 %.0f, bf16 %.0f. Model: %d layers, "
             "d %d, %d heads, d_ff %d, vocab %d, batch %d, Linformer sharing %s. Tokens/s of the "
             "median of %d steps after %d warm-up, the fastest of %d run(s) per side; ratio = "
             "ours / PyTorch." % (
                 torch.__version__, SETUP, a.threads, a.foreach, tg["f32"], tg["bf16"],
                 peaks.get("f32", 0), peaks.get("bf16", 0), a.layers, a.d_model, a.heads, a.d_ff,
                 a.vocab, a.batch, a.sharing, a.reps, a.warmup, a.runs), "",
             "| attention | n | params (ours = PyTorch) | PyTorch f32 | PyTorch bf16 | ours f32 | "
             "f32 / PyTorch f32 | ours bf16 | bf16 / PyTorch f32 | bf16 / PyTorch bf16 |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for (attention, n), r in best.items():
        name = attention + (" k=%d" % a.k if attention == "linformer" else "")
        lines.append("| %s | %d | %d | %.0f | %.0f | %.0f | %.2fx | %.0f | %.2fx | %.2fx |" % (
            name, n, r["params ours"], r["torch f32"], r["torch bf16"], r["ours f32"],
            r["ours f32"] / r["torch f32"], r["ours bf16"], r["ours bf16"] / r["torch f32"],
            r["ours bf16"] / r["torch bf16"]))
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
