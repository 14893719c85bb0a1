#!/usr/bin/env bash
# The installed package as another project sees it: installs the build into a temporary
# prefix, builds examples/ against it with find_package(linformer), finetunes a tiny
# classifier with the installed `linformer`, and checks that the example's labels,
# probabilities and sentence vectors equal those of `linformer predict` and `linformer embed`.
#   package_test.sh BUILD_DIR SOURCE_DIR CXX_COMPILER
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) cxx=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lf_package_test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail() { echo "package_test: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
lib=$(ls "$tmp"/prefix/lib*/liblinformer.a 2>/dev/null | head -1)
for f in "$tmp/prefix/bin/linformer" "$lib" "$tmp/prefix/include/linformer/model.h"; do
  [ -n "$f" ] && [ -f "$f" ] || fail "not installed: ${f:-liblinformer.a}"
done
ls "$tmp"/prefix/lib*/cmake/linformer/linformerConfig.cmake >/dev/null || fail "no package config"
# The installed headers include only each other and system/third-party headers.
if grep -n '#include "' "$tmp"/prefix/include/linformer/*.h | grep -v '#include "linformer/'; then
  fail "an installed header includes a private header"
fi
[ ! -e "$tmp/prefix/include/core" ] && [ ! -e "$tmp/prefix/include/kernels" ] || fail "private headers installed"

# The example, configured and built as an outside project against the installed copy only.
gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S "$src/examples" -B "$tmp/example" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log" 2>&1 ||
  { cat "$tmp/configure.log"; fail "configuring examples/ against the installed package"; }
cmake --build "$tmp/example" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building examples/"; }

# A tiny separable classifier: "good" -> positive, "bad" -> negative, among filler words.
python3 - "$tmp" <<'PY'
import random, sys
d = sys.argv[1]
filler = "the movie was very and plot it acting film really".split()
def rows(n, seed):
    r = random.Random(seed)
    out = ["label\tsentence"]
    for _ in range(n):
        y = r.randrange(2)
        words = [r.choice(filler) for _ in range(r.randrange(2, 8))]
        words.insert(r.randrange(len(words) + 1), "good" if y else "bad")
        out.append(f"{y}\t{' '.join(words)}")
    return "\n".join(out) + "\n"
open(f"{d}/train.tsv", "w").write(rows(320, 1))
open(f"{d}/dev.tsv", "w").write(rows(64, 2))
PY
lf="$tmp/prefix/bin/linformer"
OMP_NUM_THREADS=1 "$lf" finetune --train "$tmp/train.tsv" --dev "$tmp/dev.tsv" --out "$tmp/run" \
  --set d_model=32 --set n_heads=2 --set d_ff=64 --set n_layers=2 --set max_len=32 --set k=8 \
  --set sharing=kv --set dropout=0 --set attention_dropout=0 --vocab-size 40 \
  --batch-size 16 --epochs 12 --lr 3e-3 --seed 3 --quiet >"$tmp/finetune.log" 2>&1 ||
  { cat "$tmp/finetune.log"; fail "finetune"; }

printf '%s\n' "the movie was good" "bad plot and acting really" "it was very good film" \
  "really bad" > "$tmp/lines.txt"
ex="$tmp/example/classify_lines"
"$ex" "$tmp/run/best" < "$tmp/lines.txt" > "$tmp/ex_predict.jsonl" || fail "example (classify)"
"$ex" "$tmp/run/best" --embed < "$tmp/lines.txt" > "$tmp/ex_embed.jsonl" || fail "example (embed)"
"$lf" predict --model "$tmp/run/best" --input "$tmp/lines.txt" > "$tmp/cli_predict.jsonl"
"$lf" embed --model "$tmp/run/best" --input "$tmp/lines.txt" --pool mean > "$tmp/cli_embed.jsonl"
# Bad input gets a message naming the problem and a non-zero exit, not a crash.
set +e
"$ex" "$tmp/nope" < "$tmp/lines.txt" 2> "$tmp/err.txt"; rc=$?
set -e
[ "$rc" -eq 1 ] && grep -q nope "$tmp/err.txt" || fail "missing model folder: exit $rc, $(cat "$tmp/err.txt")"

python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
load = lambda f: [json.loads(l) for l in open(f"{d}/{f}") if l.strip()]
ex, cli = load("ex_predict.jsonl"), load("cli_predict.jsonl")
assert len(ex) == len(cli) == 4, (len(ex), len(cli))
assert [e["label"] for e in ex] == ["positive", "negative", "positive", "negative"], ex
for e, c in zip(ex, cli):
    assert e["label"] == c["label"], (e, c)
    for k in c["probs"]:
        assert abs(e["probs"][k] - c["probs"][k]) < 1e-5, (e, c)
ex, cli = load("ex_embed.jsonl"), load("cli_embed.jsonl")
assert len(ex) == len(cli) == 4
for e, c in zip(ex, cli):
    assert len(e["mean"]) == len(c["mean"]) == 32
    assert max(abs(a - b) for a, b in zip(e["mean"], c["mean"])) < 1e-5, (e, c)
print("package_test: example built against the installed package agrees with the CLI")
PY
