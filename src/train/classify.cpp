#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/json_read.h"
#include "linformer/checkpoint.h"
#include "linformer/classifier.h"
#include "linformer/error.h"
#include "linformer/file_util.h"

namespace lf {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

json task_to_json(const TaskInfo& t) {
  return json{{"format", t.format},
              {"pairs", t.pairs},
              {"max_len", t.max_len},
              {"truncate", to_string(t.truncate)},
              {"metric", t.metric},
              {"lowercase", t.lowercase}};
}

TaskInfo task_from_json(const json& j) {
  TaskInfo t;
  t.format = j.value("format", std::string("tsv"));
  t.pairs = j.value("pairs", false);
  t.max_len = j.value("max_len", int64_t{0});
  t.truncate = parse_truncate(j.value("truncate", std::string("head")));
  t.metric = j.value("metric", std::string("accuracy"));
  t.lowercase = j.value("lowercase", false);
  return t;
}

}  // namespace

void save_labels(const std::string& dir, const LabelMap& labels, const TaskInfo& task) {
  const json j{{"labels", labels.to_json()}, {"task", task_to_json(task)}};
  write_file_atomic((fs::path(dir) / "labels.json").string(), j.dump(2) + "\n");
}

ClassifierBundle load_classifier(const std::string& dir, bool need_labels) {
  LF_CHECK(fs::is_directory(dir), "model folder ", dir, " does not exist");
  LF_CHECK(!Tokenizer::files_in(dir).empty(),
           dir, " has no tokenizer (tokenizer.model, tokenizer.json, vocab.json + merges.txt or "
           "vocab.txt: a folder written by `linformer finetune`, `linformer pretrain` (RUN/model) "
           "or `linformer init --from` holds one)");
  ClassifierBundle b;
  const fs::path lj = fs::path(dir) / "labels.json";
  if (fs::exists(lj)) {
    json j;
    try {
      j = read_json_file(lj.string());
      b.labels = LabelMap::from_json(j.at("labels"));
      if (j.contains("task")) b.task = task_from_json(j.at("task"));
    } catch (const json::exception& e) {
      fail(lj.string(), ": ", e.what());
    }
  } else {
    LF_CHECK(!need_labels, dir, " has no labels.json: it is not a classifier (train one with "
                                "`linformer finetune`)");
  }
  LoadOptions lo;
  lo.init_missing = !b.has_labels();  // a classifier must be complete
  b.model = load_model(dir, lo);
  b.tokenizer = std::make_unique<Tokenizer>(dir);
  const Config& cfg = b.model->config();
  LF_CHECK(b.tokenizer->vocab_size() <= cfg.vocab_size, dir, ": the tokenizer has ",
           b.tokenizer->vocab_size(), " pieces but the model only ", cfg.vocab_size);
  if (b.has_labels())
    LF_CHECK(b.labels.size() == cfg.num_classes, lj.string(), " names ", b.labels.size(),
             " classes but the model's num_classes is ", cfg.num_classes);
  if (b.task.max_len <= 0 || b.task.max_len > cfg.max_len) b.task.max_len = cfg.max_len;
  return b;
}

void save_classifier_folder(Model& model, const std::string& tokenizer_path,
                            const LabelMap& labels, const TaskInfo& task, const std::string& dir,
                            const json& extra) {
  const fs::path final_dir(dir);
  const fs::path tmp = final_dir.string() + ".tmp", old = final_dir.string() + ".old";
  std::error_code ec;
  fs::remove_all(tmp, ec);
  save_model(model, tmp.string());
  copy_tokenizer_files(Tokenizer(tokenizer_path), tmp.string());
  save_labels(tmp.string(), labels, task);
  if (!extra.is_null()) write_file_atomic((tmp / "eval.json").string(), extra.dump(2) + "\n");
  fs::remove_all(old, ec);
  if (fs::exists(final_dir)) {
    fs::rename(final_dir, old, ec);
    LF_CHECK(!ec, "cannot rename ", final_dir.string(), ": ", ec.message());
  }
  fs::rename(tmp, final_dir, ec);
  LF_CHECK(!ec, "cannot rename ", tmp.string(), " to ", final_dir.string(), ": ", ec.message());
  fs::remove_all(old, ec);
}

std::vector<float> predict_probs(Model& model, const std::vector<std::vector<int32_t>>& seqs,
                                 int64_t batch_size, bool sort, std::vector<float>* logits_out) {
  const int64_t n = static_cast<int64_t>(seqs.size());
  const int64_t C = model.config().num_classes;
  std::vector<float> probs(n * C);
  if (logits_out) logits_out->assign(n * C, 0.f);
  std::vector<int64_t> lengths(n);
  for (int64_t i = 0; i < n; ++i) lengths[i] = static_cast<int64_t>(seqs[i].size());
  PaddedBatch pb;
  std::vector<float> logits;
  for (const std::vector<int64_t>& which : inference_batches(lengths, batch_size, sort)) {
    make_padded_batch(seqs, which, static_cast<int32_t>(model.config().pad_id), 0, &pb);
    model.forward(Batch{pb.ids.data(), pb.mask.data(), pb.B, pb.N}, false);
    logits.resize(pb.B * C);
    model.cls_logits(logits.data());
    for (int64_t b = 0; b < pb.B; ++b) {
      const float* l = logits.data() + b * C;
      float* p = probs.data() + which[b] * C;
      const float mx = *std::max_element(l, l + C);
      double sum = 0;
      for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(l[c] - mx));
      for (int64_t c = 0; c < C; ++c)
        p[c] = static_cast<float>(std::exp(static_cast<double>(l[c] - mx)) / sum);
      if (logits_out) std::memcpy(logits_out->data() + which[b] * C, l, C * sizeof(float));
    }
  }
  return probs;
}

