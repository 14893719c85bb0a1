// Nystromformer attention (see attention_path_nystrom.h for the formulas). Every (sequence,
// head) pair is one task on one thread: its products are small (N x m, m x m) and run
// single-threaded on the thread's workspace. Matrices are dense row-major with mb columns or
// rows, mb = the sequence's landmark count; Q, K, V, the context and their gradients are the
// layer's [R, D] buffers, head h in columns [h Dh, (h+1) Dh).
#include "layers/attention_path_nystrom.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "layers/attention_paths.h"

namespace lf {

namespace {

constexpr int kPinvIterations = 6;  // the paper's choice

// One layer's shapes: B sequences of N positions, H heads of Dh, m landmarks (at most).
struct NyDims {
  int64_t B = 0, N = 0, D = 0, H = 0, Dh = 0, m = 0;
  float scale = 1.f;
};

// The landmark segments of one sequence: its real positions, split into mb consecutive runs;
// segment j holds pos[bound[j] .. bound[j+1]).
struct Segments {
  std::vector<int32_t> pos;
  std::vector<int64_t> bound;
  int64_t mb = 0;
};

Segments segments_of(const float* mask, int64_t N, int64_t m) {
  Segments s;
  for (int64_t t = 0; t < N; ++t)
    if (!mask || mask[t] != 0.f) s.pos.push_back(static_cast<int32_t>(t));
  const int64_t n = static_cast<int64_t>(s.pos.size());
  s.mb = std::min(m, n);
  for (int64_t j = 0; j <= s.mb; ++j) s.bound.push_back(s.mb ? j * n / s.mb : 0);
  return s;
}

// The tensors of one (sequence, head) that backward reads: kept per layer in training, on the
// thread's workspace in inference. Sizes for m landmarks (mb <= m used).
struct NyHead {
  float *qt, *kt;  // [mb, Dh] landmark queries and keys
  float* F;        // [N, mb]  softmax(s Q K~^T)
  float* A;        // [mb, mb] softmax(s Q~ K~^T)
  float* Bm;       // [mb, N]  softmax(s Q~ K^T), padded keys 0
  float* Z;        // [mb, mb] A+
  float *W, *U;    // [mb, Dh] B V and A+ B V
  static int64_t floats(const NyDims& d) { return 4 * d.m * d.Dh + 2 * d.N * d.m + 2 * d.m * d.m; }
  static NyHead carve(float* p, const NyDims& d) {
    NyHead t;
    const int64_t mD = d.m * d.Dh, Nm = d.N * d.m, mm = d.m * d.m;
    t.qt = p, t.kt = p + mD, t.W = p + 2 * mD, t.U = p + 3 * mD;
    t.F = p + 4 * mD, t.Bm = t.F + Nm, t.A = t.Bm + Nm, t.Z = t.A + mm;
    return t;
  }
};

// Per-thread workspace: the pseudo-inverse's iterates and temporaries (both directions), and
// backward's gradients of one (sequence, head).
int64_t pinv_floats(int64_t m) { return (kPinvIterations + 1 + 10) * m * m; }
int64_t grad_floats(const NyDims& d) { return 2 * d.N * d.m + 4 * d.m * d.Dh + 2 * d.m * d.m; }

// C [M,N] = alpha op(A) op(B) + beta C, dense operands (leading dimension = stored columns)
// unless given: the f32 product of one thread.
void mm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
        const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  gemm(ComputeType::f32, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// X = c I - X (n x n).
void from_identity(float* X, float c, int64_t n) {
  for (int64_t i = 0; i < n * n; ++i) X[i] = -X[i];
  for (int64_t i = 0; i < n; ++i) X[i * n + i] += c;
}

// Row and column of A [n,n] with the largest sum, and those sums.
struct NormArgs {
  int64_t row = 0, col = 0;
  float row_sum = 0.f, col_sum = 0.f;
};
NormArgs norm_args(const float* A, int64_t n) {
  NormArgs a;
  std::vector<float> cs(static_cast<size_t>(n), 0.f);
  for (int64_t i = 0; i < n; ++i) {
    float rs = 0.f;
    for (int64_t j = 0; j < n; ++j) rs += A[i * n + j], cs[j] += A[i * n + j];
    if (i == 0 || rs > a.row_sum) a.row_sum = rs, a.row = i;
  }
  for (int64_t j = 0; j < n; ++j)
    if (j == 0 || cs[j] > a.col_sum) a.col_sum = cs[j], a.col = j;
  return a;
}

// The iterates Z_0 .. Z_6 of A's pseudo-inverse into zs (7 matrices of n x n); work: 3 n n.
void pinv_forward(float* zs, const float* A, int64_t n, float* work) {
  const int64_t nn = n * n;
  float *P = work, *T1 = work + nn, *T2 = work + 2 * nn;
  const NormArgs a = norm_args(A, n);
  const float c = 1.f / (a.row_sum * a.col_sum);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) zs[i * n + j] = A[j * n + i] * c;
  for (int i = 0; i < kPinvIterations; ++i) {
    const float* Z = zs + i * nn;
    mm(false, false, n, n, n, 1.f, A, n, Z, n, 0.f, P, n);  // P = A Z
    std::memcpy(T1, P, sizeof(float) * nn);
    from_identity(T1, 7.f, n);  // 7I - P
    mm(false, false, n, n, n, 1.f, P, n, T1, n, 0.f, T2, n);
    from_identity(T2, 15.f, n);  // 15I - P T1
    mm(false, false, n, n, n, 1.f, P, n, T2, n, 0.f, T1, n);
    from_identity(T1, 13.f, n);  // 13I - P T2
    mm(false, false, n, n, n, 0.25f, Z, n, T1, n, 0.f, zs + (i + 1) * nn, n);
  }
}

// dA += d(Z_6)/dA applied to dZ (n x n, overwritten): backward through pinv_forward's
// iterations and its start Z_0 (the scale's maxima included). zs as pinv_forward left them;
// work: 9 n n.
void pinv_backward(float* dA, float* dZ, const float* A, const float* zs, int64_t n, float* work) {
  const int64_t nn = n * n;
  float *P = work, *T1 = P + nn, *T2 = T1 + nn, *T3 = T2 + nn, *dT = T3 + nn, *dT2 = dT + nn,
        *dP = dT2 + nn, *dZp = dP + nn;
  for (int i = kPinvIterations - 1; i >= 0; --i) {
    const float* Z = zs + i * nn;
    mm(false, false, n, n, n, 1.f, A, n, Z, n, 0.f, P, n);
    std::memcpy(T1, P, sizeof(float) * nn);
    from_identity(T1, 7.f, n);
    mm(false, false, n, n, n, 1.f, P, n, T1, n, 0.f, T2, n);
    from_identity(T2, 15.f, n);
    mm(false, false, n, n, n, 1.f, P, n, T2, n, 0.f, T3, n);
    from_identity(T3, 13.f, n);
    // Z' = Z T3 / 4
    mm(false, true, n, n, n, 0.25f, dZ, n, T3, n, 0.f, dZp, n);  // dZ  = dZ' T3^T / 4
    mm(true, false, n, n, n, 0.25f, Z, n, dZ, n, 0.f, dT, n);    // dT3 = Z^T dZ' / 4
    // T3 = 13I - P T2
    mm(false, true, n, n, n, -1.f, dT, n, T2, n, 0.f, dP, n);  // dP  = -dT3 T2^T
    mm(true, false, n, n, n, -1.f, P, n, dT, n, 0.f, dT2, n);  // dT2 = -P^T dT3
    // T2 = 15I - P T1
    mm(false, true, n, n, n, -1.f, dT2, n, T1, n, 1.f, dP, n);  // dP -= dT2 T1^T
    mm(true, false, n, n, n, -1.f, P, n, dT2, n, 0.f, dT, n);   // dT1 = -P^T dT2
    for (int64_t k = 0; k < nn; ++k) dP[k] -= dT[k];            // T1 = 7I - P
    // P = A Z
    mm(false, true, n, n, n, 1.f, dP, n, Z, n, 1.f, dA, n);   // dA += dP Z^T
    mm(true, false, n, n, n, 1.f, A, n, dP, n, 1.f, dZp, n);  // dZ += A^T dP
    std::memcpy(dZ, dZp, sizeof(float) * nn);
  }
  // Z_0 = A^T / c, c = max row sum * max column sum.
  const NormArgs a = norm_args(A, n);
  const float c = a.row_sum * a.col_sum;
  float dc = 0.f;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      dA[j * n + i] += dZ[i * n + j] / c;
      dc -= dZ[i * n + j] * zs[i * n + j] / c;
    }
  for (int64_t j = 0; j < n; ++j) dA[a.row * n + j] += dc * a.col_sum;
  for (int64_t i = 0; i < n; ++i) dA[i * n + a.col] += dc * a.row_sum;
}

// The means of x's rows (row stride ld, Dh columns) over each segment into out [mb, Dh].
void segment_means(float* out, const float* x, int64_t ld, const Segments& s, int64_t Dh) {
  for (int64_t j = 0; j < s.mb; ++j) {
    float* o = out + j * Dh;
    std::fill(o, o + Dh, 0.f);
    for (int64_t t = s.bound[j]; t < s.bound[j + 1]; ++t) {
      const float* r = x + s.pos[t] * ld;
      for (int64_t c = 0; c < Dh; ++c) o[c] += r[c];
    }
    const float inv = 1.f / static_cast<float>(s.bound[j + 1] - s.bound[j]);
    for (int64_t c = 0; c < Dh; ++c) o[c] *= inv;
  }
}

// dx's rows (stride ld) += each segment's gradient dm [mb, Dh] spread evenly over it.
void segment_means_backward(float* dx, const float* dm, int64_t ld, const Segments& s, int64_t Dh) {
  for (int64_t j = 0; j < s.mb; ++j) {
    const float inv = 1.f / static_cast<float>(s.bound[j + 1] - s.bound[j]);
    for (int64_t t = s.bound[j]; t < s.bound[j + 1]; ++t) {
      float* r = dx + s.pos[t] * ld;
      for (int64_t c = 0; c < Dh; ++c) r[c] += dm[j * Dh + c] * inv;
    }
  }
}

// Zero rows [N, Dh] of stride ld.
void zero_rows(float* x, int64_t N, int64_t ld, int64_t Dh) {
  for (int64_t t = 0; t < N; ++t) std::fill(x + t * ld, x + t * ld + Dh, 0.f);
}

// One (sequence, head): out [N, Dh] (stride D) from q, k, v (stride D); t receives what
// backward reads; pw: pinv_floats(m) of workspace.
void head_forward(float* out, const float* q, const float* k, const float* v, const float* key_mask,
                  const Segments& s, const NyDims& d, const NyHead& t, float* pw) {
  const int64_t N = d.N, D = d.D, Dh = d.Dh, mb = s.mb;
  if (mb == 0) return zero_rows(out, N, D, Dh);
  segment_means(t.qt, q, D, s, Dh);
  segment_means(t.kt, k, D, s, Dh);
  mm(false, true, N, mb, Dh, 1.f, q, D, t.kt, Dh, 0.f, t.F, mb);
  softmax_forward(t.F, t.F, N, mb, d.scale, nullptr);
  mm(false, true, mb, mb, Dh, 1.f, t.qt, Dh, t.kt, Dh, 0.f, t.A, mb);
  softmax_forward(t.A, t.A, mb, mb, d.scale, nullptr);
  mm(false, true, mb, N, Dh, 1.f, t.qt, Dh, k, D, 0.f, t.Bm, N);
  softmax_forward(t.Bm, t.Bm, mb, N, d.scale, key_mask);
  pinv_forward(pw, t.A, mb, pw + (kPinvIterations + 1) * mb * mb);
  std::memcpy(t.Z, pw + kPinvIterations * mb * mb, sizeof(float) * mb * mb);
  mm(false, false, mb, Dh, N, 1.f, t.Bm, N, v, D, 0.f, t.W, Dh);
  mm(false, false, mb, Dh, mb, 1.f, t.Z, mb, t.W, Dh, 0.f, t.U, Dh);
  mm(false, false, N, Dh, mb, 1.f, t.F, mb, t.U, Dh, 0.f, out, D);
}

// Backward of head_forward: dq, dk, dv (stride D) written from dout (stride D). gw:
// grad_floats(d), pw: pinv_floats(m).
void head_backward(float* dq, float* dk, float* dv, const float* dout, const float* q,
                   const float* k, const float* v, const Segments& s, const NyDims& d,
                   const NyHead& t, float* gw, float* pw) {
  const int64_t N = d.N, D = d.D, Dh = d.Dh, mb = s.mb, mD = d.m * Dh;
  for (float* x : {dq, dk, dv}) zero_rows(x, N, D, Dh);
  if (mb == 0) return;
  float *dF = gw, *dBm = dF + N * d.m, *dU = dBm + N * d.m, *dW = dU + mD, *dQt = dW + mD,
        *dKt = dQt + mD, *dZ = dKt + mD, *dA = dZ + d.m * d.m;
  mm(true, false, mb, Dh, N, 1.f, t.F, mb, dout, D, 0.f, dU, Dh);  // dU = F^T dout
  mm(false, true, N, mb, Dh, 1.f, dout, D, t.U, Dh, 0.f, dF, mb);  // dF = dout U^T
  mm(false, true, mb, mb, Dh, 1.f, dU, Dh, t.W, Dh, 0.f, dZ, mb);  // dZ = dU W^T
  mm(true, false, mb, Dh, mb, 1.f, t.Z, mb, dU, Dh, 0.f, dW, Dh);  // dW = Z^T dU
  mm(false, true, mb, N, Dh, 1.f, dW, Dh, v, D, 0.f, dBm, N);      // dB = dW V^T
  mm(true, false, N, Dh, mb, 1.f, t.Bm, N, dW, Dh, 0.f, dv, D);    // dV = B^T dW
  // A+ from the iterates again (cheap: m x m), then backward through them.
  pinv_forward(pw, t.A, mb, pw + (kPinvIterations + 1) * mb * mb);
  std::fill(dA, dA + mb * mb, 0.f);
  pinv_backward(dA, dZ, t.A, pw, mb, pw + (kPinvIterations + 1) * mb * mb);
  // The three softmaxes, to their (unscaled) scores.
  softmax_backward(dF, t.F, dF, N, mb, d.scale, false);
  softmax_backward(dA, t.A, dA, mb, mb, d.scale, false);
  softmax_backward(dBm, t.Bm, dBm, mb, N, d.scale, false);
  mm(false, false, N, Dh, mb, 1.f, dF, mb, t.kt, Dh, 0.f, dq, D);     // dQ  = dSF K~
  mm(true, false, mb, Dh, N, 1.f, dF, mb, q, D, 0.f, dKt, Dh);        // dK~ = dSF^T Q
  mm(true, false, mb, Dh, mb, 1.f, dA, mb, t.qt, Dh, 1.f, dKt, Dh);   //     + dSA^T Q~
  mm(false, false, mb, Dh, mb, 1.f, dA, mb, t.kt, Dh, 0.f, dQt, Dh);  // dQ~ = dSA K~
  mm(false, false, mb, Dh, N, 1.f, dBm, N, k, D, 1.f, dQt, Dh);       //     + dSB K
  mm(true, false, N, Dh, mb, 1.f, dBm, N, t.qt, Dh, 0.f, dk, D);      // dK  = dSB^T Q~
  segment_means_backward(dq, dQt, D, s, Dh);
  segment_means_backward(dk, dKt, D, s, Dh);
}

// The kind's activations of one layer (training) and its per-thread workspace (both plans).
struct NystromAct final : PathBlock {
  KVMaps kv;
  float* keep = nullptr;  // training: B H NyHead::floats
};
struct NystromWork final : PathBlock {
  float* work = nullptr;
  int64_t per_thread = 0;
};

class NystromPath final : public FullKeysPath<NystromAct> {
 public:
  const char* name() const override { return "nystrom"; }
  bool runs(const Config& cfg) const override { return cfg.attention == AttentionKind::nystrom; }
  void validate(const Config& cfg) const override {
    LF_CHECK(cfg.landmarks >= 1 && cfg.landmarks <= cfg.max_len,
             "config: landmarks must be in [1, ", "max_len = ", cfg.max_len,
             "] for nystrom attention, got ", cfg.landmarks);
    LF_CHECK(!cfg.causal,
             "config: causal attention is impossible with nystrom: each landmark "
             "averages a segment of positions, so every query would see future tokens");
    LF_CHECK(cfg.attention_dropout == 0.f,
             "config: nystrom attention has no attention "
             "probabilities to drop out; set attention_dropout to 0 (got ",
             cfg.attention_dropout, ")");
  }
  void variants(const Config& base, std::vector<AttentionVariant>& out) const override {
    Config c = base;
    c.attention = AttentionKind::nystrom;
    c.attention_dropout = 0.f;
    c.landmarks = std::min(base.landmarks, std::max<int64_t>(1, base.max_len / 4));
    out.push_back({"nystrom", c});
  }
  int64_t key_length(int64_t N, int64_t) const override { return N; }
  bool has_softmax_probs() const override { return false; }
  bool runs_precision(ComputeType t, bool train) const override {
    return !train || t == ComputeType::f32;
  }

