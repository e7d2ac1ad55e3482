// Grid-stride launches for the elementwise kernels: kThreads per block, enough blocks to cover n
// elements (at most 65535·32, each thread then takes several), one element per step.
#pragma once

#include <cstdint>

namespace scaleplan::runtime::cuda {

inline constexpr int kThreads = 256;

inline unsigned grid_for(int64_t n) {
  const int64_t g = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(g < 65535 * 32 ? (g > 0 ? g : 1) : 65535 * 32);
}

}  // namespace scaleplan::runtime::cuda

#define SP_GRID_STRIDE(i, n)                                                             \
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
