#!/usr/bin/env bash
# Load test of `linformer serve` on loopback with wrk (Debian's wrk; scripts/setup.sh --bench):
# throughput (inputs/s, tokens/s) and p50/p99 latency at 1, 8 and 64 concurrent clients, for
# short texts (SST-2 dev sentences) and long ones (whole IMDB validation reviews), in f32 and
# int8, with batch invariance (the default) and without (--no-batch-invariance), against the
# offline `linformer predict` throughput on the same texts in the same precision; optionally
# batches of one (--max-batch-requests 1) and a soak (64 clients) that samples the server's
# resident memory every 10 s. Results go to OUT/*.txt and one line per run to OUT/results.tsv.
# Stages are resumable: a run whose result file exists is skipped (delete it to run it again).
#
# Usage: bench/serve/serve_bench.sh BUILD OUT [SECONDS] [SOAK_SECONDS]
#   SECONDS per row (default 10), SOAK_SECONDS (default 0: no soak).
#   Environment: TEXTS="short long", PRECISIONS="f32 int8", CLIENTS="1 8 64",
#   MODES="batched no-invariance" (and/or one-per-batch); PREPARE_ONLY=1 stops once the models
#   and texts are made. Measure with nothing else running on the machine.
#   e.g. bench/serve/serve_bench.sh build runs/serve-bench
#        TEXTS=short PRECISIONS=f32 bench/serve/serve_bench.sh build runs/serve-bench
set -euo pipefail
build=$(cd "${1:?usage: serve_bench.sh BUILD OUT [SECONDS] [SOAK_SECONDS]}" && pwd)
out=${2:?usage: serve_bench.sh BUILD OUT [SECONDS] [SOAK_SECONDS]}
secs=${3:-10}
soak=${4:-0}
texts_sel=${TEXTS:-short long}
precisions=${PRECISIONS:-f32 int8}
clients=${CLIENTS:-1 8 64}
modes=${MODES:-batched no-invariance}
src=$(cd "$(dirname "$0")/../.." && pwd)
data=${DATA:-$src/../shared/data}
lf="$build/linformer"
mkdir -p "$out"
out=$(cd "$out" && pwd)
command -v wrk >/dev/null || { echo "serve_bench: wrk is missing (scripts/setup.sh --bench)" >&2; exit 1; }
export OMP_WAIT_POLICY=PASSIVE

# ---- Models: SST-2 (n = 128) and IMDB (n = 2048) classifiers, Linformer k = 128, small size.
# A few hundred finetuning steps: the figures are about speed, the weights only need to be real.
model() {  # model NAME TRAIN DEV MAX_LEN STEPS
  local dir="$out/models/$1"
  [[ -f "$dir/best/labels.json" ]] && return
  "$lf" finetune --train "$2" --dev "$3" --out "$dir" --config "$src/configs/small-linformer.json" \
    --set "max_len=$4" --max-train $(($5 * 16)) --epochs 1 --batch-size 16 --lr 1e-4 --quiet \
    --overwrite --max-dev 500 > "$dir.log" 2>&1 || { tail "$dir.log" >&2; exit 1; }
}
mkdir -p "$out/models"
model sst2 "$data/sst2/train.tsv" "$data/sst2/dev.tsv" 128 300
model imdb "$data/imdb/train.tsv" "$data/imdb/val.tsv" 2048 60

# ---- Texts (one per line) and JSON bodies (one per line) for wrk.
python3 - "$data" "$out" <<'PY'
import csv, json, sys
data, out = sys.argv[1], sys.argv[2]
csv.field_size_limit(1 << 24)
def texts(path, n):
    with open(path, newline="") as f:
        rows = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        col = "content" if "content" in rows.fieldnames else rows.fieldnames[-1]
        return [r[col].replace("\n", " ").replace("<br />", " ") for _, r in zip(range(n), rows)]
for name, path, n in [("short", f"{data}/sst2/dev.tsv", 872), ("long", f"{data}/imdb/val.tsv", 500)]:
    t = texts(path, n)
    open(f"{out}/{name}.txt", "w").write("\n".join(t) + "\n")
    open(f"{out}/{name}.bodies", "w").write(
        "\n".join(json.dumps({"inputs": x, "truncate": True}) for x in t) + "\n")
PY

