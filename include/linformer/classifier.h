// Running a classifier: model folders with a tokenizer and labels, batched padding-masked
// inference, pooled embeddings and the evaluation metrics.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "linformer/classify_data.h"
#include "linformer/model.h"
#include "linformer/tokenizer.h"

namespace lf {

// How a classifier encodes its inputs (stored in labels.json next to the labels).
struct TaskInfo {
  std::string format = "tsv";  // the training data's format
  bool pairs = false;
  int64_t max_len = 0;  // tokens per example (<= the model's max_len)
  Truncate truncate = Truncate::head;
  std::string metric = "accuracy";  // what selected the best checkpoint: accuracy or f1
  bool lowercase = false;           // ASCII-lowercase texts before tokenizing
};

// A model folder ready for inference: config.json, model.safetensors, tokenizer.model and,
// for a classifier, labels.json ({"labels": LabelMap, "task": TaskInfo}).
struct ClassifierBundle {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  LabelMap labels;  // empty names when the folder has no labels.json (e.g. a pretrained model)
  TaskInfo task;
  bool has_labels() const { return !labels.names.empty(); }
};

// Loads DIR (tokenizer: DIR/tokenizer.model; labels.json optional unless need_labels).
ClassifierBundle load_classifier(const std::string& dir, bool need_labels);

// Writes DIR/labels.json atomically.
void save_labels(const std::string& dir, const LabelMap& labels, const TaskInfo& task);

// Copies model, tokenizer and labels into DIR as one complete folder: written under
// DIR.tmp and swapped in by renames, so DIR is always a complete folder (or, after a crash
// between the renames, DIR.old is).
void save_classifier_folder(Model& model, const std::string& tokenizer_path, const LabelMap& labels,
                            const TaskInfo& task, const std::string& dir,
                            const nlohmann::json& extra = nullptr);

// Class probabilities [n, C] (softmax of the logits) for encoded sequences, run in batches of
// batch_size padded to the longest sequence in the batch (sorted by length when sort is true).
// Results do not depend on the batching: padding is masked out.
std::vector<float> predict_probs(Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                 int64_t batch_size, bool sort = true,
                                 std::vector<float>* logits = nullptr);

// Sentence vectors [n, D]: the first-token hidden state (cls) and/or the mean of the hidden
// states over the real (unpadded) tokens, <s> and </s> included (mean). Null outputs are skipped.
void embed_sequences(Model& model, const std::vector<std::vector<int32_t>>& seqs,
                     int64_t batch_size, std::vector<float>* cls, std::vector<float>* mean);

struct ClassifyMetrics {
  int64_t count = 0;
  double accuracy = 0;
  double loss = 0;                   // mean cross-entropy
  double f1 = 0;                     // binary: F1 of the positive class; more classes: macro F1
  double precision = 0, recall = 0;  // of the positive class (binary only)
  std::vector<std::vector<int64_t>> confusion;  // [true][predicted]
  std::vector<double> per_class_f1;
  nlohmann::json to_json(const LabelMap& labels) const;
};

// Metrics from probabilities [n, C] and true ids; positive < 0: macro F1.
ClassifyMetrics compute_metrics(const std::vector<float>& probs, const std::vector<int32_t>& gold,
                                int64_t C, int32_t positive);

}  // namespace lf
