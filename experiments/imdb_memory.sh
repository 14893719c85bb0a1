#!/usr/bin/env bash
# Memory and time of IMDB finetuning against n (docs/results.md, "Long documents"): every
# batch padded to n (--pad-to-max), 8 reviews per batch, 4 optimizer steps from scratch, for
# Linformer (k = 128) and standard attention. Prints n, attention, the engine's activation
# bytes for the batch, the process's peak RSS and the seconds per step.
#   experiments/imdb_memory.sh [LINFORMER_BINARY]        (default build/linformer)
set -euo pipefail
LF=${1:-build/linformer}
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/cls/memory}
TOK=${TOK:-runs/ptb/tokenizer.model}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Threads sleep while they wait: other processes on the cores then cost far less.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
rm -rf "$OUT"
mkdir -p "$OUT"
printf '| n | attention | activations (engine) | peak RSS | s/step |\n|---|---|---|---|---|\n'
for n in 512 1024 2048 4096; do
  for att in linformer standard; do
    run="$OUT/$att-n$n"
    /usr/bin/time -v "$LF" finetune --config configs/small-linformer.json --set max_len=$n \
      --set k=128 --set sharing=headwise --set attention=$att --tokenizer "$TOK" --lowercase \
      --train "$DATA/imdb/train.tsv" --max-train 32 --max-len $n --pad-to-max \
      --truncate head+tail --epochs 1 --batch-size 8 --log-every 1 --out "$run" \
      >"$run.log" 2>&1 || { echo "| $n | $att | failed, see $run.log | | |"; continue; }
    act=$(grep -o 'longest batch ([0-9]* x [0-9]*): [0-9.]* [KMG]B' "$run.log" | sed 's/.*: //')
    rss=$(grep 'Maximum resident' "$run.log" | awk '{printf "%.0f MB", $6 / 1024}')
    # seconds per step: elapsed time of the last progress line / its step (first step excluded)
    sps=$(python3 - "$run/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in rows if r.get("split") == "train"]
if len(rows) >= 2:
    dt = rows[-1]["elapsed_s"] - rows[0]["elapsed_s"]
    print("%.2f" % (dt / (rows[-1]["step"] - rows[0]["step"])))
else:
    print("?")
PY
)
    echo "| $n | $att | $act | $rss | $sps |"
  done
done
