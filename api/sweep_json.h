// JSON of sweeps over GPU counts (planner/sweep.h), shared by `sweep --json` and the "deadline"
// object of `plan --deadline --json`. The numbers come from planner::SweepPoint and
// planner::DeadlineResult.
#pragma once

#include "core/json_util.h"
#include "planner/sweep.h"

namespace scaleplan::api {

// One point: gpus, gbs, layout (null when nothing fits), the best plan's prediction_json fields
// (api/plan.h; the same as `plan --json`'s first plan), layout_change, no_fit, and the search's
// candidates, fit, simulated, search_s.
Json sweep_point_json(const planner::SweepPoint& p);

// `plan --deadline`: the deadline, whether and where it is met, and every count tried.
Json deadline_json(const planner::DeadlineResult& r, double deadline_s,
                   const planner::Budget& budget, int gpus_per_node);

}  // namespace scaleplan::api
