#!/usr/bin/python3
"""Independent PyTorch reference for the Linformer encoder described in docs/model.md.

Usage:
  /usr/bin/python3 tests/reference/torch_reference.py --model DIR --input IN.safetensors \
      --out OUT.safetensors [--threads 1]

DIR holds config.json and model.safetensors (F32 parameters).  IN.safetensors holds
input_ids [B, N] and optionally attention_mask [B, N], mlm_labels [B, N], class_labels [B].
OUT.safetensors receives (all F32) hidden_states [B, N, D], mlm_logits [B, N, V],
class_logits [B, C] and, when labels are given, mlm_loss [1] / class_loss [1] (one per
given label kind) and grad.<param> for every parameter: the gradient of the sum of the
given losses.

Everything is computed in float64 and written as float32.  The computation follows
docs/model.md literally: keys and values are computed with the linear maps first, padded
rows are zeroed, and only then are they projected along the sequence axis (E[:, :N] @ K~).
Dropout is not modelled; a config with non-zero dropout is rejected.

The module is importable (tests/reference/selfcheck.py uses load_config, make_param_specs,
forward, losses, read_safetensors, write_safetensors and run).
"""

import argparse
import json
import math
import os
import sys

import numpy as np
import torch


from nystrom_reference import nystrom_attention  # noqa: E402
from st_io import RefError, read_safetensors, write_safetensors  # noqa: E402,F401


# --------------------------------------------------------------------------------------------
# Config
# --------------------------------------------------------------------------------------------

_DEFAULTS = {
    "vocab_size": 8192, "max_len": 512, "d_model": 256, "n_heads": 4, "d_ff": 1024,
    "n_layers": 4, "type_vocab_size": 1, "position_offset": 0, "attention": "linformer",
    "k": [128], "sharing": "layerwise", "projection": "linear", "norm": "post",
    "causal": False, "mask_empty_rows": True, "dropout": 0.1, "attention_dropout": 0.1, "layer_norm_eps": 1e-5,
    "init_std": 0.02, "num_classes": 2, "pad_id": 1, "cls_id": 0, "classifier_pooling": "first",
    # initialisation only (the reference loads the weights): accepted, not used
    "projection_init": "mean_pool", "projection_init_noise": 0.1,
    "landmarks": 64,  # nystrom only
}
_INT_KEYS = ["vocab_size", "max_len", "d_model", "n_heads", "d_ff", "n_layers",
             "type_vocab_size", "position_offset", "num_classes", "pad_id", "cls_id", "landmarks"]
_CHOICES = {
    "attention": ("standard", "linformer", "nystrom"),
    "sharing": ("none", "headwise", "kv", "layerwise"),
    "projection": ("linear", "mean_pool", "max_pool", "conv"),
    "norm": ("post", "pre"),
    "classifier_pooling": ("first", "mean"),
}


