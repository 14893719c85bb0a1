#!/usr/bin/env bash
# The paper's Figure 3 at laptop scale on Penn Treebank: masked-LM pretraining of a small
# encoder (4 layers, d 256, 4 heads, d_ff 1024) with standard attention and with Linformer
# for several k, sharing modes and sequence lengths, all with the same number of tokens.
# Usage: experiments/ptb_sweep.sh [BUILD_DIR] [OUT_DIR] [JOBS]
#   DATA=path/to/ptb (default ../shared/data/ptb), STEPS (default 300), RUNS (the names of the
#   runs to do, default every one of the table below).
# Runs JOBS trainings at a time, each on 1 thread (OMP_NUM_THREADS=1 per process: on this
# 2-core machine two single-thread runs finish sooner than one two-thread run after another).
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-runs/ptb}
JOBS=${3:-2}
DATA=${DATA:-../shared/data/ptb}
STEPS=${STEPS:-300}
BIN="$BUILD/linformer"
mkdir -p "$OUT/configs"
[[ -s "$OUT/tokenizer.model" ]] ||
  "$BIN" tokenizer train --input "$DATA/ptb.train.txt" --out "$OUT/tokenizer.model" --vocab-size 8192

# name  attention  k  sharing  n  batch
runs=(
  "standard-n512   standard  0   none      512  8"
  "lin-k32-n512    linformer 32  headwise  512  8"
  "lin-k64-n512    linformer 64  headwise  512  8"
  "lin-k128-n512   linformer 128 headwise  512  8"
  "lin-k256-n512   linformer 256 headwise  512  8"
  "lin-k64-none    linformer 64  none      512  8"
  "lin-k64-kv      linformer 64  kv        512  8"
  "lin-k64-layer   linformer 64  layerwise 512  8"
  "lin-k128-n1024  linformer 128 headwise  1024 4"
  "lin-k128-n2048  linformer 128 headwise  2048 2"
  "standard-n1024  standard  0   none      1024 4"
  "standard-n2048  standard  0   none      2048 2"
)
run_one() {
  local name=$1 att=$2 k=$3 sharing=$4 n=$5 batch=$6
  [[ -z "${RUNS:-}" || " $RUNS " == *" $name "* ]] || return 0
  local cfg="$OUT/configs/$name.json"
  cat > "$cfg" <<JSON
{"max_len": $n, "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_layers": 4,
 "attention": "$att", "k": $([[ $k == 0 ]] && echo 128 || echo "$k"), "sharing": "$sharing",
 "projection": "linear", "norm": "post", "dropout": 0.1, "attention_dropout": 0.1}
JSON
  if [[ -s "$OUT/$name/model/model.safetensors" ]]; then echo "$name: done already"; return; fi
  local resume=()
  [[ -s "$OUT/$name/train_args.json" ]] && resume=(--resume)
  OMP_NUM_THREADS=1 "$BIN" pretrain --train "$DATA/ptb.train.txt" --valid "$DATA/ptb.valid.txt" \
    --config "$cfg" --tokenizer "$OUT/tokenizer.model" --cache-dir "$OUT/cache" \
    --out "$OUT/$name" --steps "$STEPS" --batch-size "$batch" --lr 1e-3 \
    --warmup-steps $((STEPS / 10)) --log-every 10 --eval-every 50 --eval-batches $((160 / batch)) \
    --checkpoint-every 50 --seed 1 "${resume[@]}" > "$OUT/$name.log" 2>&1
  echo "$name: $(tail -1 "$OUT/$name.log")"
}
# Tokenise once before running in parallel (the runs share the cache).
first=(${runs[0]})
run_one "${first[@]}"
for r in "${runs[@]:1}"; do
  while (( $(jobs -rp | wc -l) >= JOBS )); do sleep 5; done
  run_one $r &
done
wait
