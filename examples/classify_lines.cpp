// classify_lines: load a model folder and classify (or embed) lines of text with the
// linformer library.
//
//   classify_lines MODEL_DIR [--embed] < texts.txt
//
// For a finetuned classifier (a folder with labels.json) each line gets its label and class
// probabilities; with --embed, or for a model without labels, its mean-pooled sentence vector.
// One JSON object per input line on stdout.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3 || (argc == 3 && std::string(argv[2]) != "--embed")) {
    std::fprintf(stderr, "usage: %s MODEL_DIR [--embed] < texts.txt\n", argv[0]);
    return 2;
  }
  try {
    // Model, tokenizer and (when present) labels.json with how the classifier encodes text.
    lf::ClassifierBundle cb = lf::load_classifier(argv[1], /*need_labels=*/false);
    const bool embed = argc == 3 || !cb.has_labels();
    const int64_t max_len = cb.task.max_len > 0 ? cb.task.max_len : cb.model->config().max_len;

    std::vector<std::string> lines;
    std::vector<std::vector<int32_t>> seqs;  // <s> tokens </s>, cut to max_len
    for (std::string line; std::getline(std::cin, line);) {
      if (line.empty()) continue;
      seqs.push_back(lf::encode_example(*cb.tokenizer, line, "", /*pair=*/false, max_len,
                                        cb.task.truncate, cb.task.lowercase));
      lines.push_back(line);
    }
    const int64_t batch_size = 16;  // sequences per forward pass, padded to the longest
    nlohmann::json out;
    if (embed) {
      std::vector<float> mean;  // [n, D]
      lf::embed_sequences(*cb.model, seqs, batch_size, nullptr, &mean);
      const int64_t D = cb.model->config().d_model;
      for (size_t i = 0; i < lines.size(); ++i) {
        out = {{"text", lines[i]},
               {"mean", std::vector<float>(mean.begin() + i * D, mean.begin() + (i + 1) * D)}};
        std::printf("%s\n", out.dump().c_str());
      }
    } else {
      const std::vector<float> probs = lf::predict_probs(*cb.model, seqs, batch_size);  // [n, C]
      const int64_t C = cb.labels.size();
      for (size_t i = 0; i < lines.size(); ++i) {
        const float* p = probs.data() + i * C;
        int64_t best = 0;
        out = {{"text", lines[i]}, {"probs", nlohmann::json::object()}};
        for (int64_t c = 0; c < C; ++c) {
          out["probs"][cb.labels.names[c]] = p[c];
          if (p[c] > p[best]) best = c;
        }
        out["label"] = cb.labels.names[best];
        std::printf("%s\n", out.dump().c_str());
      }
    }
  } catch (const lf::Error& e) {  // bad input: the message names the problem
    std::fprintf(stderr, "classify_lines: %s\n", e.what());
    return 1;
  }
  return 0;
}
