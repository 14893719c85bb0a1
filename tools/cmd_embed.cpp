#include <cstdio>
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
      "Pooled sentence vectors from any model folder with its tokenizer (a pretrained\n"
      "RUN/model or a finetuned RUN/best): the first-token (<s>) hidden state (cls) and/or the\n"
      "mean of the hidden states over the real tokens, <s> and </s> included (mean).");
  cmd->footer(
      "Input as for predict (--input FILE or - for stdin; a TSV with a header or one text per\n"
      "line). Output: JSON lines {\"cls\": [...], \"mean\": [...]} (stdout or --out FILE), or with\n"
      "--out FILE.safetensors the tensors cls [M, D] and mean [M, D] (F32) in input order.\n"
      "Example: linformer embed --model runs/pre/model --input texts.txt --pool both --out e.safetensors");
  struct Opts {
    ModelRunOptions run;
    TextInputOptions in;
    std::string out, pool = "cls";
    bool pairs = false, lowercase = false;
  };
  auto o = std::make_shared<Opts>();
  add_model_run_options(cmd, &o->run, "Model folder with its tokenizer",
                        "Tokens per text (default: the model's max_len or its finetuning length)",
                        "Texts per batch");
  add_text_input_options(cmd, &o->in);
  cmd->add_option("--out", o->out, "Output: FILE.safetensors, another file for JSON lines, or "
                                   "nothing for JSON lines on stdout");
  cmd->add_option("--pool", o->pool, "cls (first-token state), mean (over real tokens) or both")
      ->check(CLI::IsMember({"cls", "mean", "both"}))
      ->capture_default_str();
  cmd->add_flag("--pairs", o->pairs,
                "Inputs are sentence pairs (default: as the model was finetuned; else single texts)");
  cmd->add_flag("--lowercase", o->lowercase,
                "Lowercase ASCII letters first (default: as the model was finetuned)");
  cmd->callback([o] {
    check_output_not_an_input(o->out, "embed: --out", o->in, o->run);
    int64_t max_len = 0;
    const ClassifierBundle cb = load_model_to_run(o->run, false, &max_len);
    const int64_t D = cb.model->config().d_model;
    const bool want_cls = o->pool != "mean", want_mean = o->pool != "cls";
    const bool st = o->out.size() > 12 && o->out.substr(o->out.size() - 12) == ".safetensors";
    TextChunks texts(o->in, o->pairs || cb.task.pairs, o->run.policy());
    std::FILE* out = st ? stdout : open_output(o->out, "--out");
    std::vector<float> all_cls, all_mean, cls, mean;
    int64_t count = 0;
    while (texts.next(cb, max_len, cb.task.lowercase || o->lowercase)) {
      const auto& seqs = texts.seqs();
      embed_sequences(*cb.model, seqs, o->run.batch_size, want_cls ? &cls : nullptr,
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
      w.set_metadata("model", o->run.model);
      w.set_metadata("pooling", o->pool);
      if (want_cls) w.add_f32("cls", {count, D}, all_cls.data());
      if (want_mean) w.add_f32("mean", {count, D}, all_mean.data());
      w.write(o->out);
    } else if (out != stdout) {
      std::fclose(out);
    }
    texts.report_bad_rows("embed");
    std::fprintf(stderr, "embed: %lld text(s), %lld-dimensional vectors\n",
                 static_cast<long long>(count), static_cast<long long>(D));
  });
}

}  // namespace lf::cli
