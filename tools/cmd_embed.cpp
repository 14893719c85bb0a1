#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "linformer/classifier.h"
#include "linformer/classify_data.h"
#include "linformer/file_util.h"
#include "linformer/safetensors.h"

namespace lf::cli {

namespace {

void print_vector(std::FILE* out, const char* key, const float* v, int64_t D) {
  std::fprintf(out, "\"%s\": [", key);
  for (int64_t j = 0; j < D; ++j) std::fprintf(out, j ? ", %.7g" : "%.7g", static_cast<double>(v[j]));
  std::fprintf(out, "]");
}

}  // namespace

void add_embed(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "embed",
      "Pooled sentence vectors from any model folder with a tokenizer.model (a pretrained\n"
      "RUN/model or a finetuned RUN/best): the first-token (<s>) hidden state (cls) and/or the\n"
      "mean of the hidden states over the real tokens, <s> and </s> included (mean).");
  cmd->footer(
      "Input as for predict (--input FILE or - for stdin; a TSV with a header or one text per\n"
      "line). Output: JSON lines {\"cls\": [...], \"mean\": [...]} (stdout or --out FILE), or with\n"
      "--out FILE.safetensors the tensors cls [M, D] and mean [M, D] (F32) in input order.\n"
      "Example: linformer embed --model runs/pre/model --input texts.txt --pool both --out e.safetensors");
  struct Opts {
    bool bf16 = false;
    std::string model, input = "-", out, format = "auto", pool = "cls", bad_rows = "stop";
    int64_t max_len = 0, batch_size = 32, chunk = 4096;
    bool pairs = false, lowercase = false;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "Model folder with tokenizer.model")->required();
  cmd->add_option("--input", o->input, "Input file, or - for stdin")->capture_default_str();
  cmd->add_option("--out", o->out, "Output: FILE.safetensors, another file for JSON lines, or "
                                   "nothing for JSON lines on stdout");
  cmd->add_option("--pool", o->pool, "cls (first-token state), mean (over real tokens) or both")
      ->check(CLI::IsMember({"cls", "mean", "both"}))
      ->capture_default_str();
  cmd->add_option("--format", o->format, "auto, tsv or lines")
      ->check(CLI::IsMember({"auto", "tsv", "lines"}))
      ->capture_default_str();
  cmd->add_flag("--pairs", o->pairs,
                "Inputs are sentence pairs (default: as the model was finetuned; else single texts)");
  cmd->add_flag("--lowercase", o->lowercase,
                "Lowercase ASCII letters first (default: as the model was finetuned)");
  cmd->add_option("--bad-rows", o->bad_rows, "stop at the first bad row, or skip it")
      ->check(CLI::IsMember({"stop", "skip"}))
      ->capture_default_str();
  cmd->add_option("--max-len", o->max_len,
                  "Tokens per text (default: the model's max_len or "
                  "its finetuning length)")
      ->check(cli::in_range(0, cli::kMaxLen));
  cmd->add_option("--batch-size", o->batch_size, "Texts per batch")
      ->capture_default_str()
      ->check(cli::in_range(1, cli::kMaxCount));
  cli::add_compute_option(cmd, &o->bf16);
  cmd->add_option("--chunk", o->chunk, "Inputs read (and sorted by length) at a time")
      ->capture_default_str()
      ->check(cli::in_range(1, cli::kMaxCount));
  cmd->callback([o] {
    if (o->out != "-")
      check_not_an_input(o->out, "embed: --out",
                         {{"--input", o->input == "-" ? "" : o->input}, {"--model", o->model}});
    ClassifierBundle cb = load_classifier(o->model, false);
    cb.model->set_compute_type(cli::compute_type_of(o->bf16));
    const int64_t max_len = checked_max_len(o->max_len, cb);
    const bool pairs = o->pairs || cb.task.pairs;
    const int64_t D = cb.model->config().d_model;
    const bool want_cls = o->pool != "mean", want_mean = o->pool != "cls";
    const bool st = o->out.size() > 12 && o->out.substr(o->out.size() - 12) == ".safetensors";
    std::ifstream file;
    std::istream* in = open_input(o->input, &file);
    std::FILE* out = st ? stdout : open_output(o->out, "--out");
    TextInput reader(*in, o->input == "-" ? "stdin" : o->input, o->format, pairs,
                     o->bad_rows == "skip" ? BadRows::skip : BadRows::stop);
    ClassifyData chunk;
    std::vector<float> all_cls, all_mean, cls, mean;
    int64_t count = 0;
    while (reader.next(static_cast<size_t>(std::max<int64_t>(o->chunk, 1)), &chunk)) {
      const auto seqs = encode_all(*cb.tokenizer, chunk, max_len, cb.task.truncate,
                               cb.task.lowercase || o->lowercase);
      embed_sequences(*cb.model, seqs, o->batch_size, want_cls ? &cls : nullptr,
                      want_mean ? &mean : nullptr);
      const int64_t n = static_cast<int64_t>(seqs.size());
      if (st) {
        all_cls.insert(all_cls.end(), cls.begin(), cls.end());
        all_mean.insert(all_mean.end(), mean.begin(), mean.end());
      } else {
        for (int64_t i = 0; i < n; ++i) {
          std::fprintf(out, "{");
          if (want_cls) print_vector(out, "cls", cls.data() + i * D, D);
          if (want_cls && want_mean) std::fprintf(out, ", ");
          if (want_mean) print_vector(out, "mean", mean.data() + i * D, D);
          std::fprintf(out, "}\n");
        }
        std::fflush(out);
      }
      count += n;
    }
    if (st) {
      SafeTensorsWriter w;
      w.set_metadata("model", o->model);
      w.set_metadata("pooling", o->pool);
      if (want_cls) w.add_f32("cls", {count, D}, all_cls.data());
      if (want_mean) w.add_f32("mean", {count, D}, all_mean.data());
      w.write(o->out);
    } else if (out != stdout) {
      std::fclose(out);
    }
    report_bad_rows("embed", reader);
    std::fprintf(stderr, "embed: %lld text(s), %lld-dimensional vectors\n",
                 static_cast<long long>(count), static_cast<long long>(D));
  });
}

}  // namespace lf::cli
