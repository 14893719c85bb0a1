#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/run.h"

namespace lf::cli {

void add_evaluate(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "evaluate",
      "Evaluate a classifier (a folder written by `linformer finetune`, e.g. RUN/best) on\n"
      "labelled data: accuracy, F1 (binary: of the positive class, label 1 / duplicate /\n"
      "positive; more classes: macro), precision, recall, loss and the confusion matrix.");
  cmd->footer(
      "The data format is recognised from the header columns, as in finetune; a folder reads\n"
      "the aclImdb layout (a root folder selects its test/ split). The JSON report goes to\n"
      "--json FILE, or to stdout when --json is not given; a readable summary goes to stderr.\n"
      "Confusion rows are true labels, columns predicted labels.\n"
      "Example: linformer evaluate --model runs/sst2/best --data sst2/dev.tsv --json dev.json");
  struct Opts {
    ModelRunOptions run;
    std::string data, json_out;
    int64_t max_examples = 0;
    bool quiet = false;
  };
  auto o = std::make_shared<Opts>();
  o->run.batch_size = 64;
  add_model_run_options(cmd, &o->run, "Classifier folder (with its tokenizer and labels.json)",
                        "Tokens per example (default: the length the model was finetuned with)",
                        "Examples per batch");
  cmd->add_option("--data", o->data, "Labelled data: TSV with a header, or aclImdb folder")
      ->required();
  cmd->add_option("--json", o->json_out, "Write the JSON report here (default: stdout)");
  cmd->add_option("--max-examples", o->max_examples, "Evenly spread subset (0: all)")
      ->capture_default_str()
      ->check(cli::in_range(0, 1e15));
  cmd->add_flag("--quiet", o->quiet, "No summary on stderr");
  cmd->callback([o] {
    check_not_an_input(o->json_out, "evaluate: --json",
                       {{"--data", o->data}, {"--model", o->run.model}});
    Stopwatch clock;
    int64_t max_len = 0;
    const ClassifierBundle cb = load_model_to_run(o->run, true, &max_len);
    ReadOptions ro;
    ro.bad_rows = o->run.policy();
    ro.require_labels = true;
    ro.split = "test";
    ro.max_examples = o->max_examples;
    ClassifyData d = read_classify_data(o->data, ro);
    LF_CHECK(d.pairs == cb.task.pairs, o->data, " holds ", d.pairs ? "sentence pairs" : "single texts",
             " but the model was trained on ", cb.task.pairs ? "sentence pairs" : "single texts");
    const std::vector<int32_t> gold = assign_labels(d, cb.labels, ro.bad_rows);
    const auto seqs = encode_all(*cb.tokenizer, d, max_len, cb.task.truncate,
                               cb.task.lowercase);
    const std::vector<float> probs = predict_probs(*cb.model, seqs, o->run.batch_size, true);
    const ClassifyMetrics m = compute_metrics(probs, gold, cb.labels.size(), cb.labels.positive);
    nlohmann::json j = m.to_json(cb.labels);
    j["model"] = o->run.model;
    j["data"] = o->data;
    j["format"] = d.format;
    j["bad_rows"] = d.bad_rows;
    j["max_len"] = max_len;
    j["seconds"] = clock.seconds();
    j["activation_bytes"] = cb.model->activation_bytes();
    j["compute"] = compute_type_name(cb.model->compute_type());
    if (o->json_out.empty() || o->json_out == "-")
      std::printf("%s\n", j.dump(2).c_str());
    else
      write_file_atomic(o->json_out, j.dump(2) + "\n");
    if (o->quiet) return;
    if (d.bad_rows) {
      std::fprintf(stderr, "skipped %lld bad row(s)\n", static_cast<long long>(d.bad_rows));
      for (const std::string& msg : d.bad_messages) std::fprintf(stderr, "  %s\n", msg.c_str());
    }
    std::fprintf(stderr, "%lld examples (%s format) in %s: accuracy %.2f%%, %s F1 %.2f%%, loss %.4f\n",
                 static_cast<long long>(m.count), d.format.c_str(),
                 format_duration(clock.seconds()).c_str(), 100 * m.accuracy,
                 cb.labels.positive >= 0 ? "binary" : "macro", 100 * m.f1, m.loss);
    size_t w = 9;
    for (const std::string& n : cb.labels.names) w = std::max(w, n.size() + 1);
    std::fprintf(stderr, "%-*s", static_cast<int>(w), "true\\pred");
    for (const std::string& n : cb.labels.names) std::fprintf(stderr, " %*s", static_cast<int>(w), n.c_str());
    std::fprintf(stderr, "\n");
    for (size_t r = 0; r < m.confusion.size(); ++r) {
      std::fprintf(stderr, "%-*s", static_cast<int>(w), cb.labels.names[r].c_str());
      for (int64_t v : m.confusion[r]) std::fprintf(stderr, " %*lld", static_cast<int>(w), static_cast<long long>(v));
      std::fprintf(stderr, "\n");
    }
  });
}

}  // namespace lf::cli
