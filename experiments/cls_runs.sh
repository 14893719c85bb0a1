#!/usr/bin/env bash
# Text classification experiments of docs/results.md: SST-2 and IMDB, standard attention
# against Linformer with the same budget, from the PTB pretraining runs of
# experiments/ptb_sweep.sh (runs/ptb/*/model), and IMDB with Linformer at n = 1024 and 2048.
# experiments/imdb_memory.sh measures memory and time against n up to 4096.
#   experiments/cls_runs.sh [LINFORMER_BINARY]        (default build/linformer)
# Each run writes runs/cls/NAME/ (metrics.jsonl, best/, eval.json) and runs/cls/NAME.log.
# ONLY (names, default all): do only these runs.
set -euo pipefail
LF=${1:-build/linformer}
DATA=${DATA:-../shared/data}
PTB=${PTB:-runs/ptb}
OUT=${OUT:-runs/cls}
mkdir -p "$OUT"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Threads sleep while they wait: other processes on the cores then cost far less.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

run() {  # NAME ARGS...: finetune (skipped when done), then evaluate the best model on dev
  local name=$1; shift
  local dev=$1; shift
  [[ -z "${ONLY:-}" || " $ONLY " == *" $name "* ]] || return 0
  if [ ! -f "$OUT/$name/eval.json" ]; then
    [ -d "$OUT/$name" ] && rm -rf "${OUT:?}/$name"
    if ! /usr/bin/time -v "$LF" finetune --out "$OUT/$name" --dev "$dev" "$@" \
        >"$OUT/$name.log" 2>&1; then
      echo "$name: failed, see $OUT/$name.log"
      return 0
    fi
    "$LF" evaluate --model "$OUT/$name/best" --data "$dev" --json "$OUT/$name/eval.json" \
      >>"$OUT/$name.log" 2>&1
  fi
  echo "$name: $(grep -o '"accuracy": *[0-9.]*' "$OUT/$name/eval.json")" \
       "peak RSS $(grep 'Maximum resident' "$OUT/$name.log" | awk '{print $6}') KiB"
}

# SST-2: sentences, max 64 tokens, 2 epochs.
for m in standard-n512 lin-k128-n512; do
  run "sst2-$m" "$DATA/sst2/dev.tsv" --init-from "$PTB/$m/model" \
    --train "$DATA/sst2/train.tsv" --max-len 64 --epochs 2 --batch-size 32 --lr 1e-4
done

# IMDB at n = 512 from the same pretrained models: 10000 reviews, 1 epoch, head+tail; at
# the learning rate of the SST-2 runs and at 3e-4.
for lr in 1e-4 3e-4; do
  sfx=""; [ "$lr" = 1e-4 ] || sfx="-lr$lr"
  for m in standard-n512 lin-k128-n512; do
    run "imdb-$m$sfx" "$DATA/imdb/val.tsv" --init-from "$PTB/$m/model" --lowercase \
      --train "$DATA/imdb/train.tsv" --max-train 10000 --max-len 512 --truncate head+tail \
      --epochs 1 --batch-size 16 --lr $lr
  done
done
# The same Linformer with its learned E replaced by mean pooling (no parameters).
run "imdb-lin-k128-n512-meanpool" "$DATA/imdb/val.tsv" --init-from "$PTB/lin-k128-n512/model" \
  --set projection=mean_pool --lowercase --train "$DATA/imdb/train.tsv" --max-train 10000 \
  --max-len 512 --truncate head+tail --epochs 1 --batch-size 16 --lr 1e-4

# Long documents: Linformer pretrained at n = 1024 and 2048 (k = 128), reviews truncated at n,
# with mean pooling in place of E (the runs above show why).
for n in 1024 2048; do
  run "imdb-lin-k128-n$n-meanpool" "$DATA/imdb/val.tsv" --init-from "$PTB/lin-k128-n$n/model" \
    --set projection=mean_pool --lowercase --train "$DATA/imdb/train.tsv" --max-train 10000 \
    --max-len $n --truncate head+tail --epochs 1 --batch-size 16 --lr 1e-4
done
# n = 2048 again at lr 3e-4 (at 1e-4 the loss stays flat for the whole epoch).
run "imdb-lin-k128-n2048-meanpool-lr3e-4" "$DATA/imdb/val.tsv" \
  --init-from "$PTB/lin-k128-n2048/model" --set projection=mean_pool --lowercase \
  --train "$DATA/imdb/train.tsv" --max-train 10000 --max-len 2048 --truncate head+tail \
  --epochs 1 --batch-size 16 --lr 3e-4
