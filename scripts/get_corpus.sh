#!/usr/bin/env bash
# The demo's built-in corpus: the King James Bible (public domain), one verse a line, from
# Debian's own package `bible-kjv` (installed by `scripts/setup.sh --demo`), read out with its
# `bible` program and the verse references stripped: 31,102 lines, about 790k words.
# It comes from the same Debian mirror as every other package the project installs, so the
# demo needs no other network access. Usage: scripts/get_corpus.sh OUT.txt
set -euo pipefail
out=${1:?usage: get_corpus.sh OUT.txt}
[[ -s "$out" ]] && exit 0
command -v bible >/dev/null || {
  echo "get_corpus: the 'bible' program is needed (apt-get install bible-kjv), or give your own" \
       "text with CORPUS=path" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
# Each line is "Book chapter:verse text", e.g. "Ge1:1 In the beginning ...".
bible -f 'gen1:1-rev22:21' | sed -E 's/^[0-9]?[A-Za-z]+[0-9]+:[0-9]+ //' | grep -v '^$' > "$out.tmp"
lines=$(wc -l < "$out.tmp")
[[ "$lines" -gt 30000 ]] || {
  rm -f "$out.tmp"; echo "get_corpus: 'bible' gave only $lines lines (expected 31,102)" >&2; exit 1; }
mv "$out.tmp" "$out"
echo "get_corpus: $lines verses of the King James Bible ($(wc -w < "$out") words) in $out"
