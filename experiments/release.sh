#!/usr/bin/env bash
# The released models (docs/models.md): the ablation that chose linformer-mini's attention, the
# corpus and tokenizer, the two pretrainings (linformer-mini and its standard twin
# standard-mini), the conversion to linformer-mini-4k, the finetunings that measure parity, and
# the release folders. Every stage is resumable: pretraining and finetuning stop after
# TIME_LIMIT seconds with a checkpoint and continue exactly when the same command runs again;
# finished runs are skipped.
#
#   experiments/release.sh STAGE [LINFORMER_BINARY]      (default build/linformer)
#     ablation   short pretrainings (ABL_TOKENS) of Linformer variants and the standard model on
#                the 10M-word corpus of experiments/build_corpus.sh, each finetuned on IMDB;
#                ABL_MODELS picks some of them (two lanes can run side by side)
#     corpus     experiments/build_release_corpus.sh into CORPUS, and the release tokenizer
#     pretrain   MODELS (default "standard-mini linformer-mini") on TOKENS tokens each
#     convert    linformer-mini-4k: standard-mini's folder made a Linformer of max_len 4096
#                (init --from, positions copied), then CONVERT_TOKENS of pretraining at n 4096
#     finetune   every finished model on SST-2 and IMDB (n 512; linformer-mini-4k on whole
#                reviews), seeds SEEDS, one recipe for all; each scored with `evaluate`
#     release    each finished model as a release folder RELEASE_DIR/NAME (models/NAME): the
#                weights stored in bf16 (experiments/export_model.py), config, tokenizer, the
#                held-out test perplexity of the f32 weights and of the bf16 copy (what the
#                storage costs; n 512 to 4096 for linformer-mini-4k), and the model card
#                written from the run's files (experiments/model_card.py), checked by
#                scripts/check_model_card.py
#     save       the newest checkpoint of each pretraining run, with what its resume needs
#                (run arguments, config, tokenizer, metrics, log, the corpus's checksums), into
#                STATE (experiments/release-state), to be committed: a machine that comes back
#                without runs/ restores the runs from there and resumes them. The checkpoint is
#                kept in experiments/state_pack.py's compact form (f32 weights, AdamW's second
#                moment in bf16, no first moment: ~36 MB a model instead of ~72), so that a
#                save replacing the last one stays small in git; such a resume is not bitwise
#                the uninterrupted run (docs/models.md gives the measured difference)
#     archive    the runs' small result files into experiments/results/release
# Environment: DATA (../shared/data), OUT (runs/release), CORPUS (runs/corpus-release),
#   TIME_LIMIT (seconds per call; 0: none), TOKENS (300000000), ABL_TOKENS (3000000),
#   PRECISION (auto: bf16 where this CPU runs bf16 products faster, AMD Zen 4/5 or AMX, else
#   f32; given to every call, a resumed run included, so a run moved to another CPU continues
#   in that CPU's faster precision; sessions.tsv records what each call ran),
#   LIN_K, LIN_SHARING, LIN_PROJECTION (linformer-mini's attention: 128, headwise, linear, as
#   the ablation chose), IMDB_TRAIN (the ablation's IMDB training reviews, 5000),
#   OMP_NUM_THREADS (threads per run; 1 when two runs share the two cores), CONVERT_TOKENS
#   (30000000), CONVERT_K (256), SEEDS ("1 2 3"), EPOCHS (2), MAX_TRAIN (finetuning examples;
#   0: all; a small number rehearses the finetune stage quickly), RELEASE_DIR (models).
set -euo pipefail
stage=${1:?usage: experiments/release.sh ablation|corpus|pretrain|convert|finetune|release|save|archive [BINARY]}
LF=${2:-build/linformer}
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/release}
CORPUS=${CORPUS:-runs/corpus-release}
TIME_LIMIT=${TIME_LIMIT:-0}
TOKENS=${TOKENS:-300000000}
ABL_TOKENS=${ABL_TOKENS:-3000000}
PRECISION=${PRECISION:-auto}
MODELS=${MODELS:-standard-mini linformer-mini}
ABL_MODELS=${ABL_MODELS-standard lin-layerwise lin-headwise lin-kv lin-layerwise-pool}
STATE=${STATE:-experiments/release-state}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
prec=(--precision "$PRECISION")
mkdir -p "$OUT"

