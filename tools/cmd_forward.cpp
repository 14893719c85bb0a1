#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "cli_util.h"
#include "commands.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/file_util.h"
#include "linformer/model.h"
#include "linformer/rng.h"
#include "linformer/safetensors.h"

namespace lf::cli {

void add_forward(CLI::App& app) {
  auto* cmd = app.add_subcommand(
      "forward", "Run the encoder on token ids; write hidden states and MLM logits.");
  cmd->footer(
      "--input FILE is a safetensors file holding input_ids [B,N] (I32 or I64, ids in\n"
      "[0, vocab_size), N <= max_len) and optionally attention_mask [B,N] (integer or float;\n"
      "1 = real token, 0 = padding). --out FILE receives, as F32: hidden_states [B,N,D],\n"
      "mlm_logits [B,N,V] (unless --no-logits) and, with --classify, class_logits [B,C].\n"
      "The folder must hold every tensor these outputs need (docs/checkpoint.md).\n"
      "Example:\n"
      "  linformer forward --model runs/m --input in.safetensors --out out.safetensors");
  struct Opts {
    std::string model, input, out;
    bool classify = false, no_logits = false;
    ComputeType precision = ComputeType::f32;
    std::vector<int64_t> float_layers;
    std::vector<int64_t> random_batch;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  add_model_option(cmd, &o->model, "Model folder (config.json + model.safetensors)")
      ->check(CLI::ExistingDirectory);
  auto* input =
      cmd->add_option("--input", o->input,
                      "Safetensors file with input_ids [B,N] and optional attention_mask [B,N]")
          ->check(CLI::ExistingFile);
  auto* random = cmd->add_option("--random-batch", o->random_batch,
                                 "Instead of --input: B N random token ids (smoke tests, timing)")
                     ->expected(2)
                     ->check(cli::in_range(1, cli::kMaxCount));
  input->excludes(random);
  cmd->add_option("--seed", o->seed, "Seed of --random-batch ids")->capture_default_str();
  cmd->add_option("--out", o->out, "Output safetensors file (replaced atomically)")->required();
  cmd->add_flag("--classify", o->classify, "Also write class_logits from the classification head");
  cmd->add_flag("--no-logits", o->no_logits, "Skip mlm_logits (they are B*N*V floats)");
  cli::add_compute_option(cmd, &o->precision, &o->float_layers);
  cmd->callback([o] {
    LF_CHECK(!o->input.empty() || !o->random_batch.empty(),
             "forward: give --input FILE or --random-batch B N");
    check_not_an_input(o->out, "forward: --out", {{"--input", o->input}, {"--model", o->model}});
    LoadOptions lo;
    lo.init_missing = true;  // then refused below if an output needs what the file lacks
    LoadReport rep;
    auto model = load_model(o->model, lo, &rep);
    cli::set_precision(*model, o->precision, o->float_layers);
    const Config& cfg = model->config();
    std::vector<std::string> lacking;
    for (const std::string& n : rep.initialised) {
      const bool head_lm = n.rfind("lm_head.", 0) == 0, head_cls = n.rfind("classifier.", 0) == 0;
      if ((!head_lm && !head_cls) || (head_lm && !o->no_logits) || (head_cls && o->classify))
        lacking.push_back(n);
    }
    if (!lacking.empty()) {
      std::string list;
      for (size_t i = 0; i < lacking.size() && i < 8; ++i) list += "\n  " + lacking[i];
      if (lacking.size() > 8) list += "\n  ... and " + std::to_string(lacking.size() - 8) + " more";
      const std::string cfg_json = o->model + "/config.json";
      fail("model folder ", o->model, ": model.safetensors lacks ", lacking.size(),
           " tensor(s) needed for the requested outputs:", list,
           "\nCreate a complete folder with `linformer init --config ",
           std::filesystem::exists(cfg_json) ? cfg_json : std::string("CONFIG"), " --from ",
           o->model, "/model.safetensors --out NEW_FOLDER`",
           " (missing tensors are then freshly initialised).");
    }
    std::vector<int64_t> shape;
    std::vector<int64_t> ids64;
    std::unique_ptr<SafeTensorsReader> reader;
    const std::string src = o->input.empty() ? std::string("--random-batch") : o->input;
    if (!o->input.empty()) {
      reader = std::make_unique<SafeTensorsReader>(o->input);
      if (!reader->has("input_ids")) {
        std::string found;
        for (const std::string& n : reader->names()) found += (found.empty() ? "" : ", ") + n;
        fail(o->input, ": no tensor 'input_ids' [B, N] (the file holds: ",
             found.empty() ? "no tensors" : found, ")");
      }
      ids64 = reader->read_i64("input_ids", &shape);
    } else {
      shape = o->random_batch;
    }
    LF_CHECK(shape.size() == 2, src, ": input_ids must have shape [B, N], got ",
             shape_to_string(shape));
    const int64_t B = shape[0], N = shape[1];
    LF_CHECK(B > 0 && N > 0, src, ": input_ids shape ", shape_to_string(shape),
             " is empty; need B > 0 and N > 0");
    LF_CHECK(N <= cfg.max_len, src, ": sequence length N = ", N, " exceeds the model's max_len ",
             cfg.max_len);
    LF_CHECK(B <= (int64_t{1} << 40) / N, src, ": batch of ", B, " x ", N, " tokens is too large");
    if (o->input.empty()) {
      ids64.resize(static_cast<size_t>(B * N));
      for (size_t i = 0; i < ids64.size(); ++i)
        ids64[i] = static_cast<int64_t>(rng_bits(o->seed, 0, i) % cfg.vocab_size);
    }
    std::vector<int32_t> ids(ids64.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      LF_CHECK(ids64[i] >= 0 && ids64[i] < cfg.vocab_size, src, ": input_ids[", i / N, ", ", i % N,
               "] = ", ids64[i], " is outside the vocabulary [0, ", cfg.vocab_size, ")");
      ids[i] = static_cast<int32_t>(ids64[i]);
    }
    std::vector<float> mask;
    if (reader && reader->has("attention_mask")) {
      const TensorInfo& mi = reader->info("attention_mask");
      LF_CHECK(mi.shape == shape, o->input, ": attention_mask has shape ",
               shape_to_string(mi.shape), " but input_ids has ", shape_to_string(shape));
      if (dtype_is_float(mi.dtype)) {
        mask = reader->read_f32("attention_mask");
      } else {
        std::vector<int64_t> m = reader->read_i64("attention_mask");
        mask.assign(m.begin(), m.end());
      }
      for (size_t i = 0; i < mask.size(); ++i)
        LF_CHECK(mask[i] == 0.f || mask[i] == 1.f, o->input, ": attention_mask[", i / N, ", ",
                 i % N, "] = ", mask[i], "; it must hold 0 (padding) or 1 (real token)");
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
