// The `linformer` command line, run as a separate process: help texts, init -> forward against
// the in-process model (error handling: test_cli_errors.cpp).
#include "cli_test_util.h"
#include "linformer/cpu.h"

namespace lf {
namespace {

using namespace cli_test;  // NOLINT: the helpers of every test_cli*.cpp


// ---------------------------------------------------------------------------------------------

TEST(Cli, HelpOfAppAndEachCommand) {
  const std::string dir = test::temp_dir("help");
  CliRun r = run_cli(dir, "--help");
  expect_ok(r, "--help");
  expect_mentions(r.out, {"init", "forward", "info", "--help"}, "linformer --help");

  r = run_cli(dir, "init --help");
  expect_ok(r, "init --help");
  expect_mentions(r.out, {"--config", "--seed", "--out", "--set", "--from", "docs/config.md"},
                  "init --help");

  r = run_cli(dir, "forward --help");
  expect_ok(r, "forward --help");
  expect_mentions(
      r.out,
      {"--model", "--input", "--out", "--random-batch", "--classify", "--no-logits", "input_ids",
       "attention_mask", "hidden_states", "mlm_logits", "[B,N,D]", "[B,N,V]"},
      "forward --help");

  r = run_cli(dir, "info --help");
  expect_ok(r, "info --help");
  expect_mentions(r.out, {"--model"}, "info --help");

  r = run_cli(dir, "--version");
  expect_ok(r, "--version");
  expect_mentions(r.out, {"linformer"}, "--version");
}

TEST(Cli, UsageErrors) {
  const std::string dir = test::temp_dir("usage");
  expect_fail(run_cli(dir, ""), {"subcommand"}, "no command");
  expect_fail(run_cli(dir, "init --seed 1"), {"--out"}, "init without --out");
  expect_fail(run_cli(dir, "init --out x --bogus"), {"--bogus"}, "unknown option");
  expect_fail(run_cli(dir, "forward --model " + dir + "/nope --random-batch 1 2 --out o"),
              {"--model", "nope"}, "forward with a missing model folder");
  expect_fail(run_cli(dir, "info --model " + dir + "/nope"), {"--model", "nope"},
              "info with a missing model folder");
}

// Runs `forward` on a padded batch and compares with the in-process model on the same weights.
void check_forward_matches(const std::string& dir, const Config& cfg, const std::string& name) {
  const std::string model_dir = init_model(dir, cfg, name, 3);

  // init is a pure function of (config, seed).
  Model expected(cfg);
  expected.init(3);
  auto loaded = load_model(model_dir);
  EXPECT_EQ(loaded->config().to_json(), cfg.to_json());
  for (const ParamInfo& p : expected.params())
    ASSERT_EQ(0, std::memcmp(expected.param_data() + p.offset, loaded->param(p.name),
                             p.numel * sizeof(float)))
        << name << ": " << p.name;

  const Inputs in = make_inputs(cfg);
  std::vector<int32_t> ids(in.ids.begin(), in.ids.end());
  std::vector<float> mask(in.mask.begin(), in.mask.end());
  loaded->forward(Batch{ids.data(), mask.data(), in.B, in.N}, false);
  const int64_t D = cfg.d_model, V = cfg.vocab_size, C = cfg.num_classes;
  std::vector<float> hidden(loaded->hidden(), loaded->hidden() + in.B * in.N * D);
  std::vector<float> logits(in.B * in.N * V), cls(in.B * C);
  loaded->mlm_logits(logits.data());
  loaded->cls_logits(cls.data());

  for (bool int32 : {false, true}) {
    const std::string what = name + (int32 ? " (I32 ids)" : " (I64 ids)");
    const std::string input = dir + "/" + name + (int32 ? "_in32" : "_in64") + ".safetensors";
    const std::string output = dir + "/" + name + (int32 ? "_out32" : "_out64") + ".safetensors";
    write_inputs(in, input, int32);
    const CliRun r = run_cli(dir, "forward --model " + model_dir + " --input " + input +
                                         " --out " + output + " --classify");
    expect_ok(r, what);
    ASSERT_TRUE(fs::exists(output)) << what;
    SafeTensorsReader out(output);
    std::vector<int64_t> shape;
    std::vector<float> h = out.read_f32("hidden_states", &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{in.B, in.N, D})) << what;
    EXPECT_EQ(out.info("hidden_states").dtype, DType::F32);
    ASSERT_EQ(h.size(), hidden.size());
    EXPECT_LT(test::rel_error(h.data(), hidden.data(), h.size()), 1e-6) << what << " hidden";
    std::vector<float> lg = out.read_f32("mlm_logits", &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{in.B, in.N, V})) << what;
    ASSERT_EQ(lg.size(), logits.size());
    EXPECT_LT(test::rel_error(lg.data(), logits.data(), lg.size()), 1e-6) << what << " logits";
    std::vector<float> cl = out.read_f32("class_logits", &shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{in.B, C})) << what;
    ASSERT_EQ(cl.size(), cls.size());
    EXPECT_LT(test::rel_error(cl.data(), cls.data(), cl.size()), 1e-6) << what << " classes";
  }

  // Without a mask every position is real: the output differs from the padded run.
  SafeTensorsWriter w;
  w.add_i64("input_ids", {in.B, in.N}, in.ids.data());
  w.write(dir + "/" + name + "_nomask.safetensors");
  const CliRun r = run_cli(dir, "forward --model " + model_dir + " --input " + dir + "/" + name +
                                       "_nomask.safetensors --out " + dir + "/" + name +
                                       "_nomask_out.safetensors --no-logits");
  expect_ok(r, name + " without mask");
  SafeTensorsReader out(dir + "/" + name + "_nomask_out.safetensors");
  EXPECT_FALSE(out.has("mlm_logits")) << "--no-logits";
  EXPECT_FALSE(out.has("class_logits"));
  const std::vector<float> h = out.read_f32("hidden_states");
  EXPECT_GT(test::rel_error(h.data(), hidden.data(), h.size()), 1e-4) << name << ": mask ignored?";
}

