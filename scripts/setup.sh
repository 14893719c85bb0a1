#!/usr/bin/env bash
# Installs the Debian 12 packages that the build needs, and with a flag those of the tests,
# the demo, the PyTorch comparison or the fuzzers (only the missing ones). Nothing is assumed
# beyond Debian's base system, make and git. Runs apt-get as root, or through sudo.
# Usage: scripts/setup.sh [--test] [--demo] [--bench] [--fuzz] [--qemu]
set -euo pipefail
for a in "$@"; do
  case "$a" in --test | --demo | --bench | --fuzz | --qemu) ;; *)
    echo "usage: scripts/setup.sh [--test] [--demo] [--bench] [--fuzz] [--qemu]" >&2; exit 2 ;;
  esac
done
# The build (library, CLI, tests and micro-benchmarks) and its packaging:
#   compiler and tools: build-essential (g++, make, dpkg-dev for cpack), cmake, ninja-build,
#     pkg-config (finds SentencePiece), file (cpack reads the binaries' dependencies)
#   oneDNN (matrix products): libdnnl-dev, and ocl-icd-opencl-dev because oneDNN's CMake
#     config requires OpenCL although the package only recommends it
#   libcpp-httplib-dev (the HTTP server of `linformer serve`)
#   nlohmann-json3-dev (JSON), libcli11-dev (command line), libsentencepiece-dev (tokenizer),
#   libpcre2-dev (GPT-2's pre-tokenizer pattern) and libicu-dev (BERT's normaliser) for the
#     Hugging Face tokenizers,
#   libeigen3-dev (SVD of the spectrum analysis), libgtest-dev (tests),
#   libbenchmark-dev (kernel micro-benchmarks)
#   Open MPI for data-parallel training on several processes or machines (docs/distributed.md):
#     libopenmpi-dev (the library linformer links, LINFORMER_MPI), openmpi-bin (mpirun, which
#     launches the ranks; the data-parallel tests run it)
#   The Python module (import linformer, LINFORMER_PYTHON; docs/python.md): pybind11-dev (the
#     bindings) and python3-dev (the headers of Debian's python3 it is built for)
pkgs=(build-essential cmake ninja-build pkg-config file libdnnl-dev ocl-icd-opencl-dev
      nlohmann-json3-dev libcli11-dev libsentencepiece-dev libeigen3-dev libgtest-dev
      libbenchmark-dev libopenmpi-dev openmpi-bin libcpp-httplib-dev libpcre2-dev libicu-dev
      pybind11-dev python3-dev)
for a in "$@"; do case "$a" in
  # PyTorch for the reference checks of the tests (never used at run time); headless chromium,
  # its driver and Selenium for the test of the server's page in a real browser; numpy and
  # pytest for the Python module's tests (tests/python).
  # nodejs and npm: the client libraries people point at a TEI server drive `linformer serve`
  # in its tests (tests/serve/test_clients.py); their versions are pinned in
  # tests/clients/package-lock.json and installed below with `npm ci` (Debian's nodejs and npm
  # only where no node or npm is on PATH).
  --test) pkgs+=(python3 python3-torch python3-numpy chromium chromium-driver python3-selenium
                 python3-pytest)
          command -v node >/dev/null || pkgs+=(nodejs)
          command -v npm >/dev/null || pkgs+=(npm) ;;
  # The demo's corpus, the King James Bible, comes from Debian's bible-kjv (scripts/get_corpus.sh).
  --demo) pkgs+=(bible-kjv) ;;
  # PyTorch for the peer comparison, with OpenBLAS's OpenMP and pthread builds (Debian's
  # default BLAS is the slow reference one, which would make the comparison meaningless), and
  # jemalloc (the training peer preloads it); bench/pytorch/torch_setup.py picks them. wrk:
  # the HTTP load generator of the server's benchmark (bench/serve/). python3-onnx, nodejs and
  # npm: the ONNX Runtime peer (bench/ort/: the graphs exported from PyTorch and run by the npm
  # package onnxruntime-node, which `cd bench/ort && ONNXRUNTIME_NODE_INSTALL=skip npm ci`
  # installs from the lock file; Debian's nodejs and npm only where no node or npm is on PATH).
  --bench) pkgs+=(python3 python3-torch python3-numpy libopenblas0-openmp libopenblas0-pthread
                  libjemalloc2 wrk python3-onnx)
           command -v node >/dev/null || pkgs+=(nodejs)
           command -v npm >/dev/null || pkgs+=(npm) ;;
  # The sanitizer build and its libFuzzer harnesses (make sanitize, make fuzz): clang, its runtimes (libFuzzer, ASan,
  # UBSan: libclang-rt-14-dev) and its OpenMP runtime (libomp-14-dev).
  --fuzz) pkgs+=(clang libclang-rt-14-dev libomp-14-dev) ;;
  # qemu-user: runs the packaged program and Python module as older x86-64 CPUs (qemu64,
  # Nehalem, Haswell) to check they run there and agree with the native run
  # (scripts/check_qemu.sh, which scripts/check_deb.sh runs in CI).
  --qemu) pkgs+=(qemu-user) ;;
