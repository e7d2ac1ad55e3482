// 128-bit access for the memory-bound kernels: storage in f32 or bf16, math in f32.
//
// A kernel templated on its storage type T and on V, the elements one access moves, reads and
// writes V elements at once: with V = 16 / sizeof(T) (4 f32 or 8 bf16) as one or more 16-byte
// loads and stores, as PyTorch's vectorized elementwise kernels (aten/src/ATen/native/cuda/
// MemoryAccess.cuh, aligned_vector of 16 bytes) and Transformer Engine's (common/utils.cuh, Vec)
// do; with V = 1 element by element. The launchers take the wide form only where every pointer
// is 16-byte aligned and, for row kernels, the row length is a multiple of V (aligned(...)), and
// a flat pass handles the n % V elements past the last whole vector element by element. Loops
// are grid-stride or one block per row with a column loop: no integer division per element.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {

__device__ inline float to_f32(float v) { return v; }
__device__ inline float to_f32(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T>
__device__ inline T from_f32(float v);
template <>
__device__ inline float from_f32<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 from_f32<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);  // round to nearest even, as PyTorch's and TE's casts do
}

// V elements of T at p into f (fp32). Wide: V·sizeof(T) a multiple of 16 and p 16-byte aligned.
template <typename T, int V>
__device__ inline void load(const T* p, float (&f)[V]) {
  if constexpr (V * sizeof(T) % 16 == 0) {
    constexpr int kE = 16 / sizeof(T);  // elements per 16-byte word
#pragma unroll
    for (int w = 0; w < V / kE; ++w) {
      const uint4 u = reinterpret_cast<const uint4*>(p)[w];
      const T* e = reinterpret_cast<const T*>(&u);
#pragma unroll
      for (int i = 0; i < kE; ++i) f[w * kE + i] = to_f32(e[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) f[i] = to_f32(p[i]);
  }
}

template <typename T, int V>
__device__ inline void store(T* p, const float (&f)[V]) {
  if constexpr (V * sizeof(T) % 16 == 0) {
    constexpr int kE = 16 / sizeof(T);
#pragma unroll
    for (int w = 0; w < V / kE; ++w) {
      uint4 u;
      T* e = reinterpret_cast<T*>(&u);
#pragma unroll
      for (int i = 0; i < kE; ++i) e[i] = from_f32<T>(f[w * kE + i]);
      reinterpret_cast<uint4*>(p)[w] = u;
    }
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = from_f32<T>(f[i]);
  }
}

// Elements of T per 16-byte access.
template <typename T>
inline constexpr int kWide = static_cast<int>(16 / sizeof(T));

// Whether every pointer is 16-byte aligned and `cols` (a row's elements; 0 for a flat pass) a
// multiple of `v`: the condition of the wide form.
inline bool aligned(int64_t cols, int v, std::initializer_list<const void*> ptrs) {
  if (cols % v != 0) return false;
  for (const void* p : ptrs) {
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// The storage type of a launcher's `Storage` argument.
template <typename F>
cudaError_t with_storage(Storage t, F&& f) {
  return t == Storage::kBf16 ? f(__nv_bfloat16{}) : f(float{});
}

// A flat pass out[i] = op(x[i], y[i]) over n elements (y unused by unary ops: pass x): grid-stride
// over the n / V whole groups of V, then the n % V last elements one by one.
template <typename Tx, typename Ty, typename To, int V, typename Op>
__global__ void map_kernel(const Tx* x, const Ty* y, To* out, int64_t n, Op op) {
  const int64_t tid = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = n / V;  // once per thread, not per element
  for (int64_t g = tid; g < groups; g += stride) {
    float a[V], b[V], o[V];
    load<Tx, V>(x + g * V, a);
    load<Ty, V>(y + g * V, b);
#pragma unroll
    for (int k = 0; k < V; ++k) o[k] = op(a[k], b[k]);
    store<To, V>(out + g * V, o);
  }
  for (int64_t i = groups * V + tid; i < n; i += stride) {
    out[i] = from_f32<To>(op(to_f32(x[i]), to_f32(y[i])));
  }
}

template <typename Tx, typename Ty, typename To, typename Op>
cudaError_t launch_map(const void* x, const void* y, void* out, int64_t n, Op op,
                       cudaStream_t stream) {
  constexpr int V = kWide < Tx >> kWide<To> ? (kWide < Tx >> kWide<Ty> ? kWide<Tx> : kWide<Ty>)
                                            : (kWide < To >> kWide<Ty> ? kWide<To> : kWide<Ty>);
  const auto* xt = static_cast<const Tx*>(x);
  const auto* yt = static_cast<const Ty*>(y);
  auto* ot = static_cast<To*>(out);
  if (aligned(0, V, {x, y, out})) {
    map_kernel<Tx, Ty, To, V>
        <<<grid_for(n / V > 0 ? n / V : 1), kThreads, 0, stream>>>(xt, yt, ot, n, op);
  } else {
    map_kernel<Tx, Ty, To, 1><<<grid_for(n), kThreads, 0, stream>>>(xt, yt, ot, n, op);
  }
  return cudaGetLastError();
}

// Threads for a row kernel whose rows have `groups` accesses: a multiple of 32, at most kBlock,
// no more than the row needs.
inline int row_threads(int64_t groups) {
  const int64_t t = (groups + 31) / 32 * 32;
  return static_cast<int>(t < 32 ? 32 : (t > 256 ? 256 : t));
}

}  // namespace scaleplan::runtime::cuda
