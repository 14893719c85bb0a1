#!/usr/bin/env bash
# The main job on a built-in default: pretrain a small Linformer and the same model with
# standard attention on a real corpus (the King James Bible from Debian's bible-kjv
# package, unless CORPUS=path is given), then print their validation perplexity and time side by side.
# Usage: scripts/demo.sh [BUILD_DIR]   (env: CORPUS, DEMO_OUT, DEMO_STEPS, DEMO_SEQ_LEN)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/linformer"
OUT=${DEMO_OUT:-runs/demo}
STEPS=${DEMO_STEPS:-300}
SEQ=${DEMO_SEQ_LEN:-512}
mkdir -p "$OUT"
if [[ -n "${CORPUS:-}" ]]; then
  corpus=$CORPUS
else
  corpus="$OUT/kjv.txt"
  scripts/get_corpus.sh "$corpus"
fi
if [[ ! -s "$OUT/tokenizer.model" ]]; then
  "$BIN" tokenizer train --input "$corpus" --out "$OUT/tokenizer.model" --vocab-size 8192
fi
declare -A secs ppl
for kind in linformer standard; do
  rm -rf "$OUT/$kind"
  start=$(date +%s.%N)
  "$BIN" pretrain --train "$corpus" --config "configs/small-$kind.json" --out "$OUT/$kind" \
    --tokenizer "$OUT/tokenizer.model" --cache-dir "$OUT/cache" --seq-len "$SEQ" \
    --steps "$STEPS" --batch-size 8 --lr 1e-3 --warmup-steps $((STEPS / 10)) \
    --log-every 20 --eval-every $((STEPS / 3)) --eval-batches 10 --checkpoint-every "$STEPS" \
    --seed 1 | tee "$OUT/$kind.log"
  end=$(date +%s.%N)
  secs[$kind]=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  ppl[$kind]=$(grep '"split":"valid"' "$OUT/$kind/metrics.jsonl" | tail -1 |
               sed -E 's/.*"ppl":([0-9.e+-]+).*/\1/')
done
echo
echo "Masked-LM pretraining, $STEPS steps of 8 x $SEQ tokens on $(basename "$corpus"):"
printf "%-10s %20s %12s\n" model "valid perplexity" "time (s)"
for kind in linformer standard; do
  printf "%-10s %20.2f %12.1f\n" "$kind" "${ppl[$kind]}" "${secs[$kind]}"
done
echo "Runs, metrics and loss plots: $OUT/{linformer,standard}/ (loss.svg, metrics.jsonl)"