TEST(Cli, InitThenForwardMatchesInProcessModel) {
  const std::string dir = test::temp_dir("fwd");
  Config lin = test::tiny_config();
  check_forward_matches(dir, lin, "linformer");
  Config std_cfg = test::tiny_config();
  std_cfg.attention = AttentionKind::standard;
  std_cfg.norm = NormPlacement::pre;
  check_forward_matches(dir, std_cfg, "standard");
}

TEST(Cli, ForwardAcceptsFloatMaskAndRandomBatch) {
  const std::string dir = test::temp_dir("fmask");
  const Config cfg = test::tiny_config();
  const std::string m = init_model(dir, cfg, "m", 1);
  const Inputs in = make_inputs(cfg);
  std::vector<float> fmask(in.mask.begin(), in.mask.end());
  SafeTensorsWriter w;
  w.add_i64("input_ids", {in.B, in.N}, in.ids.data());
  w.add_f32("attention_mask", {in.B, in.N}, fmask.data());
  w.write(dir + "/in_f.safetensors");
  write_inputs(in, dir + "/in_i.safetensors", false);
  expect_ok(run_cli(dir, "forward --model " + m + " --input " + dir + "/in_f.safetensors --out " +
                             dir + "/out_f.safetensors"),
            "float mask");
  expect_ok(run_cli(dir, "forward --model " + m + " --input " + dir + "/in_i.safetensors --out " +
                             dir + "/out_i.safetensors"),
            "int mask");
  const std::vector<float> a =
      SafeTensorsReader(dir + "/out_f.safetensors").read_f32("hidden_states");
  const std::vector<float> b =
      SafeTensorsReader(dir + "/out_i.safetensors").read_f32("hidden_states");
  EXPECT_EQ(a, b);

  const CliRun r = run_cli(dir, "forward --model " + m + " --random-batch 2 16 --seed 4 --out " +
                                       dir + "/rnd.safetensors --no-logits");
  expect_ok(r, "random batch");
  std::vector<int64_t> shape;
  SafeTensorsReader(dir + "/rnd.safetensors").read_f32("hidden_states", &shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 16, cfg.d_model}));
}

