// The inputs of one training job; contract in job.h.
#include "api/job.h"

#include <utility>

#include "api/options.h"
#include "calibrate/kernel_model.h"
#include "planner/training_cost.h"
#include "sim/simulate.h"

namespace scaleplan::api {

Status require_model_and_cluster(const JobRequest& o) {
  if (o.model.empty()) return Status::invalid("--model is required (a preset or a config.json)");
  if (o.cluster.empty()) return Status::invalid("--cluster is required (a profile name or path)");
  return Status::ok();
}

Result<planner::Budget> job_budget(const JobRequest& o) {
  planner::Budget budget{o.train_tokens, std::nullopt};
  SP_ASSIGN_OR_RETURN(budget.gpu_hour_cost,
                      planner::check_budget_options(o.train_tokens, o.gpu_hour_cost));
  return budget;
}

Result<Job> load_job(const JobRequest& o) {
  SP_RETURN_IF_ERROR(require_model_and_cluster(o));
  Job job;
  job.seq = o.seq;
  Result<models::ModelSpec> loaded = models::load_model(o.model);
  if (!loaded) return loaded.status().with_context("--model");
  job.model = std::move(*loaded);
  SP_RETURN_IF_ERROR(sim::check_simulable(job.model).with_context("--model"));
  SP_RETURN_IF_ERROR(apply_moe_imbalance(job.model, o.moe_imbalance));
  SP_RETURN_IF_ERROR(apply_moe_dispatcher(job.model, o.moe_dispatcher));
  SP_ASSIGN_OR_RETURN(job.host_launch, parse_host_launch(o.host_launch));
  Result<hw::Cluster> cluster = hw::load_cluster(o.cluster);
  if (!cluster) return cluster.status().with_context("--cluster");
  job.cluster = std::move(*cluster);
  return job;
}

Result<planner::PlanRequest> job_search(const JobRequest& o, const Job& job) {
  planner::PlanRequest req;
  req.search.model = models::layout_constraints(job.model, job.seq);
  req.search.nvlink_domain_gpus = job.cluster.gpus_per_domain();
  req.search.allow_cross_node_tp = o.allow_cross_node_tp;
  for (const auto& f : o.fixes) SP_RETURN_IF_ERROR(req.search.fixes.add(f));
  if (req.search.fixes.names("dtype", "fp8"))
    SP_RETURN_IF_ERROR(hw::check_dtype_supported(job.cluster, DType::kFp8, "--fix"));
  SP_ASSIGN_OR_RETURN(const std::optional<Bytes> margin, parse_memory_margin(o.memory_margin));
  if (margin) req.memory_margin = *margin;
  req.threads = o.threads;
  req.max_simulations = o.max_simulations;
  return req;
}

Result<std::unique_ptr<const planner::ModelEvaluator>> job_evaluator(
    const Job& job, const sim::Framework& framework) {
  SP_ASSIGN_OR_RETURN(auto kernels, calibrate::kernel_cost_model_for(job.cluster));
  return std::unique_ptr<const planner::ModelEvaluator>(std::make_unique<planner::ModelEvaluator>(
      job.model, job.cluster, job.seq, framework, std::move(kernels)));
}

void describe_job(const Job& job, const planner::PlanRequest& search,
                  const sim::Framework& framework, JobOutcome& out) {
  out.model = job.model;
  out.cluster_name = job.cluster.name;
  out.gpus_per_node = job.cluster.gpus_per_node;
  out.fixes = search.search.fixes.to_string();
  out.memory_margin = search.memory_margin;
  out.framework = std::string(framework.name());
}

}  // namespace scaleplan::api
