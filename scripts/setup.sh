#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need (only those missing).
# Usage: scripts/setup.sh [--test | --demo | --bench]
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config libdnnl-dev nlohmann-json3-dev
      libcli11-dev libgtest-dev libsentencepiece-dev libeigen3-dev)
if [[ "${1:-}" == "--demo" ]] && ! command -v npm >/dev/null; then
  pkgs+=(npm)
fi
if [[ "${1:-}" == "--bench" ]]; then
  # PyTorch for the peer comparison, with OpenBLAS's OpenMP and pthread builds (Debian's
  # default BLAS is the slow reference one, which would make the comparison meaningless);
  # bench/pytorch/bench_torch.py --blas picks the build.
  pkgs+=(python3-torch python3-numpy libopenblas0-openmp libopenblas0-pthread)
fi
if [[ "${1:-}" == "--test" ]]; then
  pkgs+=(python3-torch python3-numpy)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
