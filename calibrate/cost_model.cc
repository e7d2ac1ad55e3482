#include "calibrate/cost_model.h"

#include "calibrate/unfused_attention.h"

namespace scaleplan::calibrate {

Duration KernelCostModel::unfused_attention_forward(const AttentionShape& s) const {
  return unfused_core(
      s, false, [&](const GemmShape& g) { return gemm(g); },
      [&](int64_t bytes) {
        return memory_bound(MemoryBoundShape{Bytes(bytes), Flops(0)});
      });
}

Duration KernelCostModel::unfused_attention_backward(const AttentionShape& s) const {
  return unfused_core(
      s, true, [&](const GemmShape& g) { return gemm(g); },
      [&](int64_t bytes) {
        return memory_bound(MemoryBoundShape{Bytes(bytes), Flops(0)});
      });
}

}  // namespace scaleplan::calibrate
