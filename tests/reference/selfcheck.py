#!/usr/bin/python3
"""Self-check of tests/reference/torch_reference.py, independent of the C++ engine.

For tiny random models (standard attention; Linformer x every sharing x every projection;
pre- and post-norm; a per-layer k list) it writes a model directory and an input with
padding, runs the reference and verifies:
  (a) forward outputs and losses against a second formulation written with explicit
      Python loops in numpy (no E matrices, no einsum), and gradients against central
      finite differences of the loss on a sample of parameter entries;
  (b) padding invariance: appending padding columns leaves hidden states at real positions,
      the losses and all gradients unchanged;
  (c) linear projection: a sequence with N < max_len gives the same result as a model whose
      E matrices (and position table) are explicitly sliced to N columns (max_len = N).
Plus CLI checks: a subprocess run matches the in-process run; invalid configs exit non-zero.
Exits non-zero on any failure.
"""

import json
import math
import os
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
except ImportError as e:  # exit code 77: ctest reports the test as skipped
    print(f"SKIP: the self-check needs numpy and torch ({e})")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_reference as ref  # noqa: E402

FAILURES = []
CHECKS = [0]


def check(cond, what):
    CHECKS[0] += 1
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


def close(a, b, atol, rtol, what):
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        check(False, f"{what}: shape {a.shape} vs {b.shape}")
        return
    err = np.abs(a - b)
    ok = bool(np.all(err <= atol + rtol * np.abs(b)))
    if not ok:
        i = np.unravel_index(np.argmax(err - rtol * np.abs(b)), err.shape)
        what = f"{what}: max violation at {i}: {a[i]!r} vs {b[i]!r}"
    check(ok, what)


# --------------------------------------------------------------------------------------------
# Tiny models
# --------------------------------------------------------------------------------------------

def is_proj(name):
    """A Linformer projection tensor (not classifier.out_proj)."""
    return name.endswith(("key_proj.weight", "value_proj.weight", "kv_proj.weight"))


def base_config(**kw):
    cfg = {
        "vocab_size": 11, "max_len": 8, "d_model": 8, "n_heads": 2, "d_ff": 12, "n_layers": 2,
        "type_vocab_size": 2, "position_offset": 2, "attention": "linformer", "k": 4,
        "sharing": "layerwise", "projection": "linear", "norm": "post", "causal": False,
        "dropout": 0.0, "attention_dropout": 0.0, "layer_norm_eps": 1e-5, "init_std": 0.02,
        "num_classes": 3, "pad_id": 1, "cls_id": 0,
    }
    cfg.update(kw)
    return cfg


def random_params(cfg, rng):
    """Non-degenerate random parameters (so every path gets a noticeable gradient)."""
    specs = ref.make_param_specs(ref.parse_config(cfg))
    out = {}
    for name, shape in specs.items():
        if name.endswith("LayerNorm.weight") or name.endswith("layer_norm.weight"):
            a = 1.0 + 0.3 * rng.standard_normal(shape)
        elif is_proj(name) and cfg["projection"] == "conv":
            a = 1.0 / shape[-1] + 0.3 * rng.standard_normal(shape)
        elif is_proj(name):
            a = rng.standard_normal(shape) / math.sqrt(cfg["max_len"])
        else:
            a = 0.5 * rng.standard_normal(shape)
        out[name] = a.astype(np.float32)
    return out


def write_model(d, cfg, params):
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    ref.write_safetensors(os.path.join(d, "model.safetensors"), params)


def make_input(cfg, rng, B=3, N=6, lengths=(6, 4, 5)):
    ids = rng.integers(2, cfg["vocab_size"], size=(B, N)).astype(np.int64)
    ids[:, 0] = cfg["cls_id"]
    mask = np.zeros((B, N), dtype=np.int64)
    for b, ln in enumerate(lengths):
        mask[b, :ln] = 1
        ids[b, ln:] = cfg["pad_id"]
    mlm = np.full((B, N), -100, dtype=np.int64)
    for b in range(B):
        for t in range(1, lengths[b]):
            if rng.random() < 0.6:
                mlm[b, t] = rng.integers(0, cfg["vocab_size"])
    mlm[0, 1] = 3  # at least one label
    cls = rng.integers(0, cfg["num_classes"], size=(B,)).astype(np.int64)
    return {"input_ids": ids, "attention_mask": mask, "mlm_labels": mlm, "class_labels": cls}


