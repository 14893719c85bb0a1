#!/usr/bin/env bash
# int8 against bf16 at RoBERTa-base width (docs/int8.md, "Today's figures"): the same
# `linformer bench --compare-precision` run R times, then the median and range of each
# configuration's int8 / bf16 speed-up over the runs. On a shared machine single runs of this
# comparison vary by +-10% (slow spells of tens of seconds); the median is what docs/int8.md
# quotes. Resumable: finished runs (OUT/run-I.md) are kept and skipped.
#   experiments/int8_ratio.sh [RUNS] [LINFORMER_BINARY]      default 9 runs, build/linformer
# Environment: OUT (runs/int8-ratio), OMP_WAIT_POLICY (passive).
set -euo pipefail
runs=${1:-9}
LF=${2:-build/linformer}
OUT=${OUT:-runs/int8-ratio}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
mkdir -p "$OUT"
for i in $(seq 1 "$runs"); do
  [ -s "$OUT/run-$i.md" ] && continue
  echo "run $i of $runs ($(date +%H:%M:%S))" >&2
  "$LF" bench --layers 12 --d-model 768 --heads 12 --d-ff 3072 --n 512 4096 --k 128 \
    --attention linformer streaming --precision bf16 --compare-precision int8 \
    > "$OUT/run-$i.md.part" 2> "$OUT/run-$i.err"
  mv "$OUT/run-$i.md.part" "$OUT/run-$i.md"
done
python3 - "$OUT" "$runs" <<'EOF'
import statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
ratios, times = {}, {}
for i in range(1, runs + 1):
    lines = open(f"{out}/run-{i}.md").read().splitlines()
    head = next(j for j, l in enumerate(lines) if l.startswith("| attention | n | k | bf16 ms/seq"))
    cols = [c.strip() for c in lines[head].strip("|").split("|")]
    for l in lines[head + 2:]:
        if not l.startswith("|"):
            break
        c = dict(zip(cols, (x.strip() for x in l.strip("|").split("|"))))
        key = (c["attention"], int(c["n"]))
        bf, i8 = float(c["bf16 ms/seq"]), float(c["int8 ms/seq"])
        ratios.setdefault(key, []).append(bf / i8)
        times.setdefault(key, []).append((bf, i8))
print(f"| attention | n | bf16 ms/seq | int8 ms/seq | int8 / bf16, median of {runs} runs | range |")
print("|---|---|---|---|---|---|")
for key in sorted(ratios, key=lambda k: (k[1], k[0])):
    r = ratios[key]
    bf = statistics.median(t[0] for t in times[key])
    i8 = statistics.median(t[1] for t in times[key])
    print(f"| {key[0]} | {key[1]} | {bf:.1f} | {i8:.1f} | {statistics.median(r):.2f}x | "
          f"{min(r):.2f}-{max(r):.2f}x |")
EOF
