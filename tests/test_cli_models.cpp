// The command line with installed model names (`linformer models`, --model NAME) and the
// conversion route from a standard model folder to a longer Linformer (`init --from`).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint_util.h"
#include "linformer/checkpoint.h"
#include "linformer/model.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using namespace checkpoint_test;
using test::run_cli;
using test::show;

// `linformer ARGS` with LINFORMER_MODELS=models (and no user folder).
test::CliRun run_with(const std::string& dir, const std::string& models, const std::string& args) {
  ::setenv("LINFORMER_MODELS", models.c_str(), 1);
  ::setenv("XDG_DATA_HOME", (dir + "/no-user-folder").c_str(), 1);
  test::CliRun r = run_cli(dir, args);
  ::unsetenv("LINFORMER_MODELS");
  ::unsetenv("XDG_DATA_HOME");
  return r;
}

bool same_param(Model& a, Model& b, const std::string& name) {
  for (const ParamInfo& p : a.params())
    if (p.name == name) return same_bits(a.param(name), b.param(name), p.numel);
  ADD_FAILURE() << "no parameter " << name;
  return false;
}

TEST(CliModels, ListsInstalledModelsAndResolvesTheirNames) {
  const std::string dir = test::temp_dir("cli");
  const std::string models = dir + "/models";
  Model a(standard_config());
  randomise(a, 4);
  save_model(a, models + "/standard-tiny");
  Model b(linformer_configs()[0]);
  randomise(b, 5);
  save_model(b, models + "/linformer-tiny");

  test::CliRun r = run_with(dir, models, "models");
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("linformer-tiny"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("standard-tiny"), std::string::npos) << r.out;

  r = run_with(dir, models, "models --json");
  ASSERT_EQ(r.code, 0) << show(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_GE(j.size(), 2u);
  EXPECT_EQ(j[0]["name"], "linformer-tiny");
  EXPECT_EQ(j[0]["attention"], "linformer");
  EXPECT_EQ(j[0]["path"], models + "/linformer-tiny");
  EXPECT_EQ(j[1]["name"], "standard-tiny");
  EXPECT_EQ(j[1]["max_len"], standard_config().max_len);

  // A bare name works where a folder does: info prints the model's configuration.
  r = run_with(dir, models, "info --model standard-tiny");
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("\"attention\": \"standard\""), std::string::npos) << r.out;

  // An unknown name: a clear error listing what is installed, no crash.
  r = run_with(dir, models, "info --model standard-huge");
  EXPECT_FALSE(r.crashed) << show(r);
  EXPECT_NE(r.code, 0) << show(r);
  EXPECT_NE(r.err.find("standard-huge is neither a folder nor an installed model"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("installed models: linformer-tiny, standard-tiny"), std::string::npos)
      << r.err;
}

TEST(CliModels, InitFromAStandardFolderMakesALongerLinformer) {
  const std::string dir = test::temp_dir("cli");
  Model a(standard_config());  // max_len 16
  randomise(a, 8);
  save_model(a, dir + "/std");
  const test::CliRun r =
      run_cli(dir, "init --from '" + dir + "/std' --set attention=linformer --set max_len=48 " +
                       "--set k=8 --set projection_init=mean_pool --out '" + dir + "/long'");
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("extended from 16 to 48 positions"), std::string::npos) << r.out;
  auto m = load_model(dir + "/long");
  EXPECT_EQ(m->config().attention, AttentionKind::linformer);
  EXPECT_EQ(m->config().max_len, 48);
  EXPECT_EQ(m->config().d_model, standard_config().d_model);  // the folder's own config
  EXPECT_EQ(m->config().n_layers, standard_config().n_layers);
  // The encoder's weights came from the folder.
  for (const char* name : {"roberta.embeddings.word_embeddings.weight",
                           "roberta.encoder.layer.0.attention.self.query.weight"})
    EXPECT_TRUE(same_param(a, *m, name)) << name;
}

// A Linformer made longer: its projections, [k, max_len], no longer fit and start afresh (as
// projection_init says), named in the output; every other tensor is the folder's.
TEST(CliModels, InitFromALinformerFolderMakesItLonger) {
  const std::string dir = test::temp_dir("cli");
  const Config c = linformer_configs()[0];
  Model a(c);
  randomise(a, 9);
  save_model(a, dir + "/lin");
  const int64_t longer = 2 * c.max_len;
  const test::CliRun r = run_cli(dir, "init --from '" + dir + "/lin' --set max_len=" +
                                          std::to_string(longer) +
                                          " --set projection_init=mean_pool --out '" + dir +
                                          "/long'");
  ASSERT_EQ(r.code, 0) << show(r);
  EXPECT_NE(r.out.find("shaped otherwise in the file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("kv_proj.weight: [4, 16] -> [4, 32]"), std::string::npos) << r.out;
  auto m = load_model(dir + "/long");
  EXPECT_EQ(m->config().max_len, longer);
  for (const ParamInfo& p : m->params()) {
    if (p.name.find("kv_proj") != std::string::npos) {
      EXPECT_EQ(p.shape.back(), longer) << p.name;  // fresh, at the new length
    } else if (p.name.find("position_embeddings") == std::string::npos) {
      EXPECT_TRUE(same_param(a, *m, p.name)) << p.name;
    }
  }
  // A plain load (forward, finetune) still refuses the other shapes, naming a tensor.
  Model b(m->config());
  EXPECT_THROW(
      {
        try {
          load_weights(b, dir + "/lin/model.safetensors");
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("' has shape ["), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
}

}  // namespace
}  // namespace lf
