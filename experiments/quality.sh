#!/usr/bin/env bash
# Quality at convergence (docs/results.md, "Pretraining to convergence"): standard attention
# against Linformer on the same token budget, the projection's initialisation, and
# classification (SST-2, IMDB, IMDB at full length). Every stage is resumable: a stage stops
# after TIME_LIMIT seconds of pretraining or finetuning with a checkpoint, and running the same
# command again continues it (finished runs are skipped).
#
#   experiments/quality.sh STAGE [LINFORMER_BINARY]     (default build/linformer)
#     corpus    the corpus (experiments/build_corpus.sh) and one tokenizer for every model
#     init      projection-initialisation study: short pretraining + perplexity + IMDB accuracy
#     pretrain  the four main models on TOKENS tokens each
#     finetune  SST-2 and IMDB, two seeds, and IMDB at full length (n = 2048)
#     all       everything in order
#     archive   copy the runs' small result files (metrics, perplexities, evaluations, logs) to
#               ARCHIVE (experiments/results/quality), which quality_report.py reads like OUT
# Environment: DATA (../shared/data), OUT (runs/quality), TIME_LIMIT (seconds per call, 0: none),
#   TOKENS (main pretraining budget, 15000000), INIT_TOKENS (init study, 3000000),
#   IMDB_TRAIN (training reviews, 10000), INIT_IMDB_TRAIN (the init study's, 5000),
#   EPOCHS (finetuning epochs on SST-2 and IMDB in the finetune stage, 1; the init study's IMDB
#   runs take 2), INIT (the
#   Linformer init of the main runs, e.g. "--set projection_init=mean_pool", the default since
#   the study; PROJ_LR for its --projection-lr-scale), PRETRAIN_ARGS and FINETUNE_ARGS (added
#   to every new pretraining or finetuning run, e.g. "--bf16"), MODELS (the main models the pretrain and finetune stages
#   run, default all nine: standard-n512 lin-k128-n512 lin-k64-n512 lin-k128-n2048,
#   lin-pool-k128-n512 and lin-pool-k128-n2048 (the references with E fixed to mean pooling),
#   lin-k256-n512 (windows of 2 positions), and lin-k128-n512-elr0.1 and lin-k128-n2048-elr0.1
#   (E learned at a tenth of the other parameters' learning rate, --projection-lr-scale 0.1)),
#   EMPTY_ROWS (mask, the default, or keep: the Linformer finetuning runs with
#   --set mask_empty_rows=false, named with a "-keep" suffix; docs/model.md, "Short sequences"),
#   HEAD (first, the default, or mean: every finetuning run's classifier reads the mean of the
#   real tokens' states, --set classifier_pooling=mean, named with a "-mean" suffix;
#   docs/classification.md, "Training"), TASKS (the finetune stage's tasks, default all three:
#   sst2 imdb full; "full" is IMDB at n = 2048). Runs with EPOCHS other than 1 are named with
#   an "-eEPOCHS" suffix.
# The runs of docs/results.md: every stage with PRETRAIN_ARGS=--bf16 FINETUNE_ARGS=--bf16 (bf16
# training is ~1.4x faster here and its perplexity within 0.2% of f32's, docs/benchmarks.md),
# e.g. OUT=runs/quality TIME_LIMIT=3000 PRETRAIN_ARGS=--bf16 FINETUNE_ARGS=--bf16 \
#        experiments/quality.sh init
# then `pretrain` with INIT and PROJ_LR set from the study, then `finetune`;
# experiments/quality_report.py OUT prints the tables.
set -euo pipefail
stage=${1:?usage: experiments/quality.sh corpus|init|pretrain|finetune|all|archive [BINARY]}
LF=${2:-build/linformer}
DATA=${DATA:-../shared/data}
OUT=${OUT:-runs/quality}
TIME_LIMIT=${TIME_LIMIT:-0}
TOKENS=${TOKENS:-15000000}
INIT_TOKENS=${INIT_TOKENS:-3000000}
IMDB_TRAIN=${IMDB_TRAIN:-10000}
INIT_IMDB_TRAIN=${INIT_IMDB_TRAIN:-5000}
EPOCHS=${EPOCHS:-1}
PROJ_LR=${PROJ_LR:-1}
MODELS=${MODELS:-standard-n512 lin-k128-n512 lin-k64-n512 lin-k128-n2048 lin-pool-k128-n512 lin-pool-k128-n2048 lin-k256-n512 lin-k128-n512-elr0.1 lin-k128-n2048-elr0.1}
EMPTY_ROWS=${EMPTY_ROWS:-mask}
HEAD=${HEAD:-first}
TASKS=${TASKS:-sst2 imdb full}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
mkdir -p "$OUT"
corpus=$OUT/corpus
tok=$OUT/tokenizer.model

