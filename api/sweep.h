// `sweep` as a library call: the best plan of one job at several GPU counts (planner/sweep.h);
// with train_tokens the days, GPU-hours and cost of each point (docs/planner.md, "Sweeps over
// scale"). Also the JSON of sweep points, shared with the "deadline" object of `plan --deadline
// --json`.
//
// SweepRequest holds the options of `scaleplan sweep` as values (the job's inputs of api/job.h
// and the counts, batch and budget); api::sweep validates them (errors name the option) and
// returns a SweepOutcome whose to_json() is exactly `scaleplan sweep --json`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "api/fields.h"
#include "api/job.h"
#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"
#include "planner/sweep.h"

namespace scaleplan::api {

struct SweepRequest : JobRequest {
  // GPU counts: FROM:TO doubles, FROM:TO:xF multiplies, FROM:TO:+S steps, or a list (planner::
  // parse_gpu_counts).
  std::string gpus;
  int64_t gbs = 0;         // a fixed global batch, or
  double gbs_per_gpu = 0;  // global batch = this x GPUs (weak scaling)
};

// One point done: the point, its index and the number of points.
struct SweepProgress {
  const planner::SweepPoint& point;
  size_t index = 0, total = 0;
};

// The job's report (api/job.h) and the sweep's points.
struct SweepOutcome : JobOutcome {
  SweepRequest request;
  planner::SweepResult result;

  // Exactly what `scaleplan sweep --json` prints.
  Json to_json() const;
};

// The fields of a sweep request (api/fields.h), bound to `request`, in the order --help lists them.
std::vector<Field> sweep_fields(SweepRequest& request);

// Progress: each point as it is done, in point order.
Result<SweepOutcome> sweep(const SweepRequest& request,
                           const Callbacks<SweepProgress>& callbacks = {});

// One point: gpus, gbs, layout (null when nothing fits), the best plan's prediction_json fields
// (api/plan.h; the same as `plan --json`'s first plan), layout_change, no_fit, and the search's
// candidates, fit, simulated, search_s.
Json sweep_point_json(const planner::SweepPoint& p);

// `plan --deadline`: the deadline, whether and where it is met, and every count tried.
Json deadline_json(const planner::DeadlineResult& r, double deadline_s,
                   const planner::Budget& budget, int gpus_per_node);

}  // namespace scaleplan::api
