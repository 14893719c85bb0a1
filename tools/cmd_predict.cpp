#include <cmath>
#include <cstdio>
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
    ModelRunOptions run;
    TextInputOptions in;
    std::string output;
  };
  auto o = std::make_shared<Opts>();
  add_model_run_options(cmd, &o->run, "Classifier folder (with its tokenizer and labels.json)",
                        "Tokens per example (default: the length the model was finetuned with)",
                        "Examples per batch");
  add_text_input_options(cmd, &o->in);
  cmd->add_option("--output", o->output, "Write the JSON lines here (default: stdout)");
  cmd->callback([o] {
    check_output_not_an_input(o->output, "predict: --output", o->in, o->run);
    int64_t max_len = 0;
    const ClassifierBundle cb = load_model_to_run(o->run, true, &max_len);
    TextChunks texts(o->in, cb.task.pairs, o->run.policy());
    std::FILE* out = open_output(o->output, "--output");
    const int64_t C = cb.labels.size();
    int64_t count = 0;
    while (texts.next(cb, max_len, cb.task.lowercase)) {
      const ClassifyData& chunk = texts.texts();
      const auto& seqs = texts.seqs();
      const std::vector<float> probs = predict_probs(*cb.model, seqs, o->run.batch_size, true);
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
    texts.report_bad_rows("predict");
    std::fprintf(stderr, "predict: %lld input(s) classified\n", static_cast<long long>(count));
  });
}

}  // namespace lf::cli
