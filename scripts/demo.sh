#!/usr/bin/env bash
# The main job on a built-in default: initialise a small Linformer and the same model with
# standard attention, and run each on a random batch at n = 512.
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/linformer"
OUT=${DEMO_OUT:-runs/demo}
mkdir -p "$OUT"
for kind in linformer standard; do
  "$BIN" init --config configs/small-$kind.json --seed 1 --out "$OUT/$kind"
  "$BIN" forward --model "$OUT/$kind" --random-batch 8 512 --out "$OUT/$kind/forward.safetensors" --no-logits
done