# finished RUN: the pretraining run reached its last step (its newest checkpoint is at
# train_args.json's "steps"; a --time-limit stop also writes RUN/model, with the weights so far).
finished() {
  local run=$1 steps last
  [[ -d "$run/model" && -f "$run/train_args.json" ]] || return 1
  steps=$(grep -o '"steps": *[0-9]*' "$run/train_args.json" | grep -o '[0-9]*$')
  last=$(ls "$run/checkpoints" | grep -o '^step-[0-9]*$' | sort | tail -n 1 | grep -o '[0-9]*$')
  (( 10#${last:-0} >= steps ))
}

# pretrain NAME TOKENS N BATCH ARGS...: a pretraining run on the corpus (resumed if begun).
pretrain() {
  local name=$1 tokens=$2 n=$3 batch=$4; shift 4
  local run=$OUT/pre/$name
  if finished "$run"; then
    echo "$name: done"
    [[ -f "$run/perplexity.json" ]] || score "$run" "$n"
    return 0
  fi
  local steps=$(( (tokens + batch * n - 1) / (batch * n) ))
  if [[ -f "$run/train_args.json" ]]; then
    "$LF" pretrain --out "$run" --resume --time-limit "$TIME_LIMIT" 2>&1 | tee -a "$OUT/pre/$name.log"
  else
    mkdir -p "$OUT/pre"
    "$LF" pretrain --train "$corpus/train.txt" --valid "$corpus/valid.txt" --tokenizer "$tok" \
      --cache-dir "$OUT/cache" --out "$run" --seq-len "$n" --batch-size "$batch" \
      --steps "$steps" --lr 5e-4 --warmup-steps $((steps / 20)) --eval-every $((steps / 20)) \
      --eval-batches 40 --checkpoint-every 200 --log-every 50 --seed 1 \
      --time-limit "$TIME_LIMIT" ${PRETRAIN_ARGS:-} "$@" 2>&1 | tee "$OUT/pre/$name.log"
  fi
  if finished "$run"; then score "$run" "$n"; fi
}

# score RUN N: the finished model's perplexity on the validation text with fixed masks.
score() {
  "$LF" perplexity --model "$1/model" --text "$corpus/valid.txt" --seq-len "$2" --seed 1 \
    --quiet --json-out "$1/perplexity.json" >/dev/null
}

# finetune NAME DEV ARGS...: a finetuning run (resumed if begun), then its dev evaluation.
finetune() {
  local name=$1 dev=$2; shift 2
  local run=$OUT/cls/$name
  [[ -f "$run/eval.json" ]] && { echo "$name: done"; return 0; }
  mkdir -p "$OUT/cls"
  if [[ -f "$run/train_args.json" ]]; then
    "$LF" finetune --out "$run" --resume --time-limit "$TIME_LIMIT" >>"$OUT/cls/$name.log" 2>&1
  else
    "$LF" finetune --out "$run" --dev "$dev" --time-limit "$TIME_LIMIT" ${FINETUNE_ARGS:-} "$@" \
      >"$OUT/cls/$name.log" 2>&1
  fi
  if [[ -d "$run/model" ]]; then
    "$LF" evaluate --model "$run/best" --data "$dev" --json "$run/eval.json" >>"$OUT/cls/$name.log" 2>&1
  fi
}

config() {  # ATTENTION N K SHARING: a small model config file (4 layers, d 256)
  local f=$OUT/configs/$1-n$2-k$3-$4.json
  mkdir -p "$OUT/configs"
  printf '{"max_len": %s, "d_model": 256, "n_heads": 4, "d_ff": 1024, "n_layers": 4, "attention": "%s", "k": %s, "sharing": "%s", "dropout": 0.1, "attention_dropout": 0.1}\n' \
    "$2" "$1" "$3" "$4" > "$f"
  echo "$f"
}

imdb() {  # NAME MODEL N EPOCHS BATCH ARGS...: IMDB from a pretrained model
  local name=$1 model=$2 n=$3 epochs=$4 batch=$5; shift 5
  finetune "$name" "$DATA/imdb/val.tsv" --init-from "$model" --train "$DATA/imdb/train.tsv" \
    --max-train "$IMDB_TRAIN" --max-len "$n" --truncate head+tail --epochs "$epochs" \
    --batch-size "$batch" --lr 1e-4 "$@"
}

stage_corpus() {
  [[ -s "$corpus/train.txt" ]] || experiments/build_corpus.sh "$DATA" "$corpus"
  [[ -s "$tok" ]] || "$LF" tokenizer train --input "$corpus/train.txt" --out "$tok" --vocab-size 8192
}

stage_init() {
  local lin; lin=$(config linformer 512 128 layerwise)
  pretrain init-normal "$INIT_TOKENS" 512 8 --config "$lin" --set projection_init=normal
  pretrain init-meanpool "$INIT_TOKENS" 512 8 --config "$lin" --set projection_init=mean_pool
  pretrain init-meanpool-lr0.01 "$INIT_TOKENS" 512 8 --config "$lin" \
    --set projection_init=mean_pool --projection-lr-scale 0.01
  pretrain init-meanpool-frozen "$INIT_TOKENS" 512 8 --config "$lin" \
    --set projection_init=mean_pool --projection-lr-scale 0
  pretrain init-fixed-meanpool "$INIT_TOKENS" 512 8 --config "$lin" --set projection=mean_pool
  for v in normal meanpool meanpool-lr0.01 meanpool-frozen fixed-meanpool; do
    local scale=1
    case $v in meanpool-lr0.01) scale=0.01 ;; meanpool-frozen) scale=0 ;; esac
    finished "$OUT/pre/init-$v" && IMDB_TRAIN=$INIT_IMDB_TRAIN imdb "imdb-init-$v" \
      "$OUT/pre/init-$v/model" 512 2 16 --projection-lr-scale "$scale" --seed 1
  done
  return 0
}