// forward with `flag` on a model wide enough for the products to take their reduced-precision
// path: hidden states and MLM logits within `tol` of f32's and not equal to them. Returns the
// forward command without --out (dir holds FLAG.safetensors).
std::string forward_close_to_f32(const std::string& dir, const std::string& flag,
                                 const std::string& name, double tol) {
  Config cfg = test::tiny_config();
  cfg.d_model = 64;
  cfg.d_ff = 128;
  const std::string m = init_model(dir, cfg, "m", 2);
  const Inputs in = make_inputs(cfg);
  write_inputs(in, dir + "/in.safetensors", false);
  const std::string base = "forward --model " + m + " --input " + dir + "/in.safetensors";
  expect_ok(run_cli(dir, base + " --out " + dir + "/f32.safetensors"), "f32");
  expect_ok(run_cli(dir, base + " " + flag + " --out " + dir + "/" + name + ".safetensors"), name);
  for (const char* t : {"hidden_states", "mlm_logits"}) {
    const std::vector<float> a = SafeTensorsReader(dir + "/f32.safetensors").read_f32(t);
    const std::vector<float> b = SafeTensorsReader(dir + "/" + name + ".safetensors").read_f32(t);
    EXPECT_EQ(a.size(), b.size());
    if (a.size() != b.size()) continue;
    const double rel = test::rel_error(b.data(), a.data(), a.size());
    EXPECT_LT(rel, tol) << t;
    EXPECT_GT(rel, 1e-6) << t << ": " << flag << " had no effect";
  }
  return base;
}

TEST(Cli, ForwardBf16IsCloseToF32) {
  LF_REQUIRE_BF16();
  const std::string dir = test::temp_dir("bf16");
  const std::string base = forward_close_to_f32(dir, "--bf16", "bf16", 2e-2);
  expect_mentions(run_cli(dir, "forward --help").out, {"--bf16"}, "forward --help");
  // --precision bf16 is the same run as its alias --bf16.
  expect_ok(run_cli(dir, base + " --precision bf16 --out " + dir + "/p.safetensors"), "precision");
  for (const char* t : {"hidden_states", "mlm_logits"})
    EXPECT_EQ(SafeTensorsReader(dir + "/p.safetensors").read_f32(t),
              SafeTensorsReader(dir + "/bf16.safetensors").read_f32(t));
}

// forward --precision int8: hidden states and MLM logits close to f32's (and not equal).
TEST(Cli, ForwardInt8IsCloseToF32) {
  LF_REQUIRE_INT8();
  const std::string dir = test::temp_dir("int8");
  forward_close_to_f32(dir, "--precision int8", "int8", 5e-2);
  // bench runs it and says so; bench --train refuses it.
  CliRun r = run_cli(dir, "bench --layers 1 --d-model 32 --heads 2 --d-ff 64 --vocab 50 --n 64 "
                          "--k 16 --attention linformer --reps 1 --precision int8 --json");
  expect_ok(r, "bench int8");
  EXPECT_NE(r.out.find("\"compute\": \"int8\""), std::string::npos) << r.out.substr(0, 400);
  // --compare-precision: the grid in f32 and int8, one table of both, kept by --from-json.
  r = run_cli(dir, "bench --layers 1 --d-model 32 --heads 2 --d-ff 64 --vocab 50 --n 64 --k 16 "
                   "--attention linformer standard --reps 1 --compare-precision int8 --out-dir " +
                       dir + "/b");
  expect_ok(r, "bench --compare-precision");
  expect_mentions(r.out, {"## Precisions", "| f32 ms/seq | int8 ms/seq | int8 speed-up |",
                          "| linformer | 64 | 16 |", "| standard | 64 | - |", "linformer (int8)"},
                  "bench --compare-precision");
  // Each configuration runs in every precision back to back (ratios measured seconds apart):
  // the run table lists the f32 run and the int8 run of a configuration one after the other.
  for (const char* row : {"| linformer (f32) | 64 | 16 |", "| standard (f32) | 64 | - |"}) {
    const size_t at = r.out.find(row);
    ASSERT_NE(at, std::string::npos) << row;
    const size_t next = r.out.find('\n', at) + 1;
    std::string int8_row = row;
    int8_row.replace(int8_row.find("(f32)"), 5, "(int8)");
    EXPECT_EQ(r.out.compare(next, int8_row.size(), int8_row), 0)
        << "after " << row << ": " << r.out.substr(next, 60);
  }
  const CliRun again = run_cli(dir, "bench --from-json " + dir + "/b/bench.json");
  expect_ok(again, "bench --from-json");
  EXPECT_EQ(again.out, r.out);
  r = run_cli(dir, "bench --train --n 32 --k 8 --precision int8");
  EXPECT_NE(r.code, 0);
  EXPECT_FALSE(r.crashed);
  EXPECT_NE(r.err.find("inference only"), std::string::npos) << r.err;
}

