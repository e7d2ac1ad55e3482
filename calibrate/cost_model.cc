#include "calibrate/cost_model.h"

#include <cstdio>
#include <utility>

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

namespace scaleplan::calibrate {

ScaledKernelModel::ScaledKernelModel(std::shared_ptr<const KernelCostModel> base, double factor)
    : base_(std::move(base)), factor_(factor) {}

Duration ScaledKernelModel::scaled(Duration d) const {
  return Duration::seconds(d.to_seconds() * factor_);
}

Duration ScaledKernelModel::gemm(const GemmShape& s) const { return scaled(base_->gemm(s)); }

Duration ScaledKernelModel::attention_forward(const AttentionShape& s) const {
  return scaled(base_->attention_forward(s));
}

Duration ScaledKernelModel::attention_backward(const AttentionShape& s) const {
  return scaled(base_->attention_backward(s));
}

Duration ScaledKernelModel::memory_bound(const MemoryBoundShape& s) const {
  return scaled(base_->memory_bound(s));
}

Duration ScaledKernelModel::unfused_attention_forward(const AttentionShape& s) const {
  return scaled(base_->unfused_attention_forward(s));
}

Duration ScaledKernelModel::unfused_attention_backward(const AttentionShape& s) const {
  return scaled(base_->unfused_attention_backward(s));
}

std::shared_ptr<const KernelCostModel> ScaledKernelModel::at_sm_clock(double hz) const {
  auto base = base_->at_sm_clock(hz);
  if (!base) return nullptr;
  return std::make_shared<ScaledKernelModel>(std::move(base), factor_);
}

std::string ScaledKernelModel::describe() const {
  char buf[32];
  std::snprintf(buf, sizeof buf, " x %.3g", factor_);
  return base_->describe() + buf;
}

}  // namespace scaleplan::calibrate
