// Measured kernel samples from a scaleplan trace (`run --trace`; `simulate --trace` reads the same
// way), for `scaleplan refit` (calibrate/refit.h).
//
// Every compute op (class gemm, attention_fwd, attention_bwd, memory_bound or optimizer) whose
// args carry its shape (payload_text, sim/program.h) becomes one KernelSample (the struct
// `profile` measures into) with the op's duration as its time. Communication ops are not read:
// a measured collective's slice also holds the wait for the group's slowest member, which is no
// property of the collective's size. Unfused attention (a GEMM, softmax and GEMM in one op) is not
// the fused kernel the attention models fit, and is skipped and counted. A PyTorch profiler
// (Kineto) trace is refused: its kernels carry names, not shapes, so nothing says what a kernel's
// time is a time of.
#pragma once

#include <string>
#include <vector>

#include "calibrate/calibration.h"
#include "core/status.h"

namespace scaleplan::sim {

struct MeasuredKernels {
  std::vector<calibrate::KernelSample> ops;
  int skipped_unfused = 0;  // unfused attention ops
  std::string generator;    // otherData.generator: "scaleplan run" or "scaleplan simulate"
};

// Appends the compute ops of the trace at `path` to `into`. Errors name the file and the field.
Status read_measured_kernels(const std::string& path, MeasuredKernels& into);
// The same from text already read (`source` names it in errors).
Status parse_measured_kernels(std::string_view text, const std::string& source,
                              MeasuredKernels& into);

}  // namespace scaleplan::sim
