// Evaluator: how the planner asks what a layout costs.
//
// The search driver (planner/planner.h) knows nothing about memory models or simulators: it calls
// an Evaluator, first `memory` on every candidate (cheap), then `simulate` on every candidate that
// fits (expensive). The real evaluator (planner/model_evaluator.h) answers with the memory model
// (models/memory.h) and the event simulator; tests substitute a deterministic fake.
//
// Contract: both functions are pure functions of the layout (the same layout always gives the same
// answer, bit for bit) and are called concurrently from many threads, so they must be thread-safe.
// The layouts passed in are resolved (core's resolve_layout). A Status error from `simulate` is
// counted and reported by the driver (never dropped silently); an error from `memory` means the
// layout cannot be evaluated at all and is reported the same way.
#pragma once

#include "core/layout.h"
#include "core/status.h"
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
};

}  // namespace scaleplan::planner
