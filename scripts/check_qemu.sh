#!/usr/bin/env bash
# The packages on older x86-64 CPUs: extracts linformer_*.deb and python3-linformer_*.deb from
# DIR into a scratch root (their run-time libraries must be installed: scripts/check_deb.sh
# installs them, a build machine has them), then runs a small classifier's `predict` and the
# Python module's `embed` natively and under Debian's qemu-user as three older CPUs:
#   qemu64   x86-64 baseline (SSE2/SSE3 only)  -> the kernels' baseline level, oneDNN's reference code
#   Nehalem  SSE4.2, no AVX                    -> baseline, oneDNN's SSE4.1 JIT
#   Haswell  AVX2 + FMA                        -> avx2, oneDNN's AVX2 JIT
# (qemu emulates the CPU's CPUID and XGETBV, so both the kernels' dispatcher and oneDNN's JIT
# choose for the emulated CPU; QEMU 7.2's TCG has no AVX-512, so that level runs only on real
# hardware, in the test suite). Each run must print the expected level and give the native
# run's probabilities and embeddings within float rounding (1e-5 absolute: the levels differ in
# their exp/GELU forms by ~1e-7 and oneDNN's kernels in summation order). A few minutes in all.
# Usage: scripts/check_qemu.sh DIR   (needs qemu-user: scripts/setup.sh --qemu)
set -euo pipefail
dir=${1:?usage: check_qemu.sh DIR}
deb=$(ls "$dir"/linformer_*.deb 2>/dev/null | head -1)
pydeb=$(ls "$dir"/python3-linformer_*.deb 2>/dev/null | head -1)
[[ -n "$deb" ]] || { echo "check_qemu: no linformer_*.deb in $dir" >&2; exit 1; }
command -v qemu-x86_64 >/dev/null ||
  { echo "check_qemu: qemu-x86_64 missing (Debian package qemu-user: scripts/setup.sh --qemu)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
dpkg-deb -x "$deb" "$root"
[[ -n "$pydeb" ]] && dpkg-deb -x "$pydeb" "$root"
bin=$root/usr/bin/linformer
export PYTHONPATH=$root/usr/lib/python3/dist-packages
export OMP_NUM_THREADS=1 LINFORMER_ISA=  # one thread: emulated threads only add time
start=$SECONDS

# A small classifier: 2 layers of d 64, a tokenizer of 60 pieces, two labels (untrained weights
# give distinct, input-dependent probabilities all the same).
m=$tmp/m
cat > "$tmp/config.json" <<'JSON'
{"vocab_size": 64, "max_len": 64, "d_model": 64, "n_heads": 2, "d_ff": 128, "n_layers": 2,
 "attention": "linformer", "k": 16, "sharing": "layerwise", "projection": "linear",
 "norm": "post", "dropout": 0.0, "attention_dropout": 0.0, "num_classes": 2}
JSON
"$bin" init --config "$tmp/config.json" --seed 3 --out "$m" >/dev/null
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog number $((i * 7))"; done > "$tmp/text.txt"
"$bin" tokenizer train --input "$tmp/text.txt" --out "$m/tokenizer.model" --vocab-size 60 >/dev/null 2>&1
echo '{"labels": {"names": ["negative", "positive"]}}' > "$m/labels.json"
printf '%s\n' "the quick brown fox" "the lazy dog jumps over the fox number 7" \
  "a dog" "number 21 jumps over the quick brown lazy dog and the fox" > "$tmp/texts.txt"
cat > "$tmp/embed.py" <<'PY'
import sys
import numpy as np
import linformer
m = linformer.Model(sys.argv[1])
texts = open(sys.argv[2]).read().splitlines()
np.save(sys.argv[3], np.concatenate([m.embed(texts, pooling=p, normalize=True) for p in ("mean", "cls")]))
print(linformer.cpu_paths()["kernels"])
PY
cat > "$tmp/compare.py" <<'PY'
import json, sys
tol = 1e-5
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b) == 4, (len(a), len(b))
dp = max(abs(x["probs"][k] - y["probs"][k]) for x, y in zip(a, b) for k in x["probs"])
de = 0.0
if len(sys.argv) > 4:
    import numpy as np
    de = float(np.abs(np.load(sys.argv[3]) - np.load(sys.argv[4])).max())
print(f"max |diff| probabilities {dp:.2e}, embeddings {de:.2e}")
sys.exit(0 if dp <= tol and de <= tol else 1)
PY

run() {  # run PREFIX... : predict and embed with the given command prefix, outputs under $tmp/$tag
  "$@" "$bin" predict --model "$m" < "$tmp/texts.txt" > "$tmp/$tag.jsonl" 2> "$tmp/$tag.err" ||
    { cat "$tmp/$tag.err" >&2; echo "check_qemu: predict failed ($tag)" >&2; return 1; }
  if [[ -n "$pydeb" ]]; then
    "$@" /usr/bin/python3 "$tmp/embed.py" "$m" "$tmp/texts.txt" "$tmp/$tag.npy" > "$tmp/$tag.py.out" 2> "$tmp/$tag.py.err" ||
      { cat "$tmp/$tag.py.err" >&2; echo "check_qemu: the Python module's embed failed ($tag)" >&2; return 1; }
  fi
}
tag=native run
native_level=$("$bin" info | sed -n 's/^cpu: kernels \([a-z0-9]*\).*/\1/p')
echo "check_qemu: native: kernels $native_level; $(head -c 120 "$tmp/native.jsonl" | head -1)"
status=0
for cpu in qemu64:baseline Nehalem:baseline Haswell:avx2; do
  tag=${cpu%%:*} want=${cpu##*:}
  t=$SECONDS
  # qemu warns about host features TCG lacks (e.g. Haswell's TSX); those lines are dropped.
  q=(qemu-x86_64 -cpu "$tag")
  info=$("${q[@]}" "$bin" info 2>/dev/null)
  level=$(sed -n 's/^cpu: kernels \([a-z0-9]*\).*/\1/p' <<< "$info")
  onednn=$(sed -n 's/^cpu: oneDNN (matrix products) //p' <<< "$info")
  if [[ "$level" != "$want" ]]; then
    echo "check_qemu: -cpu $tag: the kernels chose '$level', expected $want" >&2; status=1; continue
  fi
  run "${q[@]}" || { status=1; continue; }
  if [[ -n "$pydeb" ]]; then
    pylevel=$(tail -1 "$tmp/$tag.py.out")
    [[ "$pylevel" == "$want" ]] || { echo "check_qemu: -cpu $tag: python module chose '$pylevel'" >&2; status=1; }
    cmp=$(/usr/bin/python3 "$tmp/compare.py" "$tmp/native.jsonl" "$tmp/$tag.jsonl" "$tmp/native.npy" "$tmp/$tag.npy") || status=1
  else
    cmp=$(/usr/bin/python3 "$tmp/compare.py" "$tmp/native.jsonl" "$tmp/$tag.jsonl") || status=1
  fi
  echo "check_qemu: -cpu $tag: kernels $level, oneDNN $onednn; predict$([[ -n "$pydeb" ]] && echo " and embed") against native: $cmp ($((SECONDS - t)) s)"
done
((status == 0)) && echo "check_qemu: the packages run on qemu64, Nehalem and Haswell and agree with the native run ($((SECONDS - start)) s)"
exit $status
