// Transformer Engine's fp8 cast-transpose (transformer_engine/common/transpose/cast_transpose.cu,
// cast_transpose_general_kernel, NVIDIA/TransformerEngine d0067d0, lines 104-217), the quantization
// TE's fp8 linear runs on each bf16 GEMM operand under Megatron-core's default recipe, delayed
// scaling (docs/runtime.md, "fp8 casts"): one pass that reads x [rows, cols] (bf16 or f32
// storage), multiplies by the per-tensor scale read from device memory (the recipe computed it
// from the amax history before the step), rounds to e4m3 with saturation
// (__nv_cvt_float_to_fp8(.., __NV_SATFINITE, __NV_E4M3): beyond ±448 to ±448, NaN stays NaN),
// writes the e4m3 copy out [rows, cols] and its transpose out_t [cols, rows] (the column-wise
// copy the weight-gradient GEMM reads), and raises *amax to the largest |x| (before scaling) by a
// block reduction and one atomicMax on the float's bits per block, as TE's atomicMaxFloat
// (common/utils.cuh:935) does: non-negative floats order as their bit patterns. *amax is
// accumulated, not overwritten: the recipe zeroes it when it rolls the history.
// A separate header from kernels.h, which cudnn_sdpa.cc includes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {

cudaError_t fp8_cast_transpose(Storage t, const void* x, void* out, void* out_t, const float* scale,
                               float* amax, int64_t rows, int64_t cols, cudaStream_t stream);

}  // namespace scaleplan::runtime::cuda
