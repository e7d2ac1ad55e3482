// Flash-style attention (Dao et al. 2022, FlashAttention; 2023, FlashAttention-2): the q×kv score
// matrix is never stored. Forward: one thread per query row, K/V tiles staged in shared memory,
// an online softmax (running max and sum, rescaling the accumulator) and the log-sum-exp saved for
// the backward. Backward: D_i = rowsum(dO∘O) first, then dQ with one thread per query and dK/dV
// with one thread per key, both recomputing P = exp(scale·q·k − lse) tile by tile.
//
// bf16 operands, fp32 accumulation. These kernels favour clarity over peak speed (no tensor cores):
// production training uses cuDNN's SDPA or FlashAttention-3, so a profile measured with them
// underestimates attention efficiency on Hopper; docs/runtime.md says so.
#include <cuda_bf16.h>

#include <cmath>

#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kRows = 64;  // threads (query or key rows) per block
constexpr int kTile = 16;  // rows per shared-memory tile: 16 × (256 + 256) floats = 32 KiB

__device__ inline float ld(const bf16* p, int64_t i) { return __bfloat162float(p[i]); }

// Last key index + 1 that query row i sees.
__device__ inline int64_t visible(const AttentionDims& d, int64_t i) {
  if (!d.causal) return d.kv_len;
  const int64_t v = d.kv_len - d.q_len + i + 1;
  return v < 0 ? 0 : (v > d.kv_len ? d.kv_len : v);
}

// First key index that query row i sees: the sliding window's start.
__device__ inline int64_t first_visible(const AttentionDims& d, int64_t i) {
  if (!d.causal || d.window <= 0) return 0;
  const int64_t f = visible(d, i) - d.window;
  return f < 0 ? 0 : f;
}

// The first key tile a block of query rows starting at `first_row` reads (block-uniform).
__device__ inline int64_t first_tile(const AttentionDims& d, int64_t first_row) {
  return first_visible(d, first_row) / kTile * kTile;
}

__global__ void forward_kernel(AttentionDims d, const bf16* q, const bf16* k, const bf16* v,
                               bf16* o, float* lse) {
  extern __shared__ float tile[];  // kTile × head_dim keys, then kTile × v_head_dim values
  float* ks = tile;
  float* vs = tile + kTile * d.head_dim;
  const int64_t bh = blockIdx.y, b = bh / d.heads, h = bh % d.heads;
  const int64_t kvh = b * d.kv_heads + h / (d.heads / d.kv_heads);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x;
  const bool active = i < d.q_len;
  float qr[kMaxHeadDim], acc[kMaxHeadDim];
  for (int64_t e = 0; e < d.head_dim; ++e)
    qr[e] = active ? ld(q, (bh * d.q_len + i) * d.head_dim + e) * d.scale : 0.f;
  for (int64_t e = 0; e < d.v_head_dim; ++e) acc[e] = 0.f;
  float m = -INFINITY, l = 0.f;
  const int64_t last_row = min(d.q_len - 1, static_cast<int64_t>(blockIdx.x) * kRows + kRows - 1);
  const int64_t keys = visible(d, last_row);  // the block's last row sees the most keys
  const int64_t mine = active ? visible(d, i) : 0;
  const int64_t from = active ? first_visible(d, i) : 0;
  for (int64_t j0 = first_tile(d, static_cast<int64_t>(blockIdx.x) * kRows); j0 < keys;
       j0 += kTile) {
    __syncthreads();  // the previous tile is no longer read
    for (int64_t t = threadIdx.x; t < kTile * d.head_dim; t += blockDim.x) {
      const int64_t j = j0 + t / d.head_dim;
      ks[t] = j < d.kv_len ? ld(k, (kvh * d.kv_len + j) * d.head_dim + t % d.head_dim) : 0.f;
    }
    for (int64_t t = threadIdx.x; t < kTile * d.v_head_dim; t += blockDim.x) {
      const int64_t j = j0 + t / d.v_head_dim;
      vs[t] = j < d.kv_len ? ld(v, (kvh * d.kv_len + j) * d.v_head_dim + t % d.v_head_dim) : 0.f;
    }
    __syncthreads();  // the tile is loaded
    for (int jj = 0; jj < kTile && j0 + jj < mine; ++jj) {
      if (j0 + jj < from) continue;
      float s = 0.f;
      for (int64_t e = 0; e < d.head_dim; ++e) s += qr[e] * ks[jj * d.head_dim + e];
      const float m_new = fmaxf(m, s);
      const float corr = __expf(m - m_new), p = __expf(s - m_new);
      l = l * corr + p;
      for (int64_t e = 0; e < d.v_head_dim; ++e)
        acc[e] = acc[e] * corr + p * vs[jj * d.v_head_dim + e];
      m = m_new;
    }
  }
  if (!active) return;
  const float inv = l > 0.f ? 1.f / l : 0.f;
  for (int64_t e = 0; e < d.v_head_dim; ++e)
    o[(bh * d.q_len + i) * d.v_head_dim + e] = __float2bfloat16(acc[e] * inv);
  lse[bh * d.q_len + i] = l > 0.f ? m + logf(l) : -INFINITY;
}

