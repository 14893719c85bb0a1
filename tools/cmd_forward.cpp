#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "io/safetensors.h"
#include "linformer/checkpoint.h"
#include "linformer/model.h"

namespace lf::cli {

void add_forward(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "forward",
      "Run the encoder on token ids and write hidden states and MLM logits.\n"
      "IN holds input_ids [B,N] (int32 or int64) and optionally attention_mask [B,N]\n"
      "(1 = real token, 0 = padding). OUT receives hidden_states [B,N,D] and mlm_logits\n"
      "[B,N,V] (float32); with --classify also class_logits [B,C].");
  struct Opts {
    std::string model, input, out;
    bool classify = false, no_logits = false;
    std::vector<int64_t> random_batch;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  cmd->add_option("--model", o->model, "Model folder")->required()->check(CLI::ExistingDirectory);
  auto* input = cmd->add_option("--input", o->input, "Input safetensors file")->check(CLI::ExistingFile);
  auto* random = cmd->add_option("--random-batch", o->random_batch,
                                 "Instead of --input: B N random token ids (smoke tests, timing)")
                     ->expected(2);
  input->excludes(random);
  cmd->add_option("--seed", o->seed, "Seed of --random-batch ids")->capture_default_str();
  cmd->add_option("--out", o->out, "Output safetensors file")->required();
  cmd->add_flag("--classify", o->classify, "Also write class_logits from the classification head");
  cmd->add_flag("--no-logits", o->no_logits, "Skip mlm_logits (they are B*N*V floats)");
  cmd->callback([o] {
    LoadOptions lo;
    lo.init_missing = false;
    auto model = load_model(o->model, lo);
    const Config& cfg = model->config();
    LF_CHECK(!o->input.empty() || !o->random_batch.empty(),
             "forward: give --input FILE or --random-batch B N");
    std::vector<int64_t> shape;
    std::vector<int64_t> ids64;
    std::unique_ptr<SafeTensorsReader> reader;
    if (!o->input.empty()) {
      reader = std::make_unique<SafeTensorsReader>(o->input);
      ids64 = reader->read_i64("input_ids", &shape);
    } else {
      shape = o->random_batch;
      LF_CHECK(shape[0] > 0 && shape[1] > 0, "forward: --random-batch needs B > 0 and N > 0");
      ids64.resize(static_cast<size_t>(shape[0] * shape[1]));
      for (size_t i = 0; i < ids64.size(); ++i)
        ids64[i] = static_cast<int64_t>(rng_bits(o->seed, 0, i) % cfg.vocab_size);
    }
    LF_CHECK(shape.size() == 2, o->input, ": input_ids must have shape [B, N], got ",
             shape_to_string(shape));
    const int64_t B = shape[0], N = shape[1];
    LF_CHECK(N <= cfg.max_len, o->input, ": sequence length ", N, " exceeds the model's max_len ",
             cfg.max_len);
    std::vector<int32_t> ids(ids64.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      LF_CHECK(ids64[i] >= 0 && ids64[i] < cfg.vocab_size, o->input, ": input_ids[", i, "] = ",
               ids64[i], " is outside the vocabulary [0, ", cfg.vocab_size, ")");
      ids[i] = static_cast<int32_t>(ids64[i]);
    }
    std::vector<float> mask;
    if (reader && reader->has("attention_mask")) {
      std::vector<int64_t> mshape;
      std::vector<int64_t> m = reader->read_i64("attention_mask", &mshape);
      LF_CHECK(mshape == shape, o->input, ": attention_mask has shape ", shape_to_string(mshape),
               " but input_ids has ", shape_to_string(shape));
      mask.resize(m.size());
      for (size_t i = 0; i < m.size(); ++i) {
        LF_CHECK(m[i] == 0 || m[i] == 1, o->input, ": attention_mask must hold 0 or 1");
        mask[i] = static_cast<float>(m[i]);
      }
    }
    Batch batch{ids.data(), mask.empty() ? nullptr : mask.data(), B, N};
    const auto t0 = std::chrono::steady_clock::now();
    model->forward(batch, false);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "forward: B=%lld N=%lld in %.3f s (%.1f sequences/s)\n",
                 static_cast<long long>(B), static_cast<long long>(N), secs, B / secs);
    SafeTensorsWriter w;
    const int64_t D = cfg.d_model, V = cfg.vocab_size;
    w.add_f32("hidden_states", {B, N, D}, model->hidden());
    if (!o->no_logits) {
      std::vector<float> logits(static_cast<size_t>(B * N * V));
      model->mlm_logits(logits.data());
      w.add_f32("mlm_logits", {B, N, V}, logits.data());
    }
    if (o->classify) {
      std::vector<float> cl(static_cast<size_t>(B * cfg.num_classes));
      model->cls_logits(cl.data());
      w.add_f32("class_logits", {B, cfg.num_classes}, cl.data());
    }
    w.write(o->out);
  });
}

}  // namespace lf::cli