  // ---- training ----
  void plan_train(Carver& c, LayerAct& A, const Config& cfg, const PathShape& s) const override {
    make_block<NystromAct>(A.path).kv.take(c, cfg, s);
  }
  void plan_attention(Carver& c, LayerAct& A, const Config& cfg,
                      const PathShape& s) const override {
    const NyDims d = dims(cfg, s.B, s.N);
    block_of<NystromAct>(A.path).keep = c.take<float>(s.B * d.H * NyHead::floats(d));
  }
  void plan_backward(Carver& c, Layout& l, const Config& cfg, const PathShape& s) const override {
    const NyDims d = dims(cfg, s.B, s.N);
    take_work(c, l, pinv_floats(d.m) + grad_floats(d));
  }
  void attend(const LayerContext& c, const LayerParams&, LayerAct& A, int64_t, const KeysValues& kv,
              float p_drop) const override {
    LF_DCHECK(p_drop == 0.f && A.q.f32() && A.ctx.f32(),
              "nystrom: f32 queries and context, no dropout");
    const float* q = A.q.f32();
    float* ctx = A.ctx.f32();
    const NyDims d = dims(*c.cfg, c.B, c.N);
    const NystromWork& w = block_of<NystromWork>(c.lay->path);
    float* keep = block_of<NystromAct>(A.path).keep;
    for_each_head(c, d, [&](int64_t b, int64_t h, const Segments& s) {
      const int64_t o = b * d.N * d.D + h * d.Dh;
      const NyHead t = NyHead::carve(keep + (b * d.H + h) * NyHead::floats(d), d);
      head_forward(ctx + o, q + o, kv.k.f32() + o, kv.v.f32() + o, mask_of(c, b), s, d, t,
                   w.work + thread_id() * w.per_thread);
    });
  }
  TensorIn attend_backward(const LayerContext& c, const LayerParams&, LayerAct& A, int64_t,
                           const KeysValues& kv) const override {
    Layout& L = *c.lay;
    LF_DCHECK(L.dctx.f32() && L.dq && A.q.f32(), "nystrom: f32 queries and gradients");
    const float* dctx = L.dctx.f32();
    const float* q = A.q.f32();
    const NyDims d = dims(*c.cfg, c.B, c.N);
    const NystromWork& w = block_of<NystromWork>(L.path);
    float* keep = block_of<NystromAct>(A.path).keep;
    for_each_head(c, d, [&](int64_t b, int64_t h, const Segments& s) {
      const int64_t o = b * d.N * d.D + h * d.Dh;
      const NyHead t = NyHead::carve(keep + (b * d.H + h) * NyHead::floats(d), d);
      float* pw = w.work + thread_id() * w.per_thread;
      head_backward(L.dq + o, L.dkk + o, L.dvv + o, dctx + o, q + o, kv.k.f32() + o, kv.v.f32() + o,
                    s, d, t, pw + pinv_floats(d.m), pw);
    });
    return L.dq;
  }