// --precision names its choices; a wrong one, or --precision beside its alias --bf16, is
// refused before anything runs (on every CPU); f32 is the default.
TEST(Cli, PrecisionOption) {
  const std::string dir = test::temp_dir("precision");
  const std::string m = init_model(dir, test::tiny_config(), "m", 2);
  const Inputs in = make_inputs(test::tiny_config());
  write_inputs(in, dir + "/in.safetensors", false);
  const std::string base = "forward --model " + m + " --input " + dir + "/in.safetensors";
  expect_ok(run_cli(dir, base + " --out " + dir + "/a.safetensors"), "default");
  expect_ok(run_cli(dir, base + " --precision f32 --out " + dir + "/b.safetensors"), "f32");
  EXPECT_EQ(SafeTensorsReader(dir + "/a.safetensors").read_f32("hidden_states"),
            SafeTensorsReader(dir + "/b.safetensors").read_f32("hidden_states"));
  CliRun r = run_cli(dir, base + " --precision fp16 --out " + dir + "/c.safetensors");
  EXPECT_NE(r.code, 0);
  expect_mentions(r.err, {"--precision", "fp16", "f32", "bf16"}, "a wrong --precision");
  r = run_cli(dir, base + " --precision f32 --bf16 --out " + dir + "/c.safetensors");
  EXPECT_NE(r.code, 0);
  expect_mentions(r.err, {"--precision", "--bf16"}, "--precision beside --bf16");
  EXPECT_FALSE(fs::exists(dir + "/c.safetensors"));
  // auto: the precision `info` names for this CPU, the same outputs, and says so on stderr.
  const AutoPrecision a = auto_precision();
  const std::string chosen = compute_type_name(a.precision);
  r = run_cli(dir, "info");
  expect_mentions(r.out, {"--precision auto runs " + chosen}, "info");
  r = run_cli(dir, base + " --precision auto --out " + dir + "/d.safetensors");
  expect_ok(r, "auto");
  expect_mentions(r.err, {"--precision auto: " + chosen, a.reason}, "auto's stderr");
  expect_ok(run_cli(dir, base + " --precision " + chosen + " --out " + dir + "/e.safetensors"),
            chosen);
  EXPECT_EQ(SafeTensorsReader(dir + "/d.safetensors").read_f32("hidden_states"),
            SafeTensorsReader(dir + "/e.safetensors").read_f32("hidden_states"));
  for (const char* cmd : {"forward", "pretrain", "finetune", "evaluate", "predict", "embed", "bench"})
    expect_mentions(run_cli(dir, std::string(cmd) + " --help").out, {"--precision", "--bf16", "auto"},
                    std::string(cmd) + " --help");
}

TEST(Cli, InfoDescribesFolder) {
  const std::string dir = test::temp_dir("info");
  const std::string m = init_model(dir, test::tiny_config(), "m", 1);
  const CliRun r = run_cli(dir, "info --model " + m);
  expect_ok(r, "info");
  expect_mentions(r.out,
                  {"\"attention\": \"linformer\"", "roberta.encoder.kv_proj.weight", "[4, 16]",
                   "roberta.embeddings.word_embeddings.weight", "[37, 16]", "parameters"},
                  "info output");
  EXPECT_EQ(r.out.find("absent"), std::string::npos) << r.out;
}

TEST(Cli, InitSetOverridesConfig) {
  const std::string dir = test::temp_dir("set");
  test::tiny_config().save(dir + "/base.json");
  CliRun r =
      run_cli(dir, "init --config " + dir + "/base.json --set 'k=[8,2]' --set sharing=kv " +
                       "--set attention_dropout=0 --set norm=pre --out " + dir + "/m");
  expect_ok(r, "init --set");
  Config c = Config::load(dir + "/m/config.json");
  EXPECT_EQ(c.k, (std::vector<int64_t>{8, 2}));
  EXPECT_EQ(c.sharing, Sharing::kv);
  EXPECT_EQ(c.norm, NormPlacement::pre);
  EXPECT_EQ(c.attention_dropout, 0.f);
  EXPECT_EQ(c.d_model, 16);  // from the file
  expect_fail(
      run_cli(dir, "init --config " + dir + "/base.json --set nonsense=1 --out " + dir + "/x"),
      {"unknown key 'nonsense'"}, "unknown --set key");
  expect_fail(run_cli(dir, "init --set d_model=15 --out " + dir + "/x"), {"d_model", "n_heads"},
              "invalid --set value");
  expect_fail(run_cli(dir, "init --set k --out " + dir + "/x"), {"KEY=VALUE"}, "--set without =");
  EXPECT_FALSE(fs::exists(dir + "/x"));
}

