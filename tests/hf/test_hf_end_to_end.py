#!/usr/bin/python3
"""Hugging Face models end to end, through the `linformer` program.

A tiny RoBERTa-shaped and a tiny BERT-shaped model are written in Hugging Face's layout
(config.json, model.safetensors with RobertaForMaskedLM's / BertForPreTraining's tensor names,
and the real tokenizer files of tests/data/tokenizers: GPT-2's BPE in RoBERTa's layout, and
bert-base-uncased's WordPiece). For each:
  1. `init --from HF` (standard attention) and `forward` on ids from `tokenizer encode` must
     reproduce this file's PyTorch forward (written here in plain torch, Hugging Face's
     function: RoBERTa's positions from pad_token_id + 1, BERT's from 0, post-norm, exact GELU,
     tied MLM decoder) to 1e-5;
  2. `init --from HF --set attention=linformer`, a few `pretrain` steps, `finetune` on a small
     TSV, then `predict`: each runs and writes what it should.
Needs python3-torch (exit code 77, skipped, without it). LINFORMER_BIN names the program.
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
except ImportError:
    print("skipped: numpy or torch is missing")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "..", "data", "tokenizers")
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
from make_hf_roberta import write_safetensors  # noqa: E402  (numpy only, independent of the engine)

BIN = os.environ.get("LINFORMER_BIN", os.path.join(HERE, "..", "..", "build", "linformer"))
TEXTS = ["Hello world, this is a test.", "The quick brown fox jumps over the lazy dog!",
         "Crème brûlée, naïve café — 東京 and emoji 🙂", "short"]

KINDS = {
    "roberta": dict(prefix="roberta.", vocab=50262, pad=1, positions=66, types=1, eps=1e-5,
                    files=["roberta/tokenizer.json"]),
    "bert": dict(prefix="bert.", vocab=30522, pad=0, positions=64, types=2, eps=1e-12,
                 files=["bert/tokenizer.json", "bert/vocab.txt"]),
}
D, H, F, L = 32, 2, 64, 2


def run(args, stdin=None):
    r = subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit("linformer %s failed (%d):\n%s\n%s" % (" ".join(args), r.returncode,
                                                               r.stdout, r.stderr))
    return r.stdout


def make_weights(kind, k, rng):
    p, V = k["prefix"], k["vocab"]
    t = {}

    def w(name, shape, std=0.02, mean=0.0):
        t[name] = (mean + std * rng.standard_normal(shape)).astype(np.float32)

    w(p + "embeddings.word_embeddings.weight", (V, D))
    w(p + "embeddings.position_embeddings.weight", (k["positions"], D))
    w(p + "embeddings.token_type_embeddings.weight", (k["types"], D))
    w(p + "embeddings.LayerNorm.weight", (D,), 0.1, 1.0)
    w(p + "embeddings.LayerNorm.bias", (D,), 0.1)
    for i in range(L):
        q = p + "encoder.layer.%d." % i
        for n in ("query", "key", "value"):
            w(q + "attention.self.%s.weight" % n, (D, D), 0.2)
            w(q + "attention.self.%s.bias" % n, (D,), 0.1)
        w(q + "attention.output.dense.weight", (D, D), 0.2)
        w(q + "attention.output.dense.bias", (D,), 0.1)
        w(q + "attention.output.LayerNorm.weight", (D,), 0.1, 1.0)
        w(q + "attention.output.LayerNorm.bias", (D,), 0.1)
        w(q + "intermediate.dense.weight", (F, D), 0.2)
        w(q + "intermediate.dense.bias", (F,), 0.1)
        w(q + "output.dense.weight", (D, F), 0.2)
        w(q + "output.dense.bias", (D,), 0.1)
        w(q + "output.LayerNorm.weight", (D,), 0.1, 1.0)
        w(q + "output.LayerNorm.bias", (D,), 0.1)
    head = "lm_head." if kind == "roberta" else "cls.predictions."
    dense = "lm_head.dense." if kind == "roberta" else "cls.predictions.transform.dense."
    norm = "lm_head.layer_norm." if kind == "roberta" else "cls.predictions.transform.LayerNorm."
    w(dense + "weight", (D, D), 0.2)
    w(dense + "bias", (D,), 0.1)
    w(norm + "weight", (D,), 0.1, 1.0)
    w(norm + "bias", (D,), 0.1)
    w(head + "bias", (V,), 0.1)
    t[head + "decoder.weight"] = t[p + "embeddings.word_embeddings.weight"]  # tied copy
    if kind == "bert":  # BertForPreTraining's pooler (the engine's classifier.dense)
        w("bert.pooler.dense.weight", (D, D), 0.2)
        w("bert.pooler.dense.bias", (D,), 0.1)
    return t


def reference_forward(kind, k, t, ids, mask):
    """Hugging Face's RobertaForMaskedLM / BertForMaskedLM in eval mode, float64."""
    P = {n: torch.tensor(a, dtype=torch.float64) for n, a in t.items()}
    p = k["prefix"]
    ids = torch.tensor(ids)
    m = torch.tensor(mask, dtype=torch.float64)
    B, N = ids.shape
    if kind == "roberta":  # create_position_ids_from_input_ids
        real = ids.ne(k["pad"]).long()
        pos = torch.cumsum(real, dim=1) * real + k["pad"]
    else:
        pos = torch.arange(N).expand(B, N)
    ln = lambda x, n: torch.nn.functional.layer_norm(x, (D,), P[n + "weight"], P[n + "bias"], k["eps"])
    lin = lambda x, n: x @ P[n + "weight"].T + P[n + "bias"]
    gelu = lambda x: 0.5 * x * (1.0 + torch.erf(x / 2 ** 0.5))
    x = (P[p + "embeddings.word_embeddings.weight"][ids] +
         P[p + "embeddings.position_embeddings.weight"][pos] +
         P[p + "embeddings.token_type_embeddings.weight"][0])
    x = ln(x, p + "embeddings.LayerNorm.")
    bias = (1.0 - m)[:, None, None, :] * torch.finfo(torch.float64).min
    dh = D // H
    for i in range(L):
        q = p + "encoder.layer.%d." % i
        heads = lambda y: y.view(B, N, H, dh).transpose(1, 2)
        Q, K, V = (heads(lin(x, q + "attention.self.%s." % n)) for n in ("query", "key", "value"))
        s = Q @ K.transpose(-1, -2) / dh ** 0.5 + bias
        ctx = (torch.softmax(s, dim=-1) @ V).transpose(1, 2).reshape(B, N, D)
        x = ln(lin(ctx, q + "attention.output.dense.") + x, q + "attention.output.LayerNorm.")
        h = gelu(lin(x, q + "intermediate.dense."))
        x = ln(lin(h, q + "output.dense.") + x, q + "output.LayerNorm.")
    if kind == "roberta":
        y = ln(gelu(lin(x, "lm_head.dense.")), "lm_head.layer_norm.")
        logits = y @ P[p + "embeddings.word_embeddings.weight"].T + P["lm_head.bias"]
    else:
        y = ln(gelu(lin(x, "cls.predictions.transform.dense.")), "cls.predictions.transform.LayerNorm.")
        logits = y @ P[p + "embeddings.word_embeddings.weight"].T + P["cls.predictions.bias"]
    return x.numpy(), logits.numpy()


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        assert info["dtype"] == "F32", info
        out[name] = np.frombuffer(data[a:b], dtype="<f4").reshape(info["shape"])
    return out


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok: " + what)


