// Transformer Engine's fp8 cast-transpose with amax (fp8_cast.h): one block per 64 × 64 tile.
// The block reads the tile's rows 8 elements per access (16 B of bf16), writes the e4m3 rows
// (8 B per access) and keeps the tile in shared memory, then writes the tile's columns as rows of
// the transpose, 8 rows per access, as TE's kernel stages its transposed subtiles through shared
// memory (cast_transpose.cu:172-201). The wide form needs rows and cols multiples of 8 and
// aligned pointers; otherwise every element goes alone.
#include <cuda_fp8.h>

#include <climits>

#include "runtime/cuda/fp8_cast.h"
#include "runtime/cuda/reduce.cuh"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

constexpr int kTile = 64;              // rows and columns of a block's tile
constexpr int kVec = 8;                // elements per access
constexpr int kGroups = kTile / kVec;  // accesses per tile row
constexpr int kPad = 4;                // shared-memory row padding: column reads spread on banks

__device__ inline uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

__device__ inline uint2 pack(const uint8_t (&q)[kVec]) {
  uint2 u;
  u.x = q[0] | q[1] << 8 | q[2] << 16 | static_cast<uint32_t>(q[3]) << 24;
  u.y = q[4] | q[5] << 8 | q[6] << 16 | static_cast<uint32_t>(q[7]) << 24;
  return u;
}

template <typename T, bool kWide>
__global__ void __launch_bounds__(kBlock)
    cast_transpose_kernel(const T* x, uint8_t* out, uint8_t* out_t, const float* scale_ptr,
                          float* amax_ptr, int64_t rows, int64_t cols, int64_t tiles_c) {
  __shared__ uint8_t tile[kTile][kTile + kPad];
  __shared__ float scratch[kBlock / 32];
  const int64_t r0 = blockIdx.x / tiles_c * kTile, c0 = blockIdx.x % tiles_c * kTile;
  const float scale = *scale_ptr;
  float amax = 0.f;
  // The tile's rows: x in, e4m3 rows out, the tile kept for the transpose.
  for (int i = threadIdx.x; i < kTile * kGroups; i += blockDim.x) {
    const int tr = i / kGroups, tc = i % kGroups * kVec;  // constant powers of two: shifts
    const int64_t r = r0 + tr, c = c0 + tc;
    float f[kVec];
    uint8_t q[kVec];
    if constexpr (kWide) {
      if (r >= rows || c >= cols) continue;  // whole vectors: cols is a multiple of kVec
      load<T, kVec>(x + r * cols + c, f);
    } else {
#pragma unroll
      for (int k = 0; k < kVec; ++k)
        f[k] = r < rows && c + k < cols ? to_f32(x[r * cols + c + k]) : 0.f;
    }
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      amax = fmaxf(amax, fabsf(f[k]));
      q[k] = to_e4m3(f[k] * scale);
      tile[tr][tc + k] = q[k];
    }
    if constexpr (kWide) {
      *reinterpret_cast<uint2*>(out + r * cols + c) = pack(q);
    } else {
      for (int k = 0; k < kVec; ++k)
        if (r < rows && c + k < cols) out[r * cols + c + k] = q[k];
    }
  }
  __syncthreads();  // the tile is complete before its columns are read
  // The tile's columns: rows of out_t [cols, rows].
  for (int i = threadIdx.x; i < kTile * kGroups; i += blockDim.x) {
    const int tc = i / kGroups, tr = i % kGroups * kVec;
    const int64_t c = c0 + tc, r = r0 + tr;
    if (c >= cols || r >= rows) continue;
    uint8_t q[kVec];
#pragma unroll
    for (int k = 0; k < kVec; ++k) q[k] = tile[tr + k][tc];
    if constexpr (kWide) {
      *reinterpret_cast<uint2*>(out_t + c * rows + r) = pack(q);
    } else {
      for (int k = 0; k < kVec; ++k)
        if (r + k < rows) out_t[c * rows + r + k] = q[k];
    }
  }
  amax = block_reduce<true>(amax, scratch);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax_ptr), __float_as_int(amax));
}

}  // namespace

cudaError_t fp8_cast_transpose(Storage t, const void* x, void* out, void* out_t, const float* scale,
                               float* amax, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t tiles_c = (cols + kTile - 1) / kTile;
  const int64_t tiles = (rows + kTile - 1) / kTile * tiles_c;
  if (tiles > INT_MAX) return cudaErrorInvalidValue;
  const bool wide = rows % kVec == 0 && aligned(cols, kVec, {x, out, out_t});
  auto* o = static_cast<uint8_t*>(out);
  auto* ot = static_cast<uint8_t*>(out_t);
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    const auto* xt = static_cast<const T*>(x);
    const unsigned g = static_cast<unsigned>(tiles);
    if (wide) {
      cast_transpose_kernel<T, true>
          <<<g, kBlock, 0, stream>>>(xt, o, ot, scale, amax, rows, cols, tiles_c);
    } else {
      cast_transpose_kernel<T, false>
          <<<g, kBlock, 0, stream>>>(xt, o, ot, scale, amax, rows, cols, tiles_c);
    }
    return cudaGetLastError();
  });
}

}  // namespace scaleplan::runtime::cuda