wanted() { [[ " $MODELS " == *" $1 "* ]]; }  # NAME: is NAME among MODELS?
task() { [[ " $TASKS " == *" $1 "* ]]; }      # TASK: is TASK among TASKS?
# plr NAME: the projection learning-rate scale of a model, in pretraining and finetuning:
# 0.1 for the "-elr0.1" models (E learned at a tenth of the others' rate), PROJ_LR otherwise.
plr() { if [[ $1 == *-elr0.1 ]]; then echo 0.1; else echo "$PROJ_LR"; fi; }

stage_pretrain() {
  wanted standard-n512 &&
    pretrain standard-n512 "$TOKENS" 512 8 --config "$(config standard 512 128 layerwise)"
  wanted lin-k128-n512 &&
    pretrain lin-k128-n512 "$TOKENS" 512 8 --config "$(config linformer 512 128 layerwise)" \
      ${INIT:-} --projection-lr-scale "$PROJ_LR"
  wanted lin-k64-n512 &&
    pretrain lin-k64-n512 "$TOKENS" 512 8 --config "$(config linformer 512 64 layerwise)" \
      ${INIT:-} --projection-lr-scale "$PROJ_LR"
  wanted lin-k128-n2048 &&
    pretrain lin-k128-n2048 "$TOKENS" 2048 2 --config "$(config linformer 2048 128 layerwise)" \
      ${INIT:-} --projection-lr-scale "$PROJ_LR"
  wanted lin-k256-n512 &&
    pretrain lin-k256-n512 "$TOKENS" 512 8 --config "$(config linformer 512 256 layerwise)" \
      ${INIT:-} --projection-lr-scale "$PROJ_LR"
  wanted lin-k128-n512-elr0.1 &&
    pretrain lin-k128-n512-elr0.1 "$TOKENS" 512 8 --config "$(config linformer 512 128 layerwise)" \
      ${INIT:-} --projection-lr-scale "$(plr lin-k128-n512-elr0.1)"
  wanted lin-k128-n2048-elr0.1 &&
    pretrain lin-k128-n2048-elr0.1 "$TOKENS" 2048 2 \
      --config "$(config linformer 2048 128 layerwise)" ${INIT:-} \
      --projection-lr-scale "$(plr lin-k128-n2048-elr0.1)"
  wanted lin-pool-k128-n512 &&
    pretrain lin-pool-k128-n512 "$TOKENS" 512 8 --config "$(config linformer 512 128 layerwise)" \
      --set projection=mean_pool
  wanted lin-pool-k128-n2048 &&
    pretrain lin-pool-k128-n2048 "$TOKENS" 2048 2 --config "$(config linformer 2048 128 layerwise)" \
      --set projection=mean_pool
  return 0
}

