#!/usr/bin/env bash
# Fixed small runs whose outputs must stay byte-identical across a refactor: pretraining (every
# attention kind and sharing mode, post- and pre-norm, dropout on; f32, and bf16 where the CPU
# runs it; Nystromformer in f32), finetuning from one of them, the spectrum analysis, and
# inference (predict, embed, perplexity) in f32, bf16 and int8, each where the CPU runs it.
# Prints one line per output: its SHA-256 and name (the losses of metrics.jsonl without the
# timings). Run it with the build before and after a change and compare the two listings:
#
#   experiments/same_outputs.sh build-before/linformer /tmp/before > before.txt
#   experiments/same_outputs.sh build/linformer /tmp/after > after.txt
#   diff before.txt after.txt && echo identical
#
# Seeded, one thread (OMP_NUM_THREADS=1 unless set), about 3 minutes on 2 cores.
set -euo pipefail
bin=$(realpath "$1")
out=$2
data=$(cd "$(dirname "$0")/../../shared/data" && pwd)
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
rm -rf "$out" && mkdir -p "$out" && cd "$out"
head -n 3000 "$data/tinyshakespeare/input.txt" | paste -d ' ' - - - - > corpus.txt
cat > base.json <<'EOF'
{"vocab_size": 300, "max_len": 64, "d_model": 32, "n_heads": 4, "d_ff": 64, "n_layers": 2,
 "attention": "linformer", "k": 16, "dropout": 0.1, "attention_dropout": 0.1}
EOF
# The losses and steps of a run's metrics.jsonl (elapsed times and speeds differ every run).
losses() {
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    print({k: v for k, v in r.items() if k in ("step", "split", "loss", "ppl", "lr", "grad_norm", "accuracy")})' "$1"
}
# A JSON result without its timing.
notime() {
  python3 -c 'import json, sys
d = json.load(open(sys.argv[1])); d.pop("seconds", None); print(json.dumps(d, sort_keys=True))' "$1"
}
sum() { sha256sum "$1" | sed "s|  .*|  $2|"; }

precisions=(f32)
runs=(
  "standard|--set attention=standard"
  "headwise-linear|--set sharing=headwise --set projection=linear"
  "kv-mean|--set sharing=kv --set projection=mean_pool"
  "layerwise-conv|--set sharing=layerwise --set projection=conv"
  "none-linear|--set sharing=none --set projection=linear"
  "none-max|--set sharing=none --set projection=max_pool"
  "headwise-prenorm|--set sharing=headwise --set norm=pre"
  "perlayer-k|--set sharing=headwise --set k=[8,16]"
)
# bf16 where this CPU runs it (a one-step run tells).
if "$bin" pretrain --train corpus.txt --config base.json --out probe_bf16 --steps 1 \
     --batch-size 2 --vocab-size 300 --quiet --precision bf16 >/dev/null 2>&1; then
  precisions+=(bf16)
fi
for p in "${precisions[@]}"; do
  for r in "${runs[@]}"; do
    name=${r%%|*}; sets=${r#*|}
    # shellcheck disable=SC2086
    "$bin" pretrain --train corpus.txt --config base.json $sets --out "pre-$p-$name" \
      --steps 12 --batch-size 4 --vocab-size 300 --log-every 2 --eval-every 6 \
      --eval-batches 2 --seed 5 --lr 1e-3 --precision "$p" --quiet > /dev/null
    sum "pre-$p-$name/model/model.safetensors" "pretrain $p $name: model"
    losses "pre-$p-$name/metrics.jsonl" > "pre-$p-$name.losses"
    sum "pre-$p-$name.losses" "pretrain $p $name: losses"
  done
done
# Nystromformer trains in f32 only (no attention dropout); it infers in every precision below.
"$bin" pretrain --train corpus.txt --config base.json --set attention=nystrom --set landmarks=16 \
  --set attention_dropout=0 --out pre-f32-nystrom --steps 12 --batch-size 4 --vocab-size 300 \
  --log-every 2 --eval-every 6 --eval-batches 2 --seed 5 --lr 1e-3 --precision f32 --quiet \
  > /dev/null
sum pre-f32-nystrom/model/model.safetensors "pretrain f32 nystrom: model"
losses pre-f32-nystrom/metrics.jsonl > pre-f32-nystrom.losses
sum pre-f32-nystrom.losses "pretrain f32 nystrom: losses"
head -n 400 "$data/sst2/train.tsv" > train.tsv
head -n 120 "$data/sst2/dev.tsv" > dev.tsv
"$bin" finetune --init-from pre-f32-headwise-linear/model --train train.tsv --dev dev.tsv \
  --out fine --epochs 1 --batch-size 16 --max-len 64 --seed 2 --lr 1e-3 --quiet > /dev/null
sum fine/best/model.safetensors "finetune: best model"
losses fine/metrics.jsonl > fine.losses
sum fine.losses "finetune: losses"
# Inference in each precision this CPU runs (a one-sequence perplexity tells): the classifier's
# predictions, pooled vectors and the masked-LM perplexity of seven attention setups; int8 also
# with its first layer's maps kept f32 (--float-layers).
infer=(f32)
for p in bf16 int8; do
  if "$bin" perplexity --model pre-f32-kv-mean/model --text corpus.txt --max-sequences 1 \
       --precision "$p" --quiet >/dev/null 2>&1; then
    infer+=("$p")
  fi
done
for p in "${infer[@]}"; do
  for opt in "" "--float-layers 0"; do
    [[ -n $opt && $p != int8 ]] && continue
    tag="$p${opt:+ float-layers 0}"
    f=$p${opt:+-fl0}
    # shellcheck disable=SC2086
    "$bin" predict --model fine/best --input dev.tsv --precision "$p" $opt > "predict-$f.jsonl"
    sum "predict-$f.jsonl" "infer $tag: predict"
    # shellcheck disable=SC2086
    "$bin" embed --model pre-f32-kv-mean/model --input corpus.txt --pool both --precision "$p" \
      $opt --out "embed-$f.safetensors" > /dev/null
    sum "embed-$f.safetensors" "infer $tag: embed"
    for m in standard headwise-linear layerwise-conv none-max headwise-prenorm perlayer-k \
      nystrom; do
      # shellcheck disable=SC2086
      "$bin" perplexity --model "pre-f32-$m/model" --text corpus.txt --max-sequences 24 \
        --batch-size 4 --seed 3 --precision "$p" $opt --json --quiet > "ppl-$f-$m.json"
      notime "ppl-$f-$m.json" > "ppl-$f-$m.notime"
      sum "ppl-$f-$m.notime" "infer $tag: perplexity $m"
    done
  done
done
"$bin" spectrum --model pre-f32-standard/model --text corpus.txt --out spectrum --n 64 \
  --sequences 4 --ks 8 16 --quiet > /dev/null
for f in spectrum/*.json; do
  notime "$f" > "$f.notime"
  sum "$f.notime" "spectrum: $(basename "$f")"
done