__global__ void rowsum_kernel(AttentionDims d, const bf16* o, const bf16* d_o, float* dsum) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= d.batch * d.heads * d.q_len) return;
  float s = 0.f;
  for (int64_t e = 0; e < d.v_head_dim; ++e)
    s += ld(o, r * d.v_head_dim + e) * ld(d_o, r * d.v_head_dim + e);
  dsum[r] = s;
}

__global__ void dq_kernel(AttentionDims d, const bf16* q, const bf16* k, const bf16* v,
                          const float* lse, const bf16* d_o, const float* dsum, bf16* dq) {
  extern __shared__ float tile[];
  float* ks = tile;
  float* vs = tile + kTile * d.head_dim;
  const int64_t bh = blockIdx.y, b = bh / d.heads, h = bh % d.heads;
  const int64_t kvh = b * d.kv_heads + h / (d.heads / d.kv_heads);
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x;
  const bool active = i < d.q_len;
  const int64_t row = bh * d.q_len + i;
  float qr[kMaxHeadDim], dor[kMaxHeadDim], acc[kMaxHeadDim];
  for (int64_t e = 0; e < d.head_dim; ++e) {
    qr[e] = active ? ld(q, row * d.head_dim + e) : 0.f;
    acc[e] = 0.f;
  }
  for (int64_t e = 0; e < d.v_head_dim; ++e)
    dor[e] = active ? ld(d_o, row * d.v_head_dim + e) : 0.f;
  const float my_lse = active ? lse[row] : 0.f, my_d = active ? dsum[row] : 0.f;
  const int64_t last_row = min(d.q_len - 1, static_cast<int64_t>(blockIdx.x) * kRows + kRows - 1);
  const int64_t keys = visible(d, last_row);
  const int64_t mine = active ? visible(d, i) : 0;
  const int64_t from = active ? first_visible(d, i) : 0;
  for (int64_t j0 = first_tile(d, static_cast<int64_t>(blockIdx.x) * kRows); j0 < keys;
       j0 += kTile) {
    __syncthreads();  // the previous tile is no longer read
    for (int64_t t = threadIdx.x; t < kTile * d.head_dim; t += blockDim.x) {
      const int64_t j = j0 + t / d.head_dim;
      ks[t] = j < d.kv_len ? ld(k, (kvh * d.kv_len + j) * d.head_dim + t % d.head_dim) : 0.f;
    }
    for (int64_t t = threadIdx.x; t < kTile * d.v_head_dim; t += blockDim.x) {
      const int64_t j = j0 + t / d.v_head_dim;
      vs[t] = j < d.kv_len ? ld(v, (kvh * d.kv_len + j) * d.v_head_dim + t % d.v_head_dim) : 0.f;
    }
    __syncthreads();  // the tile is loaded
    for (int jj = 0; jj < kTile && j0 + jj < mine; ++jj) {
      if (j0 + jj < from) continue;
      float s = 0.f, dp = 0.f;
      for (int64_t e = 0; e < d.head_dim; ++e) s += qr[e] * ks[jj * d.head_dim + e];
      for (int64_t e = 0; e < d.v_head_dim; ++e) dp += dor[e] * vs[jj * d.v_head_dim + e];
      const float p = __expf(s * d.scale - my_lse);
      const float ds = p * (dp - my_d) * d.scale;
      for (int64_t e = 0; e < d.head_dim; ++e) acc[e] += ds * ks[jj * d.head_dim + e];
    }
  }
  if (!active) return;
  for (int64_t e = 0; e < d.head_dim; ++e) dq[row * d.head_dim + e] = __float2bfloat16(acc[e]);
}

