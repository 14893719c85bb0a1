#!/usr/bin/env bash
# Length-bucketed batches against batches padded to --max-len (docs/classification.md): one
# epoch of IMDB finetuning on 1024 training reviews, from scratch, with the 4 x d256 Linformer
# (k = 128, layerwise) at n = 512 (batch 16) and n = 2048 (batch 4); prints the wall time of
# each run.
#   experiments/bucket_speed.sh [LINFORMER_BINARY]     (default build/linformer)
# Environment: DATA (../shared/data), OUT (runs/bucket_speed).
set -euo pipefail
LF=${1:-build/linformer}
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/bucket_speed}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT"
tok=$OUT/tokenizer.model
if [[ ! -s "$tok" ]]; then
  tail -n +2 "$DATA/imdb/train.tsv" | cut -f4 > "$OUT/imdb_train.txt"
  "$LF" tokenizer train --input "$OUT/imdb_train.txt" --out "$tok" --vocab-size 8192 >/dev/null
fi
for n in 512 2048; do
  cfg=$OUT/linformer-n$n.json
  printf '{"max_len": %s, "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_layers": 4, "attention": "linformer", "k": 128, "sharing": "layerwise", "dropout": 0.1, "attention_dropout": 0.1}\n' \
    "$n" > "$cfg"
  bs=16; [[ $n == 2048 ]] && bs=4
  for mode in bucketed padded; do
    extra=(); [[ $mode == padded ]] && extra=(--pad-to-max --no-bucket)
    rm -rf "$OUT/run-$n-$mode"
    start=$(date +%s%N)
    "$LF" finetune --train "$DATA/imdb/train.tsv" --dev "$DATA/imdb/val.tsv" --max-dev 64 \
      --config "$cfg" --tokenizer "$tok" --out "$OUT/run-$n-$mode" --max-train 1024 \
      --max-len "$n" --truncate head+tail --epochs 1 --batch-size "$bs" --lr 1e-4 --seed 1 \
      --quiet "${extra[@]}"
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    echo "n = $n, $mode: $((ms / 1000)).$(printf '%03d' $((ms % 1000))) s"
  done
done
