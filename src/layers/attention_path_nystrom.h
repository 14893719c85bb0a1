// Nystromformer attention (Xiong et al. 2021, "Nystromformer: A Nystrom-Based Algorithm for
// Approximating Self-Attention"), one attention kind of the registry (attention_path.h).
//
// Per sequence b and head h, with Q, K, V [n, Dh] (n the sequence's real tokens), m landmarks
// and s = 1/sqrt(Dh):
//   Q~, K~ [m, Dh]  means of Q and K over m consecutive segments of the real positions
//                   (segment j: positions floor(j n / m) .. floor((j+1) n / m) - 1)
//   F  = softmax(s Q K~^T)   [N, m]   (every query row, padded ones too)
//   A  = softmax(s Q~ K~^T)  [m, m]
//   B  = softmax(s Q~ K^T)   [m, N]   (padded keys excluded)
//   A+ = Z_6, Z_0 = A^T / (max row sum(A) * max column sum(A)),
//        Z_{i+1} = Z_i (13 I - A Z_i (15 I - A Z_i (7 I - A Z_i))) / 4
//   out = F A+ (B V)
// Padding: the landmarks average real positions only and B excludes padded keys, so a
// sequence's real rows are the same whatever padding the batch adds (m shrinks to n for a
// sequence shorter than m landmarks; an all-padded sequence gives 0). Training in f32 only;
// inference in any precision (the linear maps in it, the landmark attention in f32); no
// attention dropout, no causal form (validate() refuses them). The paper's
// depthwise convolution on V is not implemented.
#pragma once
#include "layers/attention_path.h"

namespace lf {

const AttentionPath& nystrom_path();

}  // namespace lf
