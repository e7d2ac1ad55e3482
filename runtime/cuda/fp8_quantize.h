// The other quantizations Transformer Engine runs on a bf16 GEMM operand, by recipe
// (docs/runtime.md, "fp8 casts"; the host references are runtime/host/host_memory_ops.cc):
//  - fp8_cast: the cast of fp8_cast_transpose without the transpose, which TE skips where fp8
//    GEMMs take any operand layout (Blackwell: quantizer.cpp:375 at d0067d0); *amax raised.
//  - fp8_amax: per-tensor current scaling's amax pass (quantizer.cpp:1009-1012), *amax
//    overwritten with max |x|; the cast then runs with the scale computed from it.
//  - mxfp8_quantize: MXFP8 (quantize_mxfp8.cuh): the row-wise copy with one E8M0 scale per 1 × 32
//    block of a row, and the column-wise copy (same [rows, cols] layout) with one per 32 × 1 block
//    of a column; each scale is the block's amax / 448 rounded up to a power of two
//    (float_to_e8m0, util/ptx_arch_spec.cuh:72-103). Reference kernels: one thread per block.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {

cudaError_t fp8_cast(Storage t, const void* x, void* out, const float* scale, float* amax,
                     int64_t n, cudaStream_t stream);
cudaError_t fp8_amax(Storage t, const void* x, float* amax, int64_t n, cudaStream_t stream);
cudaError_t mxfp8_quantize(Storage t, const void* x, void* out_row, void* out_col, void* scale_row,
                           void* scale_col, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace scaleplan::runtime::cuda