def hf_folder(root, kind, k):
    d = os.path.join(root, "hf_" + kind)
    os.makedirs(d)
    cfg = {"model_type": kind, "vocab_size": k["vocab"], "hidden_size": D,
           "num_hidden_layers": L, "num_attention_heads": H, "intermediate_size": F,
           "hidden_act": "gelu", "max_position_embeddings": k["positions"],
           "type_vocab_size": k["types"], "layer_norm_eps": k["eps"], "pad_token_id": k["pad"],
           "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.1,
           "initializer_range": 0.02, "position_embedding_type": "absolute",
           "architectures": ["RobertaForMaskedLM" if kind == "roberta" else "BertForPreTraining"]}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for rel in k["files"]:
        shutil.copy(os.path.join(DATA, rel), d)
    t = make_weights(kind, k, np.random.default_rng(7 if kind == "roberta" else 8))
    write_safetensors(os.path.join(d, "model.safetensors"),
                      {n: (a, "F32") for n, a in t.items()}, {"format": "pt"})
    return d, t


def reproduce(root, kind, k, d, t):
    std = os.path.join(root, kind + "_std")
    run(["init", "--from", d, "--out", std])
    lines = run(["tokenizer", "encode", "--special", "--tokenizer", std], "\n".join(TEXTS) + "\n")
    seqs = [[int(v) for v in l.split()] for l in lines.strip().split("\n")]
    check(len(seqs) == len(TEXTS) and all(s[0] == (0 if kind == "roberta" else 101) for s in seqs),
          "%s: tokenizer encode --special frames every text with the cls token" % kind)
    N = max(len(s) for s in seqs)
    ids = np.full((len(seqs), N), k["pad"], dtype=np.int64)
    mask = np.zeros((len(seqs), N), dtype=np.float32)
    for i, s in enumerate(seqs):
        ids[i, :len(s)] = s
        mask[i, :len(s)] = 1
    inp, out = os.path.join(root, kind + "_in.safetensors"), os.path.join(root, kind + "_out.safetensors")
    write_safetensors(inp, {"input_ids": (ids, "I64"), "attention_mask": (mask, "F32")}, {})
    run(["forward", "--model", std, "--input", inp, "--out", out])
    got = read_safetensors(out)
    want_h, want_l = reference_forward(kind, k, t, ids, mask)
    real = mask.astype(bool)
    err_h = np.abs(got["hidden_states"][real] - want_h[real]).max()
    err_l = np.abs(got["mlm_logits"][real] - want_l[real]).max()
    print("%s: max |hidden - torch| = %.2e, max |logits - torch| = %.2e" % (kind, err_h, err_l))
    check(err_h <= 1e-5 and err_l <= 1e-5,
          "%s: the standard-attention conversion reproduces PyTorch to 1e-5" % kind)


