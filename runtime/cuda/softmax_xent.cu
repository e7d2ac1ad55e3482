// Row softmax and the fused softmax + cross-entropy of the LM head (loss per row and the gradient
// of the mean loss, as llm.c's fused_classifier does): one block per row, max-subtracted.
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"

namespace scaleplan::runtime::cuda {
namespace {

__global__ void softmax_kernel(const float* x, float* out, int64_t cols) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce<true>(m, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
  const float inv = 1.f / block_reduce<false>(s, scratch);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[blockIdx.x * cols + c] = __expf(xr[c] - m) * inv;
}

__global__ void cross_entropy_kernel(const float* x, const int32_t* labels, float* loss,
                                     float* grad, int64_t rows, int64_t cols) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_reduce<true>(m, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(xr[c] - m);
  s = block_reduce<false>(s, scratch);
  const int32_t label = labels[blockIdx.x];
  if (threadIdx.x == 0) loss[blockIdx.x] = logf(s) + m - xr[label];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float p = __expf(xr[c] - m) / s;
    grad[blockIdx.x * cols + c] = (p - (c == label ? 1.f : 0.f)) / rows;
  }
}

}  // namespace

cudaError_t softmax(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  softmax_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(x, out, cols);
  return cudaGetLastError();
}

cudaError_t cross_entropy(const float* logits, const int32_t* labels, float* loss, float* dlogits,
                          int64_t rows, int64_t cols, cudaStream_t stream) {
  cross_entropy_kernel<<<static_cast<unsigned>(rows), kBlock, 0, stream>>>(logits, labels, loss,
                                                                           dlogits, rows, cols);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
