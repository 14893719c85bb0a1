#!/usr/bin/env bash
# bf16 mixed precision against f32 on a real pretraining run (docs/benchmarks.md, "bf16 against
# f32"): the same model, data, seed and steps, trained once with f32 products and once with
# --bf16, then both scored by `linformer perplexity` on the same held-out text with the same
# masks. Resumable: a finished run is skipped.
#
#   experiments/bf16_check.sh [LINFORMER_BINARY]          (default build/linformer)
# Environment: DATA (../shared/data), OUT (runs/bf16_check), STEPS (600), CONFIG
#   (configs/small-linformer.json), TIME_LIMIT (seconds per call, 0: none).
set -euo pipefail
LF=${1:-build/linformer}
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/bf16_check}
STEPS=${STEPS:-600}
CONFIG=${CONFIG:-configs/small-linformer.json}
TIME_LIMIT=${TIME_LIMIT:-0}
train=$DATA/ptb/ptb.train.txt
valid=$DATA/ptb/ptb.valid.txt
mkdir -p "$OUT"
[[ -s "$OUT/tokenizer.model" ]] ||
  "$LF" tokenizer train --input "$train" --out "$OUT/tokenizer.model" --vocab-size 8192
for p in f32 bf16; do
  run=$OUT/$p
  flag=(); [[ $p == bf16 ]] && flag=(--bf16)
  if [[ ! -d "$run/model" ]]; then
    if [[ -f "$run/train_args.json" ]]; then
      "$LF" pretrain --out "$run" --resume --time-limit "$TIME_LIMIT"
    else
      "$LF" pretrain --train "$train" --valid "$valid" --config "$CONFIG" --out "$run" \
        --tokenizer "$OUT/tokenizer.model" --cache-dir "$OUT/cache" --seq-len 512 \
        --steps "$STEPS" --batch-size 8 --lr 1e-3 --warmup-steps $((STEPS / 10)) \
        --log-every 50 --eval-every $((STEPS / 4)) --eval-batches 20 --checkpoint-every 100 \
        --seed 1 --time-limit "$TIME_LIMIT" "${flag[@]}"
    fi
  fi
  [[ -d "$run/model" ]] || { echo "$p: stopped by the time limit; run again to continue"; exit 0; }
  "$LF" perplexity --model "$run/model" --text "$valid" --seq-len 512 --seed 1 --quiet \
    --json-out "$run/perplexity.json" >/dev/null
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
r = {p: json.load(open(f"{out}/{p}/perplexity.json")) for p in ("f32", "bf16")}
key = "perplexity" if "perplexity" in r["f32"] else "ppl"
a, b = r["f32"][key], r["bf16"][key]
print(f"validation perplexity (PTB valid, fixed masks): f32 {a:.2f}, bf16 {b:.2f}, "
      f"bf16 / f32 = {b / a:.4f} ({100 * (b / a - 1):+.2f}%)")
PY
