// Elementwise ops: SwiGLU (Shazeer 2020), GELU with the tanh approximation (Hendrycks & Gimpel
// 2016), RoPE (Su et al. 2021) and the residual add. Grid-stride loops, one element per step.
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {
namespace {

__global__ void swiglu_kernel(const float* x, float* out, int64_t rows, int64_t cols) {
  SP_GRID_STRIDE(i, rows * cols) {
    const int64_t r = i / cols, c = i % cols;
    const float g = x[r * 2 * cols + c], u = x[r * 2 * cols + cols + c];
    out[i] = g / (1.f + __expf(-g)) * u;
  }
}

__global__ void gelu_kernel(const float* x, float* out, int64_t n) {
  constexpr float kC = 0.7978845608f;  // sqrt(2/pi)
  SP_GRID_STRIDE(i, n) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.f + tanhf(kC * (v + 0.044715f * v * v * v)));
  }
}

__global__ void rope_kernel(const float* x, float* out, int64_t rows, int64_t cols,
                            int64_t head_dim, int64_t seq_len, float theta) {
  SP_GRID_STRIDE(p, rows * cols / 2) {
    const int64_t r = p / (cols / 2), c = (p % (cols / 2)) * 2;
    const int64_t i = (c % head_dim) / 2;
    const float angle = static_cast<float>(r % seq_len) * powf(theta, -2.f * i / head_dim);
    float sn, cs;
    sincosf(angle, &sn, &cs);
    const float x0 = x[r * cols + c], x1 = x[r * cols + c + 1];
    out[r * cols + c] = x0 * cs - x1 * sn;
    out[r * cols + c + 1] = x0 * sn + x1 * cs;
  }
}

__global__ void add_kernel(const float* x, const float* y, float* out, int64_t n) {
  SP_GRID_STRIDE(i, n) { out[i] = x[i] + y[i]; }
}

}  // namespace

cudaError_t swiglu(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  swiglu_kernel<<<grid_for(rows * cols), kThreads, 0, stream>>>(x, out, rows, cols);
  return cudaGetLastError();
}
cudaError_t gelu(const float* x, float* out, int64_t n, cudaStream_t stream) {
  gelu_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, out, n);
  return cudaGetLastError();
}
cudaError_t rope(const float* x, float* out, int64_t rows, int64_t cols, int64_t head_dim,
                 int64_t seq_len, float theta, cudaStream_t stream) {
  rope_kernel<<<grid_for(rows * cols / 2), kThreads, 0, stream>>>(x, out, rows, cols, head_dim,
                                                                  seq_len, theta);
  return cudaGetLastError();
}
cudaError_t add(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream) {
  add_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, y, out, n);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