  // ---- inference: whole-batch Q and context, like tiled standard attention ----
  void plan_infer(Carver& c, LayerAct& A, Layout& l, const Config& cfg,
                  const PathShape& s) const override {
    const int64_t R = s.B * s.N, D = cfg.d_model;
    make_block<NystromAct>(A.path).kv.take(c, cfg, s);
    A.q = c.take<float>(R * D);
    A.ctx = c.take<float>(R * D);
    const NyDims d = dims(cfg, s.B, s.N);
    take_work(c, l, pinv_floats(d.m) + NyHead::floats(d));
  }
  int64_t rows_work_floats(int64_t, const AttnDims&) const override { return 0; }
  KeysValues infer_batch(const LayerContext& c, const LayerParams& lp, LayerAct& A, const float* in,
                         const float** ctx_all) const override {
    const NystromAct& act = block_of<NystromAct>(A.path);
    act.kv.infer(c, lp, in);
    float* q = A.q.f32();
    float* ctx = A.ctx.f32();
    lp.q.packed.apply(q, in, c.B * c.N, lp.q.b, PackedLinear::Epilogue::store, c.N);
    const KeysValues kv = saved(c, A);
    const NyDims d = dims(*c.cfg, c.B, c.N);
    const NystromWork& w = block_of<NystromWork>(c.lay->path);
    for_each_head(c, d, [&](int64_t b, int64_t h, const Segments& s) {
      const int64_t o = b * d.N * d.D + h * d.Dh;
      float* pw = w.work + thread_id() * w.per_thread;
      const NyHead t = NyHead::carve(pw + pinv_floats(d.m), d);
      head_forward(ctx + o, q + o, kv.k.f32() + o, kv.v.f32() + o, mask_of(c, b), s, d, t, pw);
    });
    *ctx_all = ctx;
    return kv;
  }

