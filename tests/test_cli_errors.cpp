// The `linformer` command line's error handling, run as a separate process: a non-zero exit and
// a message naming the problem, never a crash, and no command replacing a model folder or one
// of its own inputs unless told to.
#include "cli_test_util.h"

namespace lf {
namespace {

using namespace cli_test;  // NOLINT: the helpers of every test_cli*.cpp

TEST(Cli, ErrorsNameTheProblem) {
  const std::string dir = test::temp_dir("err");
  const Config cfg = test::tiny_config();
  const std::string m = init_model(dir, cfg, "m", 1);
  const std::string fwd = "forward --model " + m + " --out " + dir + "/out.safetensors --input ";

  // Config problems at init.
  expect_fail(run_cli(dir, "init --config " + dir + "/missing.json --out " + dir + "/x"),
              {"--config", "missing.json", "does not exist"}, "missing --config file");
  write_file_atomic(dir + "/bad.json", std::string("{\"vocab_size\": 10,, }"));
  expect_fail(run_cli(dir, "init --config " + dir + "/bad.json --out " + dir + "/x"),
              {"bad.json", "not valid JSON"}, "bad JSON config");
  Config causal = cfg;
  causal.causal = true;
  causal.attention = AttentionKind::standard;
  causal.save(dir + "/causal.json");  // standard + causal is fine; make it Linformer by hand
  std::string text = read_file(dir + "/causal.json");
  text.replace(text.find("\"standard\""), 10, "\"linformer\"");
  write_file_atomic(dir + "/causal.json", text);
  expect_fail(run_cli(dir, "init --config " + dir + "/causal.json --out " + dir + "/x"),
              {"causal.json", "causal", "Linformer"}, "causal Linformer config");
  write_file_atomic(dir + "/unknown.json", std::string("{\"heads\": 4}"));
  expect_fail(run_cli(dir, "init --config " + dir + "/unknown.json --out " + dir + "/x"),
              {"unknown key 'heads'"}, "unknown config key");
  EXPECT_FALSE(fs::exists(dir + "/x"));

  // Inputs that do not fit the model.
  auto write_ids = [&](const std::string& name, std::vector<int64_t> shape,
                       const std::vector<int64_t>& ids) {
    SafeTensorsWriter w;
    w.add_i64("input_ids", shape, ids.data());
    w.write(dir + "/" + name);
    return dir + "/" + name;
  };
  std::vector<int64_t> long_ids(2 * 17, 5);
  expect_fail(run_cli(dir, fwd + write_ids("long.safetensors", {2, 17}, long_ids)),
              {"long.safetensors", "17", "max_len 16"}, "N > max_len");
  std::vector<int64_t> oov(2 * 4, 3);
  oov[6] = 37;
  expect_fail(run_cli(dir, fwd + write_ids("oov.safetensors", {2, 4}, oov)),
              {"oov.safetensors", "input_ids[1, 2] = 37", "vocabulary [0, 37)"}, "id == V");
  oov[6] = -1;
  expect_fail(run_cli(dir, fwd + write_ids("neg.safetensors", {2, 4}, oov)),
              {"input_ids[1, 2] = -1", "vocabulary"}, "negative id");
  expect_fail(run_cli(dir, fwd + write_ids("flat.safetensors", {8}, oov)),
              {"flat.safetensors", "[B, N]", "[8]"}, "1-D input_ids");
  expect_fail(run_cli(dir, fwd + write_ids("empty.safetensors", {0, 4}, {})),
              {"empty.safetensors", "[0, 4]", "empty"}, "B = 0");
  {
    SafeTensorsWriter w;
    std::vector<int64_t> ids(2 * 4, 3), mask(2 * 5, 1);
    w.add_i64("input_ids", {2, 4}, ids.data());
    w.add_i64("attention_mask", {2, 5}, mask.data());
    w.write(dir + "/maskshape.safetensors");
    expect_fail(run_cli(dir, fwd + dir + "/maskshape.safetensors"),
                {"maskshape.safetensors", "attention_mask", "[2, 5]", "[2, 4]"},
                "attention_mask shape mismatch");
    SafeTensorsWriter w2;
    mask.assign(2 * 4, 1);
    mask[3] = 2;
    w2.add_i64("input_ids", {2, 4}, ids.data());
    w2.add_i64("attention_mask", {2, 4}, mask.data());
    w2.write(dir + "/maskval.safetensors");
    expect_fail(run_cli(dir, fwd + dir + "/maskval.safetensors"),
                {"attention_mask[0, 3] = 2", "0 (padding) or 1"}, "mask value 2");
    SafeTensorsWriter w3;
    std::vector<float> fids(8, 1.f);
    w3.add_f32("input_ids", {2, 4}, fids.data());
    w3.write(dir + "/floatids.safetensors");
    expect_fail(run_cli(dir, fwd + dir + "/floatids.safetensors"),
                {"input_ids", "floating dtype F32", "integer"}, "float input_ids");
    SafeTensorsWriter w4;
    w4.add_i64("tokens", {2, 4}, ids.data());
    w4.write(dir + "/noids.safetensors");
    expect_fail(run_cli(dir, fwd + dir + "/noids.safetensors"),
                {"noids.safetensors", "no tensor 'input_ids'", "tokens"}, "no input_ids");
  }

  // Input files that are not safetensors.
  write_file_atomic(dir + "/text.safetensors", std::string("input_ids = [[0, 5, 6, 2]]\n"));
  expect_fail(run_cli(dir, fwd + dir + "/text.safetensors"),
              {"text.safetensors", "header length", "not a safetensors file"}, "text file");
  write_file_atomic(dir + "/short.safetensors", std::string("abc"));
  expect_fail(run_cli(dir, fwd + dir + "/short.safetensors"), {"short.safetensors", "too short"},
              "3-byte file");
  expect_fail(run_cli(dir, fwd + dir + "/absent.safetensors"), {"absent.safetensors"},
              "missing input file");
  EXPECT_FALSE(fs::exists(dir + "/out.safetensors")) << "a failed forward wrote output";

  // Neither --input nor --random-batch; both.
  expect_fail(run_cli(dir, "forward --model " + m + " --out " + dir + "/o.safetensors"),
              {"--input", "--random-batch"}, "no input");
  expect_fail(
      run_cli(dir, "forward --model " + m + " --random-batch 1 17 --out " + dir + "/o.safetensors"),
      {"max_len"}, "random batch too long");
  expect_fail(
      run_cli(dir, "forward --model " + m + " --random-batch 0 4 --out " + dir + "/o.safetensors"),
      {"--random-batch", "must be in [1, "}, "random batch B = 0");
  // An output path in a folder that does not exist.
  write_ids("ok.safetensors", {1, 4}, {0, 5, 6, 2});
  expect_fail(run_cli(dir, "forward --model " + m + " --input " + dir + "/ok.safetensors --out " +
                               dir + "/no/such/dir/o.safetensors"),
              {"cannot write", "no/such/dir/o.safetensors"}, "unwritable output");

  // Broken model folders.
  fs::create_directories(dir + "/empty_model");
  expect_fail(run_cli(dir, "forward --model " + dir + "/empty_model --input " + dir +
                               "/ok.safetensors --out " + dir + "/o.safetensors"),
              {"no model.safetensors"}, "folder without weights");
  Config other = cfg;
  other.d_model = 32;
  other.save(m + "/config.json");
  expect_fail(run_cli(dir, "info --model " + m),
              {"expected [37, 32]", "does the model configuration (config.json) match"},
              "config.json mismatching the weights");
}

// Numeric options out of range (NaN included) are refused with the allowed range,
// and no command replaces a model folder or one of its own inputs unless told to.
TEST(Cli, HostileOptionsAndOutputs) {
  const std::string dir = test::temp_dir("hostile");
  const std::string m = init_model(dir, test::tiny_config(), "m", 1);
  test::write_text(dir + "/corpus.txt", "some text\n");
  const std::string train =
      "pretrain --train " + dir + "/corpus.txt --config " + dir + "/m.json --out " + dir + "/run ";
  expect_fail(run_cli(dir, train + "--valid-fraction nan"),
              {"--valid-fraction must be in [0, 1), got nan"}, "--valid-fraction nan");
  expect_fail(run_cli(dir, train + "--mask-prob 2"), {"--mask-prob must be in (0, 1), got 2"},
              "--mask-prob 2");
  expect_fail(run_cli(dir, train + "--batch-size -4"), {"--batch-size must be in [1, "},
              "--batch-size -4");
  expect_fail(run_cli(dir, train + "--lr nan"), {"--lr must be positive and finite"}, "--lr nan");
  EXPECT_FALSE(fs::exists(dir + "/run")) << "a refused run created its folder";
  expect_fail(run_cli(dir, train + "--resume --overwrite"), {"--overwrite"},
              "--resume with --overwrite");
  test::write_text(dir + "/in.txt", "a text\n");
  for (const char* opt : {"--batch-size nan", "--batch-size 0", "--chunk -1", "--max-len inf"})
    expect_fail(run_cli(dir, "predict --model " + m + " --input " + dir + "/in.txt " + opt),
                {"must be in ["}, opt);

  // init refuses a folder that holds a model, unless --overwrite.
  const std::string again = "init --config " + dir + "/m.json --seed 2 --out " + m;
  expect_fail(run_cli(dir, again), {"already holds a model", "--overwrite"}, "init twice");
  expect_ok(run_cli(dir, again + " --overwrite"), "init --overwrite");
  // An output that is one of the inputs.
  expect_fail(run_cli(dir, "init --config " + dir + "/m.json --from " + m +
                               "/model.safetensors --overwrite --out " + m),
              {"would overwrite the input", "--from"}, "init --out holding --from");
  Inputs in = make_inputs(test::tiny_config());
  write_inputs(in, dir + "/in.safetensors", false);
  expect_fail(run_cli(dir, "forward --model " + m + " --input " + dir + "/in.safetensors --out " +
                               dir + "/in.safetensors"),
              {"would overwrite the input", "--input"}, "forward --out = --input");
  expect_fail(run_cli(dir, "forward --model " + m + " --random-batch 2 4 --out " + m +
                               "/model.safetensors"),
              {"would overwrite the input", "--model"}, "forward --out in the model folder");
  EXPECT_TRUE(fs::exists(dir + "/in.safetensors"));
}

}  // namespace
}  // namespace lf
