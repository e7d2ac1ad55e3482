// IterationBound: a cheap, provable lower bound on the iteration time the event simulator predicts
// for a layout, so that the planner can skip simulating layouts that cannot reach the top K
// (branch and bound, docs/planner.md "Exact pruning").
//
// The bound uses what the simulator itself uses and nothing else: the operator list
// (models/operators.h) of each layer kind, the embedding and the LM head, timed by the same
// KernelCostModel object that the simulator is given, and the layout's stage split
// (stage_layer_counts). Per pipeline stage s with m micro-batches:
//   F_g, B_g, W_g   compute time of one micro-batch's forward, backward (input gradients and
//                   recompute; weight gradients too unless the schedule splits them off, ZB-H1)
//                   and split-off weight pass of model chunk g (chunk g = v·pp + stage);
//   busy(s)         m · Σ over the stage's chunks of (F + B + W), plus its optimizer step opt(s);
//   head(s)         Σ_{j<s} F_j: no op of stage s can start before micro-batch 0 has gone forward
//                   through chunks 0..s-1 (every pass of stage s depends on that chain);
//   tail(s)         Σ_{j<s} B_j + opt(0): after any forward or backward pass of stage s, the
//                   backward of that micro-batch must still pass chunks s-1..0, and stage 0 then
//                   runs its optimizer step.
//   closed form = max_s head(s) + max(busy(s), m·Σ(F + B) + tail(s)).
// F, B and W also count the collectives the builder puts on the critical path (TP/SP, EP and ETP:
// the next op waits for them), timed by the simulator's collective model on the layout's
// placement, and head and tail a point-to-point transfer per stage boundary. Two refinements:
//   replay          the schedule's pass order (sim/schedule.h, which the builder follows) replayed
//                   with these durations: with the orders fixed every start time is a longest
//                   path in a DAG, monotone in the durations, so it cannot exceed the simulation;
//                   this counts the schedule's whole bubble (AFAB, 1F1B, interleaved, ZB-H1);
//   ZeRO-3          the DP stream runs, one after another, two all-gathers of each layer's
//                   parameters and the reduce-scatter of its gradients per micro-batch.
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
// so a call costs a pass over the layers and the chunks. Thread-safe (the caches are guarded by a
// mutex); not copyable.
#pragma once

#include <cstdint>
#include <memory>

#include "calibrate/cost_model.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "models/operators.h"

namespace scaleplan::hw {
class CollectiveModel;
struct LayoutPlacement;
}  // namespace scaleplan::hw

namespace scaleplan::planner {

class IterationBound {
 public:
  // `kernels` must outlive this object; it must be the model the simulator is given.
  // `ops`: the framework's changes to the operator lists (models::framework_layer_operators), the
  // ones the simulator is given.
  // `attention`: the fused attention kernel the simulated framework runs on this cluster's GPU
  // (sim::framework_attention).
  IterationBound(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                 const calibrate::KernelCostModel* kernels, models::FrameworkOps ops = {},
                 AttentionKernel attention = AttentionKernel::kFlash2);
  ~IterationBound();
  IterationBound(const IterationBound&) = delete;
  IterationBound& operator=(const IterationBound&) = delete;

  // How hard to try: kClosedForm costs a pass over the layers and the chunks (microseconds);
  // kReplay also replays the schedule's pass order (sim/schedule.h) with the same durations, which
  // counts the whole bubble of the schedule but costs a step per pass (up to a millisecond).
  enum class Effort { kClosedForm, kReplay };

  // The bound for a resolved layout. Errors name what the layout does not divide.
  Result<Duration> lower_bound(const Layout& layout, Effort effort = Effort::kReplay) const;

  // hw::place_layout(layout, cluster) of a resolved layout, from the cache the bound keeps per
  // parallel grid (tp, cp, pp, dp, ep, etp); valid while this object lives. The simulator can take
  // it (sim::SimulateOptions::placement) instead of computing it again.
  Result<const hw::LayoutPlacement*> placement(const Layout& layout) const;

 private:
  struct Cache;
  models::FrameworkOps ops_;
  AttentionKernel attention_ = AttentionKernel::kFlash2;
  models::ModelSpec model_;
  hw::Cluster cluster_;
  int64_t seq_len_;
  const calibrate::KernelCostModel* kernels_;
  std::unique_ptr<const hw::CollectiveModel> collectives_;
  std::unique_ptr<Cache> cache_;
};

}  // namespace scaleplan::planner
