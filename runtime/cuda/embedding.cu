// Embedding lookup: out[r] = table[ids[r]], one block per row, the row copied in 16-byte accesses
// (vec.cuh), table and output in the activation storage (token ids are checked on the host side
// only for the buffer sizes; an id outside the vocabulary reads out of bounds, as in PyTorch's
// fast path, so the backend validates them in debug builds only).
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

template <typename T, int V>
__global__ void embedding_kernel(const int32_t* ids, const T* table, T* out, int64_t cols) {
  const T* src = table + static_cast<int64_t>(ids[blockIdx.x]) * cols;
  for (int64_t c = threadIdx.x * V; c < cols; c += blockDim.x * V) {
    float f[V];
    load<T, V>(src + c, f);
    store<T, V>(out + blockIdx.x * cols + c, f);
  }
}

}  // namespace

cudaError_t embedding(Storage t, const int32_t* ids, const void* table, void* out, int64_t rows,
                      int64_t cols, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    const unsigned g = static_cast<unsigned>(rows);
    if (aligned(cols, kWide<T>, {table, out})) {
      embedding_kernel<T, kWide<T>><<<g, row_threads(cols / kWide<T>), 0, stream>>>(
          ids, static_cast<const T*>(table), static_cast<T*>(out), cols);
    } else {
      embedding_kernel<T, 1><<<g, row_threads(cols), 0, stream>>>(ids, static_cast<const T*>(table),
                                                                  static_cast<T*>(out), cols);
    }
    return cudaGetLastError();
  });
}

}  // namespace scaleplan::runtime::cuda
