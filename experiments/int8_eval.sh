#!/usr/bin/env bash
# int8 inference on real models (docs/results.md, "int8 inference on the same classifiers"):
# the PTB-pretrained models and the SST-2 and IMDB classifiers of experiments/cls_runs.sh,
# scored in f32, bf16 (where the CPU has it) and int8. Stages, each resumable (finished runs are
# skipped):
#   experiments/int8_eval.sh models [LINFORMER_BINARY]   the two pretrained models (standard and
#       Linformer k = 128, experiments/ptb_sweep.sh) and their four classifiers (cls_runs.sh)
#   experiments/int8_eval.sh eval [LINFORMER_BINARY]     accuracy, loss and time of each
#       classifier, the embeddings' cosine similarity to f32, the pretrained models' perplexity
# Environment: DATA (../shared/data), PTB (runs/ptb), RUNS (runs/cls), OMP_NUM_THREADS (2),
#   PRECISIONS (the eval stage's, default "f32 bf16 int8"; bf16 is skipped on CPUs without it).
set -euo pipefail
stage=${1:?usage: experiments/int8_eval.sh models|eval [BINARY]}
LF=${2:-build/linformer}
DATA=${DATA:-../shared/data}
PTB=${PTB:-runs/ptb}
RUNS=${RUNS:-runs/cls}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The classifiers (cls_runs.sh's names), each with its dev/val set under DATA.
specs="sst2-standard-n512:sst2/dev.tsv sst2-lin-k128-n512:sst2/dev.tsv
       imdb-standard-n512-lr3e-4:imdb/val.tsv imdb-lin-k128-n512-meanpool:imdb/val.tsv"
classifiers=$(for s in $specs; do printf '%s ' "${s%%:*}"; done)

case $stage in
models)
  RUNS="standard-n512 lin-k128-n512" DATA=$DATA/ptb "$here/ptb_sweep.sh" "$(dirname "$LF")" "$PTB" 1
  ONLY=$classifiers PTB=$PTB OUT=$RUNS "$here/cls_runs.sh" "$LF"
  ;;
eval)
  # Precisions this CPU runs (bf16 needs AVX-512).
  precs=()
  for c in ${PRECISIONS:-f32 bf16 int8}; do
    if "$LF" forward --model "$PTB/standard-n512/model" --random-batch 1 8 --no-logits \
         --precision "$c" --out "$tmp/probe.safetensors" >/dev/null 2>&1; then precs+=("$c")
    else echo "skipped $c: this CPU does not run it" >&2; fi
  done
  echo "## Classifiers: accuracy, loss and wall time of \`evaluate\` (tokenising included)"
  echo
  printf "| model | data | precision | accuracy | loss | seconds |\n|---|---|---|---|---|---|\n"
  for spec in $specs; do
    name=${spec%%:*}; data=$DATA/${spec#*:}
    [ -d "$RUNS/$name/best" ] || { echo "skipped $name: no $RUNS/$name/best" >&2; continue; }
    for c in "${precs[@]}"; do
      t0=$EPOCHREALTIME
      "$LF" evaluate --model "$RUNS/$name/best" --data "$data" --quiet --precision "$c" \
        > "$tmp/$name-$c.json"
      t1=$EPOCHREALTIME
      python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('| %s | %s | %s | %.2f%% | %.4f | %.1f |' % (sys.argv[2], sys.argv[3], sys.argv[4], 100*j['accuracy'], j['loss'], float(sys.argv[6]) - float(sys.argv[5])))" \
        "$tmp/$name-$c.json" "$name" "${spec#*:}" "$c" "$t0" "$t1"
    done
  done
  echo
  echo "## Embeddings: cosine similarity to f32 (mean-pooled, every dev/val text)"
  echo
  printf "| model | data | precision | mean cosine | worst cosine | texts |\n|---|---|---|---|---|---|\n"
  for spec in $specs; do
    name=${spec%%:*}; data=$DATA/${spec#*:}
    [ -d "$RUNS/$name/best" ] || continue
    for c in "${precs[@]}"; do
      "$LF" embed --model "$RUNS/$name/best" --input "$data" --pool mean --precision "$c" \
        --out "$tmp/$name-$c.jsonl" 2>/dev/null
    done
    for c in "${precs[@]}"; do
      [ "$c" = f32 ] && continue
      python3 - "$tmp/$name-f32.jsonl" "$tmp/$name-$c.jsonl" "$name" "${spec#*:}" "$c" <<'PY'
import json, math, sys
a = [json.loads(l)["mean"] for l in open(sys.argv[1])]
b = [json.loads(l)["mean"] for l in open(sys.argv[2])]
assert len(a) == len(b)
cos = []
for x, y in zip(a, b):
    d = sum(p * q for p, q in zip(x, y))
    cos.append(d / math.sqrt(sum(p * p for p in x) * sum(q * q for q in y)))
print("| %s | %s | %s | %.5f | %.5f | %d |" % (sys.argv[3], sys.argv[4], sys.argv[5],
                                              sum(cos) / len(cos), min(cos), len(cos)))
PY
    done
  done
  echo
  echo "## Pretrained models: perplexity on the PTB validation text (fixed masks, seed 1)"
  echo
  printf "| model | precision | perplexity | vs f32 |\n|---|---|---|---|\n"
  for m in standard-n512 lin-k128-n512; do
    [ -d "$PTB/$m/model" ] || { echo "skipped $m: no $PTB/$m/model" >&2; continue; }
    base=""
    for c in "${precs[@]}"; do
      ppl=$("$LF" perplexity --model "$PTB/$m/model" --text "$DATA/ptb/ptb.valid.txt" --seed 1 \
              --quiet --json --precision "$c" | python3 -c "import json,sys; print(json.load(sys.stdin)['ppl'])")
      [ -z "$base" ] && base=$ppl
      python3 -c "import sys; p, b = float(sys.argv[3]), float(sys.argv[4]); print('| %s | %s | %.3f | %+.3f%% |' % (sys.argv[1], sys.argv[2], p, 100 * (p / b - 1)))" \
        "$m" "$c" "$ppl" "$base"
    done
  done
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
