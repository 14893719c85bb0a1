#!/usr/bin/python3
"""Exports the PyTorch peer's encoder (bench/pytorch/bench_torch.py) to ONNX for ONNX Runtime,
optionally int8 (dynamic quantization), and checks ONNX Runtime's output against PyTorch's.

  /usr/bin/python3 bench/ort/export.py --layers 1 --d-model 512 --heads 8 --d-ff 2048 \\
      --n 512 --attention linformer --variant mha --precision int8 --out m.onnx

The model is bench_torch.py's Encoder (post-norm RoBERTa-style layers, exact GELU; standard
attention, or Linformer attention with one [k, n] projection E shared by every layer, applied
to the layer input along the sequence axis before the key/value maps), seeded with --seed,
exported with torch.onnx.export (opset 17, dynamic batch axis, sequence length fixed at --n).

--variant
  plain  attention as PyTorch computes it (MatMul, Softmax, MatMul over [B, h, n, L] scores);
         ONNX Runtime's graph optimisations may fuse some of it at load
  mha    the attention core (scores, softmax, weighted sum over all heads) exported as one
         com.microsoft MultiHeadAttention node on the projected Q [B, n, d] and K, V [B, L, d]
         (L = n, or k for Linformer): ONNX Runtime's CPU kernel runs it as flash attention
         (MlasFlashAttention, tiles sized to the L2 cache, no [B, h, n, L] tensor) when there is
         no mask, no past state and ORT_DISABLE_FLASH_ATTENTION is not set

--precision int8: the graph is rewritten as onnxruntime.quantization.quantize_dynamic(
per_channel=True, weight_type=QInt8) would leave it after ORT's fusions: every MatMul whose
second operand is a constant 2-D weight (Q, K, V, attention output, FFN in and out) becomes a
com.microsoft DynamicQuantizeMatMul (activation quantized to uint8 at run time over the whole
tensor, weight int8 symmetric per output channel, zero points 0, the following bias Add folded
in). Attention (QK^T, softmax, PV), the projection E, LayerNorm, GELU and the embeddings stay f32
(ORT's dynamic quantization; ours runs attention's products and E on bf16 operands where bf16
products are the faster ones, AMX or AMD Zen 4/5, else on f32 operands).
--reduce-range: 7-bit weights (quantize_dynamic's reduce_range), ORT's advice for CPUs without
VNNI, where its u8 x s8 product can saturate (compare.py turns it on there).

The check runs the model in ONNX Runtime (bench_ort.js, same session set-up as the timing) on
--check-batch sequences of random token ids and compares with PyTorch f32: max abs difference
relative to max |output|, and cosine similarity. It fails (exit 1) when f32 is off by more
than --tol relative, or int8 has a cosine below --min-cosine. It also saves the graph after
ONNX Runtime's optimisations and lists its operators, to show what was fused. A JSON summary
goes to --out with .json appended to the name, and to stdout.
"""
import argparse
import collections
import json
import math
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "pytorch"))
import torch_setup  # noqa: E402

if __name__ == "__main__":
    # PyTorch is only the reference here, but Debian's default BLAS would make it very slow.
    torch_setup.select(blas_default="openmp", malloc_default="system")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper, TensorProto  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as Fn  # noqa: E402

import bench_torch  # noqa: E402  (the PyTorch peer's model: Encoder, Layer)

MS_DOMAIN = "com.microsoft"


