// Evaluator: how the planner asks what a layout costs.
//
// The search driver (planner/planner.h) knows nothing about memory models or simulators: it calls
// an Evaluator, first `memory` on every candidate (cheap), then `coarse_lower_bound` on every
// candidate that fits (cheaper still) and `iteration_lower_bound` on those the coarse one does not
// rule out (cheap), then `simulate` on the fitting candidates in the order of their bounds until
// the bound exceeds the time of the K-th best simulated (expensive). The real
// evaluator (planner/model_evaluator.h) answers with the memory model (models/memory.h) and the
// event simulator; tests substitute a deterministic fake.
//
// Contract: the functions are pure functions of the layout (the same layout always gives the same
// answer, bit for bit) and are called concurrently from many threads, so they must be thread-safe.
// The layouts passed in are resolved (core's resolve_layout). A Status error from `simulate` is
// counted and reported by the driver (never dropped silently); an error from `memory` means the
// layout cannot be evaluated at all and is reported the same way.
#pragma once

#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "planner/prediction.h"

namespace scaleplan::planner {

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  // Per-GPU peak on the worst stage, everything included (allocator reserve, CUDA context, NCCL
  // buffers), and the device capacity. The driver applies the user's margin.
  virtual Result<MemoryVerdict> memory(const Layout& layout) const = 0;
  // One simulated iteration.
  virtual Result<Prediction> simulate(const Layout& layout) const = 0;
  // simulate(), for a caller that reads the breakdown only if the iteration is at most
  // `breakdown_within` (the planner: a slower result has K' faster ones and cannot reach its top
  // K'). Everything else is simulate()'s; an evaluator may leave a slower result's breakdown zero.
  // Default: simulate().
  virtual Result<Prediction> simulate_within(const Layout& layout,
                                             Duration breakdown_within) const {
    (void)breakdown_within;
    return simulate(layout);
  }
  // A lower bound on simulate(layout)->iteration that holds for every layout: the planner never
  // simulates a layout whose bound exceeds the K-th best simulated iteration, so a bound above the
  // simulated time could lose a plan. The ranking assumes that tokens_per_s_per_gpu falls as the
  // iteration grows (gbs·seq / (iteration·gpus) for one job). Default: zero, which prunes nothing.
  // Called on every fitting candidate, so it should cost microseconds.
  virtual Result<Duration> iteration_lower_bound(const Layout& layout) const {
    (void)layout;
    return Duration::zero();
  }
  // A lower bound on iteration_lower_bound(layout) that costs less still: the planner computes
  // iteration_lower_bound only for layouts whose coarse bound does not rule them out already, in
  // the order of the coarse bounds, so that it has every bound the walk in bound order reaches
  // (planner/planner.h). It must never exceed iteration_lower_bound(layout), whose order the
  // search follows; an error counts as zero. Default: zero, which computes every bound.
  virtual Result<Duration> coarse_lower_bound(const Layout& layout) const {
    (void)layout;
    return Duration::zero();
  }
  // A tighter bound that may cost more; the planner calls it only on candidates that the cheap
  // one does not rule out, just before it would simulate them. Default: the cheap one.
  virtual Result<Duration> refined_lower_bound(const Layout& layout) const {
    return iteration_lower_bound(layout);
  }
};

}  // namespace scaleplan::planner
