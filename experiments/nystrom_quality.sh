#!/usr/bin/env bash
# Perplexity at equal tokens of the three attention kinds (docs/results.md, "Nystromformer"):
# standard (exact) attention, Linformer (k 128, headwise) and Nystromformer (64 landmarks),
# each pretrained from scratch with one recipe on the quality corpus (experiments/build_corpus.sh)
# at n = 512 and n = 2048, then `linformer perplexity` on the held-out part at the run's n.
# Every call is resumable: a pretraining stops after TIME_LIMIT seconds with a checkpoint and
# the same command continues it; finished runs are skipped.
#
#   experiments/nystrom_quality.sh [LINFORMER_BINARY]     (default build/linformer)
#   experiments/nystrom_quality.sh report                 the table (markdown) from OUT
#
# Environment: DATA (../shared/data), OUT (runs/nystrom), TOKENS (tokens per model, 4000000),
#   MODELS (default: standard-n512 linformer-n512 nystrom-n512 standard-n2048 linformer-n2048
#   nystrom-n2048), TIME_LIMIT (seconds per call; 0: none), OMP_NUM_THREADS (2).
# One model size for all: 4 layers, d 128, 4 heads, d_ff 512, dropout 0.1, no attention dropout
# (Nystromformer has none); 8,192 tokens a step (16 x 512 or 4 x 2048), lr 5e-4, 2% warm-up.
set -euo pipefail
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/nystrom}
TOKENS=${TOKENS:-4000000}
TIME_LIMIT=${TIME_LIMIT:-0}
MODELS=${MODELS:-standard-n512 linformer-n512 nystrom-n512 standard-n2048 linformer-n2048 nystrom-n2048}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

if [[ ${1:-} == report ]]; then
  printf '| model | n | tokens | steps | validation ppl (run) | `perplexity` (held-out) |\n|---|---|---|---|---|---|\n'
  for m in $MODELS; do
    run=$OUT/pre/$m
    [[ -f $run/perplexity.json ]] || continue
    python3 - "$run" "$m" <<'EOF'
import json, sys
run, name = sys.argv[1], sys.argv[2]
recs = [json.loads(l) for l in open(run + "/metrics.jsonl")]
args = json.load(open(run + "/train_args.json"))
val = [r for r in recs if r.get("split") == "valid"]
ppl = json.load(open(run + "/perplexity.json"))
n = args["seq_len"]
print(f"| {name} | {n} | {args['steps'] * args['batch_size'] * n / 1e6:.1f}M | {args['steps']} | "
      f"{val[-1]['ppl']:.2f} | {ppl['ppl']:.2f} |")
EOF
  done
  exit 0
fi

LF=${1:-build/linformer}
corpus=$OUT/corpus
tok=$OUT/tokenizer.model
[[ -s $corpus/train.txt ]] || experiments/build_corpus.sh "$DATA" "$corpus"
[[ -s $tok ]] || "$LF" tokenizer train --input "$corpus/train.txt" --out "$tok" --vocab-size 8192
mkdir -p "$OUT/configs" "$OUT/pre"

for m in $MODELS; do
  kind=${m%-n*}
  n=${m##*-n}
  cfg=$OUT/configs/$m.json
  printf '{"max_len": %s, "d_model": 128, "n_heads": 4, "d_ff": 512, "n_layers": 4, "attention": "%s", "k": 128, "sharing": "headwise", "landmarks": 64, "dropout": 0.1, "attention_dropout": 0}\n' \
    "$n" "$kind" > "$cfg"
  run=$OUT/pre/$m
  batch=$((8192 / n))
  steps=$(( (TOKENS + 8191) / 8192 ))
  if [[ -d $run/model && -f $run/perplexity.json ]]; then
    echo "$m: done"
    continue
  elif [[ -f $run/train_args.json ]]; then
    "$LF" pretrain --out "$run" --resume --time-limit "$TIME_LIMIT" 2>&1 | tee -a "$run.log"
  else
    "$LF" pretrain --train "$corpus/train.txt" --valid "$corpus/valid.txt" --tokenizer "$tok" \
      --cache-dir "$OUT/cache" --out "$run" --config "$cfg" --seq-len "$n" --batch-size "$batch" \
      --steps "$steps" --lr 5e-4 --warmup-steps $((steps / 50)) --eval-every $((steps / 4)) \
      --eval-batches 20 --checkpoint-every 50 --log-every 25 --seed 1 \
      --time-limit "$TIME_LIMIT" 2>&1 | tee "$run.log"
  fi
  if [[ -d $run/model ]]; then
    "$LF" perplexity --model "$run/model" --text "$corpus/valid.txt" --seq-len "$n" --seed 1 \
      --quiet --json-out "$run/perplexity.json" >/dev/null
  else
    exit 0  # stopped by the time limit: the next call continues it
  fi
done
