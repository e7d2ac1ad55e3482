// The softmax kernels of the unfused attention core (unfused_attention.cc): the scale, mask and
// softmax that Megatron-LM's FusedScaleMaskSoftmax applies between the two batched GEMMs, over
// the b·h·q_len rows of bf16 scores with fp32 math. One block per row; the row's query position
// comes from one division per row, none per element. Masks as AttentionArgs (backend.h): causal
// aligned bottom-right, a sliding window keeps the last `window` keys of a query.
#include <cuda_bf16.h>

#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"

namespace scaleplan::runtime::cuda {
namespace {

// The keys [lo, hi) row `row` sees.
struct RowKeys {
  int64_t lo, hi;
};
__device__ inline RowKeys row_keys(int64_t row, const SoftmaxRows& r) {
  if (!r.causal) return {0, r.kv_len};
  const int64_t pos = r.kv_len - r.q_len + row % r.q_len;  // the query's token position
  const int64_t hi = pos + 1 < 0 ? 0 : (pos + 1 > r.kv_len ? r.kv_len : pos + 1);
  const int64_t lo = r.window > 0 && pos + 1 - r.window > 0 ? pos + 1 - r.window : 0;
  return {lo < hi ? lo : hi, hi};
}

__global__ void masked_softmax_kernel(const __nv_bfloat16* s, __nv_bfloat16* p, float* lse,
                                      SoftmaxRows r) {
  __shared__ float scratch[kBlock / 32];
  const int64_t row = blockIdx.x;
  const __nv_bfloat16* sr = s + row * r.kv_len;
  __nv_bfloat16* pr = p + row * r.kv_len;
  const RowKeys k = row_keys(row, r);
  float m = -INFINITY;
  for (int64_t c = k.lo + threadIdx.x; c < k.hi; c += blockDim.x)
    m = fmaxf(m, __bfloat162float(sr[c]) * r.scale);
  m = block_reduce<true>(m, scratch);
  float sum = 0.f;
  for (int64_t c = k.lo + threadIdx.x; c < k.hi; c += blockDim.x)
    sum += __expf(__bfloat162float(sr[c]) * r.scale - m);
  sum = block_reduce<false>(sum, scratch);
  const float l = k.hi > k.lo ? m + logf(sum) : -INFINITY;
  if (threadIdx.x == 0) lse[row] = l;
  for (int64_t c = threadIdx.x; c < r.kv_len; c += blockDim.x) {
    const bool in = c >= k.lo && c < k.hi;
    pr[c] = __float2bfloat16(in ? __expf(__bfloat162float(sr[c]) * r.scale - l) : 0.f);
  }
}

__global__ void softmax_from_lse_kernel(const __nv_bfloat16* s, const float* lse, __nv_bfloat16* p,
                                        SoftmaxRows r) {
  const int64_t row = blockIdx.x;
  const RowKeys k = row_keys(row, r);
  const float l = lse[row];
  for (int64_t c = threadIdx.x; c < r.kv_len; c += blockDim.x) {
    const bool in = c >= k.lo && c < k.hi;
    const float v = __bfloat162float(s[row * r.kv_len + c]) * r.scale - l;
    p[row * r.kv_len + c] = __float2bfloat16(in ? __expf(v) : 0.f);
  }
}

// dS = scale · P ∘ (dP − D), D = Σ_j P_j dP_j (= rowsum(dO ∘ O)); masked P is 0, so is dS there.
__global__ void softmax_backward_kernel(const __nv_bfloat16* p, const __nv_bfloat16* dp,
                                        __nv_bfloat16* ds, SoftmaxRows r) {
  __shared__ float scratch[kBlock / 32];
  const int64_t off = static_cast<int64_t>(blockIdx.x) * r.kv_len;
  float d = 0.f;
  for (int64_t c = threadIdx.x; c < r.kv_len; c += blockDim.x)
    d += __bfloat162float(p[off + c]) * __bfloat162float(dp[off + c]);
  d = block_reduce<false>(d, scratch);
  for (int64_t c = threadIdx.x; c < r.kv_len; c += blockDim.x) {
    const float pv = __bfloat162float(p[off + c]);
    ds[off + c] = __float2bfloat16(r.scale * pv * (__bfloat162float(dp[off + c]) - d));
  }
}

}  // namespace

cudaError_t masked_softmax(const void* scores, void* probs, float* lse, const SoftmaxRows& r,
                           cudaStream_t stream) {
  masked_softmax_kernel<<<static_cast<unsigned>(r.rows), kBlock, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(scores), static_cast<__nv_bfloat16*>(probs), lse, r);
  return cudaGetLastError();
}

cudaError_t softmax_from_lse(const void* scores, const float* lse, void* probs,
                             const SoftmaxRows& r, cudaStream_t stream) {
  softmax_from_lse_kernel<<<static_cast<unsigned>(r.rows), kBlock, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(scores), lse, static_cast<__nv_bfloat16*>(probs), r);
  return cudaGetLastError();
}

cudaError_t softmax_backward(const void* probs, const void* dprobs, void* dscores,
                             const SoftmaxRows& r, cudaStream_t stream) {
  softmax_backward_kernel<<<static_cast<unsigned>(r.rows), kBlock, 0, stream>>>(
      static_cast<const __nv_bfloat16*>(probs), static_cast<const __nv_bfloat16*>(dprobs),
      static_cast<__nv_bfloat16*>(dscores), r);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
