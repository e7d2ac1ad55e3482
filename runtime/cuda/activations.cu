// Activations and RoPE, forward and backward, bf16 or f32 storage and fp32 math with 16-byte
// accesses (vec.cuh):
//  - SwiGLU (Shazeer 2020) fused as one silu(gate)·up pass and its backward, as Transformer
//    Engine's swiglu / dswiglu (transformer_engine/common/activation/swiglu.cu) run them: one
//    block per row, the gate and up halves of the row read in the same column loop;
//  - GELU with the tanh approximation (Hendrycks & Gimpel 2016) and its derivative: flat passes;
//  - RoPE (Su et al. 2021) on interleaved (2i, 2i+1) pairs, torchtitan's layout (apply_rotary_emb
//    multiplies view_as_complex pairs by freqs_cis), reading cos and sin from a cache built once
//    per shape (rope_cache, torchtitan's precompute_freqs_cis) instead of evaluating them per
//    element: one block per row (its position computed once), threads over heads and pairs.
#include <cuda_bf16.h>

#include <type_traits>

#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

constexpr float kGeluC = 0.7978845608f;  // sqrt(2/pi)

__device__ inline float sigmoid(float x) { return 1.f / (1.f + __expf(-x)); }

struct Gelu {
  __device__ float operator()(float v, float) const {
    return 0.5f * v * (1.f + tanhf(kGeluC * (v + 0.044715f * v * v * v)));
  }
};
struct GeluGrad {
  __device__ float operator()(float v, float dy) const {
    const float t = tanhf(kGeluC * (v + 0.044715f * v * v * v));
    return dy *
           (0.5f * (1.f + t) + 0.5f * v * (1.f - t * t) * kGeluC * (1.f + 3.f * 0.044715f * v * v));
  }
};

// One block per row r: out[r, c] = silu(x[r, c]) · x[r, cols + c] (forward), or dx[r, c] and
// dx[r, cols + c] from dy[r, c] (backward).
template <typename T, int V, bool kBwd>
__global__ void swiglu_kernel(const T* x, const T* dy, T* out, int64_t cols) {
  const T* xr = x + blockIdx.x * 2 * cols;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float g[V], u[V], o[V];
    load<T, V>(xr + c, g);
    load<T, V>(xr + cols + c, u);
    if constexpr (!kBwd) {
#pragma unroll
      for (int k = 0; k < V; ++k) o[k] = g[k] * sigmoid(g[k]) * u[k];
      store<T, V>(out + blockIdx.x * cols + c, o);
    } else {
      float d[V], du[V];
      load<T, V>(dy + blockIdx.x * cols + c, d);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float s = sigmoid(g[k]);
        o[k] = d[k] * u[k] * s * (1.f + g[k] * (1.f - s));  // d/dgate
        du[k] = d[k] * g[k] * s;                            // d/dup = silu(gate)
      }
      store<T, V>(out + blockIdx.x * 2 * cols + c, o);
      store<T, V>(out + blockIdx.x * 2 * cols + cols + c, du);
    }
  }
}

__global__ void rope_cache_kernel(float2* cache, int64_t seq_len, int64_t half, float theta,
                                  int64_t head_dim) {
  // Once per shape, not per step: the division here is not on the op's path.
  SP_GRID_STRIDE(p, seq_len * half) {
    const int64_t pos = p / half, i = p % half;
    const float inv_freq = powf(theta, -2.f * static_cast<float>(i) / static_cast<float>(head_dim));
    float sn, cs;
    sincosf(static_cast<float>(pos) * inv_freq, &sn, &cs);
    cache[p] = float2{cs, sn};
  }
}

// One block per row: threadIdx.y over the row's heads, threadIdx.x over V-element groups of a
// head (V/2 pairs each). The backward rotates by the negative angle.
template <typename T, int V, bool kBwd>
__global__ void rope_kernel(const T* x, T* out, const float2* cache, int64_t heads,
                            int64_t head_dim, int64_t seq_len) {
  const int64_t row = blockIdx.x;
  const float2* cs = cache + (row % seq_len) * (head_dim / 2);  // once per row
  const T* xr = x + row * heads * head_dim;
  T* orow = out + row * heads * head_dim;
  for (int64_t h = threadIdx.y; h < heads; h += blockDim.y) {
    for (int64_t j = threadIdx.x * V; j < head_dim; j += blockDim.x * V) {
      float v[V], o[V];
      load<T, V>(xr + h * head_dim + j, v);
#pragma unroll
      for (int k = 0; k < V; k += 2) {
        const float2 c = cs[(j + k) >> 1];
        const float sn = kBwd ? -c.y : c.y;
        o[k] = v[k] * c.x - v[k + 1] * sn;
        o[k + 1] = v[k] * sn + v[k + 1] * c.x;
      }
      store<T, V>(orow + h * head_dim + j, o);
    }
  }
}

