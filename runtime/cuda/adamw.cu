// Fused AdamW step (Loshchilov & Hutter 2019): decoupled weight decay, bias-corrected moments,
// one pass over param, grad, m and v (llm.c's adamw_kernel3 does the same in one kernel).
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {
namespace {

__global__ void adamw_kernel(float* w, const float* g, float* m, float* v, int64_t n, float lr,
                             float b1, float b2, float wd, float c1, float c2) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float gi = g[i];
    const float mi = b1 * m[i] + (1.f - b1) * gi;
    const float vi = b2 * v[i] + (1.f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= lr * ((mi / c1) / (sqrtf(vi / c2) + 1e-8f) + wd * w[i]);
  }
}

}  // namespace

cudaError_t adamw(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float weight_decay, int64_t step, cudaStream_t stream) {
  const float c1 = 1.f - powf(beta1, static_cast<float>(step));
  const float c2 = 1.f - powf(beta2, static_cast<float>(step));
  const int64_t blocks = (n + 255) / 256;
  adamw_kernel<<<static_cast<unsigned>(blocks < 65535 * 32 ? (blocks > 0 ? blocks : 1)
                                                           : 65535 * 32),
                 256, 0, stream>>>(param, grad, m, v, n, lr, beta1, beta2, weight_decay, c1, c2);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