// One thread per key of one kv head; loops over the query heads that share it (GQA) and the
// queries that see the key.
__global__ void dkdv_kernel(AttentionDims d, const bf16* q, const bf16* k, const bf16* v,
                            const float* lse, const bf16* d_o, const float* dsum, bf16* dk,
                            bf16* dv) {
  extern __shared__ float tile[];  // kTile queries: q, dO, lse, D
  float* qs = tile;
  float* dos = qs + kTile * d.head_dim;
  float* ls = dos + kTile * d.v_head_dim;
  float* ds_ = ls + kTile;
  const int64_t bkv = blockIdx.y, b = bkv / d.kv_heads, kvh = bkv % d.kv_heads;
  const int64_t group = d.heads / d.kv_heads;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kRows + threadIdx.x;
  const bool active = j < d.kv_len;
  float kr[kMaxHeadDim], vr[kMaxHeadDim], dka[kMaxHeadDim], dva[kMaxHeadDim];
  for (int64_t e = 0; e < d.head_dim; ++e) {
    kr[e] = active ? ld(k, (bkv * d.kv_len + j) * d.head_dim + e) : 0.f;
    dka[e] = 0.f;
  }
  for (int64_t e = 0; e < d.v_head_dim; ++e) {
    vr[e] = active ? ld(v, (bkv * d.kv_len + j) * d.v_head_dim + e) : 0.f;
    dva[e] = 0.f;
  }
  // Queries that see key j: i >= j - (kv_len - q_len) when causal, and under a sliding window
  // also i < j - (kv_len - q_len) + window. The block's first and last keys bound them.
  const int64_t first_key = static_cast<int64_t>(blockIdx.x) * kRows;
  int64_t i_begin = d.causal ? first_key - (d.kv_len - d.q_len) : 0;
  if (i_begin < 0) i_begin = 0;
  int64_t i_end = d.q_len;
  if (d.causal && d.window > 0) {
    const int64_t last_key = min(first_key + kRows - 1, d.kv_len - 1);
    const int64_t bound = last_key - (d.kv_len - d.q_len) + d.window;
    if (bound < i_end) i_end = bound;
  }
  for (int64_t g = 0; g < group; ++g) {
    const int64_t bh = b * d.heads + kvh * group + g;
    for (int64_t i0 = i_begin; i0 < i_end; i0 += kTile) {
      __syncthreads();  // the previous tile is no longer read
      for (int64_t t = threadIdx.x; t < kTile * d.head_dim; t += blockDim.x) {
        const int64_t i = i0 + t / d.head_dim;
        qs[t] = i < d.q_len ? ld(q, (bh * d.q_len + i) * d.head_dim + t % d.head_dim) : 0.f;
      }
      for (int64_t t = threadIdx.x; t < kTile * d.v_head_dim; t += blockDim.x) {
        const int64_t i = i0 + t / d.v_head_dim;
        dos[t] = i < d.q_len ? ld(d_o, (bh * d.q_len + i) * d.v_head_dim + t % d.v_head_dim) : 0.f;
      }
      for (int64_t t = threadIdx.x; t < kTile; t += blockDim.x) {
        ls[t] = i0 + t < d.q_len ? lse[bh * d.q_len + i0 + t] : 0.f;
        ds_[t] = i0 + t < d.q_len ? dsum[bh * d.q_len + i0 + t] : 0.f;
      }
      __syncthreads();  // the tile is loaded
      if (!active) continue;
      for (int ii = 0; ii < kTile && i0 + ii < d.q_len; ++ii) {
        if (j >= visible(d, i0 + ii) || j < first_visible(d, i0 + ii)) continue;
        float s = 0.f, dp = 0.f;
        for (int64_t e = 0; e < d.head_dim; ++e) s += qs[ii * d.head_dim + e] * kr[e];
        for (int64_t e = 0; e < d.v_head_dim; ++e) dp += dos[ii * d.v_head_dim + e] * vr[e];
        const float p = __expf(s * d.scale - ls[ii]);
        const float dsv = p * (dp - ds_[ii]) * d.scale;
        for (int64_t e = 0; e < d.v_head_dim; ++e) dva[e] += p * dos[ii * d.v_head_dim + e];
        for (int64_t e = 0; e < d.head_dim; ++e) dka[e] += dsv * qs[ii * d.head_dim + e];
      }
    }
  }
  if (!active) return;
  for (int64_t e = 0; e < d.head_dim; ++e)
    dk[(bkv * d.kv_len + j) * d.head_dim + e] = __float2bfloat16(dka[e]);
  for (int64_t e = 0; e < d.v_head_dim; ++e)
    dv[(bkv * d.kv_len + j) * d.v_head_dim + e] = __float2bfloat16(dva[e]);
}

