#!/usr/bin/env bash
# bf16 inference on real data (docs/results.md): the finetuned SST-2 and IMDB classifiers of
# experiments/cls_runs.sh evaluated on their dev sets in f32 and with --bf16, with the wall
# time of each evaluation (tokenising included).
#   experiments/bf16_eval.sh [LINFORMER_BINARY]        (default build/linformer)
set -euo pipefail
LF=${1:-build/linformer}
DATA=${DATA:-../shared/data}
RUNS=${RUNS:-runs/cls}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
out=$(mktemp -d)
printf "| model | data | compute | accuracy | loss | seconds |\n|---|---|---|---|---|---|\n"
for spec in sst2-standard-n512:sst2/dev.tsv sst2-lin-k128-n512:sst2/dev.tsv \
            imdb-standard-n512-lr3e-4:imdb/val.tsv imdb-lin-k128-n512-meanpool:imdb/val.tsv; do
  name=${spec%%:*}; data=$DATA/${spec#*:}
  [ -d "$RUNS/$name/best" ] || { echo "skipped $name: no $RUNS/$name/best" >&2; continue; }
  for c in f32 bf16; do
    flag=""; [ $c = bf16 ] && flag=--bf16
    t0=$EPOCHREALTIME
    "$LF" evaluate --model "$RUNS/$name/best" --data "$data" --quiet $flag > "$out/$name-$c.json"
    t1=$EPOCHREALTIME
    python3 -c "import json,sys; j=json.load(open(sys.argv[1])); print('| %s | %s | %s | %.2f%% | %.4f | %.1f |' % (sys.argv[2], sys.argv[3], sys.argv[4], 100*j['accuracy'], j['loss'], float(sys.argv[6]) - float(sys.argv[5])))" \
      "$out/$name-$c.json" "$name" "${spec#*:}" "$c" "$t0" "$t1"
  done
done
rm -rf "$out"
