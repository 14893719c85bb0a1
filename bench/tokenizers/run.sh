#!/usr/bin/env bash
# Tokenizer throughput, one core: linformer's SentencePiece, byte-level BPE and WordPiece
# against gpt-3-encoder (JavaScript) and Hugging Face's tokenizers (Rust) on the same text
# (docs/tokenizers.md, "Throughput"). Needs node and npm for the references (installed in a
# temporary folder). Usage: bench/tokenizers/run.sh BUILD TEXT_FILE
set -euo pipefail
build=${1:?usage: run.sh BUILD TEXT_FILE}
text=${2:?usage: run.sh BUILD TEXT_FILE}
src=$(cd "$(dirname "$0")/../.." && pwd)
data=$src/tests/data/tokenizers
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tokenizer-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
"$build/linformer" tokenizer train --input "$text" --out "$tmp/sp.model" --vocab-size 8192 >/dev/null
for t in "$tmp/sp.model" "$data/gpt2" "$data/roberta/tokenizer.json" "$data/bert/vocab.txt" \
         "$data/bert/tokenizer.json"; do
  OMP_NUM_THREADS=1 taskset -c 0 "$build/linformer" tokenizer bench --tokenizer "$t" --input "$text"
done
(cd "$tmp" && npm install --no-audit --no-fund --silent gpt-3-encoder@1.1.4 @anush008/tokenizers@0.6.0 >/dev/null)
RAYON_NUM_THREADS=1 taskset -c 0 node "$src/bench/tokenizers/bench_js.js" "$tmp/node_modules" "$text" \
  "$data/roberta/tokenizer.json" "$data/bert/tokenizer.json"
