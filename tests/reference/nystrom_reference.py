"""Nystromformer attention in PyTorch, written from the paper (Xiong et al. 2021) and its code
(mlpen/Nystromformer, NystromAttention), for torch_reference.py: autograd gives every gradient.

Landmarks are segment means of Q and K over the real positions (the paper's reshape-and-mean
when the length divides by the landmark count); the paper's masking (Q, K zeroed at padded
positions, padded keys at -1e9 in kernel_3) is replaced by leaving padded positions out of the
landmarks and of kernel_3, so that a sequence's real rows do not depend on the padding.  The
pseudo-inverse starts from Z_0 = A^T / (max row sum * max column sum) of each matrix (the
paper's code takes one maximum over the whole batch).
"""

import torch


def segment_matrix(n, m, dtype):
    """S [m, n]: row j averages positions floor(j n / m) .. floor((j+1) n / m) - 1."""
    S = torch.zeros(m, n, dtype=dtype)
    for j in range(m):
        lo, hi = j * n // m, (j + 1) * n // m
        S[j, lo:hi] = 1.0 / (hi - lo)
    return S


def iterative_inv(mat, n_iter=6):
    """The paper's iterative Moore-Penrose pseudo-inverse of mat [..., m, m]."""
    I = torch.eye(mat.size(-1), dtype=mat.dtype)
    K = mat
    row = torch.max(torch.sum(K, dim=-1), dim=-1).values
    col = torch.max(torch.sum(K, dim=-2), dim=-1).values
    V = K.transpose(-1, -2) / (row * col)[..., None, None]
    for _ in range(n_iter):
        KV = torch.matmul(K, V)
        V = torch.matmul(0.25 * V, 13 * I - torch.matmul(KV, 15 * I - torch.matmul(KV, 7 * I - KV)))
    return V


def nystrom_attention(Q, K, V, mask, landmarks):
    """Q, K, V [B, H, N, Dh]; mask [B, N] (float 0/1).  Returns the context [B, H, N, Dh]."""
    B, H, N, Dh = Q.shape
    out = []
    for b in range(B):
        real = torch.nonzero(mask[b] > 0.5).flatten()
        n = real.numel()
        if n == 0:
            out.append(torch.zeros_like(Q[b]))
            continue
        m = min(landmarks, n)
        q = Q[b] / Dh ** 0.25  # [H, N, Dh], scaled as in the paper's code
        k = K[b][:, real] / Dh ** 0.25  # the real keys only
        v = V[b][:, real]
        S = segment_matrix(n, m, Q.dtype)
        q_land = torch.matmul(S, q[:, real])  # [H, m, Dh]
        k_land = torch.matmul(S, k)
        kernel_1 = torch.softmax(torch.matmul(q, k_land.transpose(-1, -2)), dim=-1)
        kernel_2 = torch.softmax(torch.matmul(q_land, k_land.transpose(-1, -2)), dim=-1)
        kernel_3 = torch.softmax(torch.matmul(q_land, k.transpose(-1, -2)), dim=-1)
        out.append(torch.matmul(torch.matmul(kernel_1, iterative_inv(kernel_2)),
                                torch.matmul(kernel_3, v)))
    return torch.stack(out)