# The released size: BERT-Mini (4 layers, d 256, 4 heads, d_ff 1024), n = 512.
config() {  # NAME ATTENTION N K SHARING [PROJECTION]: a config file of the released size
  local f=$OUT/configs/$1.json
  mkdir -p "$OUT/configs"
  printf '{"max_len": %s, "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_layers": 4, "attention": "%s", "k": %s, "sharing": "%s", "projection": "%s", "dropout": 0.1, "attention_dropout": 0.1}\n' \
    "$3" "$2" "$4" "$5" "${6:-linear}" > "$f"
  echo "$f"
}

# finished RUN: the pretraining run reached its last step.
finished() {
  local run=$1 steps last
  [[ -d "$run/model" && -f "$run/train_args.json" ]] || return 1
  steps=$(grep -o '"steps": *[0-9]*' "$run/train_args.json" | grep -o '[0-9]*$')
  last=$(ls "$run/checkpoints" | grep -o '^step-[0-9]*$' | sort | tail -n 1 | grep -o '[0-9]*$')
  (( 10#${last:-0} >= steps ))
}

# pretrain RUN CORPUS_DIR TOKENIZER TOKENS BATCH ARGS...: one MLM pretraining at n = 512,
# resumed if begun. Checkpoints every ~4M tokens, so a lost machine costs minutes, not hours.
pretrain() {
  local run=$1 corpus=$2 tok=$3 tokens=$4 batch=$5; shift 5
  restore "$run" "$corpus"
  if finished "$run"; then
    echo "$(basename "$run"): done"
  elif [[ -f "$run/train_args.json" ]]; then
    session "$run"
    "$LF" pretrain --out "$run" --resume --time-limit "$TIME_LIMIT" "${prec[@]}" 2>&1 |
      tee -a "$run.log"
  else
    mkdir -p "$run"
    session "$run"
    local steps=$(( (tokens + batch * 512 - 1) / (batch * 512) ))
    local every=$(( steps / 40 > 50 ? steps / 40 : 50 ))
    mkdir -p "$(dirname "$run")"
    "$LF" pretrain --train "$corpus/train.txt" --valid "$corpus/valid.txt" --tokenizer "$tok" \
      --cache-dir "$(dirname "$run")/cache" --out "$run" --seq-len 512 --batch-size "$batch" \
      --steps "$steps" --lr 5e-4 --warmup-steps $((steps / 50)) --eval-every "$every" \
      --eval-batches 40 --checkpoint-every $(( 4000000 / (batch * 512) < steps / 4 ? 4000000 / (batch * 512) : steps / 4 + 1 )) --log-every 50 --seed 1 \
      --time-limit "$TIME_LIMIT" "${prec[@]}" "$@" 2>&1 | tee "$run.log"
  fi
  if finished "$run" && [[ ! -f "$run/perplexity.json" ]]; then
    "$LF" perplexity --model "$run/model" --text "$corpus/valid.txt" --seq-len 512 --seed 1 \
      --quiet --json-out "$run/perplexity.json" >/dev/null
  fi
}

# session RUN: one line per call in RUN/sessions.tsv (the model card's hardware and time): when,
# the CPU, the kernels and oneDNN path it runs, the precision, threads, the step it starts at.
session() {
  local run=$1 f=$1/sessions.tsv step cpu info kernels precision
  [[ -f "$f" ]] || printf 'started\tcpu\tkernels\tprecision\tthreads\tfrom_step\n' > "$f"
  step=$(cat "$run/checkpoints/latest" 2>/dev/null | grep -o '[0-9]*$' || true)
  cpu=$(lscpu | sed -n 's/^Model name: *//p' | head -1)
  info=$("$LF" info 2>/dev/null)
  kernels=$(sed -n 's/^cpu: kernels \([a-z0-9]*\).*/\1/p; s/^cpu: oneDNN.* \([a-z0-9_]*\)$/oneDNN \1/p' <<<"$info" | paste -sd' ')
  precision=$PRECISION  # what auto runs here
  [[ $precision == auto ]] && precision=$(sed -n 's/^cpu: --precision auto runs \([a-z0-9]*\).*/\1/p' <<<"$info")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$(date -u +%FT%TZ)" "$cpu" "$kernels" "$precision" \
    "$OMP_NUM_THREADS" "$((10#${step:-0}))" >> "$f"
}

# experiments/state_pack.py (the saved state's compact form) reads safetensors with numpy.
need_numpy() {
  /usr/bin/python3 -c 'import numpy' 2>/dev/null || { apt-get update && apt-get install -y python3-numpy; }
}

# corpus_sums CORPUS: the checksums of the corpus a run reads (its data order follows them).
corpus_sums() { (cd "$1" && sha256sum train.txt valid.txt); }

# restore RUN CORPUS: a run saved in STATE and absent from RUN is copied back, after checking
# that the corpus is byte for byte the one it was trained on.
restore() {
  local run=$1 corpus=$2 saved=$STATE/$(basename "$1")
  [[ -f "$run/train_args.json" || ! -f "$saved/train_args.json" ]] && return 0
  if ! diff <(corpus_sums "$corpus") "$saved/corpus.sha256" >/dev/null; then
    echo "release.sh: $corpus differs from the corpus $saved was trained on" \
      "($saved/corpus.sha256); rebuild it with experiments/build_release_corpus.sh" >&2
    exit 1
  fi
  mkdir -p "$run/checkpoints"
  cp "$saved"/{train_args.json,config.json,tokenizer.model,metrics.jsonl} "$run/"
  [[ -f "$saved/sessions.tsv" ]] && cp "$saved/sessions.tsv" "$run/"
  local ckpt
  ckpt=$(cat "$saved/checkpoints/latest")
  if [[ -f "$saved/checkpoints/$ckpt/optimizer-v.bf16.safetensors" ]]; then
    need_numpy
    experiments/state_pack.py unpack "$saved/checkpoints/$ckpt" "$run/checkpoints/$ckpt"
  else  # saved whole (saves before the compact form)
    cp -r "$saved/checkpoints/$ckpt" "$run/checkpoints/"
  fi
  cp "$saved/checkpoints/latest" "$run/checkpoints/"
  [[ -f "$saved/log" ]] && cp "$saved/log" "$run.log"
  echo "release.sh: restored $run from $saved ($(cat "$saved/checkpoints/latest"))"
}

stage_convert() {
  local std=$OUT/pre/standard-mini init=$OUT/pre/linformer-mini-4k-init
  finished "$std" || { echo "convert: standard-mini is not pretrained yet" >&2; return 0; }
  [[ -f "$init/model.safetensors" ]] ||
    "$LF" init --from "$std/model" --set attention=linformer --set max_len=4096 \
      --set k="${CONVERT_K:-256}" --set sharing="${LIN_SHARING:-headwise}" \
      --set projection_init=mean_pool \
      --out "$init"
  local tokens=${CONVERT_TOKENS:-30000000} run=$OUT/pre/linformer-mini-4k
  restore "$run" "$CORPUS"
  if finished "$run"; then
    echo "linformer-mini-4k: done"
  elif [[ -f "$run/train_args.json" ]]; then
    session "$run"
    "$LF" pretrain --out "$run" --resume --time-limit "$TIME_LIMIT" "${prec[@]}" 2>&1 | tee -a "$run.log"
  else
    mkdir -p "$run"
    session "$run"
    local steps=$(( (tokens + 4 * 4096 - 1) / (4 * 4096) ))
    "$LF" pretrain --init-from "$init" --train "$CORPUS/train.txt" --valid "$CORPUS/valid.txt" \
      --cache-dir "$OUT/pre/cache" --out "$run" --seq-len 4096 --batch-size 4 \
      --steps "$steps" --lr 2e-4 --warmup-steps $((steps / 50)) --eval-every $((steps / 20 + 1)) \
      --eval-batches 10 --checkpoint-every $(( 4000000 / (4 * 4096) )) --log-every 20 --seed 1 \
      --time-limit "$TIME_LIMIT" "${prec[@]}" 2>&1 | tee "$run.log"
  fi
  if finished "$run" && [[ ! -f "$run/perplexity.json" ]]; then
    local n
    for n in 512 1024 2048 4096; do  # the paper's claim: about the same perplexity for every n
      "$LF" perplexity --model "$run/model" --text "$CORPUS/valid.txt" --seq-len "$n" --seed 1 \
        --quiet --json-out "$run/perplexity-n$n.json" >/dev/null
    done
    cp "$run/perplexity-n4096.json" "$run/perplexity.json"
  fi
}

# One finetuning recipe for every released model: AdamW lr 1e-4 (6% warm-up, linear decay),
# EPOCHS epochs, the first token's head, dropout as pretrained; SST-2 at 64 tokens, batch 32;
# IMDB (all 20,000 training reviews) head+tail to 512 tokens, batch 16, or whole reviews up to
# 4096 tokens for linformer-mini-4k (batch 4 x 4). Scored on SST-2 dev / IMDB val.
stage_finetune() {
  local m seed run epochs=${EPOCHS:-2} few=()
  (( ${MAX_TRAIN:-0} > 0 )) && few=(--max-train "$MAX_TRAIN")
  for m in standard-mini linformer-mini linformer-mini-4k; do
    finished "$OUT/pre/$m" || { echo "finetune: $m is not pretrained yet"; continue; }
    for seed in ${SEEDS:-1 2 3}; do
      run=$OUT/cls/sst2-$m-s$seed
      cls "$run" "$DATA/sst2/dev.tsv" --init-from "$OUT/pre/$m/model" \
        --train "$DATA/sst2/train.tsv" --max-len 64 --batch-size 32 --epochs "$epochs" \
        --lr 1e-4 --seed "$seed" "${few[@]}"
      run=$OUT/cls/imdb-$m-s$seed
      if [[ $m == *-4k ]]; then
        cls "$run" "$DATA/imdb/val.tsv" --init-from "$OUT/pre/$m/model" \
          --train "$DATA/imdb/train.tsv" --max-len 4096 --truncate head+tail --batch-size 4 \
          --grad-accum 4 --epochs "$epochs" --lr 1e-4 --seed "$seed" "${few[@]}"
      else
        cls "$run" "$DATA/imdb/val.tsv" --init-from "$OUT/pre/$m/model" \
          --train "$DATA/imdb/train.tsv" --max-len 512 --truncate head+tail --batch-size 16 \
          --epochs "$epochs" --lr 1e-4 --seed "$seed" "${few[@]}"
      fi
    done
  done
}

# cls RUN DEV ARGS...: a finetuning run (resumed if begun), then `evaluate` on DEV.
cls() {
  local run=$1 dev=$2; shift 2
  [[ -f "$run/eval.json" ]] && { echo "$(basename "$run"): done"; return 0; }
  mkdir -p "$(dirname "$run")"
  if [[ -f "$run/train_args.json" ]]; then
    "$LF" finetune --out "$run" --resume --time-limit "$TIME_LIMIT" "${prec[@]}" >>"$run.log" 2>&1
  else
    "$LF" finetune --out "$run" --dev "$dev" --time-limit "$TIME_LIMIT" "${prec[@]}" "$@" \
      >"$run.log" 2>&1
  fi
  [[ -d "$run/model" ]] &&
    "$LF" evaluate --model "$run/best" --data "$dev" --json "$run/eval.json" >>"$run.log" 2>&1
  return 0
}

# The held-out test part's perplexity at each N of "$@" of MODEL_DIR into RUN/test-nN$SUFFIX.json.
test_ppl() {
  local model=$1 run=$2 suffix=$3 n; shift 3
  for n in "$@"; do
    [[ -f "$run/test-n$n$suffix.json" ]] ||
      "$LF" perplexity --model "$model" --text "$CORPUS/test.txt" --seq-len "$n" --seed 1 \
        --quiet --json-out "$run/test-n$n$suffix.json" >/dev/null
  done
}

stage_release() {
  local m run dest tmp ns extra
  need_numpy
  for m in standard-mini linformer-mini linformer-mini-4k; do
    run=$OUT/pre/$m
    finished "$run" || { echo "release: $m is not pretrained yet"; continue; }
    dest=${RELEASE_DIR:-models}/$m
    tmp=$OUT/release-tmp/$m  # written whole, then moved: a stopped call leaves no half folder
    rm -rf "$tmp"
    experiments/export_model.py "$run/model" "$tmp" --dtype bf16
    ns=(512) extra=()
    case $m in
      linformer-mini) extra=(--twin "standard-mini=$OUT/pre/standard-mini") ;;
      linformer-mini-4k)
        ns=(512 1024 2048 4096)
        extra=(--twin "standard-mini=$OUT/pre/standard-mini" --parent standard-mini) ;;
    esac
    rm -f "$run"/test-n*-bf16.json  # the copy is new: measure it again
    test_ppl "$run/model" "$run" "" "${ns[@]}"
    test_ppl "$tmp" "$run" -bf16 "${ns[@]}"
    experiments/model_card.py --name "$m" --run "$run" --out "$tmp" --storage bf16 \
      --finetune "$OUT/cls/*-$m-s*/eval.json" "${extra[@]}"
    scripts/check_model_card.py "$tmp"
    mkdir -p "$(dirname "$dest")"
    rm -rf "$dest" && mv "$tmp" "$dest"
    echo "release: $dest ($(du -sh "$dest" | cut -f1))"
  done
}

stage_save() {
  local run name latest dest
  for run in "$OUT"/pre/*/; do
    run=${run%/}
    name=$(basename "$run")
    [[ -f "$run/checkpoints/latest" ]] || continue
    latest=$(cat "$run/checkpoints/latest")
    dest=$STATE/$name
    rm -rf "$dest.tmp"
    mkdir -p "$dest.tmp/checkpoints"
    cp "$run"/{train_args.json,config.json,tokenizer.model,metrics.jsonl} "$dest.tmp/"
    [[ -f "$run/sessions.tsv" ]] && cp "$run/sessions.tsv" "$dest.tmp/"
    need_numpy
    experiments/state_pack.py pack "$run/checkpoints/$latest" "$dest.tmp/checkpoints/$latest"
    echo "$latest" > "$dest.tmp/checkpoints/latest"
    [[ -f "$run.log" ]] && cp "$run.log" "$dest.tmp/log"
    corpus_sums "$CORPUS" > "$dest.tmp/corpus.sha256"
    rm -rf "$dest" && mv "$dest.tmp" "$dest"
    echo "saved $run ($latest) into $dest ($(du -sh "$dest" | cut -f1))"
  done
  [[ -f "$OUT/tokenizer.model" ]] && cp "$OUT/tokenizer.model" "$STATE/tokenizer.model"
  return 0
}

# imdb RUN MODEL EPOCHS ARGS...: the ablation's IMDB finetuning (n 512, head+tail) and its
# evaluation (cls).
imdb() {
  local run=$1 model=$2 epochs=$3; shift 3
  cls "$run" "$DATA/imdb/val.tsv" --init-from "$model" --train "$DATA/imdb/train.tsv" \
    --max-train "${IMDB_TRAIN:-5000}" --max-len 512 --truncate head+tail --epochs "$epochs" \
    --batch-size 16 --lr 1e-4 --seed 1 "$@"
}

stage_ablation() {
  local a=$OUT/ablation
  [[ -s "$a/corpus/train.txt" ]] || experiments/build_corpus.sh "$DATA" "$a/corpus"
  [[ -s "$a/tokenizer.model" ]] ||
    "$LF" tokenizer train --input "$a/corpus/train.txt" --out "$a/tokenizer.model" --vocab-size 8192
  local m cfg
  for m in $ABL_MODELS; do
    case $m in
      standard) cfg=$(config abl-standard standard 512 128 layerwise) ;;
      lin-layerwise) cfg=$(config abl-lin-layerwise linformer 512 128 layerwise) ;;
      lin-headwise) cfg=$(config abl-lin-headwise linformer 512 128 headwise) ;;
      lin-kv) cfg=$(config abl-lin-kv linformer 512 128 kv) ;;
      lin-layerwise-pool) cfg=$(config abl-lin-layerwise-pool linformer 512 128 layerwise mean_pool) ;;
      lin-headwise-pool) cfg=$(config abl-lin-headwise-pool linformer 512 128 headwise mean_pool) ;;
      lin-headwise-k256) cfg=$(config abl-lin-headwise-k256 linformer 512 256 headwise) ;;
      *) echo "unknown ablation model $m" >&2; exit 2 ;;
    esac
    pretrain "$a/pre/$m" "$a/corpus" "$a/tokenizer.model" "$ABL_TOKENS" 8 --config "$cfg"
    finished "$a/pre/$m" && imdb "$a/cls/imdb-$m" "$a/pre/$m/model" 2
  done
  return 0
}

stage_corpus() {
  [[ -s "$CORPUS/train.txt" ]] || experiments/build_release_corpus.sh "$CORPUS"
  # The corpus the released models are trained on: a different build would change their data.
  if [[ -f "$STATE/corpus.sha256" ]] && ! diff <(corpus_sums "$CORPUS") "$STATE/corpus.sha256" >/dev/null; then
    echo "release.sh: $CORPUS differs from the release corpus ($STATE/corpus.sha256);" \
      "rebuild it with experiments/build_release_corpus.sh" >&2
    exit 1
  fi
  # One SentencePiece unigram tokenizer for every released model, trained on the training part.
  # The tokenizer saved with the runs (stage save) wins: a retrained one could differ.
  [[ -s "$OUT/tokenizer.model" || ! -s "$STATE/tokenizer.model" ]] ||
    cp "$STATE/tokenizer.model" "$OUT/tokenizer.model"
  [[ -s "$OUT/tokenizer.model" ]] ||
    "$LF" tokenizer train --input "$CORPUS/train.txt" --out "$OUT/tokenizer.model" \
      --vocab-size 8192 --max-sentences 300000
}

stage_pretrain() {
  local m
  for m in $MODELS; do
    case $m in
      standard-mini)
        pretrain "$OUT/pre/$m" "$CORPUS" "$OUT/tokenizer.model" "$TOKENS" 16 \
          --config "$(config "$m" standard 512 128 layerwise)" ;;
      linformer-mini)
        pretrain "$OUT/pre/$m" "$CORPUS" "$OUT/tokenizer.model" "$TOKENS" 16 \
          --config "$(config "$m" linformer 512 "${LIN_K:-128}" "${LIN_SHARING:-headwise}" "${LIN_PROJECTION:-linear}")" ;;
      *) echo "unknown model $m" >&2; exit 2 ;;
    esac
  done
}

stage_archive() {
  local dest=${ARCHIVE:-experiments/results/release} f rel
  mkdir -p "$dest"
  for f in "$OUT"/ablation/corpus/recipe.tsv "$CORPUS"/recipe.tsv "$OUT"/configs/*.json \
           "$OUT"/{,ablation/}{pre,cls}/*.log \
           "$OUT"/{,ablation/}pre/*/{train_args.json,metrics.jsonl,perplexity.json} \
           "$OUT"/{,ablation/}cls/*/{train_args.json,metrics.jsonl,eval.json}; do
    [[ -f "$f" ]] || continue
    case $f in "$CORPUS"/*) rel=corpus/${f#"$CORPUS"/} ;; *) rel=${f#"$OUT"/} ;; esac
    mkdir -p "$dest/$(dirname "$rel")"
    cp "$f" "$dest/$rel"
  done
  echo "archived $OUT into $dest"
}

case $stage in
  ablation) stage_ablation ;;
  corpus) stage_corpus ;;
  pretrain) stage_corpus; stage_pretrain ;;
  convert) stage_corpus; stage_convert ;;
  finetune) stage_finetune ;;
  release) stage_release ;;
  save) stage_save ;;
  archive) stage_archive ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
