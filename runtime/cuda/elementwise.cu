// The operator list's plain passes: copy, cast (to bf16), fill, scale (grid-stride, one element
// per step) and the per-row sum of squares of a gradient norm (one block per row).
#include <cuda_bf16.h>

#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"

namespace scaleplan::runtime::cuda {
namespace {

__global__ void scale_kernel(const float* x, float* out, int64_t n, float scale) {
  SP_GRID_STRIDE(i, n) { out[i] = scale * x[i]; }
}
__global__ void fill_kernel(float* out, int64_t n, float value) {
  SP_GRID_STRIDE(i, n) { out[i] = value; }
}
__global__ void cast_bf16_kernel(const float* x, __nv_bfloat16* out, int64_t n) {
  SP_GRID_STRIDE(i, n) { out[i] = __float2bfloat16(x[i]); }
}
__global__ void round_bf16_kernel(const float* x, float* out, int64_t n) {
  SP_GRID_STRIDE(i, n) { out[i] = __bfloat162float(__float2bfloat16(x[i])); }
}
__global__ void sum_squares_kernel(const float* x, float* out, int64_t cols) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  float ss = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_reduce<false>(ss, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = ss;
}

}  // namespace

cudaError_t copy(const float* x, float* out, int64_t n, cudaStream_t stream) {
  return cudaMemcpyAsync(out, x, static_cast<size_t>(n) * sizeof(float), cudaMemcpyDeviceToDevice,
                         stream);
}
cudaError_t cast_bf16(const float* x, void* out, bool out_bf16, int64_t n, cudaStream_t stream) {
  if (out_bf16) {
    cast_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, static_cast<__nv_bfloat16*>(out), n);
  } else {
    round_bf16_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, static_cast<float*>(out), n);
  }
  return cudaGetLastError();
}
cudaError_t fill(float* out, int64_t n, float value, cudaStream_t stream) {
  fill_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}
cudaError_t scale(const float* x, float* out, int64_t n, float s, cudaStream_t stream) {
  scale_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n, s);
  return cudaGetLastError();
}
cudaError_t sum_squares(const float* x, float* out, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  sum_squares_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, out, cols);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
