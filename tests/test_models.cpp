// Released-model plumbing: extending a model's position embeddings (init --from a shorter
// model, Longformer's recipe) and resolving bare model names (docs/models.md).
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint_util.h"
#include "linformer/checkpoint.h"
#include "linformer/error.h"
#include "linformer/models.h"
#include "test_util.h"

namespace lf {
namespace {

namespace fs = std::filesystem;
using namespace checkpoint_test;

constexpr const char* kPos = "roberta.embeddings.position_embeddings.weight";

// The hidden states of `m` on one sequence of `n` tokens (ids from `seed`).
std::vector<float> hidden_of(Model& m, int64_t n, int seed) {
  std::vector<int32_t> ids(n);
  std::vector<float> mask(n, 1.f);
  for (int64_t t = 0; t < n; ++t)
    ids[t] = static_cast<int32_t>(3 + (seed * 13 + 7 * t) % (m.config().vocab_size - 3));
  m.forward(Batch{ids.data(), mask.data(), 1, n}, false);
  return {m.hidden(), m.hidden() + n * m.config().d_model};
}

TEST(PositionExtension, LongerStandardModelKeepsOutputsWithinTheOldLength) {
  const std::string dir = test::temp_dir("short");
  Config short_cfg = standard_config();  // max_len 16, position_offset 2
  Model a(short_cfg);
  randomise(a, 11);
  save_model(a, dir);

  Config long_cfg = short_cfg;
  long_cfg.max_len = 40;  // not a multiple of 16: the last copy is partial
  Model b(long_cfg);
  b.init(5);
  LoadOptions lo;
  lo.extend_positions = true;
  const LoadReport rep = load_weights(b, dir + "/model.safetensors", lo);
  EXPECT_EQ(rep.positions_from, 16);
  EXPECT_EQ(rep.positions_to, 40);
  EXPECT_TRUE(rep.initialised.empty());

  // The table: the offset rows as they were, then the learned rows again and again.
  const int64_t D = short_cfg.d_model, off = short_cfg.position_offset;
  const float* pa = a.param(kPos);
  const float* pb = b.param(kPos);
  EXPECT_TRUE(same_bits(pa, pb, off * D));
  for (int64_t t = 0; t < 40; ++t)
    ASSERT_TRUE(same_bits(pa + (off + t % 16) * D, pb + (off + t) * D, D)) << "position " << t;
  // Every other parameter unchanged.
  for (const ParamInfo& p : a.params())
    if (p.name != kPos)
      EXPECT_TRUE(same_bits(a.param(p.name), b.param(p.name), p.numel)) << p.name;

  // Inputs within the old length: bitwise the same hidden states.
  for (int64_t n : {1, 5, 16}) {
    const std::vector<float> ha = hidden_of(a, n, static_cast<int>(n));
    const std::vector<float> hb = hidden_of(b, n, static_cast<int>(n));
    ASSERT_EQ(ha.size(), hb.size());
    EXPECT_TRUE(same_bits(ha.data(), hb.data(), ha.size())) << "n = " << n;
  }
  // Longer inputs run.
  const std::vector<float> h = hidden_of(b, 40, 1);
  for (float v : h) ASSERT_TRUE(std::isfinite(v));
}

TEST(PositionExtension, IntoALinformerInitialisesOnlyTheProjections) {
  const std::string dir = test::temp_dir("short");
  Model a(standard_config());
  randomise(a, 2);
  save_model(a, dir);
  Config c = linformer_configs()[0];
  c.max_len = 64;
  Model b(c);
  LoadOptions lo;
  lo.extend_positions = true;
  const LoadReport rep = load_weights(b, dir + "/model.safetensors", lo);
  EXPECT_EQ(rep.positions_to, 64);
  ASSERT_FALSE(rep.initialised.empty());
  for (const std::string& n : rep.initialised)
    EXPECT_NE(n.find("proj"), std::string::npos) << n << " was initialised";
}

TEST(PositionExtension, RefusedWithoutTheOptionAndNeverShrinks) {
  const std::string dir = test::temp_dir("short");
  Model a(standard_config());
  randomise(a, 2);
  save_model(a, dir);
  Config longer = standard_config();
  longer.max_len = 32;
  Model b(longer);
  test::expect_error([&] { load_weights(b, dir + "/model.safetensors"); }, {"has shape"});
  // A shorter model is not a truncation target: shapes must match.
  Config shorter = standard_config();
  shorter.max_len = 8;
  Model c(shorter);
  LoadOptions lo;
  lo.extend_positions = true;
  test::expect_error([&] { load_weights(c, dir + "/model.safetensors", lo); }, {"has shape"});
}

// LINFORMER_MODELS set for the life of one test.
class ModelNames : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test::temp_dir("models");
    const char* old = std::getenv("LINFORMER_MODELS");
    had_ = old != nullptr;
    if (old) old_ = old;
    ::setenv("LINFORMER_MODELS", (root_ + "/a:" + root_ + "/b").c_str(), 1);
    ::setenv("XDG_DATA_HOME", (root_ + "/xdg").c_str(), 1);
  }
  void TearDown() override {
    if (had_)
      ::setenv("LINFORMER_MODELS", old_.c_str(), 1);
    else
      ::unsetenv("LINFORMER_MODELS");
    ::unsetenv("XDG_DATA_HOME");
  }
  void make(const std::string& dir, const Config& c) {
    Model m(c);
    randomise(m, 1);
    save_model(m, dir);
  }
  std::string root_, old_;
  bool had_ = false;
};