unsigned blocks(int64_t rows) { return static_cast<unsigned>((rows + kRows - 1) / kRows); }

}  // namespace

cudaError_t attention_forward(const AttentionDims& d, const void* q, const void* k, const void* v,
                              void* o, float* lse, cudaStream_t stream) {
  const size_t smem = sizeof(float) * kTile * (d.head_dim + d.v_head_dim);
  const dim3 grid(blocks(d.q_len), static_cast<unsigned>(d.batch * d.heads));
  forward_kernel<<<grid, kRows, smem, stream>>>(
      d, static_cast<const bf16*>(q), static_cast<const bf16*>(k), static_cast<const bf16*>(v),
      static_cast<bf16*>(o), lse);
  return cudaGetLastError();
}

cudaError_t attention_backward(const AttentionDims& d, const void* q, const void* k, const void* v,
                               const void* o, const float* lse, const void* d_o, void* dq, void* dk,
                               void* dv, float* workspace, cudaStream_t stream) {
  const auto* Q = static_cast<const bf16*>(q);
  const auto* K = static_cast<const bf16*>(k);
  const auto* V = static_cast<const bf16*>(v);
  const auto* dO = static_cast<const bf16*>(d_o);
  const int64_t rows = d.batch * d.heads * d.q_len;
  rowsum_kernel<<<blocks(rows), kRows, 0, stream>>>(d, static_cast<const bf16*>(o), dO, workspace);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const size_t smem_q = sizeof(float) * kTile * (d.head_dim + d.v_head_dim);
  dq_kernel<<<dim3(blocks(d.q_len), static_cast<unsigned>(d.batch * d.heads)), kRows, smem_q,
              stream>>>(d, Q, K, V, lse, dO, workspace, static_cast<bf16*>(dq));
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const size_t smem_kv = sizeof(float) * kTile * (d.head_dim + d.v_head_dim + 2);
  dkdv_kernel<<<dim3(blocks(d.kv_len), static_cast<unsigned>(d.batch * d.kv_heads)), kRows, smem_kv,
                stream>>>(d, Q, K, V, lse, dO, workspace, static_cast<bf16*>(dk),
                          static_cast<bf16*>(dv));
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
