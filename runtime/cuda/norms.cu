// RMSNorm (Zhang & Sennrich 2019) and LayerNorm (Ba et al. 2016) forward: one block per row.
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"

namespace scaleplan::runtime::cuda {
namespace {

__global__ void rmsnorm_kernel(const float* x, const float* w, float* out, int64_t cols,
                               float eps) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ss += xr[c] * xr[c];
  const float inv = rsqrtf(block_reduce<false>(ss, scratch) / cols + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[blockIdx.x * cols + c] = xr[c] * inv * w[c];
}

__global__ void layernorm_kernel(const float* x, const float* w, const float* b, float* out,
                                 int64_t cols, float eps) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  const float mean = block_reduce<false>(s, scratch) / cols;
  float v = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) v += (xr[c] - mean) * (xr[c] - mean);
  const float inv = rsqrtf(block_reduce<false>(v, scratch) / cols + eps);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    out[blockIdx.x * cols + c] = (xr[c] - mean) * inv * w[c] + b[c];
  }
}

}  // namespace

cudaError_t rmsnorm(const float* x, const float* w, float* out, int64_t rows, int64_t cols,
                    float eps, cudaStream_t stream) {
  rmsnorm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, w, out, cols, eps);
  return cudaGetLastError();
}

cudaError_t layernorm(const float* x, const float* w, const float* b, float* out, int64_t rows,
                      int64_t cols, float eps, cudaStream_t stream) {
  layernorm_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, w, b, out, cols, eps);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