esac; done
# Selenium and chromedriver reach each other (and chromium) at "localhost": a system built by
# debootstrap has no /etc/hosts, so the name does not resolve there. The test setup adds the
# two lines every installed Debian system has (only when the name is missing).
if [[ " $* " == *" --test "* ]] && ! getent hosts localhost >/dev/null; then
  echo "setup: 'localhost' does not resolve (no /etc/hosts entry); adding 127.0.0.1 and ::1"
  printf '127.0.0.1\tlocalhost\n::1\t\tlocalhost ip6-localhost ip6-loopback\n' |
    if [[ $(id -u) -eq 0 ]]; then tee -a /etc/hosts; else sudo tee -a /etc/hosts; fi >/dev/null
fi
# The npm packages of the client tests, exactly as tests/clients/package-lock.json pins them
# (once the lock file changes, or when node_modules is missing).
npm_clients() {
  [[ " $* " == *" --test "* ]] || return 0
  local dir lock stamp
  dir="$(cd "$(dirname "$0")/.." && pwd)/tests/clients"
  lock="$dir/package-lock.json" stamp="$dir/node_modules/.package-lock.json"
  [[ -f "$stamp" && ! "$lock" -nt "$stamp" ]] && return 0
  echo "setup: npm ci in tests/clients (the client libraries of the serve tests)"
  local log
  log=$(mktemp)
  if (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) 2> >(tee "$log" >&2); then
    rm -f "$log"
    return 0
  fi
  # A network that re-signs TLS (a proxy whose certificate authority this fresh system does
  # not hold) fails with SELF_SIGNED_CERT_IN_CHAIN or UNABLE_TO_GET_ISSUER_CERT. The lock file
  # pins every package by its sha512 integrity, which npm checks on each tarball whatever the
  # connection, so the install is retried without TLS verification.
  if grep -q -E 'SELF_SIGNED_CERT|UNABLE_TO_(GET_ISSUER|VERIFY)|CERT_' "$log"; then
    rm -f "$log"
    echo "setup: the npm registry's certificate is not trusted here; retrying with the lock" \
         "file's sha512 integrity checks only" >&2
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error --strict-ssl=false)
    return
  fi
  rm -f "$log"
  return 1
}
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  npm_clients "$@"
  exit 0
fi
SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || {
    echo "setup: these packages are missing and installing them needs root (or sudo):" >&2
    echo "  apt-get install ${missing[*]}" >&2
    exit 1
  }
  SUDO=(sudo)
fi
log=$(mktemp "${TMPDIR:-/tmp}/linformer-setup.XXXXXX.log")
echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]} (log: $log)"
if ! { "${SUDO[@]}" apt-get update -q &&
       "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
         --no-install-recommends "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "setup: apt-get failed (full log: $log)" >&2
  exit 1
fi
rm -f "$log"
npm_clients "$@"
echo "setup: done"