def _as_int(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
        raise RefError(f"config: '{name}' must be an integer, got {v!r}")
    return int(v)


def parse_config(raw):
    """Validates a config dict (as read from config.json) and returns a normalised copy."""
    if not isinstance(raw, dict):
        raise RefError("config: not a JSON object")
    unknown = sorted(set(raw) - set(_DEFAULTS))
    if unknown:
        raise RefError(f"config: unknown key(s) {unknown}")
    cfg = dict(_DEFAULTS)
    cfg.update(raw)
    for key in _INT_KEYS:
        cfg[key] = _as_int(key, cfg[key])
    for key, choices in _CHOICES.items():
        if cfg[key] not in choices:
            raise RefError(f"config: '{key}' must be one of {list(choices)}, got {cfg[key]!r}")
    for key in ("causal", "mask_empty_rows"):
        if not isinstance(cfg[key], bool):
            raise RefError(f"config: '{key}' must be true or false")
    for key in ("dropout", "attention_dropout", "layer_norm_eps", "init_std"):
        if isinstance(cfg[key], bool) or not isinstance(cfg[key], (int, float)):
            raise RefError(f"config: '{key}' must be a number")
        cfg[key] = float(cfg[key])
    k = cfg["k"]
    k = [k] if not isinstance(k, list) else k
    cfg["k"] = [_as_int("k", v) for v in k]

    L, n = cfg["n_layers"], cfg["max_len"]
    for key in ("vocab_size", "max_len", "d_model", "n_heads", "d_ff", "n_layers",
                "type_vocab_size", "num_classes"):
        if cfg[key] <= 0:
            raise RefError(f"config: '{key}' must be positive")
    if cfg["position_offset"] < 0:
        raise RefError("config: 'position_offset' must be >= 0")
    if cfg["d_model"] % cfg["n_heads"] != 0:
        raise RefError("config: d_model must be divisible by n_heads")
    if cfg["layer_norm_eps"] <= 0:
        raise RefError("config: layer_norm_eps must be positive")
    if cfg["dropout"] != 0.0 or cfg["attention_dropout"] != 0.0:
        raise RefError("config: the reference runs without dropout; dropout and "
                       "attention_dropout must be 0")
    if cfg["attention"] == "nystrom" and (cfg["causal"] or not 1 <= cfg["landmarks"] <= n):
        raise RefError(f"config: nystrom needs causal false and landmarks in [1, {n}]")
    if cfg["attention"] == "linformer":
        if cfg["causal"]:
            raise RefError("config: causal attention cannot be expressed with Linformer "
                           "(the projection mixes all positions)")
        if len(cfg["k"]) not in (1, L):
            raise RefError(f"config: 'k' must have 1 or n_layers={L} entries")
        if any(v <= 0 for v in cfg["k"]):
            raise RefError("config: every k must be positive")
        if cfg["sharing"] == "layerwise" and len(set(cfg["k"])) != 1:
            raise RefError("config: sharing 'layerwise' needs the same k in every layer")
        if cfg["projection"] != "linear":
            for v in cfg["k"]:
                if n % v != 0:
                    raise RefError(f"config: max_len={n} is not divisible by k={v} "
                                   f"(required for projection '{cfg['projection']}')")
    return cfg


def load_config(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            raw = json.load(f)
    except OSError as e:
        raise RefError(f"cannot read {path}: {e}")
    except json.JSONDecodeError as e:
        raise RefError(f"{path}: bad JSON: {e}")
    return parse_config(raw)


def k_of(cfg, layer):
    return cfg["k"][0] if len(cfg["k"]) == 1 else cfg["k"][layer]


# --------------------------------------------------------------------------------------------
# Parameters
# --------------------------------------------------------------------------------------------

def make_param_specs(cfg):
    """Ordered dict name -> shape of every parameter the config implies."""
    V, D, F, H = cfg["vocab_size"], cfg["d_model"], cfg["d_ff"], cfg["n_heads"]
    n, L, C = cfg["max_len"], cfg["n_layers"], cfg["num_classes"]
    specs = {}
    e = "roberta.embeddings."
    specs[e + "word_embeddings.weight"] = (V, D)
    specs[e + "position_embeddings.weight"] = (n + cfg["position_offset"], D)
    specs[e + "token_type_embeddings.weight"] = (cfg["type_vocab_size"], D)
    specs[e + "LayerNorm.weight"] = (D,)
    specs[e + "LayerNorm.bias"] = (D,)
    lin = cfg["attention"] == "linformer"
    proj = cfg["projection"]
    has_proj = lin and proj in ("linear", "conv")

    def proj_shape(K, per_head):
        base = (K, n) if proj == "linear" else (n // K,)
        return ((H,) + base) if per_head else base

    if has_proj and cfg["sharing"] == "layerwise":
        specs["roberta.encoder.kv_proj.weight"] = proj_shape(k_of(cfg, 0), False)
    for i in range(L):
        p = f"roberta.encoder.layer.{i}."
        for m in ("query", "key", "value"):
            specs[p + f"attention.self.{m}.weight"] = (D, D)
            specs[p + f"attention.self.{m}.bias"] = (D,)
        if has_proj:
            K = k_of(cfg, i)
            if cfg["sharing"] in ("none", "headwise"):
                per_head = cfg["sharing"] == "none"
                specs[p + "attention.self.key_proj.weight"] = proj_shape(K, per_head)
                specs[p + "attention.self.value_proj.weight"] = proj_shape(K, per_head)
            elif cfg["sharing"] == "kv":
                specs[p + "attention.self.kv_proj.weight"] = proj_shape(K, False)
        specs[p + "attention.output.dense.weight"] = (D, D)
        specs[p + "attention.output.dense.bias"] = (D,)
        specs[p + "attention.output.LayerNorm.weight"] = (D,)
        specs[p + "attention.output.LayerNorm.bias"] = (D,)
        specs[p + "intermediate.dense.weight"] = (F, D)
        specs[p + "intermediate.dense.bias"] = (F,)
        specs[p + "output.dense.weight"] = (D, F)
        specs[p + "output.dense.bias"] = (D,)
        specs[p + "output.LayerNorm.weight"] = (D,)
        specs[p + "output.LayerNorm.bias"] = (D,)
    if cfg["norm"] == "pre":
        specs["roberta.encoder.final_layer_norm.weight"] = (D,)
        specs["roberta.encoder.final_layer_norm.bias"] = (D,)
    specs["lm_head.dense.weight"] = (D, D)
    specs["lm_head.dense.bias"] = (D,)
    specs["lm_head.layer_norm.weight"] = (D,)
    specs["lm_head.layer_norm.bias"] = (D,)
    specs["lm_head.bias"] = (V,)
    specs["classifier.dense.weight"] = (D, D)
    specs["classifier.dense.bias"] = (D,)
    specs["classifier.out_proj.weight"] = (C, D)
    specs["classifier.out_proj.bias"] = (C,)
    return specs


def load_params(cfg, path):
    """Reads model.safetensors; returns dict name -> float64 leaf tensor (requires_grad)."""
    tensors, _ = read_safetensors(path)
    specs = make_param_specs(cfg)
    missing = [k for k in specs if k not in tensors]
    if missing:
        raise RefError(f"{path}: missing parameter(s): {missing}")
    extra = sorted(set(tensors) - set(specs))
    if extra:
        raise RefError(f"{path}: unexpected tensor(s) for this config: {extra}")
    params = {}
    for name, shape in specs.items():
        arr = tensors[name]
        if tuple(arr.shape) != tuple(shape):
            raise RefError(f"{path}: '{name}' has shape {list(arr.shape)}, expected {list(shape)}")
        if arr.dtype.kind != "f":
            raise RefError(f"{path}: '{name}' is not a floating-point tensor")
        params[name] = torch.tensor(arr, dtype=torch.float64).requires_grad_(True)
    return params


# --------------------------------------------------------------------------------------------
# The model (docs/model.md, straightforward order)
# --------------------------------------------------------------------------------------------

def gelu(x):
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


def layer_norm(x, w, b, eps):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)  # biased variance, as in nn.LayerNorm
    return (x - mu) / torch.sqrt(var + eps) * w + b


def linear(x, w, b=None):
    y = x.matmul(w.t())
    return y if b is None else y + b


def standard_attention(q, k, v, mask, causal):
    """q, k, v: [B, H, N, Dh]; mask [B, N] (float 0/1).  Padded keys get weight exactly 0."""
    B, H, N, Dh = q.shape
    scores = q.matmul(k.transpose(-1, -2)) / math.sqrt(Dh)  # [B, H, N, N]
    allowed = (mask > 0.5)[:, None, None, :].expand(B, H, N, N)
    if causal:
        tri = torch.ones(N, N, dtype=torch.bool).tril()
        allowed = allowed & tri[None, None]
    scores = scores.masked_fill(~allowed, float("-inf"))
    mx = scores.detach().amax(dim=-1, keepdim=True)
    mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
    e = torch.exp(scores - mx)  # exactly 0 where not allowed
    z = e.sum(dim=-1, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))  # a query with no real key gets 0
    return p.matmul(v)


def fixed_mean_matrix(K, n):
    w = n // K
    E = torch.zeros(K, n, dtype=torch.float64)
    for j in range(K):
        E[j, j * w:(j + 1) * w] = 1.0 / w
    return E


def conv_matrix(c, K):
    """c: [..., w] kernels -> [..., K, K*w] with E[j, j*w + u] = c[u] (block diagonal)."""
    eye = torch.eye(K, dtype=c.dtype)
    # E[..., j, j2*w + u] = eye[j, j2] * c[..., u]
    E = eye[:, :, None] * c[..., None, None, :]  # [..., K, K, w]
    return E.reshape(*c.shape[:-1], K, K * c.shape[-1])


def project(Y, mask, kind, weight, K, n):
    """Y: [B, H, N, Dh] with padded rows already zeroed; weight: None, [K, n], [H, K, n],
    [w] or [H, w].  Returns [B, H, K, Dh]."""
    B, H, N, Dh = Y.shape
    if kind == "max_pool":
        w = n // K
        real = (mask > 0.5)[:, None, :, None].expand(B, H, N, Dh)
        neg = torch.full((B, H, n, Dh), float("-inf"), dtype=Y.dtype)
        full = torch.cat([torch.where(real, Y, neg[:, :, :N]), neg[:, :, N:]], dim=2)
        m = full.reshape(B, H, K, w, Dh).max(dim=3).values
        return torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    if kind == "linear":
        E = weight
    elif kind == "mean_pool":
        E = fixed_mean_matrix(K, n)
    elif kind == "conv":
        E = conv_matrix(weight, K)
    else:
        raise RefError(f"unknown projection {kind}")
    E = E[..., :N]  # the first N columns
    if E.dim() == 2:
        return torch.einsum("kt,bhtd->bhkd", E, Y)
    return torch.einsum("hkt,bhtd->bhkd", E, Y)


def live_rows(mask, K, n):
    """[B, K] bool: projected row j is live when its window of positions
    [floor(j n / K), floor((j+1) n / K)) holds a real (unpadded) position of the sequence."""
    B, N = mask.shape
    real = torch.zeros(B, n, dtype=torch.bool)
    real[:, :N] = mask > 0.5
    row_of = torch.tensor([max(j for j in range(K) if j * n // K <= t) for t in range(n)])
    live = torch.zeros(B, K, dtype=torch.bool)
    for t in range(n):
        live[:, row_of[t]] |= real[:, t]
    return live


def self_attention(cfg, P, layer, x, mask):
    B, N, D = x.shape
    H = cfg["n_heads"]
    Dh = D // H
    p = f"roberta.encoder.layer.{layer}.attention.self."
    Q = linear(x, P[p + "query.weight"], P[p + "query.bias"])
    Km = linear(x, P[p + "key.weight"], P[p + "key.bias"])
    Vm = linear(x, P[p + "value.weight"], P[p + "value.bias"])

    def heads(t):  # [B, N, D] -> [B, H, N, Dh]
        return t.reshape(B, N, H, Dh).permute(0, 2, 1, 3)

    Q, Km, Vm = heads(Q), heads(Km), heads(Vm)
    if cfg["attention"] == "standard":
        out = standard_attention(Q, Km, Vm, mask, cfg["causal"])
    elif cfg["attention"] == "nystrom":
        out = nystrom_attention(Q, Km, Vm, mask, cfg["landmarks"])
    else:
        K = k_of(cfg, layer)
        n = cfg["max_len"]
        m = mask[:, None, :, None]
        Kt = Km * m  # K~ = diag(m) K (bias included)
        Vt = Vm * m
        kind = cfg["projection"]
        Ew = Fw = None
        if kind in ("linear", "conv"):
            s = cfg["sharing"]
            if s in ("none", "headwise"):
                Ew, Fw = P[p + "key_proj.weight"], P[p + "value_proj.weight"]
            elif s == "kv":
                Ew = Fw = P[p + "kv_proj.weight"]
            else:
                Ew = Fw = P["roberta.encoder.kv_proj.weight"]
        Kp = project(Kt, mask, kind, Ew, K, n)  # [B, H, K, Dh]
        Vp = project(Vt, mask, kind, Fw, K, n)
        scores = Q.matmul(Kp.transpose(-1, -2)) / math.sqrt(Dh)  # [B, H, N, K]
        if cfg["mask_empty_rows"]:
            live = live_rows(mask, K, n)  # [B, K]
            scores = scores.masked_fill(~live[:, None, None, :], float("-inf"))
        out = torch.softmax(scores, dim=-1).matmul(Vp)
    return out.permute(0, 2, 1, 3).reshape(B, N, D)


def forward(cfg, P, ids, mask):
    """ids: LongTensor [B, N]; mask: float64 [B, N].  Returns (hidden, mlm_logits, class_logits)."""
    B, N = ids.shape
    eps = cfg["layer_norm_eps"]
    e = "roberta.embeddings."
    word = P[e + "word_embeddings.weight"]
    pos = torch.arange(N) + cfg["position_offset"]
    x = word[ids] + P[e + "position_embeddings.weight"][pos][None] \
        + P[e + "token_type_embeddings.weight"][0][None, None]
    x = layer_norm(x, P[e + "LayerNorm.weight"], P[e + "LayerNorm.bias"], eps)
    for i in range(cfg["n_layers"]):
        p = f"roberta.encoder.layer.{i}."

        def attn_out(h):
            return linear(h, P[p + "attention.output.dense.weight"],
                          P[p + "attention.output.dense.bias"])

        def ffn(h):
            h = gelu(linear(h, P[p + "intermediate.dense.weight"], P[p + "intermediate.dense.bias"]))
            return linear(h, P[p + "output.dense.weight"], P[p + "output.dense.bias"])

        ln_attn = (P[p + "attention.output.LayerNorm.weight"], P[p + "attention.output.LayerNorm.bias"])
        ln_out = (P[p + "output.LayerNorm.weight"], P[p + "output.LayerNorm.bias"])
        if cfg["norm"] == "post":
            x = layer_norm(x + attn_out(self_attention(cfg, P, i, x, mask)), *ln_attn, eps)
            x = layer_norm(x + ffn(x), *ln_out, eps)
        else:
            x = x + attn_out(self_attention(cfg, P, i, layer_norm(x, *ln_attn, eps), mask))
            x = x + ffn(layer_norm(x, *ln_out, eps))
    if cfg["norm"] == "pre":
        x = layer_norm(x, P["roberta.encoder.final_layer_norm.weight"],
                       P["roberta.encoder.final_layer_norm.bias"], eps)
    hidden = x
    h = gelu(linear(x, P["lm_head.dense.weight"], P["lm_head.dense.bias"]))
    h = layer_norm(h, P["lm_head.layer_norm.weight"], P["lm_head.layer_norm.bias"], eps)
    mlm_logits = linear(h, word, P["lm_head.bias"])
    if cfg["classifier_pooling"] == "mean":  # the mean over the real tokens
        pooled = (x * mask[:, :, None]).sum(1) / mask.sum(1, keepdim=True)
    else:
        pooled = x[:, 0]
    c = torch.tanh(linear(pooled, P["classifier.dense.weight"], P["classifier.dense.bias"]))
    class_logits = linear(c, P["classifier.out_proj.weight"], P["classifier.out_proj.bias"])
    return hidden, mlm_logits, class_logits


def cross_entropy_mean(logits, labels):
    """Mean cross-entropy over rows whose label is not -100 (0 when there are none)."""
    keep = labels != -100
    if int(keep.sum()) == 0:
        return logits.sum() * 0.0
    lg = logits[keep]
    lb = labels[keep]
    logp = lg - torch.logsumexp(lg, dim=-1, keepdim=True)
    return -logp.gather(1, lb[:, None]).mean()


def losses(cfg, mlm_logits, class_logits, mlm_labels, class_labels):
    out = {}
    if mlm_labels is not None:
        out["mlm_loss"] = cross_entropy_mean(mlm_logits.reshape(-1, mlm_logits.shape[-1]),
                                             mlm_labels.reshape(-1))
    if class_labels is not None:
        out["class_loss"] = cross_entropy_mean(class_logits, class_labels)
    return out


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def _int_tensor(name, arr):
    if arr.dtype.kind not in "iu":
        raise RefError(f"input: '{name}' must be an integer tensor (I32 or I64), got {arr.dtype}")
    return torch.tensor(arr.astype(np.int64), dtype=torch.long)


def load_inputs(cfg, path):
    t, _ = read_safetensors(path)
    if "input_ids" not in t:
        raise RefError(f"{path}: missing 'input_ids'")
    unknown = sorted(set(t) - {"input_ids", "attention_mask", "mlm_labels", "class_labels"})
    if unknown:
        raise RefError(f"{path}: unexpected tensor(s) {unknown}")
    ids = _int_tensor("input_ids", t["input_ids"])
    if ids.dim() != 2 or ids.shape[0] < 1 or ids.shape[1] < 1:
        raise RefError(f"{path}: input_ids must be [B, N] with B, N >= 1")
    B, N = ids.shape
    if N > cfg["max_len"]:
        raise RefError(f"{path}: sequence length {N} exceeds max_len {cfg['max_len']}")
    if int(ids.min()) < 0 or int(ids.max()) >= cfg["vocab_size"]:
        raise RefError(f"{path}: input_ids out of [0, {cfg['vocab_size']})")
    if "attention_mask" in t:
        m = _int_tensor("attention_mask", t["attention_mask"])
        if tuple(m.shape) != (B, N):
            raise RefError(f"{path}: attention_mask shape {list(m.shape)} != {[B, N]}")
        if not bool(((m == 0) | (m == 1)).all()):
            raise RefError(f"{path}: attention_mask values must be 0 or 1")
        mask = m.to(torch.float64)
    else:
        mask = torch.ones(B, N, dtype=torch.float64)
    mlm_labels = class_labels = None
    if "mlm_labels" in t:
        mlm_labels = _int_tensor("mlm_labels", t["mlm_labels"])
        if tuple(mlm_labels.shape) != (B, N):
            raise RefError(f"{path}: mlm_labels shape {list(mlm_labels.shape)} != {[B, N]}")
        bad = (mlm_labels != -100) & ((mlm_labels < 0) | (mlm_labels >= cfg["vocab_size"]))
        if bool(bad.any()):
            raise RefError(f"{path}: mlm_labels must be -100 or in [0, vocab_size)")
    if "class_labels" in t:
        class_labels = _int_tensor("class_labels", t["class_labels"])
        if tuple(class_labels.shape) != (B,):
            raise RefError(f"{path}: class_labels shape {list(class_labels.shape)} != {[B]}")
        if bool(((class_labels < 0) | (class_labels >= cfg["num_classes"])).any()):
            raise RefError(f"{path}: class_labels must be in [0, num_classes)")
    return ids, mask, mlm_labels, class_labels


def compute(cfg, params, ids, mask, mlm_labels=None, class_labels=None):
    """Returns an ordered dict of float64 numpy outputs (as described in the module doc)."""
    for p in params.values():
        p.grad = None
    hidden, mlm_logits, class_logits = forward(cfg, params, ids, mask)
    L = losses(cfg, mlm_logits, class_logits, mlm_labels, class_labels)
    out = {
        "hidden_states": hidden.detach().numpy(),
        "mlm_logits": mlm_logits.detach().numpy(),
        "class_logits": class_logits.detach().numpy(),
    }
    if L:
        total = sum(L.values())
        total.backward()
        for name, v in L.items():
            out[name] = v.detach().reshape(1).numpy()
        for name, p in params.items():
            g = p.grad if p.grad is not None else torch.zeros_like(p)
            out["grad." + name] = g.detach().numpy()
    return out


def run(model_dir, input_path, out_path, threads=1):
    torch.set_num_threads(max(1, int(threads)))
    cfg = load_config(os.path.join(model_dir, "config.json"))
    params = load_params(cfg, os.path.join(model_dir, "model.safetensors"))
    ids, mask, mlm_labels, class_labels = load_inputs(cfg, input_path)
    out = compute(cfg, params, ids, mask, mlm_labels, class_labels)
    write_safetensors(out_path, {k: v.astype(np.float32) for k, v in out.items()},
                      metadata={"generator": "tests/reference/torch_reference.py",
                                "precision": "float64 computed, float32 stored"})
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="directory with config.json and model.safetensors")
    ap.add_argument("--input", required=True, help="input safetensors")
    ap.add_argument("--out", required=True, help="output safetensors")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    try:
        run(args.model, args.input, args.out, args.threads)
    except RefError as e:
        print(f"torch_reference: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
