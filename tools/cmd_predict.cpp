#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/file_util.h"

namespace lf::cli {

void add_predict(CLI::App& app) {
  auto* cmd = app.add_subcommand("predict",
                                 "Classify texts with a finetuned model: one JSON line per input,\n"
                                 "  {\"label\": NAME, \"probs\": {NAME: p, ...}}  (plus \"id\" "
                                 "when a TSV has an id/index column).");
  cmd->footer(
      "Input (--input FILE, or - for stdin): a TSV whose header names the text column(s) (e.g.\n"
      "a GLUE test file `index<TAB>sentence`; other columns are ignored), or one text per line\n"
      "(pairs: A<TAB>B). --format auto decides by the first line. Texts are read in chunks,\n"
      "sorted by length and run in padded, padding-masked batches; output keeps the input order.\n"
      "Example: echo 'a gripping , beautiful film' | linformer predict --model runs/sst2/best");
  struct Opts {
    bool bf16 = false;
    std::string model, input = "-", output, format = "auto", bad_rows = "stop";
    int64_t max_len = 0, batch_size = 32, chunk = 4096;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "Classifier folder (with tokenizer.model and labels.json)")
      ->required();
  cmd->add_option("--input", o->input, "Input file, or - for stdin")->capture_default_str();
  cmd->add_option("--output", o->output, "Write the JSON lines here (default: stdout)");
  cmd->add_option("--format", o->format, "auto, tsv (a header line first) or lines (one text per line)")
      ->check(CLI::IsMember({"auto", "tsv", "lines"}))
      ->capture_default_str();
  cmd->add_option("--bad-rows", o->bad_rows, "stop at the first bad row, or skip it (reported on stderr)")
      ->check(CLI::IsMember({"stop", "skip"}))
      ->capture_default_str();
  cmd->add_option("--max-len", o->max_len,
                  "Tokens per example (default: the length the model was finetuned with)")
      ->check(cli::in_range(0, cli::kMaxLen));
  cmd->add_option("--batch-size", o->batch_size, "Examples per batch")
      ->capture_default_str()
      ->check(cli::in_range(1, cli::kMaxCount));
  cli::add_compute_option(cmd, &o->bf16);
  cmd->add_option("--chunk", o->chunk, "Inputs read (and sorted by length) at a time")
      ->capture_default_str()
      ->check(cli::in_range(1, cli::kMaxCount));
  cmd->callback([o] {
    if (o->output != "-")
      check_not_an_input(o->output, "predict: --output",
                         {{"--input", o->input == "-" ? "" : o->input}, {"--model", o->model}});
    ClassifierBundle cb = load_classifier(o->model, true);
    cb.model->set_compute_type(cli::compute_type_of(o->bf16));
    const int64_t max_len = checked_max_len(o->max_len, cb);
    std::ifstream file;
    std::istream* in = open_input(o->input, &file);
    std::FILE* out = open_output(o->output, "--output");
    const BadRows policy = o->bad_rows == "skip" ? BadRows::skip : BadRows::stop;
    TextInput reader(*in, o->input == "-" ? "stdin" : o->input, o->format, cb.task.pairs, policy);
    ClassifyData chunk;
    const int64_t C = cb.labels.size();
    int64_t count = 0;
    while (reader.next(static_cast<size_t>(std::max<int64_t>(o->chunk, 1)), &chunk)) {
      const auto seqs = encode_all(*cb.tokenizer, chunk, max_len, cb.task.truncate,
                               cb.task.lowercase);
      const std::vector<float> probs = predict_probs(*cb.model, seqs, o->batch_size, true);
      for (size_t i = 0; i < seqs.size(); ++i) {
        const float* p = probs.data() + i * C;
        int64_t best = 0;
        for (int64_t c = 1; c < C; ++c)
          if (p[c] > p[best]) best = c;
        nlohmann::json j;
        if (!chunk.examples[i].id.empty()) j["id"] = chunk.examples[i].id;
        j["label"] = cb.labels.names[best];
        nlohmann::json pj = nlohmann::json::object();
        for (int64_t c = 0; c < C; ++c) pj[cb.labels.names[c]] = std::round(p[c] * 1e6) / 1e6;
        j["probs"] = pj;
        std::fprintf(out, "%s\n", j.dump().c_str());
      }
      std::fflush(out);
      count += static_cast<int64_t>(seqs.size());
    }
    if (out != stdout) std::fclose(out);
    report_bad_rows("predict", reader);
    std::fprintf(stderr, "predict: %lld input(s) classified\n", static_cast<long long>(count));
  });
}

}  // namespace lf::cli