  double flops(const Config& cfg, int64_t, double n) const override {
    const double D = static_cast<double>(cfg.d_model), H = static_cast<double>(cfg.n_heads),
                 m = std::min(static_cast<double>(cfg.landmarks), n), Dh = D / H;
    return 2.0 * n * (2.0 * D * D)                             // K and V maps
           + H * (2.0 * Dh * (4.0 * n * m + 2.0 * m * m)       // F, B, B V, F U; A, Z W
                  + kPinvIterations * 4.0 * 2.0 * m * m * m);  // the pseudo-inverse
  }

 private:
  static NyDims dims(const Config& cfg, int64_t B, int64_t N) {
    NyDims d;
    d.B = B, d.N = N, d.D = cfg.d_model, d.H = cfg.n_heads, d.Dh = cfg.d_head();
    d.m = std::min(cfg.landmarks, N);
    d.scale = 1.f / std::sqrt(static_cast<float>(d.Dh));
    return d;
  }
  static const float* mask_of(const LayerContext& c, int64_t b) {
    return c.mask ? c.mask + b * c.N : nullptr;
  }
  static void take_work(Carver& c, Layout& l, int64_t per_thread) {
    NystromWork& w = make_block<NystromWork>(l.path);
    w.per_thread = (per_thread + 15) / 16 * 16;
    w.work = c.take<float>(w.per_thread * num_threads());
  }
  // f(b, h, segments of b) for every (sequence, head), in parallel, one pair per task.
  template <class F>
  static void for_each_head(const LayerContext& c, const NyDims& d, const F& f) {
    std::vector<Segments> segs(static_cast<size_t>(d.B));
    for (int64_t b = 0; b < d.B; ++b) segs[b] = segments_of(mask_of(c, b), d.N, d.m);
    parallel_for(0, d.B * d.H, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) f(i / d.H, i % d.H, segs[i / d.H]);
    });
  }
};

}  // namespace

const AttentionPath& nystrom_path() {
  static const NystromPath path;
  return path;
}

}  // namespace lf
