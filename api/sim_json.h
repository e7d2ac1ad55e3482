// JSON of a simulated stage for the subcommands that print simulations (simulate, validate).
#pragma once

#include "core/json_util.h"

namespace scaleplan::sim {
struct StageResult;
}
namespace scaleplan::planner {
struct Perturbation;
}

namespace scaleplan::api {

// One stage's breakdown in seconds: compute, recompute, exposed and overlapped communication by
// kind, bubble, idle, total; and its peak memory in bytes. The keys `simulate --json` documents.
Json stage_breakdown_json(const sim::StageResult& s);

// A perturbation of the "how sure" check (planner/robustness.h): its name and multipliers, the
// keys `simulate --how-sure --json` and `plan --json` document.
Json perturbation_json(const planner::Perturbation& p);

}  // namespace scaleplan::api