def linformer_pipeline(root, kind, d):
    lin = os.path.join(root, kind + "_lin")
    run(["init", "--from", d, "--set", "attention=linformer", "--set", "k=16",
         "--seed", "1", "--out", lin])
    check(any(os.path.exists(os.path.join(lin, f)) for f in ("tokenizer.json", "vocab.txt")),
          "%s: init --from copies the tokenizer" % kind)
    corpus = os.path.join(root, kind + "_corpus.txt")
    with open(corpus, "w") as f:
        for i in range(60):
            f.write("%s Line %d of the corpus, with words and numbers %d.\n" % (TEXTS[i % 4], i, i * 7))
    pre = os.path.join(root, kind + "_pre")
    run(["pretrain", "--init-from", lin, "--train", corpus, "--steps", "3", "--batch-size", "4",
         "--seq-len", "32", "--eval-every", "3", "--quiet", "--out", pre])
    metrics = [json.loads(l) for l in open(os.path.join(pre, "metrics.jsonl"))]
    check(len(metrics) > 0 and os.path.exists(os.path.join(pre, "model", "model.safetensors")),
          "%s: pretrain ran 3 steps from the converted model" % kind)
    tsv = os.path.join(root, kind + "_train.tsv")
    with open(tsv, "w") as f:
        f.write("text\tlabel\n")
        for i in range(24):
            f.write("%s number %d\t%s\n" % ("good great fine" if i % 2 else "bad awful poor", i,
                                             "pos" if i % 2 else "neg"))
    ft = os.path.join(root, kind + "_ft")
    run(["finetune", "--init-from", os.path.join(pre, "model"), "--train", tsv, "--dev", tsv,
         "--epochs", "1", "--batch-size", "8", "--max-len", "32", "--quiet", "--out", ft])
    out = run(["predict", "--model", os.path.join(ft, "best")], "good great fine\nbad awful\n")
    preds = [json.loads(l) for l in out.strip().split("\n")]
    check(len(preds) == 2 and all(p["label"] in ("pos", "neg") for p in preds),
          "%s: finetune + predict on the converted Linformer" % kind)


def main():
    root = tempfile.mkdtemp(prefix="lf_hf_e2e_")
    try:
        for kind, k in KINDS.items():
            d, t = hf_folder(root, kind, k)
            reproduce(root, kind, k, d, t)
            linformer_pipeline(root, kind, d)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
