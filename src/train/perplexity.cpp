#include "linformer/perplexity.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "data/corpus.h"
#include "data/mlm_data.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/model.h"
#include "linformer/run.h"
#include "linformer/tokenizer.h"

namespace lf {

nlohmann::json PerplexityResult::to_json() const {
  return {{"documents", documents},
          {"tokens", tokens},
          {"sequences", sequences},
          {"seq_len", seq_len},
          {"masked", masked},
          {"loss", loss},
          {"ppl", ppl},
          {"seconds", seconds}};
}

PerplexityResult mlm_perplexity(Model& model, const Tokenizer& tok, const PerplexityOptions& opt) {
  const Config& cfg = model.config();
  const int64_t n = opt.seq_len > 0 ? opt.seq_len : cfg.max_len;
  LF_CHECK(n >= 3, "perplexity: --seq-len must be at least 3 (<s>, a token, </s>), got ", n);
  LF_CHECK(n <= cfg.max_len, "perplexity: --seq-len ", n, " exceeds the model's max_len ",
           cfg.max_len);
  LF_CHECK(tok.vocab_size() == cfg.vocab_size, "perplexity: the tokenizer has ", tok.vocab_size(),
           " pieces but the model's vocab_size is ", cfg.vocab_size);
  LF_CHECK(opt.mask_prob > 0 && opt.mask_prob <= 1,
           "perplexity: --mask-prob must be in (0, 1], got ", opt.mask_prob);
  LF_CHECK(opt.batch_size > 0, "perplexity: --batch-size must be positive, got ", opt.batch_size);
  LF_CHECK(opt.max_sequences >= 0, "perplexity: --max-sequences must be >= 0");
  LF_CHECK(!opt.text.empty(), "perplexity: no text given");

  Stopwatch clock;
  PerplexityResult r;
  // Documents as in pretraining: each non-empty line, then </s>.
  std::vector<int32_t> tokens;
  for_each_line(list_corpus_files(opt.text), [&](const std::string& line) {
    const std::vector<int32_t> ids = tok.encode(line);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    tokens.push_back(tok.special().sep);
    ++r.documents;
    return true;
  });
  LF_CHECK(r.documents > 0, "perplexity: the text holds no documents (every line is empty)");
  const TokenStream stream = TokenStream::from_tokens(std::move(tokens));
  PackedSequences seqs{&stream, 0, stream.size(), n};
  seqs.set_frame(tok.special());
  r.tokens = stream.size();
  r.seq_len = n;
  r.sequences = opt.max_sequences > 0 ? std::min(seqs.count(), opt.max_sequences) : seqs.count();

  const MaskingOptions mo = masking_for(tok, opt.mask_prob, cfg.vocab_size);
  MlmBatch batch;
  double total = 0;
  for (int64_t i0 = 0; i0 < r.sequences; i0 += opt.batch_size) {
    std::vector<int64_t> which;
    for (int64_t i = i0; i < std::min(r.sequences, i0 + opt.batch_size); ++i) which.push_back(i);
    const std::vector<int64_t> epochs(which.size(), -1);  // the evaluation draw
    make_mlm_batch(seqs, which, epochs, mo, opt.seed, &batch);
    const int64_t B = static_cast<int64_t>(which.size());
    model.forward(Batch{batch.ids.data(), batch.mask.data(), B, n}, /*train=*/false);
    int64_t count = 0;
    total += model.mlm_loss(batch.labels.data(), /*grad=*/false, 1.f, &count);
    r.masked += count;
    if (!opt.quiet && (i0 / opt.batch_size) % 50 == 49)
      std::fprintf(stderr, "perplexity: %lld / %lld sequences\n", static_cast<long long>(i0 + B),
                   static_cast<long long>(r.sequences));
  }
  LF_CHECK(r.masked > 0, "perplexity: no maskable tokens in the text");
  r.loss = total / static_cast<double>(r.masked);
  r.ppl = std::exp(r.loss);
  r.seconds = clock.seconds();
  return r;
}

PerplexityResult mlm_perplexity(const std::string& model_dir, const PerplexityOptions& opt) {
  namespace fs = std::filesystem;
  const std::string tok_path = model_dir;
  LF_CHECK(!Tokenizer::files_in(model_dir).empty(), "perplexity: model folder ", model_dir,
           " has no tokenizer (tokenizer.model, tokenizer.json, vocab.json + merges.txt or "
           "vocab.txt; pretraining writes one into RUN/model)");
  LoadReport report;
  std::unique_ptr<Model> model = load_model(model_dir, {}, &report);
  // Parameters that had to be initialised would make the score meaningless (the classifier is
  // not used here).
  std::string missing;
  for (const std::string& name : report.initialised)
    if (name.rfind("classifier.", 0) != 0) missing += (missing.empty() ? "" : ", ") + name;
  LF_CHECK(missing.empty(), "perplexity: model folder ", model_dir,
           " lacks trained tensors the masked-LM score needs: ", missing);
  const Tokenizer tok(tok_path);
  model->set_compute_type(opt.precision);
  model->set_float_layers(opt.float_layers);
  return mlm_perplexity(*model, tok, opt);
}

}  // namespace lf
