// Linformer with strided subsampling (projection: stride): after the K/V maps on every row,
// projected row j of the keys (and values) is the key at the start of its window of
// w = max_len / K positions, kp[b,j,:] = k[b, j*w, :] if that position is real, else 0.
// No parameters, whatever the sharing. Rows whose window holds no real position are left out
// like the other fixed projections' (mark_live_rows, docs/model.md).
#include <cstring>

#include "layers/attention_path_linformer.h"

namespace lf {

namespace {

class StridePath final : public ReduceKeysPath {
 public:
  const char* name() const override { return "stride"; }
  bool runs(const Config& cfg) const override {
    return is_linformer(cfg) && cfg.projection == Projection::stride;
  }
  void variants(const Config& base, std::vector<AttentionVariant>& out) const override {
    add_variants(base, {Sharing::none, Sharing::layerwise}, {Projection::stride}, out);
  }
  std::vector<PathTensor> tensors(const Config&, int64_t) const override { return {}; }

 private:
  // out [B,rows,C]: row j = x [B,N,C] at position j*w when real (and < N), else 0.
  static void pick(const LayerContext& c, const LayerParams& lp, float* out, const float* x) {
    const int64_t N = c.N, C = c.cfg->d_model, rows = c.proj_rows(lp), w = c.cfg->max_len / lp.K;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < rows; ++j) {
        const int64_t t = j * w;
        float* o = out + (b * rows + j) * C;
        if (t < N && (!c.mask || c.mask[b * N + t] != 0.f))
          std::memcpy(o, x + (b * N + t) * C, C * sizeof(float));
        else
          std::memset(o, 0, C * sizeof(float));
      }
  }
  // dx [B,N,C] += d(out) at the positions pick() read.
  static void scatter(const LayerContext& c, const LayerParams& lp, float* dx, const float* dout) {
    const int64_t N = c.N, C = c.cfg->d_model, rows = c.proj_rows(lp), w = c.cfg->max_len / lp.K;
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t j = 0; j < rows; ++j) {
        const int64_t t = j * w;
        if (t >= N || (c.mask && c.mask[b * N + t] == 0.f)) continue;
        const float* g = dout + (b * rows + j) * C;
        float* d = dx + (b * N + t) * C;
        for (int64_t i = 0; i < C; ++i) d[i] += g[i];
      }
  }
  void reduce(const LayerContext& c, const LayerParams& lp, LinformerAct& A) const override {
    pick(c, lp, A.kp, A.kv.k);
    pick(c, lp, A.vp, A.kv.v);
  }
  void reduce_backward(const LayerContext& c, const LayerParams& lp, const LinformerAct&, float* dk,
                       float* dv, const float* dkp, const float* dvp) const override {
    scatter(c, lp, dk, dkp);
    scatter(c, lp, dv, dvp);
  }
  double reduce_flops(const Config&, double, double) const override { return 0.0; }
};

}  // namespace

const AttentionPath& stride_path() {
  static const StridePath p;
  return p;
}

}  // namespace lf