void embed_sequences(Model& model, const std::vector<std::vector<int32_t>>& seqs,
                     int64_t batch_size, std::vector<float>* cls, std::vector<float>* mean) {
  const int64_t n = static_cast<int64_t>(seqs.size());
  const int64_t D = model.config().d_model;
  if (cls) cls->assign(n * D, 0.f);
  if (mean) mean->assign(n * D, 0.f);
  std::vector<int64_t> lengths(n);
  for (int64_t i = 0; i < n; ++i) lengths[i] = static_cast<int64_t>(seqs[i].size());
  PaddedBatch pb;
  for (const std::vector<int64_t>& which : inference_batches(lengths, batch_size, true)) {
    make_padded_batch(seqs, which, static_cast<int32_t>(model.config().pad_id), 0, &pb);
    model.forward(Batch{pb.ids.data(), pb.mask.data(), pb.B, pb.N}, false);
    const float* h = model.hidden();
    for (int64_t b = 0; b < pb.B; ++b) {
      const float* hb = h + b * pb.N * D;
      if (cls) std::memcpy(cls->data() + which[b] * D, hb, D * sizeof(float));
      if (mean) {
        const int64_t len = lengths[which[b]];
        std::vector<double> acc(D, 0.0);
        for (int64_t t = 0; t < len; ++t)
          for (int64_t j = 0; j < D; ++j) acc[j] += hb[t * D + j];
        float* out = mean->data() + which[b] * D;
        for (int64_t j = 0; j < D; ++j) out[j] = static_cast<float>(acc[j] / std::max<int64_t>(len, 1));
      }
    }
  }
}

ClassifyMetrics compute_metrics(const std::vector<float>& probs, const std::vector<int32_t>& gold,
                                int64_t C, int32_t positive) {
  ClassifyMetrics m;
  const int64_t n = static_cast<int64_t>(gold.size());
  LF_CHECK(static_cast<int64_t>(probs.size()) == n * C, "metrics: ", probs.size(),
           " probabilities for ", n, " examples of ", C, " classes");
  m.count = n;
  m.confusion.assign(C, std::vector<int64_t>(C, 0));
  int64_t correct = 0;
  double loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* p = probs.data() + i * C;
    const int64_t pred = std::max_element(p, p + C) - p;
    ++m.confusion[gold[i]][pred];
    correct += pred == gold[i];
    loss -= std::log(std::max(static_cast<double>(p[gold[i]]), 1e-12));
  }
  m.accuracy = n ? static_cast<double>(correct) / n : 0.0;
  m.loss = n ? loss / n : 0.0;
  m.per_class_f1.assign(C, 0.0);
  std::vector<double> prec(C), rec(C);
  for (int64_t c = 0; c < C; ++c) {
    int64_t tp = m.confusion[c][c], fp = 0, fn = 0;
    for (int64_t o = 0; o < C; ++o)
      if (o != c) {
        fp += m.confusion[o][c];
        fn += m.confusion[c][o];
      }
    prec[c] = tp + fp ? static_cast<double>(tp) / (tp + fp) : 0.0;
    rec[c] = tp + fn ? static_cast<double>(tp) / (tp + fn) : 0.0;
    m.per_class_f1[c] = prec[c] + rec[c] > 0 ? 2 * prec[c] * rec[c] / (prec[c] + rec[c]) : 0.0;
  }
  if (positive >= 0 && positive < C) {
    m.f1 = m.per_class_f1[positive];
    m.precision = prec[positive];
    m.recall = rec[positive];
  } else {
    double s = 0;
    for (double f : m.per_class_f1) s += f;
    m.f1 = C ? s / C : 0.0;
  }
  return m;
}

json ClassifyMetrics::to_json(const LabelMap& labels) const {
  json j{{"count", count}, {"accuracy", accuracy}, {"loss", loss}, {"f1", f1},
         {"labels", labels.names}, {"confusion", confusion}};
  if (labels.positive >= 0 && labels.positive < labels.size()) {
    j["f1_kind"] = "binary";
    j["positive_label"] = labels.names[labels.positive];
    j["precision"] = precision;
    j["recall"] = recall;
  } else {
    j["f1_kind"] = "macro";
  }
  json pc = json::object();
  for (size_t c = 0; c < per_class_f1.size() && c < labels.names.size(); ++c)
    pc[labels.names[c]] = per_class_f1[c];
  j["per_class_f1"] = pc;
  j["confusion_rows"] = "true label";
  j["confusion_columns"] = "predicted label";
  return j;
}

}  // namespace lf
