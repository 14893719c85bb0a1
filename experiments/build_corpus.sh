#!/usr/bin/env bash
# The pretraining corpus of the quality experiment (docs/results.md, "Pretraining to
# convergence"): real English text from ../shared/data, one document per line.
#
#   experiments/build_corpus.sh [DATA_DIR] [OUT_DIR]   (defaults: ../shared/data, runs/corpus)
#
# Sources, each turned into documents (one per line, tabs and <br /> tags replaced by spaces):
#   ptb/ptb.train.txt          Penn Treebank (Mikolov's LM version), one sentence a line
#   corpus/brown_plain.txt     Brown corpus, one sentence a line
#   corpus/sotu_1790_2021.txt  State of the Union addresses, one address a line
#   corpus/kjv_bible.txt       King James Bible: verse references removed, one chapter a line
#   tinyshakespeare/input.txt  Tiny Shakespeare: one speech (blank-line separated block) a line
#   sst2/train.tsv             SST-2 *training* sentences, labels dropped (never dev)
#   imdb/train.tsv             IMDB *training* reviews, labels dropped (never val)
# Every 100th document of each source goes to valid.txt instead of train.txt, so validation
# covers every source and shares no document with training; ptb.valid.txt is added to
# valid.txt as well. Writes OUT_DIR/{train.txt, valid.txt, recipe.tsv} (recipe.tsv: documents,
# words and bytes per source and split). The token count depends on the tokenizer and is
# printed by `linformer pretrain` ("data: ...").
set -euo pipefail
data=${1:-../shared/data}
out=${2:-runs/corpus}
for f in ptb/ptb.train.txt ptb/ptb.valid.txt corpus/brown_plain.txt corpus/sotu_1790_2021.txt \
         corpus/kjv_bible.txt tinyshakespeare/input.txt sst2/train.tsv imdb/train.tsv; do
  [[ -s "$data/$f" ]] || { echo "build_corpus: $data/$f is missing" >&2; exit 1; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
clean() { tr -d '\r' | sed -E 's#<br */?>#  #g; s/\t/ /g; s/^ +//; s/ +$//' | grep -v '^$' || true; }

clean < "$data/ptb/ptb.train.txt" > "$tmp/ptb"
clean < "$data/corpus/brown_plain.txt" > "$tmp/brown"
clean < "$data/corpus/sotu_1790_2021.txt" > "$tmp/sotu"
# "Ge1:1 In the beginning ..." -> one line per chapter (book + chapter).
awk '{ ref = $1; sub(/:[0-9]+$/, "", ref); $1 = "";
       if (ref != last && NR > 1) { print doc; doc = "" }
       doc = doc $0; last = ref } END { if (doc != "") print doc }' \
  "$data/corpus/kjv_bible.txt" | clean > "$tmp/kjv"
# Blank-line separated speeches, joined into one line each.
awk 'BEGIN { RS = ""; FS = "\n" } { line = $1; for (i = 2; i <= NF; ++i) line = line " " $i; print line }' \
  "$data/tinyshakespeare/input.txt" | clean > "$tmp/shakespeare"
# TSVs: the text column named in the header (sentence / text).
tsv_text() {
  awk -F'\t' -v want="$2" 'NR == 1 { for (i = 1; i <= NF; ++i) { h = $i; sub(/\r$/, "", h); if (h == want) c = i }
                                      if (!c) { print "no column " want > "/dev/stderr"; exit 1 }; next }
                           { print $c }' "$1" | clean
}
tsv_text "$data/sst2/train.tsv" sentence > "$tmp/sst2"
tsv_text "$data/imdb/train.tsv" text > "$tmp/imdb"

: > "$out/train.txt.tmp"
: > "$out/valid.txt.tmp"
printf 'source\tsplit\tdocuments\twords\tbytes\n' > "$out/recipe.tsv.tmp"
for s in ptb brown sotu kjv shakespeare sst2 imdb; do
  awk -v tr="$tmp/$s.train" -v va="$tmp/$s.valid" 'NR % 100 == 0 { print > va; next } { print > tr }' "$tmp/$s"
  touch "$tmp/$s.valid"
  cat "$tmp/$s.train" >> "$out/train.txt.tmp"
  cat "$tmp/$s.valid" >> "$out/valid.txt.tmp"
  for split in train valid; do
    printf '%s\t%s\t%s\t%s\t%s\n' "$s" "$split" "$(wc -l < "$tmp/$s.$split")" \
      "$(wc -w < "$tmp/$s.$split")" "$(wc -c < "$tmp/$s.$split")" >> "$out/recipe.tsv.tmp"
  done
done
clean < "$data/ptb/ptb.valid.txt" > "$tmp/ptbv"
cat "$tmp/ptbv" >> "$out/valid.txt.tmp"
printf 'ptb.valid\tvalid\t%s\t%s\t%s\n' "$(wc -l < "$tmp/ptbv")" "$(wc -w < "$tmp/ptbv")" \
  "$(wc -c < "$tmp/ptbv")" >> "$out/recipe.tsv.tmp"
for f in train.txt valid.txt recipe.tsv; do mv "$out/$f.tmp" "$out/$f"; done
column -t -s $'\t' "$out/recipe.tsv" 2>/dev/null || cat "$out/recipe.tsv"
echo "build_corpus: $(wc -w < "$out/train.txt") words in $out/train.txt, $(wc -w < "$out/valid.txt") in $out/valid.txt"
