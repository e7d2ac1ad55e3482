// The host backend's compute kernels: f32, single-threaded (one thread is one rank), Eigen for the
// matrix products. Each checks its arguments and returns an invalid-input Status naming the op and
// the mismatching sizes; none allocates device memory or touches another rank.
#pragma once

#include "core/status.h"
#include "runtime/backend.h"

namespace scaleplan::runtime::host {

Status gemm(const GemmArgs& args);
Status attention_forward(const AttentionArgs& args);
Status attention_backward(const AttentionArgs& args);
Status memory_op(const MemOpArgs& args);

// Checks that `b` is an f32 (or `type`) buffer of at least `count` elements; `what` names it
// ("gemm: a").
Status check_buffer(const Buffer& b, int64_t count, std::string_view what,
                    ElemType type = ElemType::kF32);

}  // namespace scaleplan::runtime::host
