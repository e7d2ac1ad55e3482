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
#include "api/job.h"
#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "export/exporters.h"
#include "hw_profiles/placement.h"
#include "models/model_spec.h"
#include "planner/planner.h"
#include "planner/robustness.h"
#include "planner/sweep.h"
#include "planner/training_cost.h"

namespace scaleplan::api {

// The job's inputs (api/job.h: model, cluster, seq, framework, memory margin, fixes, MoE options,
// host launch, threads, simulation cap) and what plan adds. `framework` empty: megatron, or the
// emit target's conventions.
struct PlanRequest : JobRequest {
  int64_t gpus = 0, gbs = 0;
  int top = 5;
  std::string emit;     // megatron, torchtitan, deepspeed, nanotron, json; empty: none
  std::string out;      // with emit: write the export here (empty: it is in the outcome)
  std::string explain;  // a layout string: where it ranks and why
  // With train_tokens: find the smallest GPU count (whole nodes) that trains them within this
  // wall-clock time ("60d"), then plan at it; gpus must then be 0. Empty: plan at gpus.
  std::string deadline;
  int64_t max_gpus = 0;  // with deadline: the largest count to try; 0: the planner's default
  // Predict with Transformer Engine's TP communication overlap (Megatron-core --tp-comm-overlap)
  // wherever a layout has TP with SP; only with Megatron-core's conventions.
  bool tp_comm_overlap = false;
  // torchtitan's torch.compile components ("model", "loss", "model,loss"; empty: eager), written
  // into --emit torchtitan; the search then keeps to the layouts the compiled block is modelled
  // for (tp=1, cp=1, recompute=none: models::check_compile).
  std::string compile;
  bool robustness = true;  // the "how sure" re-simulation (--no-robustness turns it off)
};

// The job's report (api/job.h: model, cluster, fixes, margin, framework, budget, notes) and the
// plan's.
struct PlanOutcome : JobOutcome {
  PlanRequest request;
  planner::PlanResult result;
  std::optional<planner::Robustness> robustness;
  std::optional<planner::Export> exported;
  // Per ranked plan (same order as result.plans): which frameworks run it as predicted.
  std::vector<std::vector<planner::FrameworkVerdict>> frameworks;
  // Per ranked plan: where its ranks run (hw::rank_map of its `place`; docs/planner.md, "Rank
  // placement"): --json's placement, ranks_per_nvlink_domain and slurm_segment_nodes.
  std::vector<hw::RankMap> placements;
  int64_t gpus = 0;       // the GPUs planned for: request.gpus or the deadline's count
  double deadline_s = 0;  // with request.deadline
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
