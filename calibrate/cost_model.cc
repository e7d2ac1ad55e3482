#include "calibrate/cost_model.h"

#include "calibrate/unfused_attention.h"

namespace scaleplan::calibrate {

namespace {

Duration composed_unfused(const KernelCostModel& k, const AttentionShape& s, bool backward) {
  return unfused_core(
      s, backward, [&](const GemmShape& g) { return k.gemm(g); },
      [&](int64_t bytes) {
        return k.memory_bound(MemoryBoundShape{Bytes(bytes), Flops(0)});
      });
}

}  // namespace

Duration KernelCostModel::unfused_attention_forward(const AttentionShape& s) const {
  return composed_unfused(*this, s, false);
}

Duration KernelCostModel::unfused_attention_backward(const AttentionShape& s) const {
  return composed_unfused(*this, s, true);
}

}  // namespace scaleplan::calibrate
