// Row softmax and the fused softmax + cross-entropy of the LM head (loss per row and the gradient
// of the mean loss, as llm.c's fused_classifier does): one block per row, 16-byte accesses
// (vec.cuh). Each thread keeps a running maximum and the sum of exponentials relative to it
// (the online softmax of Milakov & Gimelshein 2018), so that the statistics take one read of the
// row and the result one more. The loss runs over fp32 logits, as the frameworks compute it:
// torchtitan casts the logits to fp32 before cross_entropy (torchtitan/components/loss.py,
// `pred.flatten(0, 1).float()`), Megatron-LM's vocab-parallel cross-entropy computes in fp32.
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/reduce.cuh"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

// Running (max, sum of exp(x - max)) of a row, then over the block.
struct RowStats {
  float max, sum;
};
template <typename T, int V>
__device__ RowStats row_stats(const T* xr, int64_t cols, float* scratch) {
  float m = -INFINITY, s = 0.f;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<T, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      if (f[k] > m) {
        s = s * __expf(m - f[k]) + 1.f;
        m = f[k];
      } else {
        s += __expf(f[k] - m);
      }
    }
  }
  const float bm = block_reduce<true>(m, scratch);
  const float bs = block_reduce<false>(m == -INFINITY ? 0.f : s * __expf(m - bm), scratch);
  return {bm, bs};
}

template <typename T, int V>
__global__ void softmax_kernel(const T* x, T* out, int64_t cols) {
  __shared__ float scratch[kBlock / 32];
  const T* xr = x + blockIdx.x * cols;
  const RowStats st = row_stats<T, V>(xr, cols, scratch);
  const float inv = 1.f / st.sum;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<T, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) f[k] = __expf(f[k] - st.max) * inv;
    store<T, V>(out + blockIdx.x * cols + c, f);
  }
}

template <int V>
__global__ void cross_entropy_kernel(const float* x, const int32_t* labels, float* loss,
                                     float* grad, int64_t cols, float inv_rows) {
  __shared__ float scratch[kBlock / 32];
  const float* xr = x + blockIdx.x * cols;
  const RowStats st = row_stats<float, V>(xr, cols, scratch);
  const int64_t label = labels[blockIdx.x];
  if (threadIdx.x == 0) loss[blockIdx.x] = logf(st.sum) + st.max - xr[label];
  const float inv = 1.f / st.sum;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<float, V>(xr + c, f);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      f[k] = (__expf(f[k] - st.max) * inv - (c + k == label ? 1.f : 0.f)) * inv_rows;
    }
    store<float, V>(grad + blockIdx.x * cols + c, f);
  }
}

}  // namespace

cudaError_t softmax(Storage t, const void* x, void* out, int64_t rows, int64_t cols,
                    cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    const unsigned g = static_cast<unsigned>(rows);
    if (aligned(cols, kWide<T>, {x, out})) {
      softmax_kernel<T, kWide<T>><<<g, row_threads(cols / kWide<T>), 0, stream>>>(
          static_cast<const T*>(x), static_cast<T*>(out), cols);
    } else {
      softmax_kernel<T, 1><<<g, row_threads(cols), 0, stream>>>(static_cast<const T*>(x),
                                                                static_cast<T*>(out), cols);
    }
    return cudaGetLastError();
  });
}

cudaError_t cross_entropy(const float* logits, const int32_t* labels, float* loss, float* dlogits,
                          int64_t rows, int64_t cols, cudaStream_t stream) {
  const unsigned g = static_cast<unsigned>(rows);
  const float inv_rows = 1.f / static_cast<float>(rows);
  if (aligned(cols, 4, {logits, dlogits})) {
    cross_entropy_kernel<4>
        <<<g, row_threads(cols / 4), 0, stream>>>(logits, labels, loss, dlogits, cols, inv_rows);
  } else {
    cross_entropy_kernel<1>
        <<<g, row_threads(cols), 0, stream>>>(logits, labels, loss, dlogits, cols, inv_rows);
  }
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