TEST_F(ModelNames, BareNameFindsTheInstalledFolderFirstFolderWins) {
  make(root_ + "/a/mini", standard_config());
  make(root_ + "/b/mini", linformer_configs()[0]);
  make(root_ + "/b/other", linformer_configs()[0]);
  fs::create_directories(root_ + "/b/not-a-model");  // no weights: never listed
  EXPECT_EQ(resolve_model("mini"), root_ + "/a/mini");
  EXPECT_EQ(resolve_model("other"), root_ + "/b/other");
  const std::vector<InstalledModel> all = installed_models();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "mini");
  EXPECT_EQ(all[0].attention, "standard");
  EXPECT_EQ(all[0].max_len, standard_config().max_len);
  EXPECT_GT(all[0].bytes, 0);
  EXPECT_EQ(all[1].name, "other");
  EXPECT_EQ(all[1].attention, "linformer");
  // The search path starts with LINFORMER_MODELS, then the user's data folder.
  const std::vector<std::string> path = model_search_path();
  ASSERT_GE(path.size(), 3u);
  EXPECT_EQ(path[0], root_ + "/a");
  EXPECT_EQ(path[1], root_ + "/b");
  EXPECT_EQ(path[2], root_ + "/xdg/linformer/models");
}

TEST_F(ModelNames, AnExistingPathWinsOverAName) {
  make(root_ + "/a/mini", standard_config());
  const std::string cwd = fs::current_path();
  const std::string here = test::temp_dir("cwd");
  fs::current_path(here);
  fs::create_directories("mini");
  EXPECT_EQ(resolve_model("mini"), "mini");
  fs::current_path(cwd);
  fs::create_directories(root_ + "/b");
  EXPECT_EQ(resolve_model(root_ + "/b"), root_ + "/b");  // any existing path as it is
}

TEST_F(ModelNames, MissingNameListsTheInstalledModels) {
  make(root_ + "/a/linformer-mini", linformer_configs()[0]);
  make(root_ + "/b/standard-mini", standard_config());
  test::expect_error([] { resolve_model("linformer-big"); },
                     {"model linformer-big is neither a folder nor an installed model; installed "
                      "models: linformer-mini, standard-mini"});
  test::expect_error([] { resolve_model("runs/nothing/here"); },
                     {"model runs/nothing/here does not exist"});
}

TEST_F(ModelNames, NothingInstalledSaysSo) {
  test::expect_error([] { resolve_model("linformer-mini"); }, {"no model is installed"});
}

}  // namespace
}  // namespace lf
