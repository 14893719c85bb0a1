// Data-parallel gradient averaging: the flat gradient buffer summed over the ranks in buckets
// that start (MPI_Iallreduce, non-blocking) during backward, as soon as the layers in them
// have their gradients, so that communication overlaps the rest of backward; and the check
// that the ranks' weights are still identical.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "linformer/model.h"

namespace lf::dist {

class GradReducer final : public BackwardObserver {
 public:
  // Buckets of at least bucket_floats gradients (whole layers; the last one takes the rest).
  // The training loop takes LINFORMER_GRAD_BUCKET_KB from the environment if set.
  static constexpr int64_t kDefaultBucketFloats = int64_t{1} << 19;  // 2 MiB

  // Registers itself as the model's backward observer until destroyed.
  GradReducer(Model& model, Comm& comm, int64_t bucket_floats = kDefaultBucketFloats);
  ~GradReducer() override;
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // The next backward pass completes the step's gradients (the step's last micro-batch):
  // start each bucket when its layers are done. Other backward passes start nothing.
  void arm();
  void grads_ready(int64_t layer) override;
  // Starts the buckets not started yet (all of them on a rank that ran no backward in its
  // last micro-batch), then waits until every bucket is summed. Returns the seconds waited.
  double finish();

  int64_t bucket_count() const { return static_cast<int64_t>(buckets_.size()); }
  // "4 buckets of 0.8-3.0 MB" for the start-up message.
  std::string describe() const;

 private:
  struct Bucket {
    int64_t lo, hi;     // float range of the gradient buffer
    size_t last_seg;    // ready when this segment is
    std::string what;   // for error messages
  };
  void start_ready();

  Model& model_;
  Comm& comm_;
  float* grads_ = nullptr;
  std::vector<Bucket> buckets_;
  size_t ready_segs_total_ = 0;  // segments (1: the single-bucket fallback)
  size_t ready_ = 0;    // segments ready (in ready order: top, layer L-1 .. 0, bottom)
  size_t started_ = 0;  // buckets started
  bool armed_ = false;
};

// The order-independent 64-bit checksum of the model's parameter bits.
uint64_t weight_checksum(Model& model);
// Throws lf::Error when the ranks' weights differ (compares their checksums).
void check_same_weights(Comm& comm, Model& model, int64_t step);

}  // namespace lf::dist