// A Hugging Face RoBERTa-style file (tests/reference/make_hf_roberta.py) through the CLI.
TEST(Cli, RobertaCheckpointWorkflow) {
  const std::string dir = test::temp_dir("hf");
  Config cfg = test::tiny_config();  // position_offset 2, max_len 16: max_pos 18
  const std::string hf = dir + "/hf.safetensors";
  const std::string py = std::string("/usr/bin/python3 ") + LF_SOURCE_DIR +
                         "/tests/reference/make_hf_roberta.py --out " + hf +
                         " --vocab 37 --max-pos 18 --hidden 16 --ffn 24 --layers 2";
  ASSERT_EQ(std::system(py.c_str()), 0) << py;

  // As a standard model folder: hidden states and logits work, the missing classifier is named.
  cfg.attention = AttentionKind::standard;
  fs::create_directories(dir + "/std");
  fs::copy_file(hf, dir + "/std/model.safetensors");
  cfg.save(dir + "/std/config.json");
  const Inputs in = make_inputs(cfg);
  write_inputs(in, dir + "/in.safetensors", false);
  expect_ok(run_cli(dir, "forward --model " + dir + "/std --input " + dir +
                             "/in.safetensors --out " + dir + "/out.safetensors"),
            "RoBERTa as standard");
  expect_fail(run_cli(dir, "forward --model " + dir + "/std --input " + dir +
                               "/in.safetensors --out " + dir + "/out2.safetensors --classify"),
              {"classifier.out_proj.weight", "init", "--from"}, "--classify without a head");
  const CliRun info = run_cli(dir, "info --model " + dir + "/std");
  expect_ok(info, "info on RoBERTa folder");
  expect_mentions(info.out,
                  {"absent", "roberta.embeddings.position_ids", "roberta.pooler.dense.weight"},
                  "info on RoBERTa folder");

  // As a Linformer folder: forward refuses random projections and says what to do.
  cfg.attention = AttentionKind::linformer;
  fs::create_directories(dir + "/lin");
  fs::copy_file(hf, dir + "/lin/model.safetensors");
  cfg.save(dir + "/lin/config.json");
  expect_fail(run_cli(dir, "forward --model " + dir + "/lin --input " + dir +
                               "/in.safetensors --out " + dir + "/out3.safetensors --no-logits"),
              {"roberta.encoder.kv_proj.weight", "init", "--from"},
              "Linformer without projections");
  EXPECT_FALSE(fs::exists(dir + "/out3.safetensors"));

  // init --from writes a complete folder: RoBERTa's weights plus fresh projections and head.
  const CliRun r = run_cli(dir, "init --config " + dir + "/lin/config.json --from " + hf +
                                       " --seed 5 --out " + dir + "/full");
  expect_ok(r, "init --from");
  expect_mentions(r.out,
                  {"roberta.encoder.kv_proj.weight", "classifier.dense.weight",
                   "roberta.embeddings.position_ids", "lm_head.decoder.weight"},
                  "init --from report");
  LoadOptions strict;
  strict.init_missing = false;
  auto full = load_model(dir + "/full", strict);
  SafeTensorsReader src(hf);
  Model fresh(cfg);
  fresh.init(5);
  for (const ParamInfo& p : full->params()) {
    const std::vector<float> want =
        src.has(p.name) ? src.read_f32(p.name)
                        : std::vector<float>(fresh.param(p.name), fresh.param(p.name) + p.numel);
    EXPECT_EQ(0, std::memcmp(want.data(), full->param(p.name), p.numel * sizeof(float))) << p.name;
  }
  expect_ok(run_cli(dir, "forward --model " + dir + "/full --input " + dir +
                             "/in.safetensors --out " + dir + "/out4.safetensors --classify"),
            "complete Linformer folder");

  // --from with a file that does not fit the config: the tensor and both shapes.
  expect_fail(run_cli(dir, "init --config " + dir + "/lin/config.json --set d_ff=32 --from " + hf +
                               " --out " + dir + "/bad"),
              {"roberta.encoder.layer.0.intermediate.dense.weight", "[24, 16]", "[32, 16]"},
              "init --from mismatch");
}

}  // namespace
}  // namespace lf
