// The cuda backend's memory-bound ops (Backend::memory_op): checks each operand against
// memory_operands (runtime/backend.h), then launches the op's kernel (kernels.h) on the stream,
// its act operands in MemOpArgs::storage (bf16 as the frameworks store activations, or f32).
//
// MemoryOps keeps what an op needs beyond its operands: RoPE's cos/sin tables, one per
// (seq_len, head_dim, theta), built on first use and kept, as a framework keeps its freqs_cis
// buffer; they come from the backend's `allocate`, so that its memory_stats count them. One per
// backend, used from the backend's thread.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <tuple>

#include "core/status.h"
#include "runtime/backend.h"

namespace scaleplan::runtime::cuda {

// `b` holds at least `count` elements of `type`; `what` names the operand ("rmsnorm: x").
Status check(const Buffer& b, int64_t count, ElemType type, const std::string& what);

class MemoryOps {
 public:
  using Allocate = std::function<Result<Buffer>(int64_t count, ElemType type)>;
  explicit MemoryOps(Allocate allocate) : allocate_(std::move(allocate)) {}

  Status run(const MemOpArgs& a, cudaStream_t stream);

 private:
  Result<const float2*> rope_table(int64_t seq_len, int64_t head_dim, float theta,
                                   cudaStream_t stream);

  Allocate allocate_;
  std::map<std::tuple<int64_t, int64_t, float>, Buffer> rope_tables_;
};

}  // namespace scaleplan::runtime::cuda
