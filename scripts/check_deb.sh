#!/usr/bin/env bash
# Installs the `linformer` Debian package (made by `make package`) with apt, which pulls in
# its run-time dependencies, then runs the installed program: --help, and a model created
# from the installed example configs run on random tokens. Used by .ci/run on a fresh Debian 12
# system, where nothing else is installed.
# Usage: scripts/check_deb.sh DIR   (DIR holds linformer_<version>_<arch>.deb)
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
echo "check_deb: the package installs on a fresh system and runs"
