// What a PyTorch profiler (Kineto) trace says about one aten op, from the fields record_shapes
// writes ("Input Dims", "Input type"): shared by the trace reader (sim/recorded.h, for the
// op-for-op match of compare) and refit's kernel samples (sim/measured_kernels.h).
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/json_util.h"

namespace scaleplan::sim {

// The dims of tensor input `i` of an op's args ("Input Dims"); empty when absent or not a list
// of integers.
std::vector<int64_t> aten_input_dims(const Json& args, size_t i);

// The GEMM an aten::mm ([m,k]·[k,n]), aten::addmm (bias, [m,k], [k,n]), aten::bmm
// ([b,m,k]·[b,k,n]) or aten::_scaled_mm ([m,k]·[k,n], fp8) computed, as {m, n, k, batch}; all
// zero when `op` is none of these, its dims do not multiply or one is not positive. `input` is set
// to the index of the first matrix input (1 for addmm, else 0).
std::array<int64_t, 4> aten_gemm_dims(std::string_view op, const Json& args,
                                      size_t* input = nullptr);

}  // namespace scaleplan::sim
