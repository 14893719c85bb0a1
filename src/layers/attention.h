// Multi-head attention building blocks shared by standard and Linformer attention.
// Activations are [B, L, D] row-major with head h in columns [h*Dh, (h+1)*Dh).
#pragma once
#include <cstdint>

namespace lf {

struct AttnDims {
  int64_t B = 0, N = 0;  // batch, query length
  int64_t Lk = 0;        // key length: N (standard) or k (Linformer)
  int64_t D = 0, H = 0, Dh = 0;
  bool causal = false;   // query i sees keys j <= i only (standard attention)
};

// ctx[b, :, h] = Dropout(softmax(scale * q_bh kk_bh^T + mask)) vv_bh.
// q [B,N,D]; kk, vv [B,Lk,D]; key_mask [B,Lk] (1 real / 0 excluded) or null.
// probs [B,H,N,Lk] keeps the softmax output for backward, or null (inference: per-thread
// scratch). scratch: per-thread workspace, attention_scratch_floats(dims) floats per thread.
void attention_forward(float* ctx, float* probs, const float* q, const float* kk, const float* vv,
                       const float* key_mask, const AttnDims& d, float scale, float p_drop,
                       uint64_t seed, uint64_t stream, float* scratch);
// Accumulates into dq, dkk, dvv.
void attention_backward(float* dq, float* dkk, float* dvv, const float* dctx, const float* probs,
                        const float* q, const float* kk, const float* vv, const AttnDims& d,
                        float scale, float p_drop, uint64_t seed, uint64_t stream,
                        float* scratch);
int64_t attention_scratch_floats(const AttnDims& d);

// Sequence-axis projection with a matrix E [K, ldE] (first N columns used):
// out_b = E diag(m_b) x_b for every batch element; x [B,N,C] with row stride ldx,
// out [B,K,C] with row stride ldo. em[b*K + j] = sum_t E[j,t] m_b[t] (may be null).
// Ebm [B,K,N] receives E diag(m_b) when mask is non-null (needed by backward).
void seq_project_forward(float* out, int64_t ldo, float* em, float* Ebm, const float* E,
                         int64_t ldE, const float* x, int64_t ldx, const float* mask, int64_t B,
                         int64_t N, int64_t K, int64_t C);
// dx_b += (E diag(m_b))^T dout_b; dE[:, :N] += sum_b (dout_b x_b^T + dem_b 1^T) diag(m_b).
// dE / dem / dx may be null. scratch: K*N floats.
void seq_project_backward(float* dx, int64_t ldx, float* dE, const float* dout, int64_t ldo,
                          const float* dem, const float* Ebm, const float* E, int64_t ldE,
                          const float* x, const float* mask, int64_t B, int64_t N, int64_t K,
                          int64_t C, float* scratch);

// Max pooling over windows of w positions: out[b,j,c] = max over real t in
// [j*w, min((j+1)*w, N)) of x[b,t,c], 0 if none; arg keeps the chosen t (or -1).
void max_pool_forward(float* out, int32_t* arg, const float* x, const float* mask, int64_t B,
                      int64_t N, int64_t K, int64_t w, int64_t C);
void max_pool_backward(float* dx, const float* dout, const int32_t* arg, int64_t B, int64_t N,
                       int64_t K, int64_t C);

}  // namespace lf
