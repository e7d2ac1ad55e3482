// IterationBound: a cheap, provable lower bound on the iteration time the event simulator predicts
// for a layout, so that the planner can skip simulating layouts that cannot reach the top K
// (branch and bound, docs/planner.md "Exact pruning").
//
// The bound sums over the plan the program builder follows (sim/pass_plan.h), computed by the same
// functions: the operator lists of each layer kind, the embedding and the LM head
// (sim::operator_lists), timed by the same KernelCostModel object that the simulator is given;
// which stage runs which chunk with which layers, where the embedding and the head sit, each
// stage's pass order, its parameters and the pipeline transfer's bytes (sim::pass_plan). It counts
// a subset of what the builder emits from that plan, never more. Per pipeline stage s with m
// micro-batches:
//   F_g, B_g, W_g   compute time of one micro-batch's forward, backward (input gradients and
//                   recompute; weight gradients too unless the schedule splits them off, ZB-H1)
//                   and split-off weight pass of model chunk g (chunk g = v·pp + stage);
//   busy(s)         m · Σ over the stage's chunks of (F + B + W), plus its optimizer step opt(s)
//                   (the optimizer kernels of PassPlan::stage_dense_params/stage_expert_params,
//                   ZeRO-sharded, with the framework's loss scaling and gradient width);
//   head(s)         Σ_{j<s} F_j: no op of stage s can start before micro-batch 0 has gone forward
//                   through chunks 0..s-1 (every pass of stage s depends on that chain);
//   tail(s)         Σ_{j<s} B_j + opt(0): after any forward or backward pass of stage s, the
//                   backward of that micro-batch must still pass chunks s-1..0, and stage 0 then
//                   runs its optimizer step.
//   dp(s)           under ZeRO 0-2, the stage's DP gradient buckets (sim::dp_buckets) over every
//                   micro-batch that reduces: the rank's DP stream runs them one at a time, none
//                   before a pass of stage s starts, and the step waits for them;
//   closed form = max_s head(s) + max(busy(s), m·Σ(F + B) + tail(s), dp(s) + opt(s)).
// F, B and W also count the collectives the builder puts on the critical path (TP/SP, EP and ETP:
// the next op waits for them), timed by the simulator's collective model on the layout's
// placement, and head and tail a point-to-point transfer (PassPlan::p2p_bytes) per stage boundary.
// An overlapped pair (a transfer the builder runs beside the next compute op: TE's TP overlap, the
// CP ring) counts as the longer of the two, its compute op at the stage's SM clock where it is an
// exactly clock-bound tensor kernel (sim/bound_times.h). Left out (so below what the builder
// emits): gradient-accumulation kernels, ZeRO-1/2 gathers, host issue. Refinements:
//   replay          the schedule's pass order (sim/schedule.h, which the builder follows) replayed
//                   with these durations: with the orders fixed every start time is a longest
//                   path in a DAG, monotone in the durations, so it cannot exceed the simulation;
//                   this counts the schedule's whole bubble (AFAB, 1F1B, interleaved, ZB-H1);
//                   then the DP stream: the gradient buckets (sim::dp_buckets) issued no earlier
//                   than the replayed passes that complete them, one collective at a time, before
//                   the step; under ZeRO-3 the stream's gathers and reduce-scatters pass to pass;
//   ZeRO-3          the DP stream runs, one after another, two all-gathers of each layer's
//                   parameters and the reduce-scatter of its gradients per micro-batch;
//   slowdown        compute beside a transfer runs at 1/σ (KernelCostModel::overlap_slowdown):
//                   a stage is busy for at least C + S + max(0, D - S)(1 - 1/σ) with C its
//                   compute, S its serial collectives, D its DP stream's transfers.
// Why it holds: the builder chains a rank's passes one after another, and inside a pass its compute
// ops and critical-path collectives one after another, each lasting at least its model duration
// (link sharing, a compute slowdown and host issue only add); a single machine with release time r,
// total work P and minimum tail q over a set of its jobs cannot finish before r + P + q (the
// one-machine bound of scheduling theory). What overlaps (CP ring, DP buckets, sends beyond their
// own duration) is not counted. One tick (1 ps) is subtracted per op against the engine's rounding
// of fluid rates. The bound thus rests on the builder's structure as well as its cost models:
// tests/planner/iteration_bound_test checks simulated ≥ bound on a set of layouts of real models.
//
// Per (tp, cp, ep, etp, sp, mbs, recompute, dtype) the operator lists are timed once and cached,
// and per parallel grid the placement (sim/placement_cache.h, the one the simulator is then given),
// so a call costs a pass over the layers and the chunks. Thread-safe (the caches are guarded by a
// mutex); not copyable.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "sim/framework.h"
#include "sim/placement_cache.h"