template <typename T, int V, bool kBwd>
void launch_rope(const void* x, void* out, const float2* cache, int64_t rows, int64_t heads,
                 int64_t head_dim, int64_t seq_len, cudaStream_t stream) {
  const int64_t groups = head_dim / V;
  const int tx = static_cast<int>(groups < 32 ? groups : 32);
  const int ty = 256 / tx < heads ? 256 / tx : static_cast<int>(heads);
  rope_kernel<T, V, kBwd><<<static_cast<unsigned>(rows), dim3(tx, ty), 0, stream>>>(
      static_cast<const T*>(x), static_cast<T*>(out), cache, heads, head_dim, seq_len);
}

template <typename T, bool kBwd>
cudaError_t launch_swiglu(const void* x, const void* dy, void* out, int64_t rows, int64_t cols,
                          cudaStream_t stream) {
  const auto* xt = static_cast<const T*>(x);
  const auto* dt = static_cast<const T*>(dy);
  auto* ot = static_cast<T*>(out);
  const unsigned g = static_cast<unsigned>(rows);
  constexpr int V = kWide<T>;
  if (aligned(cols, V, {x, dy, out})) {
    swiglu_kernel<T, V, kBwd><<<g, row_threads(cols / V), 0, stream>>>(xt, dt, ot, cols);
  } else {
    swiglu_kernel<T, 1, kBwd><<<g, row_threads(cols), 0, stream>>>(xt, dt, ot, cols);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t swiglu(Storage t, const void* x, void* out, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  return with_storage(
      t, [&](auto e) { return launch_swiglu<decltype(e), false>(x, x, out, rows, cols, stream); });
}

cudaError_t swiglu_backward(Storage t, const void* x, const void* dy, void* dx, int64_t rows,
                            int64_t cols, cudaStream_t stream) {
  return with_storage(
      t, [&](auto e) { return launch_swiglu<decltype(e), true>(x, dy, dx, rows, cols, stream); });
}

cudaError_t gelu(Storage t, const void* x, void* out, int64_t n, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return launch_map<T, T, T>(x, x, out, n, Gelu{}, stream);
  });
}

cudaError_t gelu_backward(Storage t, const void* x, const void* dy, void* dx, int64_t n,
                          cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    return launch_map<T, T, T>(x, dy, dx, n, GeluGrad{}, stream);
  });
}

cudaError_t rope_cache(float2* cache, int64_t seq_len, int64_t head_dim, float theta,
                       cudaStream_t stream) {
  const int64_t half = head_dim / 2;
  rope_cache_kernel<<<grid_for(seq_len * half), kThreads, 0, stream>>>(cache, seq_len, half, theta,
                                                                       head_dim);
  return cudaGetLastError();
}

cudaError_t rope(Storage t, const void* x, void* out, const float2* cache, int64_t rows,
                 int64_t cols, int64_t head_dim, int64_t seq_len, bool backward,
                 cudaStream_t stream) {
  const int64_t heads = cols / head_dim;  // once per launch
  auto go = [&](auto e, auto wide) {
    using T = decltype(e);
    constexpr int V = decltype(wide)::value;
    if (backward) {
      launch_rope<T, V, true>(x, out, cache, rows, heads, head_dim, seq_len, stream);
    } else {
      launch_rope<T, V, false>(x, out, cache, rows, heads, head_dim, seq_len, stream);
    }
    return cudaGetLastError();
  };
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    if (aligned(head_dim, kWide<T>, {x, out}))
      return go(e, std::integral_constant<int, kWide<T>>{});
    return go(e, std::integral_constant<int, 2>{});  // one pair per access
  });
}

}  // namespace scaleplan::runtime::cuda
