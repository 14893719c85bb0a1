// The parameter table: every tensor of a model, its checkpoint name, shape, place in the flat
// parameter buffer and how it starts (the layers bind their weights through it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "linformer/config.h"

namespace lf {

enum class Init { normal, zeros, ones, proj_normal, proj_mean, conv_mean };

struct ParamInfo {
  std::string name;  // Hugging Face RoBERTa name (see docs/checkpoint.md)
  std::vector<int64_t> shape;
  size_t offset = 0;  // into the flat parameter buffer, in floats
  size_t numel = 0;
  Init init = Init::normal;
  bool decay = true;        // false for biases and LayerNorm parameters
  bool projection = false;  // a Linformer projection (E/F or conv kernel): its own lr scale
  // Where the next tensor may start: every tensor is 64-byte aligned in the flat buffer.
  size_t padded_end() const { return offset + (numel + 15) / 16 * 16; }
};

// The parameter table for a config, in a fixed order.
std::vector<ParamInfo> param_table(const Config& cfg);

// How inference (train = false) computes standard attention; all three give the same
// function (to float rounding), training is unaffected, Linformer attention ignores it.
// The default is default_exact_attention().
//  tiled: per (sequence, head), one N x N score tile per thread.
//  streaming: the online softmax over key blocks (the FlashAttention idea), O(rows x block)
//    workspace whatever N is.
//  materialized: the textbook layout of PyTorch's and fairseq's attention, the paper's
//    baseline: the [B, H, N, N] probabilities of the whole batch are held at once.
enum class ExactAttention { tiled, streaming, materialized };
// A model's default: streaming where this build has its own streaming kernel (AVX2 + FMA
// without AVX-512: faster than tiled at every length measured, 1.08-1.5x from n = 512 to
// 4096, docs/design.md), else tiled.
ExactAttention default_exact_attention();

}  // namespace lf