cat > "$out/post.lua" <<'LUA'
-- Each connection posts the bodies of BODIES in turn, starting at a different one.
local bodies = {}
for line in io.lines(os.getenv("BODIES")) do bodies[#bodies + 1] = line end
local i = 0
local n = 0
setup = function(thread) n = n + 1; thread:set("offset", n * 97) end
init = function() i = offset or 0 end
request = function()
  i = i % #bodies + 1
  return wrk.format("POST", "/predict", {["Content-Type"] = "application/json"}, bodies[i])
end
done = function(summary, latency, requests)
  io.write(string.format("RESULT requests=%d seconds=%.3f p50_ms=%.2f p99_ms=%.2f errors=%d\n",
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3,
    latency:percentile(99) / 1e3, summary.errors.status + summary.errors.connect +
    summary.errors.read + summary.errors.write + summary.errors.timeout))
end
LUA
[[ ${PREPARE_ONLY:-0} == 1 ]] && { echo "serve_bench: models and texts ready in $out"; exit 0; }

cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
[[ -f "$out/results.tsv" ]] ||
  printf 'cpu\ttexts\tprecision\tmode\tclients\tinputs_per_s\ttokens_per_s\tp50_ms\tp99_ms\terrors\tload1\n' > "$out/results.tsv"

# ---- Offline: `linformer predict` on the same texts (its own batching, whole file).
for t in $texts_sel; do
  for p in $precisions; do
    m=$([[ $t == short ]] && echo sst2 || echo imdb)
    f="$out/offline-$t-$p.txt"
    [[ -f "$f" ]] && continue
    # The best of three runs (process start and model load included, as a user runs it).
    best=""
    for _ in 1 2 3; do
      start=$(date +%s.%N)
      "$lf" predict --model "$out/models/$m/best" --precision "$p" --input "$out/$t.txt" \
        --output /dev/null 2> "$f.log"
      end=$(date +%s.%N)
      s=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$end")
      best=$(python3 -c "import sys; a = sys.argv[1]; print(min(float(a), float(sys.argv[2])) if a else sys.argv[2])" "$best" "$s")
    done
    n=$(wc -l < "$out/$t.txt")
    python3 -c "import sys; n, s = int(sys.argv[1]), float(sys.argv[2]); print(f'RESULT inputs={n} seconds={s:.3f} inputs_per_s={n / s:.1f}')" \
      "$n" "$best" > "$f"
    printf '%s\t%s\t%s\toffline predict\t-\t%s\t\t\t\t0\t%s\n' "$cpu" "$t" "$p" \
      "$(sed -n 's/.*inputs_per_s=\([0-9.]*\).*/\1/p' "$f")" "$(cut -d' ' -f1 /proc/loadavg)" \
      >> "$out/results.tsv"
  done
done

# ---- The server under wrk.
serve_run() {  # serve_run TEXTS PRECISION MODE CLIENTS SECONDS [serve options...]
  local t=$1 p=$2 mode=$3 c=$4 s=$5
  shift 5
  local f="$out/serve-$t-$p-$mode-c$c.txt"
  [[ -f "$f" ]] && return
  local m; m=$([[ $t == short ]] && echo sst2 || echo imdb)
  "$lf" serve --model "$out/models/$m/best" --port 0 --max-concurrent-requests 1024 \
    --precision "$p" "$@" \
    > "$out/serve.out" 2> "$out/serve.log" &
  local pid=$! port=""
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/serve.out" | head -1)
    [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  local before; before=$(curl -s "http://127.0.0.1:$port/metrics")
  BODIES="$out/$t.bodies" wrk -t 1 -c "$c" -d "${s}s" --timeout 60s -s "$out/post.lua" \
    "http://127.0.0.1:$port/predict" > "$f.wrk"
  local after; after=$(curl -s "http://127.0.0.1:$port/metrics")
  kill -TERM $pid; wait $pid || true
  local toks
  toks=$(python3 - "$before" "$after" <<'PY'
import sys
def val(text, key):
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return 0.0
k = "linformer_request_input_length_sum"
print(int(val(sys.argv[2], k) - val(sys.argv[1], k)))
PY
)
  local r; r=$(grep RESULT "$f.wrk")
  python3 - "$r" "$toks" > "$f" <<'PY'
import re, sys
kv = dict(re.findall(r"(\w+)=([0-9.]+)", sys.argv[1]))
s = float(kv["seconds"])
print(f"inputs_per_s={float(kv['requests']) / s:.1f} tokens_per_s={float(sys.argv[2]) / s:.0f} "
      f"p50_ms={kv['p50_ms']} p99_ms={kv['p99_ms']} errors={kv['errors']}")
PY
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$cpu" "$t" "$p" "$mode" "$c" \
    "$(sed 's/[a-z0-9_]*=//g; s/ /\t/g' "$f")" "$(cut -d' ' -f1 /proc/loadavg)" >> "$out/results.tsv"
}
for t in $texts_sel; do
  for p in $precisions; do
    for c in $clients; do
      for mode in $modes; do
        case $mode in
          batched) serve_run "$t" "$p" batched "$c" "$secs" ;;
          no-invariance) serve_run "$t" "$p" no-invariance "$c" "$secs" --no-batch-invariance ;;
          one-per-batch) serve_run "$t" "$p" one-per-batch "$c" "$secs" --max-batch-requests 1 ;;
          *) echo "serve_bench: unknown mode $mode" >&2; exit 2 ;;
        esac
      done
    done
  done
done

# ---- Soak: 64 clients on short texts for SOAK_SECONDS, resident memory every 10 s.
f="$out/soak.tsv"
if ((soak > 0)) && [[ ! -f "$f" ]]; then
  "$lf" serve --model "$out/models/sst2/best" --port 0 > "$out/serve.out" 2> "$out/soak.log" &
  pid=$!
  for _ in $(seq 1 600); do
    port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$out/serve.out" | head -1)
    [[ -n "$port" ]] && curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.1
  done
  BODIES="$out/short.bodies" wrk -t 1 -c 64 -d "${soak}s" --timeout 60s -s "$out/post.lua" \
    "http://127.0.0.1:$port/predict" > "$out/soak.wrk" &
  wpid=$!
  printf 'seconds\trss_mb\n' > "$f.part"
  for ((i = 0; i <= soak; i += 10)); do
    rss=$(curl -s "http://127.0.0.1:$port/metrics" | sed -n 's/^process_resident_memory_bytes //p')
    printf '%d\t%.1f\n' "$i" "$(python3 -c "print(${rss:-0} / 1e6)")" >> "$f.part"
    sleep 10
  done
  wait $wpid || true
  kill -TERM $pid; wait $pid || true
  mv "$f.part" "$f"
fi
column -t -s $'\t' "$out/results.tsv"
if [[ -f "$f" ]]; then
  echo "soak (resident memory, MB):"
  column -t "$f"
fi