class _FusedAttention(torch.autograd.Function):
    """softmax(Q K^T / sqrt(dh)) V over heads, exported as com.microsoft MultiHeadAttention
    with Q [B, n, d], K and V [B, L, d] (its 3-D, no-bias, no-mask form)."""

    @staticmethod
    def forward(ctx, q, k, v, heads):
        B, n, d = q.shape
        L, dh = k.shape[1], d // heads
        qh = q.view(B, n, heads, dh).transpose(1, 2)
        kh = k.view(B, L, heads, dh).transpose(1, 2)
        vh = v.view(B, L, heads, dh).transpose(1, 2)
        # Blocks of query rows, so that tracing the export at n = 16384 holds [B, h, rows, L]
        # scores of at most 256 MiB rather than the whole [B, h, n, L] (17 GiB at batch 2).
        rows = max(1, (64 << 20) // max(1, B * heads * L))
        out = torch.empty_like(qh)
        for i in range(0, n, rows):
            s = torch.matmul(qh[:, :, i:i + rows], kh.transpose(-1, -2)) * (1.0 / math.sqrt(dh))
            out[:, :, i:i + rows] = torch.matmul(torch.softmax(s, dim=-1), vh)
        return out.transpose(1, 2).reshape(B, n, d)

    @staticmethod
    def symbolic(g, q, k, v, heads):
        out = g.op(MS_DOMAIN + "::MultiHeadAttention", q, k, v, num_heads_i=heads)
        out.setType(q.type())
        return out


class FusedLayer(bench_torch.Layer):
    """bench_torch.Layer with its attention core as one MultiHeadAttention node (same weights,
    same computation; instances of Layer are switched to this class in place)."""

    def forward(self, x):
        if self.attention == "linformer":
            xp = torch.matmul(self.E[:, :x.shape[1]], x)  # [B, k, d]: E x, then the key/value maps
            kk, vv = self.k(xp), self.v(xp)
        else:
            kk, vv = self.k(x), self.v(x)
        ctx = _FusedAttention.apply(self.q(x), kk, vv, self.h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.out(Fn.gelu(self.inter(x))))


def build_model(a):
    torch.manual_seed(a.seed)
    m = bench_torch.Encoder(a.layers, a.d_model, a.heads, a.d_ff, a.vocab, a.attention, a.n, a.k).eval()
    if a.variant == "mha":
        for layer in m.layers:
            layer.__class__ = FusedLayer
    return m


def export_f32(model, a, path):
    ids = torch.randint(0, a.vocab, (2, a.n))
    kw = dict(opset_version=17, input_names=["ids"], output_names=["hidden"],
              dynamic_axes={"ids": {0: "batch"}, "hidden": {0: "batch"}}, do_constant_folding=True)
    if a.variant == "mha":
        kw["custom_opsets"] = {MS_DOMAIN: 1}
    with torch.no_grad():
        torch.onnx.export(model, (ids,), path, **kw)


def quantize_int8(src, dst, reduce_range=False):
    """Dynamic int8 quantization of the constant-weight MatMuls (see the module docstring).
    Returns the number of MatMuls rewritten."""
    m = onnx.load(src)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    consumers = collections.defaultdict(list)
    for node in g.node:
        for name in node.input:
            consumers[name].append(node)
    qmax = 63 if reduce_range else 127
    nodes, dropped, new_inits, count = [], set(), [], 0
    for node in g.node:
        if id(node) in dropped:
            continue
        w = inits.get(node.input[1]) if node.op_type == "MatMul" else None
        if w is None or len(w.dims) != 2 or node.input[0] in inits:
            nodes.append(node)
            continue
        W = numpy_helper.to_array(w).astype(np.float32)  # [K, N]: y = x W
        amax = np.abs(W).max(axis=0)
        scale = np.where(amax > 0, amax / qmax, 1.0).astype(np.float32)
        Wq = np.clip(np.round(W / scale), -qmax, qmax).astype(np.int8)
        base = node.name or node.output[0]
        qn, sn, zn = base + "_W_int8", base + "_W_scale", base + "_W_zero_point"
        new_inits += [numpy_helper.from_array(Wq, qn), numpy_helper.from_array(scale, sn),
                      numpy_helper.from_array(np.zeros(W.shape[1], np.int8), zn)]
        inputs, out = [node.input[0], qn, sn, zn], node.output[0]
        # Fold a following Add of a constant bias [N] (nn.Linear's bias) into the node.
        users = consumers[node.output[0]]
        if len(users) == 1 and users[0].op_type == "Add" and out not in [o.name for o in g.output]:
            add = users[0]
            other = add.input[1] if add.input[0] == out else add.input[0]
            b = inits.get(other)
            if b is not None and list(b.dims) == [W.shape[1]]:
                inputs.append(other)
                out = add.output[0]
                dropped.add(id(add))
        nodes.append(helper.make_node("DynamicQuantizeMatMul", inputs, [out], name=base + "_quant",
                                      domain=MS_DOMAIN))
        count += 1
    del g.node[:]
    g.node.extend(nodes)
    g.initializer.extend(new_inits)
    used = {name for node in g.node for name in node.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(o.domain == MS_DOMAIN for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    onnx.save(m, dst)
    return count


def op_counts(path):
    m = onnx.load(path, load_external_data=False)
    c = collections.Counter((n.domain + "::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
                            for n in m.graph.node)
    return dict(sorted(c.items()))


def check(model, a, path, out):
    """Runs the exported model in ONNX Runtime and PyTorch on the same ids; returns the report."""
    torch.manual_seed(a.seed + 1)
    B = a.check_batch
    need = 2 * B * a.heads * a.n * a.n * 4 if a.attention == "standard" else 0
    if need > a.check_memory_gib * 2**30:
        return {"status": "skipped", "why": "PyTorch reference needs %.1f GiB for [B,h,n,n] scores "
                "(--check-memory-gib %.0f)" % (need / 2**30, a.check_memory_gib)}
    ids = torch.randint(0, a.vocab, (B, a.n))
    classes = [layer.__class__ for layer in model.layers]
    for layer in model.layers:  # the reference is bench_torch's own Layer, also for --variant mha
        layer.__class__ = bench_torch.Layer
    with torch.inference_mode():
        ref = model(ids).float().numpy()
    for layer, c in zip(model.layers, classes):
        layer.__class__ = c
    with tempfile.TemporaryDirectory() as tmp:
        ids_f, out_f, opt_f = (os.path.join(tmp, x) for x in ("ids.bin", "out.bin", "opt.onnx"))
        ids.numpy().astype("<i8").tofile(ids_f)
        cmd = ["node", os.path.join(HERE, "bench_ort.js"), "--model", path, "--n", str(a.n),
               "--ids", ids_f, "--out", out_f, "--threads", str(a.threads), "--save-optimized", opt_f]
        info = json.loads(subprocess.run(cmd, check=True, stdout=subprocess.PIPE, text=True).stdout)
        got = np.fromfile(out_f, dtype="<f4").reshape(ref.shape)
        ops = op_counts(opt_f)
    diff = float(np.abs(got - ref).max())
    scale = float(np.abs(ref).max())
    cos = float(np.dot(got.ravel().astype(np.float64), ref.ravel()) /
                (np.linalg.norm(got.ravel().astype(np.float64)) * np.linalg.norm(ref.ravel())))
    rel = diff / scale
    ok = rel <= a.tol if a.precision == "f32" else cos >= a.min_cosine
    fused = {k: v for k, v in ops.items() if k.startswith(MS_DOMAIN)}
    return {"status": "ok" if ok else "failed", "batch": B, "max_abs_diff": diff, "output_max_abs": scale,
            "rel_diff": rel, "cosine": cos, "criterion": ("rel_diff <= %g" % a.tol) if a.precision == "f32"
            else ("cosine >= %g" % a.min_cosine), "ort_version": info.get("ort_version"),
            "optimized_ops": ops, "ort_contrib_ops": fused,
            "fused_attention": any(k.endswith(("::Attention", "::MultiHeadAttention")) for k in ops)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--d-model", type=int, default=512)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--d-ff", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=50265)
    ap.add_argument("--n", type=int, default=512)
    ap.add_argument("--k", type=int, default=128)
    ap.add_argument("--attention", choices=["standard", "linformer"], default="linformer")
    ap.add_argument("--variant", choices=["plain", "mha"], default="plain")
    ap.add_argument("--precision", choices=["f32", "int8"], default="f32")
    ap.add_argument("--reduce-range", action="store_true",
                    help="int8: 7-bit weights (quantize_dynamic's reduce_range, for u8s8 saturation on "
                         "CPUs without VNNI)")
    ap.add_argument("--out", required=True, help="the .onnx file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-check", action="store_true")
    ap.add_argument("--check-batch", type=int, default=2)
    ap.add_argument("--check-memory-gib", type=float, default=6.0,
                    help="skip the check when PyTorch's standard-attention reference needs more")
    ap.add_argument("--tol", type=float, default=1e-3, help="f32: max |ORT - PyTorch| / max |PyTorch|")
    ap.add_argument("--min-cosine", type=float, default=0.99, help="int8: cosine with PyTorch f32")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--blas", choices=["openmp", "pthread", "system"], default="openmp",
                    help="OpenBLAS build of the PyTorch reference (bench/pytorch/torch_setup.py)")
    a = ap.parse_args()
    if a.attention == "linformer" and a.k >= a.n:
        sys.exit("export.py: Linformer needs k < n")
    torch.set_num_threads(a.threads)
    t0 = time.time()
    model = build_model(a)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    report = {"config": {k: getattr(a, k) for k in ("layers", "d_model", "heads", "d_ff", "vocab", "n", "k",
                                                    "attention", "variant", "precision", "reduce_range", "seed")},
              "torch_version": torch.__version__, "onnx_version": onnx.__version__}
    if a.precision == "f32":
        export_f32(model, a, a.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            f32 = os.path.join(tmp, "f32.onnx")
            export_f32(model, a, f32)
            report["quantized_matmuls"] = quantize_int8(f32, a.out, a.reduce_range)
    report["export_seconds"] = time.time() - t0
    report["file_bytes"] = os.path.getsize(a.out)
    report["ops"] = op_counts(a.out)
    report["check"] = {"status": "not run"} if a.no_check else check(model, a, a.out, a.out)
    with open(a.out + ".json", "w") as f:
        json.dump(report, f, indent=1)
    c = report["check"]
    print(json.dumps(report, indent=1))
    if c["status"] == "ok" or c["status"] == "skipped":
        print("check %s: max |ORT - PyTorch| %.3g (%.2g of max |out| %.3g), cosine %.6f" % (
            c["status"], c.get("max_abs_diff", float("nan")), c.get("rel_diff", float("nan")),
            c.get("output_max_abs", float("nan")), c.get("cosine", float("nan"))) if "cosine" in c
            else "check skipped: " + c["why"], file=sys.stderr)
    elif c["status"] == "failed":
        print("check FAILED (%s): max |ORT - PyTorch| %.3g (%.2g relative), cosine %.6f" % (
            c["criterion"], c["max_abs_diff"], c["rel_diff"], c["cosine"]), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