namespace scaleplan::hw {
class CollectiveModel;
struct LayoutPlacement;
}  // namespace scaleplan::hw

namespace scaleplan::sim {

class IterationBound {
 public:
  // `kernels` must outlive this object; it must be the model the simulator is given.
  // `framework`: the conventions the simulator is given (sim::SimulateOptions::framework): its
  // operator-list changes, the attention kernel it runs on this cluster's GPU
  // (sim::framework_attention), its pipeline transfer and optimizer conventions, as the plan
  // (sim::pass_plan) and the builder read them.
  IterationBound(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                 const calibrate::KernelCostModel* kernels, sim::Framework framework = {});
  ~IterationBound();
  IterationBound(const IterationBound&) = delete;
  IterationBound& operator=(const IterationBound&) = delete;

  // How hard to try: kClosedForm costs a pass over the layers and the chunks (microseconds);
  // kReplay also replays the schedule's pass order (sim/schedule.h) with the same durations, which
  // counts the whole bubble of the schedule but costs a step per pass (up to a millisecond).
  enum class Effort { kClosedForm, kReplay };

  // The bound for a resolved layout. Errors name what the layout does not divide. `stage_hz`, if
  // given, receives the SM clock it times each pipeline stage's passes at: the simulation's
  // (sim/stage_clock.h), or none where the GPU has no power limit.
  Result<Duration> lower_bound(const Layout& layout, Effort effort = Effort::kReplay,
                               std::vector<double>* stage_hz = nullptr) const;

  // A lower bound on lower_bound(layout, Effort::kClosedForm) that costs a few cache lookups (the
  // closed form also plans the stages, solves their clocks and times the DP stream, tens of
  // microseconds): one micro-batch's passes through the whole model on the layout's placement at
  // the GPU's maximum clock, times the micro-batches, over the pp stages (the busiest stage does
  // at least the mean). Zero for the two-chunk schedules. It reads only the list key, the
  // placement, the weight split, the micro-batches and pp, so layouts that differ in anything
  // else (vpp, the stage split, ZeRO, the moments, the schedule but ZB-H1's split) share it. The
  // planner computes the closed form only where this does not already rule a layout out.
  Result<Duration> work_bound(const Layout& layout) const;

  // hw::place_layout(layout, cluster) of a resolved layout, from the bound's PlacementCache (one
  // entry per parallel grid); valid while this object lives. The simulator can take it
  // (sim::SimulateOptions::placement) instead of computing it again.
  Result<const hw::LayoutPlacement*> placement(const Layout& layout) const;

 private:
  struct Cache;
  sim::Framework framework_;
  AttentionKernel attention_ = AttentionKernel::kFlash2;
  models::ModelSpec model_;
  hw::Cluster cluster_;
  int64_t seq_len_;
  // `kernels` at the GPU's maximum SM clock, where it has a clock model: the passes are timed
  // there and each stage's tensor kernels then moved to the stage's clock (sim/stage_clock.h).
  std::shared_ptr<const calibrate::KernelCostModel> fastest_;
  const calibrate::KernelCostModel* kernels_;
  const calibrate::KernelCostModel* given_;  // `kernels`: the stage clocks' solve times with it
  std::unique_ptr<const hw::CollectiveModel> collectives_;
  PlacementCache placements_{&cluster_};  // after cluster_, which it reads
  std::unique_ptr<Cache> cache_;
  int64_t layers_of_kind_[models::ModelSpec::kLayerKinds] = {};  // the model's layers by kind
};

}  // namespace scaleplan::sim
