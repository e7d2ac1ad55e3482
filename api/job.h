// The inputs of one training job that `plan` and `sweep` search: the model with its MoE options,
// the cluster, the sequence length, the framework's conventions, the host launch cost, the memory
// margin and the --fix restrictions. JobRequest holds them as given (empty / 0: not given, as on
// the command line); load_job parses them once into a Job, and job_search turns a Job into the
// search options both commands start from. Errors name the option ("--model: ...").
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "planner/model_evaluator.h"
#include "planner/planner.h"
#include "planner/sweep.h"
#include "sim/framework.h"

namespace scaleplan::api {

struct JobRequest {
  std::string model;    // preset name or HF config.json path
  std::string cluster;  // bundled profile name or profile path
  int64_t seq = 0;
  std::string framework;           // empty: megatron (plan: or the emit target's conventions)
  std::string memory_margin;       // with a unit, e.g. "6GiB"; empty: planner::kDefaultMemoryMargin
  std::vector<std::string> fixes;  // KEY=V1|V2...
  std::string moe_imbalance, moe_dispatcher, host_launch;  // empty: not given (api/options.h)
  int threads = 0;                                         // 0: all cores
  int64_t max_simulations = 0;                             // 0: no cap
  bool allow_cross_node_tp = false;
  double train_tokens = 0;    // report the time (and cost) to train this many tokens; 0: not given
  std::string gpu_hour_cost;  // with train_tokens: price of one GPU-hour; empty: no cost
};

struct Job {
  models::ModelSpec model;  // as loaded, checked simulable, with the MoE options applied
  hw::Cluster cluster;
  int64_t seq = 0;
  // --host-launch; nullopt: the framework's own. Takes effect through the framework value
  // (with_host_launch); kept for the export, which writes it into the plan file.
  std::optional<Duration> host_launch;
};

// What plan and sweep report of the job they searched.
struct JobOutcome {
  models::ModelSpec model;  // as loaded, with the MoE options applied
  std::string cluster_name;
  int gpus_per_node = 0;
  std::string fixes;  // the --fix restrictions as one string
  Bytes memory_margin;
  std::string framework;           // the conventions predicted with
  planner::Budget budget;          // train_tokens and the checked gpu_hour_cost
  std::vector<std::string> notes;  // the notes of the job (counts that do not fill whole nodes)
};

// --model and --cluster are given (errors name the missing one).
Status require_model_and_cluster(const JobRequest& request);

// train_tokens with the checked gpu_hour_cost (planner::check_budget_options).
Result<planner::Budget> job_budget(const JobRequest& request);

// The model (checked simulable, MoE options applied), the host launch cost and the cluster, in
// that order; `model` and `cluster` are required.
Result<Job> load_job(const JobRequest& request);

// The search options of the job (planner::PlanRequest without gpus, gbs and progress): the
// model's layout constraints, the cluster's NVLink domain, --allow-cross-node-tp, the fixes (an
// fp8 fix checked against the GPU), the memory margin, threads and the simulation cap.
Result<planner::PlanRequest> job_search(const JobRequest& request, const Job& job);

// The evaluator every layout of the job is simulated with: the cluster's kernel model and the
// framework's conventions (the job's host launch cost applied to it: with_host_launch).
Result<std::unique_ptr<const planner::ModelEvaluator>> job_evaluator(
    const Job& job, const sim::Framework& framework);

// Sets what `out` reports of the job (all but the budget and the notes): the model, the cluster,
// the search's fixes and margin, the framework's name.
void describe_job(const Job& job, const planner::PlanRequest& search,
                  const sim::Framework& framework, JobOutcome& out);

}  // namespace scaleplan::api
