// What the planner knows about one evaluated layout: the memory verdict and the simulated
// iteration with its breakdown.
//
// These are the planner's own plain values, filled by an Evaluator (planner/evaluator.h) from the
// memory model and the event simulator, so that the search driver, the ranking, the explanations
// and the exporters do not depend on how those are computed (and tests can substitute a fake).
// Breakdown classes add up to the iteration time of the rank they describe (sim/metrics.h): the
// compute stream is busy (compute, of which recompute is a part), or idle while a transfer of a
// kind runs (exposed comm), or waiting for a neighbouring stage (bubble), or otherwise idle.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "core/comm.h"
#include "core/layout.h"
#include "core/units.h"

namespace scaleplan::planner {

// The breakdown's classes of communication are core/comm.h's CommClass, the simulator's.

// `peak` is what must fit (the caching allocator's reserved estimate plus the CUDA context and
// library workspaces, memory.h's peak_reserved + overhead); `allocated` is the allocated peak
// (PyTorch's max_memory_allocated, what frameworks log and simulate prints as "peak memory").
// plan and simulate print both with the same words (docs/memory-model.md, "Peak").
struct MemoryVerdict {
  Bytes peak;       // worst pipeline stage, per GPU, reserved + overhead: what must fit
  Bytes capacity;   // device memory of one GPU
  Bytes allocated;  // the allocated peak of the worst stage; 0 where not computed
  // Headroom left on the worst stage; negative when it does not fit at all.
  Bytes headroom() const { return capacity - peak; }
  // Fits with `margin` to spare (the user's safety margin).
  bool fits(Bytes margin) const { return peak + margin <= capacity; }
};

struct Breakdown {
  Duration compute;                                 // kernels, recompute included
  Duration recompute;                               // part of compute spent recomputing activations
  std::array<Duration, kNumCommClasses> exposed{};  // compute idle while comm of a class runs
  Duration bubble;                                  // pipeline stage waiting for a neighbour
  Duration other;                                   // everything else (optimizer wait, end of step)
  Duration exposed_total() const {
    Duration d;
    for (Duration x : exposed) d += x;
    return d;
  }
};

struct Prediction {
  Duration iteration;               // one optimizer step
  double tokens_per_s_per_gpu = 0;  // gbs·seq / (iteration · gpus)
  double mfu = 0;                   // model FLOPs / (iteration · gpus · dense bf16 peak)
  MemoryVerdict memory;             // the simulator's own peak where it tracks one
  Breakdown breakdown;              // of the bottleneck stage: the busiest with compute and
                                    // exposed communication
  // The rank placement this prediction ran with where the layout left `place` open and the
  // evaluator chose the faster of those that differ (planner/model_evaluator.h); nullopt: the
  // layout's own (linear unless it says).
  std::optional<Placement> place;
};

}  // namespace scaleplan::planner
