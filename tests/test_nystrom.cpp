// Nystromformer attention (layers/attention_path_nystrom.h) beyond what every kind gets from
// the kind-parameterised suites (PyTorch reference, finite differences, padding and batch
// invariance): its config key, and the clear refusals of what it cannot do.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "layers/attention_path.h"
#include "linformer/compute_type.h"
#include "linformer/config.h"
#include "linformer/finetune.h"
#include "linformer/model.h"
#include "linformer/pretrain.h"
#include "test_util.h"
#include "train/run_io.h"

namespace lf {
namespace {

Config nystrom_config() {
  Config c = test::tiny_config();
  c.attention = AttentionKind::nystrom;
  c.landmarks = 4;
  return c;
}

TEST(Nystrom, LandmarksKeyIsReadAndWrittenForNystromOnly) {
  const Config c = Config::load_with_overrides(
      "", {"attention=nystrom", "landmarks=5", "attention_dropout=0", "max_len=32"});
  EXPECT_EQ(c.attention, AttentionKind::nystrom);
  EXPECT_EQ(c.landmarks, 5);
  EXPECT_EQ(std::string(attention_path(c).name()), "nystrom");
  const std::string text = c.to_json();
  EXPECT_NE(text.find("\"landmarks\": 5"), std::string::npos) << text;
  EXPECT_EQ(Config::from_json(text).landmarks, 5);
  // The other kinds' configs are written as before.
  EXPECT_EQ(test::tiny_config().to_json().find("landmarks"), std::string::npos);
}

TEST(Nystrom, ConfigRefusesWhatItCannotRun) {
  Config c = nystrom_config();
  c.attention_dropout = 0.1f;
  test::expect_error([&] { c.validate(); }, {"nystrom", "attention_dropout"}, "dropout");
  c = nystrom_config();
  c.causal = true;
  test::expect_error([&] { c.validate(); }, {"nystrom", "causal"}, "causal");
  for (int64_t bad : {int64_t{0}, c.max_len + 1}) {
    c = nystrom_config();
    c.landmarks = bad;
    test::expect_error([&] { c.validate(); }, {"landmarks", "nystrom"}, "landmarks");
  }
}

TEST(Nystrom, HasNoSoftmaxProbabilitiesToHandOut) {
  Model m(nystrom_config());
  test::randomise(m, 3);
  const std::vector<int32_t> ids = {0, 5, 6, 7, 8, 9, 2, 1};
  m.forward(Batch{ids.data(), nullptr, 1, 8}, true);
  test::expect_error([&] { m.attention_probs(0); }, {"nystrom", "softmax"}, "attention_probs");
}

// Inference runs in every precision (the linear maps in it, the landmark attention in f32;
// the kind-wide bf16 and int8 suites check the outputs against f32); training in bf16 is
// refused naming the kind.
TEST(Nystrom, InfersInEveryPrecisionTrainsInF32Only) {
  for (ComputeType t : {ComputeType::bf16, ComputeType::int8}) {
    if (!compute_type_supported(t)) continue;
    Model m(nystrom_config());
    m.set_compute_type(t);
    EXPECT_EQ(m.compute_type(), t);
    if (compute_type_trains(t)) {
      test::expect_error([&] { m.set_train_compute_type(t); }, {"nystrom", "trains in f32 only"},
                         std::string("train ") + compute_type_name(t));
      EXPECT_EQ(m.train_compute_type(), ComputeType::f32);
    }
  }
}

// --precision auto trains a kind that trains in f32 only in f32 (on a CPU where auto picks
// bf16); a precision asked by name is left for the model to refuse; other kinds keep it.
TEST(Nystrom, AutoPrecisionTrainsInF32) {
  const Config ny = nystrom_config();
  Config lin = ny;
  lin.attention = AttentionKind::linformer;
  EXPECT_EQ(trained_precision("pretrain", ny, ComputeType::bf16, true, true), ComputeType::f32);
  EXPECT_EQ(trained_precision("pretrain", ny, ComputeType::bf16, false, true), ComputeType::bf16);
  EXPECT_EQ(trained_precision("pretrain", lin, ComputeType::bf16, true, true), ComputeType::bf16);
  EXPECT_EQ(trained_precision("pretrain", ny, ComputeType::f32, true, true), ComputeType::f32);
  // "auto" in the options' JSON (the Python module's way) sets the flag; a stored run's name not.
  nlohmann::json j = PretrainOptions().to_json();
  j["precision"] = "auto";
  EXPECT_TRUE(PretrainOptions::from_json(j).precision_auto);
  j["precision"] = "f32";
  EXPECT_FALSE(PretrainOptions::from_json(j).precision_auto);
  nlohmann::json f = FinetuneOptions().to_json();
  f["precision"] = "auto";
  EXPECT_TRUE(FinetuneOptions::from_json(f).precision_auto);
}

}  // namespace
}  // namespace lf
