// The whole public API of the linformer library in one include.
//
//   model.h, config.h, compute_type.h  the encoder, its configuration, inference precision
//   checkpoint.h, safetensors.h        model folders and tensor files
//   tokenizer.h                        SentencePiece tokenizer with the model's special tokens
//   classifier.h, classify_data.h      classification and embeddings on text; data set readers
//   pretrain.h, finetune.h, optim.h    training runs (masked LM, classification), AdamW settings
//   perplexity.h                       masked-LM perplexity on any text with fixed seeded masks
//   run.h                              run folders: metrics log, checkpoints, timing
//   spectrum.h, bench.h                the paper's measurements: attention spectrum, efficiency
//   error.h                            lf::Error, thrown for bad input with a message naming it
//   file_util.h, plot.h, rng.h         atomic file writes, SVG charts, counter-based randomness
#pragma once

#include "linformer/bench.h"
#include "linformer/checkpoint.h"
#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/finetune.h"
#include "linformer/model.h"
#include "linformer/optim.h"
#include "linformer/perplexity.h"
#include "linformer/plot.h"
#include "linformer/pretrain.h"
#include "linformer/rng.h"
#include "linformer/run.h"
#include "linformer/safetensors.h"
#include "linformer/spectrum.h"
#include "linformer/tokenizer.h"
