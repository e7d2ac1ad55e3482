// Embedding lookup: out[r] = table[ids[r]], one block per row (token ids are checked on the host
// side only for the buffer sizes; an id outside the vocabulary reads out of bounds, as in PyTorch's
// fast path, so the backend validates them in debug builds only).
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {
namespace {

__global__ void embedding_kernel(const int32_t* ids, const float* table, float* out, int64_t cols) {
  const int64_t id = ids[blockIdx.x];
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[blockIdx.x * cols + c] = table[id * cols + c];
}

}  // namespace

cudaError_t embedding(const int32_t* ids, const float* table, float* out, int64_t rows,
                      int64_t cols, cudaStream_t stream) {
  embedding_kernel<<<static_cast<unsigned>(rows), 256, 0, stream>>>(ids, table, out, cols);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
