// JSON of a simulated stage for the subcommands that print simulations (simulate, validate), and
// of a planned layout (plan, sweep).
#pragma once

#include <optional>

#include "core/json_util.h"

namespace scaleplan::sim {
struct StageResult;
}
namespace scaleplan::planner {
struct Perturbation;
struct Prediction;
struct MemoryVerdict;
struct TrainingCost;
}  // namespace scaleplan::planner

namespace scaleplan::cli {

// One stage's breakdown in seconds: compute, recompute, exposed and overlapped communication by
// kind, bubble, idle, total; and its peak memory in bytes. The keys `simulate --json` documents.
Json stage_breakdown_json(const sim::StageResult& s);

// A perturbation of the "how sure" check (planner/robustness.h): its name and multipliers, the
// keys `simulate --how-sure --json` and `plan --json` document.
Json perturbation_json(const planner::Perturbation& p);

// A planned layout's numbers, the keys of each entry of `plan --json`'s "plans" and of each
// point of `sweep --json`: iteration_s, tokens_per_s_per_gpu, mfu, peak_memory_bytes,
// memory_capacity_bytes, headroom_bytes, breakdown; with a token budget also time_to_train_s,
// days_to_train, gpu_hours, and cost (with --gpu-hour-cost).
Json prediction_json(const planner::Prediction& p, const planner::MemoryVerdict& m,
                     const std::optional<planner::TrainingCost>& cost);

}  // namespace scaleplan::cli
