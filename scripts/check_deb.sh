#!/usr/bin/env bash
# Installs the `linformer` Debian package (made by `make package`) with apt, which pulls in
# its run-time dependencies, then runs the installed program: --help, and a model created
# from the installed example configs run on random tokens. Then, when DIR holds it, the
# Python module's package `python3-linformer` beside it, and Debian's python3 runs an example
# with it on the same model. Last, the packages on older CPUs under qemu-user (qemu64, Nehalem,
# Haswell: scripts/check_qemu.sh, which installs nothing; qemu-user is installed here with apt).
# Used by .ci/run on a fresh Debian 12 system, where nothing else is installed.
# Usage: scripts/check_deb.sh DIR   (DIR holds linformer_<version>_<arch>.deb and
#                                     python3-linformer_<version>_<arch>.deb)
set -euo pipefail
dir=${1:?usage: check_deb.sh DIR}
deb=$(ls "$dir"/linformer_*.deb 2>/dev/null | head -1)
[[ -n "$deb" ]] || { echo "check_deb: no linformer_*.deb in $dir" >&2; exit 1; }
cp "$deb" /tmp/ && deb=/tmp/$(basename "$deb")
echo "check_deb: installing $(basename "$deb") and its dependencies"
apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$deb" >/tmp/check_deb.log 2>&1 ||
  { tail -n 30 /tmp/check_deb.log >&2; exit 1; }
dpkg-query -W -f='check_deb: installed ${Package} ${Version}\ncheck_deb: depends on ${Depends}\n' linformer
tmp=$(mktemp -d)
linformer --help > "$tmp/help.txt"
head -n 3 "$tmp/help.txt"
linformer init --config /usr/share/linformer/configs/small-linformer.json --seed 1 --out "$tmp/m"
linformer forward --model "$tmp/m" --random-batch 2 64 --no-logits --out "$tmp/out.safetensors"
linformer info --model "$tmp/m" > "$tmp/info.txt"
head -n 5 "$tmp/info.txt"
# The server: started on a free loopback port with a model and a tokenizer made here, asked
# for its health and an embedding over bash's /dev/tcp (a fresh system has no curl), stopped
# with SIGTERM.
for i in $(seq 1 300); do echo "the quick brown fox $i jumps over the lazy dog number $((i * 7))"; done > "$tmp/text.txt"
linformer tokenizer train --input "$tmp/text.txt" --out "$tmp/m/tokenizer.model" --vocab-size 60 >/dev/null 2>&1
linformer serve --model "$tmp/m" --port 0 > "$tmp/serve.out" 2> "$tmp/serve.err" &
serve_pid=$!
http() {  # http METHOD PATH [BODY]: the response, headers and body
  local port body=${3:-}
  port=$(sed -n 's/.*127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.out" | head -1)
  exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
  printf '%s %s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
    "$1" "$2" "${#body}" "$body" >&3
  cat <&3
  exec 3>&-
}
healthy=0
for i in $(seq 1 600); do
  if grep -q listening "$tmp/serve.out" 2>/dev/null; then
    reply=$(http GET /health 2>/dev/null || true)
    [[ "$reply" == *'"status":"ok"'* ]] && { healthy=1; break; }
  fi
  kill -0 $serve_pid 2>/dev/null || { cat "$tmp/serve.err" >&2; echo "check_deb: serve exited" >&2; exit 1; }
  sleep 0.1
done
((healthy)) || { cat "$tmp/serve.err" >&2; echo "check_deb: serve never became healthy" >&2; exit 1; }
reply=$(http POST /embed '{"inputs": "the quick brown fox"}')
[[ "$reply" == *'[[-'* || "$reply" == *'[[0'* || "$reply" == *'[[1'* ]] ||
  { echo "$reply" >&2; cat "$tmp/serve.err" >&2; echo "check_deb: serve gave no embedding" >&2; exit 1; }
kill -TERM $serve_pid
wait $serve_pid || { echo "check_deb: serve did not exit 0 on SIGTERM" >&2; exit 1; }
echo "check_deb: linformer serve answers /health and /embed and stops on SIGTERM"
echo "check_deb: the package installs on a fresh system and runs"

# The packages as older x86-64 CPUs run them (qemu-user): installed after the checks above, so
# that they saw only the packages' own dependencies.
check_qemu() {
  echo "check_deb: installing qemu-user for the older-CPU check"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-user \
    >/tmp/check_deb_qemu.log 2>&1 || { tail -n 30 /tmp/check_deb_qemu.log >&2; exit 1; }
  "$(dirname "$0")/check_qemu.sh" "$dir"
}

pydeb=$(ls "$dir"/python3-linformer_*.deb 2>/dev/null | head -1)
if [[ -z "$pydeb" ]]; then
  echo "check_deb: no python3-linformer_*.deb in $dir (built without LINFORMER_PYTHON); skipped"
  check_qemu
  exit 0
fi
cp "$pydeb" /tmp/ && pydeb=/tmp/$(basename "$pydeb")
echo "check_deb: installing $(basename "$pydeb") and its dependencies"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$pydeb" \
  >/tmp/check_deb_python.log 2>&1 || { tail -n 30 /tmp/check_deb_python.log >&2; exit 1; }
dpkg-query -W -f='check_deb: installed ${Package} ${Version}\ncheck_deb: depends on ${Depends}\n' \
  python3-linformer
# Debian's interpreter, from a neutral folder (not the source tree): the installed module.
(cd "$tmp" && /usr/bin/python3 - "$tmp/m" <<'PY'
import sys
import numpy as np
import linformer
m = linformer.Model(sys.argv[1])
ids = np.random.default_rng(0).integers(0, m.vocab_size, size=(2, 64))
out = m.forward(ids)
vec = m.embed(ids, pooling="mean", normalize=True)
print(f"check_deb: python3 -c 'import linformer' from {linformer.__file__}")
print(f"check_deb: {m!r}: hidden_states {out['hidden_states'].shape}, "
      f"mlm_logits {out['mlm_logits'].shape}, embeddings {vec.shape}")
assert out["hidden_states"].shape == (2, 64, m.d_model) and np.isfinite(out["mlm_logits"]).all()
if m.tokenizer is not None:  # the folder holds the tokenizer trained for the server above
    texts = m.embed(["the quick brown fox", "the lazy dog"], normalize=True)
    print(f"check_deb: embedded 2 texts: {texts.shape}, cosine {float(texts[0] @ texts[1]):.3f}")
    assert texts.shape == (2, m.d_model) and np.isfinite(texts).all()
PY
)
echo "check_deb: the Python package installs beside the program and runs"
check_qemu
