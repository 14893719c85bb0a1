#!/usr/bin/python3
"""Independent PyTorch reference for a few steps of MLM training (the llm.c style check).

Usage:
  /usr/bin/python3 tests/reference/torch_train_reference.py --model DIR --data DATA.safetensors \
      --out OUT.safetensors [--lr 1e-3] [--warmup 2] [--total 8] [--clip 1.0] \
      [--weight-decay 0.01] [--beta1 0.9] [--beta2 0.98] [--eps 1e-6]

DIR holds config.json and model.safetensors (the initial weights).  DATA.safetensors holds, for
S steps, input_ids [S, B, N], attention_mask [S, B, N] and mlm_labels [S, B, N] (-100 = not
predicted).  For every step s the script does what one optimiser step of MLM pretraining does:

  zero the gradients; forward; mean cross-entropy over the labelled positions; backward;
  clip the global gradient norm (torch.nn.utils.clip_grad_norm_); set the learning rate of the
  step; torch.optim.AdamW.step()

The model is the one in torch_reference.py (imported, computed in float64).  The optimiser is
PyTorch's own torch.optim.AdamW with two parameter groups: weight decay on the weight
matrices/embeddings/projections, none on biases and LayerNorm parameters (decided here from the
parameter names).  Parameters that get no gradient from the MLM loss (the classification head)
are given a zero gradient, so, as in a trainer that owns one flat gradient buffer, their weights
still decay.

Learning rate at step s (0-based), warm-up W, total T, peak lr:
  s <  W: lr * (s + 1) / W                 (linear warm-up; the first step is not wasted at 0)
  s >= W: lr * max(0, 1 - (s - W) / (T - W))   (linear decay to 0 at step T)

OUT.safetensors receives (float64) loss [S] (the mean MLM loss of each step, before its update),
grad_norm [S] (global gradient norm before clipping), lr [S], and (float32) final.<param>: every
parameter after the last step.
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_reference as ref  # noqa: E402


def no_decay(name):
    return name.endswith(".bias") or "LayerNorm." in name or "layer_norm." in name


def lr_at(step, peak, warmup, total):
    if warmup > 0 and step < warmup:
        return peak * (step + 1) / warmup
    return peak * max(0.0, 1.0 - (step - warmup) / max(1, total - warmup))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--total", type=int, default=8)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.98)
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, args.threads))

    try:
        cfg = ref.load_config(os.path.join(args.model, "config.json"))
        params = ref.load_params(cfg, os.path.join(args.model, "model.safetensors"))
        data, _ = ref.read_safetensors(args.data)
    except ref.RefError as e:
        print(f"torch_train_reference: error: {e}", file=sys.stderr)
        return 2
    ids_all = torch.tensor(data["input_ids"].astype(np.int64))
    mask_all = torch.tensor(data["attention_mask"].astype(np.float64))
    labels_all = torch.tensor(data["mlm_labels"].astype(np.int64))
    steps = ids_all.shape[0]

    decay = [p for n, p in params.items() if not no_decay(n)]
    plain = [p for n, p in params.items() if no_decay(n)]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay},
         {"params": plain, "weight_decay": 0.0}],
        lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps)

    losses, norms, lrs = [], [], []
    for s in range(steps):
        opt.zero_grad(set_to_none=True)
        _, mlm_logits, _ = ref.forward(cfg, params, ids_all[s], mask_all[s])
        loss = ref.cross_entropy_mean(mlm_logits.reshape(-1, mlm_logits.shape[-1]),
                                      labels_all[s].reshape(-1))
        loss.backward()
        for p in params.values():
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), args.clip)
        lr = lr_at(s, args.lr, args.warmup, args.total)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(float(loss.detach()))
        norms.append(float(norm))
        lrs.append(lr)
        print(f"step {s + 1}: loss {losses[-1]:.10f} grad_norm {norms[-1]:.6f} lr {lr:.3e}",
              file=sys.stderr)

    out = {"loss": np.array(losses, dtype=np.float64),
           "grad_norm": np.array(norms, dtype=np.float64),
           "lr": np.array(lrs, dtype=np.float64)}
    for n, p in params.items():
        out["final." + n] = p.detach().numpy().astype(np.float32)
    ref.write_safetensors(args.out, out,
                          metadata={"generator": "tests/reference/torch_train_reference.py"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
