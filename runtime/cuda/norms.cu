// RMSNorm (Zhang & Sennrich 2019) forward and backward and LayerNorm (Ba et al. 2016) forward:
// one block per row, the row read in 16-byte accesses (vec.cuh), statistics in fp32, f32 weights,
// bf16 or f32 activations, as Transformer Engine's rmsnorm kernels (common/normalization/) and
// PyTorch's fused RMSNorm store them. The second pass over a row re-reads it, mostly from L2.
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

template <typename T, int V>
__global__ void rmsnorm_kernel(const T* x, const float* w, T* out, int64_t cols, float eps) {
  __shared__ float scratch[kBlock / 32];
  const T* xr = x + blockIdx.x * cols;
  float ss = 0.f;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<T, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += f[k] * f[k];
  }
  const float inv = rsqrtf(block_reduce<false>(ss, scratch) / static_cast<float>(cols) + eps);
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V], g[V];
    load<T, V>(xr + c, f);
    load<float, V>(w + c, g);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = f[k] * inv * g[k];
    store<T, V>(out + blockIdx.x * cols + c, f);
  }
}

// Columns [c, c + V) of a row of x, of w and of a row of dy.
template <typename T, int V>
__device__ inline void load_columns(const T* x, const float* w, const T* dy, int64_t c,
                                    float (&f)[V], float (&g)[V], float (&d)[V]) {
  load<T, V>(x + c, f);
  load<float, V>(w + c, g);
  load<T, V>(dy + c, d);
}

// y = x·inv·w with inv = (mean(x²) + eps)^-1/2: dx = inv·w·dy - x·inv³·mean(x·w·dy).
template <typename T, int V>
__global__ void rmsnorm_backward_kernel(const T* x, const float* w, const T* dy, T* dx,
                                        int64_t cols, float eps) {
  __shared__ float scratch[kBlock / 32];
  const T* xr = x + blockIdx.x * cols;
  const T* dyr = dy + blockIdx.x * cols;
  float ss = 0.f, dot = 0.f;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V], g[V], d[V];
    load_columns<T, V>(xr, w, dyr, c, f, g, d);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      ss += f[k] * f[k];
      dot += f[k] * g[k] * d[k];
    }
  }
  const float inv_cols = 1.f / static_cast<float>(cols);
  const float inv = rsqrtf(block_reduce<false>(ss, scratch) * inv_cols + eps);
  const float k3 = inv * inv * inv * block_reduce<false>(dot, scratch) * inv_cols;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V], g[V], d[V];
    load_columns<T, V>(xr, w, dyr, c, f, g, d);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = inv * g[k] * d[k] - f[k] * k3;
    store<T, V>(dx + blockIdx.x * cols + c, f);
  }
}

template <typename T, int V>
__global__ void layernorm_kernel(const T* x, const float* w, const float* b, T* out, int64_t cols,
                                 float eps) {
  __shared__ float scratch[kBlock / 32];
  const T* xr = x + blockIdx.x * cols;
  float s = 0.f, s2 = 0.f;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<T, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) s += f[k];
  }
  const float inv_cols = 1.f / static_cast<float>(cols);
  const float mean = block_reduce<false>(s, scratch) * inv_cols;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<T, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) s2 += (f[k] - mean) * (f[k] - mean);
  }
  const float inv = rsqrtf(block_reduce<false>(s2, scratch) * inv_cols + eps);
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V], g[V], h[V];
    load<T, V>(xr + c, f);
    load<float, V>(w + c, g);
    load<float, V>(b + c, h);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = (f[k] - mean) * inv * g[k] + h[k];
    store<T, V>(out + blockIdx.x * cols + c, f);
  }
}

// The wide form where the row length and every pointer allow it, else element by element.
template <typename T, typename Launch>
cudaError_t row_launch(int64_t cols, std::initializer_list<const void*> ptrs, Launch launch) {
  if (aligned(cols, kWide<T>, ptrs)) {
    launch(std::integral_constant<int, kWide<T>>{}, row_threads(cols / kWide<T>));
  } else {
    launch(std::integral_constant<int, 1>{}, row_threads(cols));
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t rmsnorm(Storage t, const void* x, const float* w, void* out, int64_t rows, int64_t cols,
                    float eps, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return row_launch<T>(cols, {x, w, out}, [&](auto v, int threads) {
      rmsnorm_kernel<T, decltype(v)::value><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
          static_cast<const T*>(x), w, static_cast<T*>(out), cols, eps);
    });
  });
}

cudaError_t rmsnorm_backward(Storage t, const void* x, const float* w, const void* dy, void* dx,
                             int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return row_launch<T>(cols, {x, w, dy, dx}, [&](auto v, int threads) {
      rmsnorm_backward_kernel<T, decltype(v)::value>
          <<<static_cast<unsigned>(rows), threads, 0, stream>>>(static_cast<const T*>(x), w,
                                                                static_cast<const T*>(dy),
                                                                static_cast<T*>(dx), cols, eps);
    });
  });
}

cudaError_t layernorm(Storage t, const void* x, const float* w, const float* b, void* out,
                      int64_t rows, int64_t cols, float eps, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return row_launch<T>(cols, {x, w, b, out}, [&](auto v, int threads) {
      layernorm_kernel<T, decltype(v)::value><<<static_cast<unsigned>(rows), threads, 0, stream>>>(
          static_cast<const T*>(x), w, b, static_cast<T*>(out), cols, eps);
    });
  });
}

}  // namespace scaleplan::runtime::cuda