stage_finetune() {
  # rows/sfx: the Linformer runs' extra arguments and name suffix; head/tag: those every run
  # gets, standard attention included (the head, and the epochs in the name).
  local rows=() sfx="" head=() tag=""
  case $EMPTY_ROWS in
    mask) ;;
    keep) rows=(--set mask_empty_rows=false) sfx=-keep ;;
    *) echo "EMPTY_ROWS must be mask or keep, got $EMPTY_ROWS" >&2; exit 2 ;;
  esac
  case $HEAD in
    first) ;;
    mean) head=(--set classifier_pooling=mean) tag=-mean ;;
    *) echo "HEAD must be first or mean, got $HEAD" >&2; exit 2 ;;
  esac
  [[ $EPOCHS == 1 ]] || tag+=-e$EPOCHS
  rows+=("${head[@]}") sfx+=$tag
  for m in standard-n512 lin-k128-n512 lin-k64-n512 lin-pool-k128-n512 lin-k256-n512 \
           lin-k128-n512-elr0.1; do
    wanted "$m" || continue
    finished "$OUT/pre/$m" || { echo "$m: not pretrained yet"; continue; }
    local r=("${rows[@]}") x=$sfx
    [[ $m == standard-* ]] && r=("${head[@]}") x=$tag  # standard attention has no projected rows
    for seed in 1 2; do
      task sst2 && finetune "sst2-$m$x-s$seed" "$DATA/sst2/dev.tsv" --init-from "$OUT/pre/$m/model" \
        --train "$DATA/sst2/train.tsv" --max-len 64 --epochs "$EPOCHS" --batch-size 32 --lr 1e-4 \
        --projection-lr-scale "$(plr "$m")" --seed "$seed" "${r[@]}"
      task imdb && imdb "imdb-$m$x-s$seed" "$OUT/pre/$m/model" 512 "$EPOCHS" 16 \
        --projection-lr-scale "$(plr "$m")" --seed "$seed" "${r[@]}"
    done
  done
  # Whole reviews (up to 2048 tokens) with Linformer against the standard model truncated to 512.
  for m in lin-k128-n2048 lin-pool-k128-n2048 lin-k128-n2048-elr0.1; do
    task full && wanted "$m" && finished "$OUT/pre/$m" &&
      imdb "imdb-full-$m$sfx" "$OUT/pre/$m/model" 2048 "$EPOCHS" 4 \
        --grad-accum 4 --projection-lr-scale "$(plr "$m")" --seed 1 "${rows[@]}"
  done
  return 0
}

stage_archive() {
  local dest=${ARCHIVE:-experiments/results/quality} f rel
  mkdir -p "$dest"
  [[ -f "$corpus/recipe.tsv" ]] && cp "$corpus/recipe.tsv" "$dest/"
  for f in "$OUT"/pre/*.log "$OUT"/pre/*/{train_args.json,metrics.jsonl,perplexity.json} \
           "$OUT"/cls/*.log "$OUT"/cls/*/{train_args.json,metrics.jsonl,eval.json}; do
    [[ -f "$f" ]] || continue
    rel=${f#"$OUT"/}
    mkdir -p "$dest/$(dirname "$rel")"
    cp "$f" "$dest/$rel"
  done
  echo "archived $OUT into $dest"
}

case $stage in
  corpus) stage_corpus ;;
  init) stage_corpus; stage_init ;;
  pretrain) stage_corpus; stage_pretrain ;;
  finetune) stage_finetune ;;
  all) stage_corpus; stage_init; stage_pretrain; stage_finetune ;;
  archive) stage_archive ;;
  *) echo "unknown stage $stage" >&2; exit 2 ;;
esac
