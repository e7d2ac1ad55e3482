// The SM clock each pipeline stage's step runs at under the GPU's power limit
// (hw_profiles/sm_clock.h; docs/hw_profiles.md, "GH100 under its 700 W limit"), solved from the
// operator lists of sim::operator_lists (a layer list per layer kind times the chunk's layers of
// that kind, the embedding, the head) per micro-batch and the stage's optimizer operators, timed
// by the profile's kernel model at the clocks its efficiencies were measured at. The program
// builder (sim/emit_clock.cc) solves the same balance on its timed lists, which are these lists
// plus the kernels it adds (gradient accumulation, autocast's casts) with TP-overlap GEMMs timed
// in pieces (more tensor time): where it adds none, its clock is at most this one, which is what
// the planner's bound (sim/iteration_bound.cc) needs to time a stage's passes at.
//
// Plain functions; thread-safe.
#pragma once

#include <vector>

#include "calibrate/cost_model.h"
#include "hw_profiles/sm_clock.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "sim/pass_plan.h"

namespace scaleplan::sim {

// The inputs of hw::step_clock: tensor-core kernels' cycles (time at the clock they were measured
// at times that clock), other clock-bound kernels' cycles (PyTorch's casting loop) and seconds of
// kernels bound by memory bandwidth.
struct ClockSums {
  double tensor_cycles = 0;
  double other_cycles = 0;
  double fixed_seconds = 0;
  // Adds `times` copies of o.
  void add(const ClockSums& o, double times = 1);
};

// The sums of one micro-batch of an operator list's chunk-pass ops (sim::chunk_pass; the
// optimizer's and communication are left out), by `base` (base.sm_clock() must be non-null).
ClockSums clock_sums(const std::vector<models::Op>& ops, const calibrate::KernelCostModel& base);

// The sums of a stage's optimizer operators: every memory-bound kernel's seconds.
ClockSums optimizer_clock_sums(const std::vector<models::Op>& ops,
                               const calibrate::KernelCostModel& base);

// Each stage's clock (indexed by PassPlan::chunks[g].stage): Σ over the stage's chunks of (its
// layers' `layer` sums by ModelSpec::layer_kind, `embed` and `head` where the chunk holds them)
// times the plan's micro-batches, plus `optimizer[stage]`, through hw::step_clock (which keeps a
// thread's recent solves). The chunks' sums are added in chunk order, so equal inputs give
// bit-equal clocks.
std::vector<double> stage_clocks(const hw::SmClock& clock, const PassPlan& plan,
                                 const models::ModelSpec& model,
                                 const ClockSums (&layer)[models::ModelSpec::kLayerKinds],
                                 const ClockSums& embed, const ClockSums& head,
                                 const std::vector<ClockSums>& optimizer);

}  // namespace scaleplan::sim
