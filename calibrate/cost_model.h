// KernelCostModel: how long one compute kernel takes on one GPU.
//
// The simulator asks it for every compute op of a Program; the planner asks through the simulator
// millions of times, so implementations must be cheap and thread-safe for concurrent const calls.
// Two implementations exist: RooflineCostModel (calibrate/roofline.h), the default from a hardware
// profile's peaks with size-dependent efficiency, and the fitted model that `scaleplan profile`
// produces (calibrate/fitted_model.h). Collective and point-to-point times come from the
// collective model (hw_profiles/collectives.h), which calibration can also override.
#pragma once

#include <memory>
#include <string>

#include "core/kernel_shapes.h"
#include "core/units.h"
#include "hw_profiles/sm_clock.h"

namespace scaleplan::calibrate {

class KernelCostModel {
 public:
  virtual ~KernelCostModel() = default;
  virtual Duration gemm(const GemmShape& s) const = 0;
  virtual Duration attention_forward(const AttentionShape& s) const = 0;
  virtual Duration attention_backward(const AttentionShape& s) const = 0;
  virtual Duration memory_bound(const MemoryBoundShape& s) const = 0;
  // The attention core as Megatron-LM ran it before flash attention: QK^T (batched GEMM), the
  // fused scale-mask-softmax, dropout and the PV GEMM forward (13 bytes moved per score element);
  // backward dP = dO·V^T, dV = P^T·dO, the dropout and softmax backward, dQ = dS·K, dK = dS^T·Q
  // (19 bytes per score). The default composes it from gemm() and memory_bound(); the roofline
  // times the passes over the scores at their own measured bandwidth (calibrate/roofline.h).
  virtual Duration unfused_attention_forward(const AttentionShape& s) const;
  virtual Duration unfused_attention_backward(const AttentionShape& s) const;
  // The attention core as `s.kernel` runs it: the fused kernel's attention_forward/backward, or
  // the unfused kernels' (AttentionKernel::kUnfused). The simulator and the planner's bound time
  // every attention op through this.
  Duration attention(const AttentionShape& s, bool backward) const {
    if (s.kernel == AttentionKernel::kUnfused)
      return backward ? unfused_attention_backward(s) : unfused_attention_forward(s);
    return backward ? attention_backward(s) : attention_forward(s);
  }
  // Compute slowdown factor (>= 1) while communication kernels run beside it on the same GPU
  // (they take SMs and memory bandwidth). 1 means no interference.
  virtual double overlap_slowdown() const { return 1.0; }
  // A short description for reports: "roofline(dgx-h100)" or "fitted(profile.json)".
  virtual std::string describe() const = 0;
  // The SM clock model of the GPU whose kernels this model times (hw/sm_clock.h): the clocks its
  // figures were measured at, the maximum and the power-limit ends; nullptr where times do not
  // depend on the step's clock (fitted models, profiles without gpu.efficiency.sm_clock).
  virtual const hw::SmClock* sm_clock() const { return nullptr; }
  // This model with its clock-bound kernels (tensor-core GEMMs and attention, the casting loop) at
  // SM clock `hz`: each one's clock-bound time at its measured clock times measured/hz. nullptr
  // where sm_clock() is. The simulator times a step at its own clock (sim/builder.cc), the
  // planner's bound at the maximum (sim/iteration_bound.cc).
  virtual std::shared_ptr<const KernelCostModel> at_sm_clock(double /*hz*/) const {
    return nullptr;
  }
};

}  // namespace scaleplan::calibrate

namespace scaleplan::calibrate {

// Another kernel model with every kernel time multiplied by `factor` (> 0): the planner's
// robustness check asks how the ranking changes when kernels run slower or faster than the model
// says (planner/robustness.h). The overlap slowdown is the base model's.
class ScaledKernelModel final : public KernelCostModel {
 public:
  ScaledKernelModel(std::shared_ptr<const KernelCostModel> base, double factor);
  Duration gemm(const GemmShape& s) const override;
  Duration attention_forward(const AttentionShape& s) const override;
  Duration attention_backward(const AttentionShape& s) const override;
  Duration memory_bound(const MemoryBoundShape& s) const override;
  Duration unfused_attention_forward(const AttentionShape& s) const override;
  Duration unfused_attention_backward(const AttentionShape& s) const override;
  double overlap_slowdown() const override { return base_->overlap_slowdown(); }
  std::string describe() const override;
  const hw::SmClock* sm_clock() const override { return base_->sm_clock(); }
  std::shared_ptr<const KernelCostModel> at_sm_clock(double hz) const override;

 private:
  Duration scaled(Duration d) const;
  std::shared_ptr<const KernelCostModel> base_;
  double factor_;
};

}  // namespace scaleplan::calibrate