def run_ref(model_dir, inputs, path):
    ref.write_safetensors(path + ".in", inputs)
    ref.run(model_dir, path + ".in", path, threads=1)
    out, _ = ref.read_safetensors(path)
    return out


# --------------------------------------------------------------------------------------------
# Second formulation: explicit loops in numpy float64
# --------------------------------------------------------------------------------------------

def np_gelu(x):
    erf = np.vectorize(math.erf)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def np_ln(x, w, b, eps):
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        row = x[idx]
        mu = sum(row) / len(row)
        var = sum((r - mu) ** 2 for r in row) / len(row)
        out[idx] = (row - mu) / math.sqrt(var + eps) * w + b
    return out


def np_softmax(v):
    v = np.asarray(v, dtype=np.float64)
    e = np.exp(v - v.max())
    return e / e.sum()


def loop_projection(cfg, Y, m, N, kind, weight, K):
    """Y: [N, Dh] already multiplied by the mask.  Returns [K, Dh] with explicit loops."""
    n = cfg["max_len"]
    Dh = Y.shape[1]
    out = np.zeros((K, Dh))
    if kind == "linear":
        for j in range(K):
            for t in range(N):
                out[j] += weight[j, t] * Y[t]
    elif kind == "mean_pool":
        w = n // K
        for j in range(K):
            for t in range(j * w, min((j + 1) * w, N)):
                out[j] += Y[t] / w
    elif kind == "conv":
        w = n // K
        for j in range(K):
            for u in range(w):
                t = j * w + u
                if t < N:
                    out[j] += weight[u] * Y[t]
    elif kind == "max_pool":
        w = n // K
        for j in range(K):
            rows = [Y[t] for t in range(j * w, min((j + 1) * w, N)) if m[t] == 1]
            if rows:
                out[j] = np.max(np.stack(rows), axis=0)
    return out


