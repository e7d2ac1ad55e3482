// fp8_quantize.h's kernels: grid-stride passes for the per-tensor cast and amax (a block max,
// then one atomicMax per block on the float's bits, as fp8_cast.cu), and one thread per MX block
// for MXFP8.
#include <cuda_fp8.h>

#include "runtime/cuda/fp8_quantize.h"
#include "runtime/cuda/grid.cuh"
#include "runtime/cuda/reduce.cuh"
#include "runtime/cuda/vec.cuh"

namespace scaleplan::runtime::cuda {
namespace {

constexpr int kMx = 32;  // elements per MX block

__device__ inline uint8_t to_e4m3(float v) {
  return static_cast<uint8_t>(__nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3));
}

// Transformer Engine's float_to_e8m0, portable path (util/ptx_arch_spec.cuh:83-103).
__device__ inline uint8_t e8m0_up(float v) {
  if (isnan(v)) return 0xff;
  if (isinf(v)) return 0xfe;
  if (v == 0.f) return 0;
  const uint32_t u = __float_as_uint(v);
  uint32_t e = u >> 23;
  const uint32_t m = u & 0x7fffff;
  if (m > 0 && e != 0xfe && !(e == 0 && m <= 0x400000)) ++e;
  return static_cast<uint8_t>(e);
}

template <typename T, bool kCast>
__global__ void __launch_bounds__(kThreads)
    amax_kernel(const T* x, uint8_t* out, const float* scale_ptr, float* amax_ptr, int64_t n) {
  __shared__ float scratch[kThreads / 32];
  const float scale = kCast ? *scale_ptr : 1.f;
  float amax = 0.f;
  SP_GRID_STRIDE(i, n) {
    const float f = to_f32(x[i]);
    amax = fmaxf(amax, fabsf(f));
    if constexpr (kCast) out[i] = to_e4m3(f * scale);
  }
  amax = block_reduce<true>(amax, scratch);
  if (threadIdx.x == 0) atomicMax(reinterpret_cast<int*>(amax_ptr), __float_as_int(amax));
}

// Thread k quantizes block k: `along_rows` blocks run along a row (1 × 32), else down a column.
template <typename T>
__global__ void mx_kernel(const T* x, uint8_t* q, uint8_t* s, int64_t rows, int64_t cols,
                          bool along_rows) {
  const int64_t per_line = along_rows ? (cols + kMx - 1) / kMx : cols;
  const int64_t blocks = along_rows ? rows * per_line : (rows + kMx - 1) / kMx * cols;
  SP_GRID_STRIDE(k, blocks) {
    const int64_t a = k / per_line, b = k % per_line;
    const int64_t first = along_rows ? a * cols + b * kMx : a * kMx * cols + b;
    const int64_t stride = along_rows ? 1 : cols;
    const int64_t left = along_rows ? cols - b * kMx : rows - a * kMx;
    const int64_t len = left < kMx ? left : kMx;
    float amax = 0.f;
    for (int64_t j = 0; j < len; ++j) amax = fmaxf(amax, fabsf(to_f32(x[first + j * stride])));
    const uint8_t e = e8m0_up(amax / 448.f);
    s[k] = e;
    const float inv = e == 0xff ? __int_as_float(0x7fffffff) : exp2f(127.f - e);
    for (int64_t j = 0; j < len; ++j)
      q[first + j * stride] = to_e4m3(to_f32(x[first + j * stride]) * inv);
  }
}

}  // namespace

cudaError_t fp8_cast(Storage t, const void* x, void* out, const float* scale, float* amax,
                     int64_t n, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    amax_kernel<T, true><<<grid_for(n), kThreads, 0, stream>>>(
        static_cast<const T*>(x), static_cast<uint8_t*>(out), scale, amax, n);
    return cudaGetLastError();
  });
}

cudaError_t fp8_amax(Storage t, const void* x, float* amax, int64_t n, cudaStream_t stream) {
  // Overwritten: TE zeroes the amax before its pass (quantizer.cpp:2010 "will zero out").
  if (cudaError_t e = cudaMemsetAsync(amax, 0, sizeof(float), stream); e != cudaSuccess) return e;
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    amax_kernel<T, false>
        <<<grid_for(n), kThreads, 0, stream>>>(static_cast<const T*>(x), nullptr, nullptr, amax, n);
    return cudaGetLastError();
  });
}

cudaError_t mxfp8_quantize(Storage t, const void* x, void* out_row, void* out_col, void* scale_row,
                           void* scale_col, int64_t rows, int64_t cols, cudaStream_t stream) {
  return with_storage(t, [&](auto e) {
    using T = decltype(e);
    const auto* xt = static_cast<const T*>(x);
    const int64_t row_blocks = rows * ((cols + kMx - 1) / kMx);
    const int64_t col_blocks = (rows + kMx - 1) / kMx * cols;
    mx_kernel<T><<<grid_for(row_blocks), kThreads, 0, stream>>>(
        xt, static_cast<uint8_t*>(out_row), static_cast<uint8_t*>(scale_row), rows, cols, true);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
    mx_kernel<T><<<grid_for(col_blocks), kThreads, 0, stream>>>(
        xt, static_cast<uint8_t*>(out_col), static_cast<uint8_t*>(scale_col), rows, cols, false);
    return cudaGetLastError();
  });
}

}  // namespace scaleplan::runtime::cuda
