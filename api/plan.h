// `plan` as a library call: search every layout of a job, keep those that fit, simulate them,
// rank them, assess how sure the ranking is, and export the best one (docs/planner.md).
//
// PlanRequest holds the options of `scaleplan plan` as values (empty / 0: not given, as on the
// command line); api::plan does everything the command does except printing: it validates the
// request (errors name the option, "--gpus: must be positive, got 0"), writes the export to
// `out` when asked, and returns a PlanOutcome whose to_json() is exactly `scaleplan plan --json`.
// Thread-compatible: one call per thread; the search starts its own workers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"
#include "export/exporters.h"
#include "planner/planner.h"
#include "planner/robustness.h"
#include "planner/sweep.h"
#include "planner/training_cost.h"

namespace scaleplan::api {

struct PlanRequest {
  std::string model;    // preset name or HF config.json path
  std::string cluster;  // bundled profile name or profile path
  int64_t gpus = 0, seq = 0, gbs = 0;
  int top = 5;
  std::string emit;                // megatron, torchtitan, deepspeed, nanotron, json; empty: none
  std::string out;                 // with emit: write the export here (empty: it is in the outcome)
  std::string explain;             // a layout string: where it ranks and why
  std::string memory_margin;       // with a unit, e.g. "6GiB"; empty: planner::kDefaultMemoryMargin
  std::vector<std::string> fixes;  // KEY=V1|V2...
  std::string framework;           // empty: megatron, or the emit target's conventions
  std::string moe_imbalance, moe_dispatcher, host_launch;  // empty: not given (api/options.h)
  int threads = 0;                                         // 0: all cores
  int64_t max_simulations = 0;                             // 0: no cap
  double train_tokens = 0;                                 // 0: not given
  std::string gpu_hour_cost;  // with train_tokens: price of one GPU-hour; empty: no cost
  // With train_tokens: find the smallest GPU count (whole nodes) that trains them within this
  // wall-clock time ("60d"), then plan at it; gpus must then be 0. Empty: plan at gpus.
  std::string deadline;
  int64_t max_gpus = 0;  // with deadline: the largest count to try; 0: the planner's default
  bool allow_cross_node_tp = false;
  // Predict with Transformer Engine's TP communication overlap (Megatron-core --tp-comm-overlap)
  // wherever a layout has TP with SP; only with Megatron-core's conventions.
  bool tp_comm_overlap = false;
  bool robustness = true;  // the "how sure" re-simulation (--no-robustness turns it off)
};

struct PlanOutcome {
  PlanRequest request;
  models::ModelSpec model;  // as loaded, with the MoE options applied
  std::string cluster_name;
  int gpus_per_node = 0;
  std::string fixes;  // the --fix restrictions as one string
  Bytes memory_margin;
  std::string framework;  // the conventions predicted with
  planner::PlanResult result;
  std::optional<planner::Robustness> robustness;
  std::optional<planner::Export> exported;
  // Per ranked plan (same order as result.plans): which frameworks run it as predicted.
  std::vector<std::vector<planner::FrameworkVerdict>> frameworks;
  std::vector<std::string> notes;  // the notes of the job (partial nodes)
  int64_t gpus = 0;                // the GPUs planned for: request.gpus or the deadline's count
  planner::Budget budget;          // train_tokens and the checked gpu_hour_cost
  double deadline_s = 0;           // with request.deadline
  std::optional<planner::DeadlineResult> deadline;

  // Exactly what `scaleplan plan --json` prints.
  Json to_json() const;
  // An export asked for with nothing to export is an error (exit 2) once the outcome is shown:
  // "nothing fits" alone is a result.
  Status export_status() const;
};

// With a deadline, callbacks.notify hears each GPU count tried.
Result<PlanOutcome> plan(const PlanRequest& request,
                         const Callbacks<planner::Progress>& callbacks = {});

// The `--json` form of a prediction and of its breakdown (plan, explain, sweep points): the keys
// iteration_s, tokens_per_s_per_gpu, mfu, peak_memory_bytes, memory_capacity_bytes,
// headroom_bytes, breakdown; with a training cost also time_to_train_s, days_to_train, gpu_hours
// and cost (when priced).
// Which frameworks run a layout as predicted (planner::framework_verdicts), as plan --json gives
// them for each ranked layout: [{"framework", "format", "runs", "needs" (the rule it breaks, when
// it does not run)}].
Json frameworks_json(const std::vector<planner::FrameworkVerdict>& verdicts);

Json prediction_json(const planner::Prediction& p, const planner::MemoryVerdict& m,
                     const std::optional<planner::TrainingCost>& cost);

}  // namespace scaleplan::api
