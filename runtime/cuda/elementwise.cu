// The operator list's plain passes: copy, casts, fill, scale, the residual add (flat passes of
// 16-byte accesses, vec.cuh) and the per-row sum of squares of a gradient norm (one block per row).
#include <cuda_bf16.h>

#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

struct Identity {
  __device__ float operator()(float x, float) const { return x; }
};
// f32 -> f32 through bf16: the value a bf16 copy of x holds.
struct RoundBf16 {
  __device__ float operator()(float x, float) const {
    return __bfloat162float(__float2bfloat16(x));
  }
};
struct Scale {
  float s;
  __device__ float operator()(float x, float) const { return s * x; }
};
struct Sum {
  __device__ float operator()(float x, float y) const { return x + y; }
};

__global__ void fill_kernel(float* out, int64_t n, float value) {
  const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const bool wide = reinterpret_cast<uintptr_t>(out) % 16 == 0;
  const int64_t groups = wide ? n / 4 : 0;
  const float4 v{value, value, value, value};
  for (int64_t g = tid; g < groups; g += stride) reinterpret_cast<float4*>(out)[g] = v;
  for (int64_t i = groups * 4 + tid; i < n; i += stride) out[i] = value;
}

template <int V>
__global__ void sum_squares_kernel(const float* x, float* out, int64_t cols) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  float ss = 0.f;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<float, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) ss += f[k] * f[k];
  }
  ss = block_reduce<false>(ss, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = ss;
}

}  // namespace

cudaError_t copy(const void* x, void* out, int64_t bytes, cudaStream_t stream) {
  return cudaMemcpyAsync(out, x, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice, stream);
}

cudaError_t cast(Storage from, Storage to, const void* x, void* out, int64_t n,
                 cudaStream_t stream) {
  using bf16 = __nv_bfloat16;
  if (from == Storage::kF32 && to == Storage::kBf16)
    return launch_map<float, float, bf16>(x, x, out, n, Identity{}, stream);
  if (from == Storage::kBf16 && to == Storage::kF32)
    return launch_map<bf16, bf16, float>(x, x, out, n, Identity{}, stream);
  if (from == Storage::kF32)
    return launch_map<float, float, float>(x, x, out, n, RoundBf16{}, stream);
  return copy(x, out, n * 2, stream);
}

cudaError_t fill(float* out, int64_t n, float value, cudaStream_t stream) {
  fill_kernel<<<grid_for(n / 4 > 0 ? n / 4 : 1), kThreads, 0, stream>>>(out, n, value);
  return cudaGetLastError();
}

cudaError_t scale(Storage t, const void* x, void* out, int64_t n, float s, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return launch_map<T, T, T>(x, x, out, n, Scale{s}, stream);
  });
}

cudaError_t add(Storage t, const void* x, const void* y, void* out, int64_t n,
                cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return launch_map<T, T, T>(x, y, out, n, Sum{}, stream);
  });
}

cudaError_t sum_squares(const float* x, float* out, int64_t rows, int64_t cols,
                        cudaStream_t stream) {
  const unsigned g = static_cast<unsigned>(rows);
  if (aligned(cols, 4, {x})) {
    sum_squares_kernel<4><<<g, row_threads(cols / 4), 0, stream>>>(x, out, cols);
  } else {
    sum_squares_kernel<1><<<g, row_threads(cols), 0, stream>>>(x, out, cols);
  }
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