def loop_forward(cfg, P, ids, mask):
    P = {k: v.astype(np.float64) for k, v in P.items()}
    B, N = ids.shape
    D, H = cfg["d_model"], cfg["n_heads"]
    Dh = D // H
    eps = cfg["layer_norm_eps"]
    kl = cfg["k"] if isinstance(cfg["k"], list) else [cfg["k"]]
    x = np.zeros((B, N, D))
    e = "roberta.embeddings."
    for b in range(B):
        for t in range(N):
            x[b, t] = (P[e + "word_embeddings.weight"][ids[b, t]]
                       + P[e + "position_embeddings.weight"][t + cfg["position_offset"]]
                       + P[e + "token_type_embeddings.weight"][0])
    x = np_ln(x, P[e + "LayerNorm.weight"], P[e + "LayerNorm.bias"], eps)

    def lin(v, name):
        return v @ P[name + ".weight"].T + P[name + ".bias"]

    def attention(i, xin):
        p = f"roberta.encoder.layer.{i}.attention.self."
        out = np.zeros((B, N, D))
        for b in range(B):
            Q = lin(xin[b], p + "query")
            Km = lin(xin[b], p + "key")
            Vm = lin(xin[b], p + "value")
            for h in range(H):
                cols = slice(h * Dh, (h + 1) * Dh)
                q, k, v = Q[:, cols], Km[:, cols], Vm[:, cols]
                if cfg["attention"] == "standard":
                    for a in range(N):
                        keys = [t for t in range(N) if mask[b, t] == 1
                                and (not cfg["causal"] or t <= a)]
                        if not keys:
                            continue
                        sc = [q[a] @ k[t] / math.sqrt(Dh) for t in keys]
                        pr = np_softmax(sc)
                        for pw, t in zip(pr, keys):
                            out[b, a, cols] += pw * v[t]
                else:
                    K = kl[0] if len(kl) == 1 else kl[i]
                    kt = k * mask[b][:, None]
                    vt = v * mask[b][:, None]
                    kind = cfg["projection"]
                    s = cfg["sharing"]
                    Ew = Fw = None
                    if kind in ("linear", "conv"):
                        if s in ("none", "headwise"):
                            Ew, Fw = P[p + "key_proj.weight"], P[p + "value_proj.weight"]
                            if s == "none":
                                Ew, Fw = Ew[h], Fw[h]
                        elif s == "kv":
                            Ew = Fw = P[p + "kv_proj.weight"]
                        else:
                            Ew = Fw = P["roberta.encoder.kv_proj.weight"]
                    kp = loop_projection(cfg, kt, mask[b], N, kind, Ew, K)
                    vp = loop_projection(cfg, vt, mask[b], N, kind, Fw, K)
                    n = cfg["max_len"]
                    rows = [j for j in range(K)
                            if not cfg.get("mask_empty_rows", True)
                            or any(mask[b, t] == 1
                                   for t in range(j * n // K, min((j + 1) * n // K, N)))]
                    for a in range(N):
                        pr = np_softmax([q[a] @ kp[j] / math.sqrt(Dh) for j in rows])
                        for pw, j in zip(pr, rows):
                            out[b, a, cols] += pw * vp[j]
        return out

    for i in range(cfg["n_layers"]):
        p = f"roberta.encoder.layer.{i}."
        lna = (P[p + "attention.output.LayerNorm.weight"], P[p + "attention.output.LayerNorm.bias"])
        lno = (P[p + "output.LayerNorm.weight"], P[p + "output.LayerNorm.bias"])

        def ffn(v):
            return lin(np_gelu(lin(v, p + "intermediate.dense")), p + "output.dense")

        if cfg["norm"] == "post":
            x = np_ln(x + lin(attention(i, x), p + "attention.output.dense"), *lna, eps)
            x = np_ln(x + ffn(x), *lno, eps)
        else:
            x = x + lin(attention(i, np_ln(x, *lna, eps)), p + "attention.output.dense")
            x = x + ffn(np_ln(x, *lno, eps))
    if cfg["norm"] == "pre":
        x = np_ln(x, P["roberta.encoder.final_layer_norm.weight"],
                  P["roberta.encoder.final_layer_norm.bias"], eps)
    hmlm = np_ln(np_gelu(lin(x, "lm_head.dense")), P["lm_head.layer_norm.weight"],
                 P["lm_head.layer_norm.bias"], eps)
    logits = hmlm @ P[e + "word_embeddings.weight"].T + P["lm_head.bias"]
    c = np.tanh(lin(x[:, 0], "classifier.dense"))
    cls_logits = lin(c, "classifier.out_proj")
    return x, logits, cls_logits


def loop_ce(logits, labels):
    tot, cnt = 0.0, 0
    for lg, lb in zip(logits, labels):
        if lb == -100:
            continue
        mx = max(lg)
        lse = mx + math.log(sum(math.exp(v - mx) for v in lg))
        tot += lse - lg[lb]
        cnt += 1
    return tot / cnt


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------

def torch_loss(cfg_n, P64, ids, mask, mlm, cls):
    _, lg, cl = ref.forward(cfg_n, P64, ids, mask)
    L = ref.losses(cfg_n, lg, cl, mlm, cls)
    return float(sum(L.values()))


def finite_difference_check(tag, cfg, params, inputs, out, rng):
    cfg_n = ref.parse_config(cfg)
    P64 = {k: torch.tensor(v, dtype=torch.float64) for k, v in params.items()}
    ids = torch.tensor(inputs["input_ids"], dtype=torch.long)
    mask = torch.tensor(inputs["attention_mask"], dtype=torch.float64)
    mlm = torch.tensor(inputs["mlm_labels"])
    cls = torch.tensor(inputs["class_labels"])
    names = [n for n in params if is_proj(n)]
    names += ["roberta.embeddings.word_embeddings.weight",
              "roberta.embeddings.position_embeddings.weight",
              "roberta.encoder.layer.0.attention.self.key.bias",
              "roberta.encoder.layer.0.attention.self.value.weight",
              "roberta.encoder.layer.1.attention.self.query.weight",
              "roberta.encoder.layer.0.attention.output.LayerNorm.weight",
              "roberta.encoder.layer.1.intermediate.dense.weight",
              "lm_head.layer_norm.bias", "classifier.dense.weight"]
    if cfg["norm"] == "pre":
        names.append("roberta.encoder.final_layer_norm.weight")
    h = 1e-6
    with torch.no_grad():
        for name in names:
            flat = P64[name].view(-1)
            g = out["grad." + name].reshape(-1)
            picks = list(rng.choice(flat.numel(), size=min(3, flat.numel()), replace=False))
            if name.endswith("position_embeddings.weight"):
                # rows beyond the sequence receive exactly zero gradient
                D = cfg["d_model"]
                picks.append((cfg["position_offset"] + inputs["input_ids"].shape[1]) * D)
            for idx in picks:
                old = float(flat[idx])
                flat[idx] = old + h
                lp = torch_loss(cfg_n, P64, ids, mask, mlm, cls)
                flat[idx] = old - h
                lm = torch_loss(cfg_n, P64, ids, mask, mlm, cls)
                flat[idx] = old
                fd = (lp - lm) / (2 * h)
                close(g[idx], fd, 2e-6, 2e-4, f"{tag}: d loss / d {name}[{idx}] (finite diff)")


def check_against_loops(tag, cfg, params, inputs, out):
    x, lg, cl = loop_forward(cfg, params, inputs["input_ids"], inputs["attention_mask"])
    close(out["hidden_states"], x, 2e-5, 2e-5, f"{tag}: hidden_states vs loop formulation")
    close(out["mlm_logits"], lg, 2e-5, 2e-5, f"{tag}: mlm_logits vs loop formulation")
    close(out["class_logits"], cl, 2e-5, 2e-5, f"{tag}: class_logits vs loop formulation")
    V = cfg["vocab_size"]
    close(out["mlm_loss"], [loop_ce(lg.reshape(-1, V), inputs["mlm_labels"].reshape(-1))],
          1e-6, 1e-6, f"{tag}: mlm_loss vs loop formulation")
    close(out["class_loss"], [loop_ce(cl, inputs["class_labels"])], 1e-6, 1e-6,
          f"{tag}: class_loss vs loop formulation")


def check_padding(tag, cfg, model_dir, inputs, out, work, extra):
    B, N = inputs["input_ids"].shape
    padded = {}
    padded["input_ids"] = np.concatenate(
        [inputs["input_ids"], np.full((B, extra), cfg["pad_id"], np.int64)], axis=1)
    padded["attention_mask"] = np.concatenate(
        [inputs["attention_mask"], np.zeros((B, extra), np.int64)], axis=1)
    padded["mlm_labels"] = np.concatenate(
        [inputs["mlm_labels"], np.full((B, extra), -100, np.int64)], axis=1)
    padded["class_labels"] = inputs["class_labels"]
    out2 = run_ref(model_dir, padded, os.path.join(work, "padded.safetensors"))
    real = inputs["attention_mask"] == 1
    close(out2["hidden_states"][:, :N][real], out["hidden_states"][real], 1e-6, 1e-5,
          f"{tag}: padding invariance of hidden_states")
    close(out2["class_logits"], out["class_logits"], 1e-6, 1e-5,
          f"{tag}: padding invariance of class_logits")
    for k in ("mlm_loss", "class_loss"):
        close(out2[k], out[k], 1e-6, 1e-5, f"{tag}: padding invariance of {k}")
    for k in out:
        if k.startswith("grad."):
            close(out2[k], out[k], 1e-6, 1e-5, f"{tag}: padding invariance of {k}")


def check_sliced(tag, cfg, params, inputs, out, work):
    N = inputs["input_ids"].shape[1]
    cfg2 = dict(cfg, max_len=N)
    p2 = {}
    for name, a in params.items():
        if is_proj(name):
            a = a[..., :N]
        elif name.endswith("position_embeddings.weight"):
            a = a[:N + cfg["position_offset"]]
        p2[name] = np.ascontiguousarray(a)
    d2 = os.path.join(work, "sliced_model")
    write_model(d2, cfg2, p2)
    out2 = run_ref(d2, inputs, os.path.join(work, "sliced.safetensors"))
    for k in ("hidden_states", "mlm_logits", "class_logits", "mlm_loss", "class_loss"):
        close(out2[k], out[k], 1e-6, 1e-5, f"{tag}: explicit E[:, :N] slicing, {k}")
    for name in params:
        g = out["grad." + name]
        if is_proj(name):
            close(out2["grad." + name], g[..., :N], 1e-6, 1e-5, f"{tag}: sliced grad {name}")
            check(np.all(g[..., N:] == 0), f"{tag}: grad {name} beyond N is exactly zero")
        elif name.endswith("position_embeddings.weight"):
            n0 = N + cfg["position_offset"]
            close(out2["grad." + name], g[:n0], 1e-6, 1e-5, f"{tag}: sliced grad {name}")
        else:
            close(out2["grad." + name], g, 1e-6, 1e-5, f"{tag}: sliced grad {name}")


def run_case(tag, cfg, seed, root, sliced=False, fd=True):
    rng = np.random.default_rng(seed)
    work = os.path.join(root, tag.replace(" ", "_").replace("/", "_"))
    os.makedirs(work)
    params = random_params(cfg, rng)
    model_dir = os.path.join(work, "model")
    write_model(model_dir, cfg, params)
    inputs = make_input(cfg, rng)
    if seed % 2:
        inputs["input_ids"] = inputs["input_ids"].astype(np.int32)
        inputs["attention_mask"] = inputs["attention_mask"].astype(np.int32)
    out = run_ref(model_dir, inputs, os.path.join(work, "out.safetensors"))
    inputs = {k: v.astype(np.int64) for k, v in inputs.items()}
    # every parameter has a gradient with the parameter's shape
    for name, a in params.items():
        check(("grad." + name) in out and out["grad." + name].shape == a.shape,
              f"{tag}: grad.{name} present with shape {a.shape}")
    check(all(v.dtype == np.float32 for v in out.values()), f"{tag}: outputs are F32")
    check_against_loops(tag, cfg, params, inputs, out)
    if fd:
        finite_difference_check(tag, cfg, params, inputs, out, rng)
    check_padding(tag, cfg, model_dir, inputs, out, work, cfg["max_len"] - inputs["input_ids"].shape[1])
    # Slicing E to N columns and setting max_len = N keeps the outputs only when empty rows
    # are kept: with the mask, which rows are empty depends on max_len's windows.
    if sliced and not cfg.get("mask_empty_rows", True):
        check_sliced(tag, cfg, params, inputs, out, work)
    return model_dir, inputs, out


def cli_checks(root, model_dir, inputs, out):
    script = os.path.join(HERE, "torch_reference.py")
    inp = os.path.join(root, "cli_in.safetensors")
    ref.write_safetensors(inp, inputs)
    outp = os.path.join(root, "cli_out.safetensors")
    r = subprocess.run([sys.executable, script, "--model", model_dir, "--input", inp,
                        "--out", outp, "--threads", "2"], capture_output=True, text=True)
    check(r.returncode == 0, f"cli: exit status 0 (stderr: {r.stderr.strip()})")
    if r.returncode == 0:
        o2, meta = ref.read_safetensors(outp)
        check(set(o2) == set(out), "cli: same output names as in-process run")
        for k in out:
            if k in o2:
                close(o2[k], out[k], 1e-6, 1e-5, f"cli: {k} matches in-process run")

    # no labels: forward outputs only
    only = {"input_ids": inputs["input_ids"]}
    ref.write_safetensors(inp, only)
    r = subprocess.run([sys.executable, script, "--model", model_dir, "--input", inp,
                        "--out", outp], capture_output=True, text=True)
    check(r.returncode == 0, f"cli (no labels): exit status 0 ({r.stderr.strip()})")
    if r.returncode == 0:
        o2, _ = ref.read_safetensors(outp)
        check(set(o2) == {"hidden_states", "mlm_logits", "class_logits"},
              f"cli (no labels): only forward outputs, got {sorted(o2)}")

    # invalid configs are rejected with a message on stderr
    bad = {
        "causal linformer": base_config(causal=True),
        "max_len % k for mean_pool": base_config(projection="mean_pool", k=3, max_len=8),
        "max_len % k for conv": base_config(projection="conv", k=[4, 3], sharing="kv"),
        "non-zero dropout": base_config(dropout=0.1),
        "layerwise with different k": base_config(k=[4, 2]),
    }
    for what, cfg in bad.items():
        d = os.path.join(root, "bad_" + what.replace(" ", "_").replace("%", "mod"))
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        # the parameters are irrelevant: the config is rejected before they are read
        ref.write_safetensors(os.path.join(d, "model.safetensors"), {})
        r = subprocess.run([sys.executable, script, "--model", d, "--input", inp,
                            "--out", os.path.join(d, "o.safetensors")],
                           capture_output=True, text=True)
        check(r.returncode != 0 and "error" in r.stderr,
              f"cli: {what} is rejected (rc={r.returncode}, stderr={r.stderr.strip()!r})")


def safetensors_roundtrip(root):
    p = os.path.join(root, "rt.safetensors")
    t = {"a": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([-1, 7], np.int64),
         "c": np.array([3], np.int32), "e": np.zeros((0, 4), np.float32)}
    ref.write_safetensors(p, t, metadata={"x": "y"})
    with open(p, "rb") as f:
        raw = f.read()
    hlen = int.from_bytes(raw[:8], "little")
    check((8 + hlen) % 8 == 0, "safetensors: data buffer is 8-byte aligned")
    hdr = json.loads(raw[8:8 + hlen])
    check(hdr["a"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]},
          f"safetensors: header entry {hdr['a']}")
    check(hdr["__metadata__"] == {"x": "y"}, "safetensors: metadata")
    back, meta = ref.read_safetensors(p)
    check(meta == {"x": "y"} and set(back) == set(t), "safetensors: names and metadata")
    for k in t:
        check(back[k].dtype == t[k].dtype and np.array_equal(back[k], t[k]),
              f"safetensors: roundtrip of {k}")


def main():
    t0 = time.time()
    torch.set_num_threads(1)
    cases = []
    cases.append(("standard post", base_config(attention="standard", k=4), False))
    cases.append(("standard pre", base_config(attention="standard", norm="pre"), False))
    cases.append(("standard causal", base_config(attention="standard", causal=True), False))
    seed = 0
    for sharing in ("none", "headwise", "kv", "layerwise"):
        for proj in ("linear", "mean_pool", "max_pool", "conv"):
            seed += 1
            norm = "pre" if seed % 2 else "post"
            k = 4 if sharing == "layerwise" else [4, 2]
            cfg = base_config(sharing=sharing, projection=proj, norm=norm, k=k)
            cases.append((f"linformer {sharing} {proj} {norm}", cfg, proj == "linear"))
    # k larger than the sequence, single k for all layers, other norm
    cases.append(("linformer headwise linear k>N post",
                  base_config(sharing="headwise", projection="linear", k=7, norm="post",
                              mask_empty_rows=False), True))
    cases.append(("linformer kv max_pool k=8 post",
                  base_config(sharing="kv", projection="max_pool", k=8, norm="post"), False))
    cases.append(("linformer layerwise linear empty rows kept",
                  base_config(mask_empty_rows=False), True))
    with tempfile.TemporaryDirectory(prefix="lf_selfcheck_") as root:
        safetensors_roundtrip(root)
        first = None
        for i, (tag, cfg, sliced) in enumerate(cases):
            n0 = len(FAILURES)
            r = run_case(tag, cfg, 100 + i, root, sliced=sliced)
            first = first or r
            print(f"{'ok  ' if len(FAILURES) == n0 else 'FAIL'} {tag}", flush=True)
        cli_checks(root, *first)
    dt = time.time() - t0
    if FAILURES:
        print(f"selfcheck: {len(FAILURES)} of {CHECKS[0]} checks FAILED ({dt:.1f} s)")
        return 1
    print(f"selfcheck: all {CHECKS[0]} checks passed ({dt:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
