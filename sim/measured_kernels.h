// Measured kernel samples for `scaleplan refit` (calibrate/refit.h), from a scaleplan trace
// (`run --trace`; `simulate --trace` reads the same way) or a PyTorch profiler (Kineto) trace
// recorded with `record_shapes=True`. The format is told by content: otherData.generator
// "scaleplan ..." is scaleplan's, any other Chrome trace is read as Kineto.
//
// scaleplan trace:
// Every compute op (class gemm, attention_fwd, attention_bwd, memory_bound or optimizer) whose
// args carry its shape (payload_text, sim/program.h) becomes one KernelSample (the struct
// `profile` measures into) with the op's duration as its time. Communication ops are not read:
// a measured collective's slice also holds the wait for the group's slowest member, which is no
// property of the collective's size. Unfused attention (a GEMM, softmax and GEMM in one op) is not
// the fused kernel the attention models fit, and is skipped and counted.
//
// Kineto trace: a kernel carries the External id of the innermost aten op that launched it, and
// with record_shapes every aten op carries "Input Dims" and "Input type" (and "Concrete Inputs",
// the values of its scalar arguments). One op becomes one sample, its time the sum of its
// kernels' durations:
//   - GEMMs: aten::mm [M,K]·[K,N], aten::addmm (bias, [M,K], [K,N]), aten::bmm [B,M,K]·[B,K,N]
//     (batch B), in bf16 or fp16 (same tensor-core rate; other dtypes are skipped and counted);
//   - attention: the kernels under an aten::_scaled_dot_product_{cudnn,flash}_attention op or its
//     _backward (the innermost op, _cudnn_attention_forward and the like, is nested in it on the
//     same thread), shape from the SDPA op's query and key [batch, heads, seq, head dim] and value
//     (head dim of V), causal from its is_causal argument.
//   - memory-bound: the elementwise ops whose bytes follow from their inputs (copy_, add, sub,
//     mul, div, neg, silu, silu_backward, their in-place forms, fill_, zero_): every tensor input
//     read once, the output written once (in place: the first input; out of place: as large as
//     the largest input in the widest input dtype; copy_ and fills do not read their first
//     input), the kind from the op and its dtypes (classify_aten_op, sim/op_class.h), the
//     implementation (MemoryBoundShape::path) from its kernel's name (memory_path_of_kernel):
//     the dynamic-casting loop, the vectorized loop or a strided one, at different rates.
// Other ops' kernels (norms, softmax and loss, the optimizer, communication) are not read. A trace
// whose aten ops carry no "Input Dims" is refused, saying to record with record_shapes=True.
#pragma once

#include <string>
#include <vector>

#include "calibrate/calibration.h"
#include "core/status.h"

namespace scaleplan::sim {

struct MeasuredKernels {
  std::vector<calibrate::KernelSample> ops;
  int skipped_unfused = 0;  // unfused attention ops
  // Kineto: GEMM and attention ops with kernels whose shape refit does not read (an fp32 or fp8
  // GEMM, efficient attention, an input without dims).
  int skipped_unread = 0;
  // otherData.generator: "scaleplan run" or "scaleplan simulate"; "pytorch profiler" for Kineto
  std::string generator;
};

// Appends the compute ops of the trace at `path` to `into`. Errors name the file and the field.
Status read_measured_kernels(const std::string& path, MeasuredKernels& into);
// The same from text already read (`source` names it in errors).
Status parse_measured_kernels(std::string_view text, const std::string& source,
                              MeasuredKernels& into);

}  // namespace scaleplan::sim
