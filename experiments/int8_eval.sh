#!/usr/bin/env bash
# int8 inference on real models (docs/results.md, "int8 inference on the same classifiers"):
# the PTB-pretrained models and the SST-2 and IMDB classifiers of experiments/cls_runs.sh,
# scored in f32, bf16 (where the CPU has it) and int8. Stages, each resumable (finished runs are
# skipped):
#   experiments/int8_eval.sh models [LINFORMER_BINARY]   the two pretrained models (standard and
#       Linformer k = 128, experiments/ptb_sweep.sh) and their four classifiers (cls_runs.sh)
#   experiments/int8_eval.sh eval [LINFORMER_BINARY]     accuracy, loss and time of each
#       classifier, the embeddings' cosine similarity to f32, the pretrained models' perplexity
# Environment: DATA (../shared/data), PTB (runs/ptb), RUNS (runs/cls), OMP_NUM_THREADS (2),
#   PRECISIONS (the eval stage's, default "f32 bf16 int8"; bf16 is skipped on CPUs without it).
set -euo pipefail
stage=${1:?usage: experiments/int8_eval.sh models|eval [BINARY]}
LF=${2:-build/linformer}
DATA=${DATA:-../shared/data}
PTB=${PTB:-runs/ptb}
RUNS=${RUNS:-runs/cls}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
here=$(dirname "$0")
classifiers="sst2-standard-n512 sst2-lin-k128-n512 imdb-standard-n512-lr3e-4 imdb-lin-k128-n512-meanpool"

case $stage in
models)
  RUNS="standard-n512 lin-k128-n512" DATA=$DATA/ptb "$here/ptb_sweep.sh" "$(dirname "$LF")" "$PTB" 1
  ONLY=$classifiers PTB=$PTB OUT=$RUNS "$here/cls_runs.sh" "$LF"
  ;;
eval)
  echo "eval: not written yet" >&2; exit 1
  ;;
*) echo "unknown stage $stage" >&2; exit 2 ;;
esac
