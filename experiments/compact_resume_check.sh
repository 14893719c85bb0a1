#!/usr/bin/env bash
# How far a resume from the compact saved state (experiments/state_pack.py) strays from the exact
# resume: a pretraining run's checkpoint is packed and unpacked into a copy of the run, the copy
# resumed for SECONDS, and its logged losses (train windows and validation) set beside those of
# the same run resumed exactly from the untouched checkpoint, each written to a TSV.
#
#   experiments/compact_resume_check.sh RUN STEP [SECONDS] [BINARY]
#     RUN      a pretraining run folder (e.g. runs/release/pre/linformer-mini)
#     STEP     one of its checkpoints (step-NNNNNNNN)
# Environment: OUT (runs/compact-check), PRECISION (auto), OMP_NUM_THREADS (1).
# Writes OUT/{exact,compact}.log and OUT/compare.tsv (split, step, both losses, difference).
set -euo pipefail
run=${1:?usage: compact_resume_check.sh RUN STEP [SECONDS] [BINARY]}
step=${2:?usage: compact_resume_check.sh RUN STEP [SECONDS] [BINARY]}
secs=${3:-900}
LF=${4:-build/linformer}
out=${OUT:-runs/compact-check}
here=$(cd "$(dirname "$0")" && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
[[ -d "$run/checkpoints/$step" ]] || { echo "no checkpoint $run/checkpoints/$step" >&2; exit 1; }
rm -rf "$out" && mkdir -p "$out"
for form in exact compact; do
  copy=$out/$form
  mkdir -p "$copy/checkpoints"
  cp "$run"/{train_args.json,config.json,tokenizer.model,metrics.jsonl} "$copy/"
  if [[ $form == exact ]]; then
    cp -r "$run/checkpoints/$step" "$copy/checkpoints/"
  else
    "$here/state_pack.py" pack "$run/checkpoints/$step" "$out/packed"
    "$here/state_pack.py" unpack "$out/packed" "$copy/checkpoints/$step"
  fi
  echo "$step" > "$copy/checkpoints/latest"
done
# Both at once, one thread each, so that they see the same machine.
pids=()
for form in exact compact; do
  "$LF" pretrain --out "$out/$form" --resume --precision "${PRECISION:-auto}" --time-limit "$secs" \
    > "$out/$form.log" 2>&1 &
  pids+=($!)
done
for i in 0 1; do
  wait "${pids[$i]}" || { f=$out/$([[ $i == 0 ]] && echo exact || echo compact).log
    echo "compact_resume_check: the resume failed ($f):" >&2; tail -n 5 "$f" >&2; exit 1; }
done
/usr/bin/python3 - "$out" "$((10#${step#step-}))" <<'EOF'
import re, sys
out, start = sys.argv[1], int(sys.argv[2])
def losses(path):
    d = {}
    for line in open(path):
        m = re.match(r"step (\d+)/\d+ \| loss ([0-9.]+)", line) or \
            re.match(r"valid @ (\d+) \| loss ([0-9.]+)", line)
        if m and int(m.group(1)) > start:
            d[("valid" if line.startswith("valid") else "train", int(m.group(1)))] = float(m.group(2))
    return d
a, b = losses(f"{out}/exact.log"), losses(f"{out}/compact.log")
# The first train window after the resume covers fewer steps than later ones: left out.
keys = sorted((k for k in set(a) & set(b) if k[0] == "valid" or k[1] - start >= 50),
              key=lambda k: (k[1], k[0]))
with open(f"{out}/compare.tsv", "w") as f:
    f.write("split\tstep\tloss_exact\tloss_compact\tdifference\n")
    for k in keys:
        f.write(f"{k[0]}\t{k[1]}\t{a[k]:.4f}\t{b[k]:.4f}\t{b[k] - a[k]:+.4f}\n")
print(open(f"{out}/compare.tsv").read(), end="")
EOF
