// Block-wide sum and max for the row kernels (one block of kBlock threads per row): warp shuffles,
// then one value per warp through shared memory (the pattern of llm.c's llmc/cuda_utils.cuh).
#pragma once

namespace scaleplan::runtime::cuda {

inline constexpr int kBlock = 256;

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Every thread of the block gets the result. `scratch` holds kBlock / 32 floats.
template <bool kMax>
__device__ inline float block_reduce(float v, float* scratch) {
  v = kMax ? warp_max(v) : warp_sum(v);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();  // all warp results are written
  float r = lane < blockDim.x / 32 ? scratch[lane] : (kMax ? -INFINITY : 0.f);
  return kMax ? warp_max(r) : warp_sum(r);
}

}  // namespace scaleplan::runtime::cuda
