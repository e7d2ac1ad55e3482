// `plan` as a library call; contract in plan.h.
#include "api/plan.h"

#include <chrono>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "api/options.h"
#include "api/sim_json.h"
#include "api/sweep.h"
#include "hw_profiles/cluster.h"
#include "models/inductor.h"
#include "planner/model_evaluator.h"
#include "sim/simulate.h"

namespace scaleplan::api {
namespace {

Json breakdown_json(const planner::Breakdown& b) {
  Json comm = Json::object();
  for (int k = 0; k < kNumCommClasses; ++k) {
    comm[std::string(to_string(static_cast<CommClass>(k)))] = b.exposed[k].to_seconds();
  }
  return {{"compute_s", b.compute.to_seconds()},
          {"recompute_s", b.recompute.to_seconds()},
          {"bubble_s", b.bubble.to_seconds()},
          {"exposed_comm_s", comm},
          {"other_s", b.other.to_seconds()}};
}

// The evaluator of `plan` on a perturbed profile (planner/robustness.h): the perturbed cluster's
// kernel model, scaled by the perturbation's kernel time.
planner::PerturbedEvaluator perturbed_evaluator(const models::ModelSpec& model,
                                                const hw::Cluster& cluster, int64_t seq,
                                                const sim::Framework& framework) {
  return [&model, &cluster, seq, &framework](
             const planner::Perturbation& p) -> Result<std::unique_ptr<const planner::Evaluator>> {
    hw::Cluster c = planner::perturbed(cluster, p);
    SP_ASSIGN_OR_RETURN(auto kernels, planner::perturbed_kernel_model(c, p));
    return std::unique_ptr<const planner::Evaluator>(std::make_unique<planner::ModelEvaluator>(
        model, std::move(c), seq, framework, std::move(kernels)));
  };
}

Json robustness_json(const planner::Robustness& r) {
  Json list = Json::array();
  for (const auto& pr : r.rankings) {
    Json times = Json::array();
    for (const auto& t : pr.iteration) times.push_back(t ? Json(t->to_seconds()) : Json(nullptr));
    Json e = perturbation_json(pr.perturbation);
    e["first_rank"] = pr.first + 1;
    e["iteration_s"] = times;
    e["errors"] = pr.errors;
    list.push_back(e);
  }
  return {{"perturbations", list}, {"stays_first", r.stays_first}, {"summary", r.summary}};
}

}  // namespace

Json prediction_json(const planner::Prediction& p, const planner::MemoryVerdict& m,
                     const std::optional<planner::TrainingCost>& cost) {
  Json j = {{"iteration_s", p.iteration.to_seconds()},
            {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
            {"mfu", p.mfu},
            // One definition with simulate: "peak" is the allocated peak, "reserved" what must fit.
            {"peak_memory_bytes", m.allocated.value()},
            {"reserved_memory_bytes", m.peak.value()},
            {"memory_capacity_bytes", m.capacity.value()},
            {"headroom_bytes", m.headroom().value()},
            {"breakdown", breakdown_json(p.breakdown)}};
  if (cost) {
    j["time_to_train_s"] = cost->seconds;
    j["days_to_train"] = cost->days;
    j["gpu_hours"] = cost->gpu_hours;
    if (cost->cost) j["cost"] = *cost->cost;
  }
  return j;
}

Status PlanOutcome::export_status() const {
  const PlanRequest& o = request;
  if (o.emit.empty() || !result.plans.empty()) return Status::ok();
  return Status::invalid("--emit " + o.emit + ": no plan to export" +
                         (o.out.empty() ? "" : " (" + o.out + " not written)") + ": " +
                         result.no_fit);
}

Json frameworks_json(const std::vector<planner::FrameworkVerdict>& verdicts) {
  Json out = Json::array();
  for (const planner::FrameworkVerdict& v : verdicts) {
    Json f = {{"framework", std::string(planner::framework_name(v.format))},
              {"format", std::string(planner::to_string(v.format))},
              {"runs", v.runs()}};
    if (!v.runs()) f["needs"] = v.rule;
    out.push_back(f);
  }
  return out;
}

Json PlanOutcome::to_json() const {
  const PlanRequest& o = request;
  const planner::PlanResult& r = result;
  Json plans = Json::array();
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const planner::RankedPlan& p = r.plans[i];
    Json j = {{"rank", p.rank}, {"layout", format_layout(p.layout)}, {"reason", p.reason}};
    j.update(prediction_json(p.prediction, p.memory,
                             planner::training_cost(p.prediction.tokens_per_s_per_gpu, gpus,
                                                    budget.train_tokens, budget.gpu_hour_cost)));
    j["lower_bound_s"] = p.lower_bound.to_seconds();
    if (i < frameworks.size()) j["frameworks"] = frameworks_json(frameworks[i]);
    if (i < placements.size()) {
      j["placement"] = std::string(to_string(p.layout.placement()));
      j["ranks_per_nvlink_domain"] = placements[i].per_domain;
      j["slurm_segment_nodes"] = placements[i].segment_nodes();
    }
    plans.push_back(j);
  }
  Json pruned = Json::array();
  int64_t pruned_total = 0;
  for (const auto& p : r.pruned) {
    pruned.push_back({{"rule", p.rule}, {"candidates", p.candidates}});
    pruned_total += p.candidates;
  }
  Json j = {{"model", model.name},
            {"cluster", cluster_name},
            {"gpus", gpus},
            {"seq", o.seq},
            {"gbs", o.gbs},
            {"fixes", fixes},
            {"memory_margin_bytes", memory_margin.value()},
            {"framework", framework},
            {"tp_comm_overlap", o.tp_comm_overlap},
            {"moe", moe_options_json(model)},
            {"plans", plans},
            {"candidates", r.candidates},
            {"fit", r.fit},
            {"simulated", r.simulated},
            {"bounded", r.bounded},
            {"not_simulated", r.not_simulated},
            {"failed", r.failed},
            {"errors", r.errors},
            {"pruned", pruned},
            {"pruned_total", pruned_total},
            {"cross_node_tp_fallback", r.cross_node_tp_fallback},
            {"max_simulations", o.max_simulations},
            {"budget_note", r.budget_note},
            {"no_fit", r.no_fit},
            {"search_s", r.search_s},
            {"threads", r.threads},
            {"notes", notes}};
  if (!o.compile.empty()) j["compile"] = o.compile;
  if (r.explanation) {
    const auto& e = *r.explanation;
    Json x = {{"layout", e.layout ? format_layout(*e.layout) : e.layout_text},
              {"valid", e.valid},
              {"in_space", e.in_space},
              {"fits", e.fits},
              {"rank", e.rank},
              {"rank_max", e.rank_max},
              {"why", e.why}};
    if (e.prediction && e.memory)
      x.update(prediction_json(*e.prediction, *e.memory, std::nullopt));
    else if (e.memory) {
      x["peak_memory_bytes"] = e.memory->allocated.value();
      x["reserved_memory_bytes"] = e.memory->peak.value();
      x["memory_capacity_bytes"] = e.memory->capacity.value();
    }
    j["explain"] = x;
  }
  if (robustness) j["robustness"] = robustness_json(*robustness);
  if (deadline) j["deadline"] = deadline_json(*deadline, deadline_s, budget, gpus_per_node);
  if (exported) {
    j["export"] = {{"format", o.emit}, {"content", exported->content}, {"notes", exported->notes}};
    if (!o.out.empty()) j["export"]["file"] = o.out;
  }
  return j;
}

Result<PlanOutcome> plan(const PlanRequest& o, const Callbacks<planner::Progress>& callbacks) {
  SP_RETURN_IF_ERROR(require_model_and_cluster(o));
  if (o.deadline.empty() && o.gpus <= 0)
    return Status::invalid("--gpus: must be positive, got " + std::to_string(o.gpus));
  if (!o.deadline.empty() && o.gpus != 0)
    return Status::invalid("--gpus " + std::to_string(o.gpus) + " with --deadline " + o.deadline +
                           ": --deadline searches the GPU count; leave out --gpus (--max-gpus "
                           "bounds the search)");
  if (o.deadline.empty() && o.max_gpus != 0)
    return Status::invalid("--max-gpus " + std::to_string(o.max_gpus) + ": only with --deadline");
  if (o.max_gpus < 0)
    return Status::invalid("--max-gpus: must be positive, got " + std::to_string(o.max_gpus));
  if (o.seq <= 0) return Status::invalid("--seq: must be positive, got " + std::to_string(o.seq));
  if (o.gbs <= 0) return Status::invalid("--gbs: must be positive, got " + std::to_string(o.gbs));
  SP_ASSIGN_OR_RETURN(const planner::Budget budget, job_budget(o));
  double deadline_s = 0;
  if (!o.deadline.empty()) {
    SP_ASSIGN_OR_RETURN(deadline_s, planner::parse_wall_time(o.deadline, "--deadline"));
    if (o.train_tokens <= 0)
      return Status::invalid("--deadline " + o.deadline +
                             ": needs --train-tokens (the tokens to train by then)");
  }
  if (o.top < 1) return Status::invalid("--top: must be at least 1, got " + std::to_string(o.top));
  std::optional<planner::ExportFormat> emit;
  if (!o.emit.empty()) {
    SP_ASSIGN_OR_RETURN(emit, planner::parse_export_format(o.emit));
  }
  // --emit X predicts and ranks with X's conventions unless --framework says otherwise: a header
  // that predicts Megatron-LM's time for a torchtitan run would not be that run's prediction.
  FrameworkId framework_id = emit ? planner::conventions_for(*emit) : FrameworkId::kMegatron;
  if (o.framework.empty()) {
    if (framework_id != FrameworkId::kMegatron) {
      const std::string name(to_string(framework_id));
      callbacks.notify("--emit " + o.emit + ": predicting with " + name +
                       "'s conventions (--framework " + name + ")");
    }
  } else {
    SP_ASSIGN_OR_RETURN(framework_id, parse_framework(o.framework));
    if (emit && !same_family(framework_id, planner::conventions_for(*emit))) {
      callbacks.notify("--emit " + o.emit + " with --framework " + o.framework +
                       ": the prediction uses " + o.framework +
                       "'s conventions, not those of the exported framework");
    }
  }

  PlanOutcome out;
  out.request = o;
  out.gpus = o.gpus;
  out.budget = budget;
  out.deadline_s = deadline_s;
  SP_ASSIGN_OR_RETURN(Job job, load_job(o));
  const models::ModelSpec& model = job.model;
  const std::optional<Duration> host_launch = job.host_launch;
  const hw::Cluster& cluster = job.cluster;
  if (std::string n =
          o.gpus > 0 ? partial_node_note(o.gpus, cluster.gpus_per_node, cluster.name) : "";
      !n.empty()) {
    callbacks.notify(n);
    out.notes.push_back(n);
  }
  // megatron-2022 re-simulates runs of old code (validate, simulate); the planner's lower bound
  // times attention as the fused kernel, which is not a bound on the unfused core, so planning
  // for it could prune a layout wrongly.
  sim::Framework framework = with_host_launch(sim::framework(framework_id), job.host_launch);
  if (o.tp_comm_overlap) {
    if (framework.id != FrameworkId::kMegatron)
      return Status::invalid(
          "--tp-comm-overlap: Transformer Engine's TP communication overlap is "
          "Megatron-core's; --framework " +
          std::string(framework.name()) + " has no such option");
    if (emit && *emit != planner::ExportFormat::kMegatron && *emit != planner::ExportFormat::kJson)
      return Status::invalid("--tp-comm-overlap: --emit " + o.emit +
                             ": only Megatron-LM runs Transformer Engine's TP communication "
                             "overlap");
    framework.ops.tp_comm_overlap = true;
  }
  if (!o.compile.empty()) {
    SP_RETURN_IF_ERROR(models::set_compile_components(framework.ops, o.compile));
    if (emit && *emit != planner::ExportFormat::kJson &&
        planner::conventions_for(*emit) != FrameworkId::kTorchtitan)
      return Status::invalid("--compile: --emit " + o.emit +
                             ": only torchtitan runs torch.compile as scaleplan predicts it");
  }
  if (framework.id == FrameworkId::kMegatron2022 || framework.id == FrameworkId::kDeepspeed2021)
    return Status::invalid("--framework: '" + o.framework +
                           "' is for re-simulating runs of 2021-2022 code (simulate, validate); "
                           "plan for megatron or nanotron");

  SP_ASSIGN_OR_RETURN(planner::PlanRequest req, job_search(o, job));
  req.search.gpus = o.gpus;
  req.search.gbs = o.gbs;
  // The compiled block is modelled without TP, CP and activation checkpointing
  // (models::check_compile): search those layouts only, unless the fixes say otherwise.
  if (!o.compile.empty()) {
    for (const char* fix : {"tp=1", "cp=1", "recompute=none"}) {
      const std::string_view key = std::string_view(fix).substr(0, std::string_view(fix).find('='));
      if (!req.search.fixes.has(key)) SP_RETURN_IF_ERROR(req.search.fixes.add(fix));
    }
  }
  // An exported plan must be one its framework runs as predicted: rank only what it runs.
  if (emit) {
    req.search.runnable = planner::runnable_values(*emit, model);
    req.search.runnable_by = std::string(planner::framework_name(*emit));
    req.search.refused = planner::refused_combinations(*emit);
  }
  describe_job(job, req, framework, out);
  req.top_k = o.top;
  req.explain = o.explain;
  if (callbacks.progress) {
    req.progress = callbacks.progress;
    req.progress_interval = std::chrono::milliseconds(1000);
  }

  SP_ASSIGN_OR_RETURN(const auto evaluator_ptr, job_evaluator(job, framework));
  const planner::Evaluator& evaluator = *evaluator_ptr;
  // --deadline: the smallest GPU count that meets it, then the plan at that count.
  if (!o.deadline.empty()) {
    planner::DeadlineRequest dr;
    dr.plan = req;
    dr.plan.top_k = 1;
    dr.plan.progress = nullptr;
    dr.gbs = o.gbs;
    dr.budget = budget;
    dr.deadline_s = deadline_s;
    dr.gpus_per_node = cluster.gpus_per_node;
    dr.max_gpus = o.max_gpus > 0 ? o.max_gpus : planner::kDefaultMaxDeadlineGpus;
    dr.on_try = [&callbacks](const planner::SweepPoint& p) {
      callbacks.notify("--deadline: " + std::to_string(p.gpus) + " GPUs: " +
                       (p.cost ? planner::format_wall_time(p.cost->seconds) : "nothing fits"));
    };
    SP_ASSIGN_OR_RETURN(out.deadline, planner::find_smallest_gpus(dr, evaluator));
    out.gpus = out.deadline->gpus > 0 ? out.deadline->gpus : out.deadline->tried.back().gpus;
    req.search.gpus = out.gpus;
  }
  SP_ASSIGN_OR_RETURN(out.result, planner::plan(req, evaluator));
  const planner::PlanResult& r = out.result;
  for (const auto& p : r.plans) {
    out.frameworks.push_back(planner::framework_verdicts(p.layout, model));
    SP_ASSIGN_OR_RETURN(hw::RankMap m, hw::rank_map(p.layout, cluster));
    out.placements.push_back(m);
  }
  // Fixes that no valid layout satisfies are a mistake in the input, not a result.
  if (r.candidates == 0 && r.pruned.empty() && !req.search.fixes.empty())
    return Status::invalid("--fix: " + r.no_fit);

  // How sure: the ranked layouts on perturbed profiles.
  if (o.robustness && !r.plans.empty()) {
    SP_ASSIGN_OR_RETURN(const auto perturbations, planner::perturbations_for(cluster));
    SP_ASSIGN_OR_RETURN(out.robustness,
                        planner::assess_robustness(
                            r.plans, perturbations,
                            perturbed_evaluator(model, cluster, o.seq, framework), o.threads));
  }

  // The export of the best plan.
  if (emit && !r.plans.empty()) {
    planner::ExportInput in;
    in.model = &model;
    in.model_source = o.model;
    in.cluster = o.cluster;
    in.gpus = out.gpus;
    in.gpus_per_node = cluster.gpus_per_node;
    in.gpu_sm = hw::sm_version(cluster.gpu);
    in.seq_len = o.seq;
    in.layout = r.plans.front().layout;
    in.prediction = r.plans.front().prediction;
    in.prediction->memory = r.plans.front().memory;
    in.framework = framework.id;
    in.host_launch = host_launch;
    in.tp_comm_overlap = framework.ops.tp_comm_overlap;
    in.compile = models::compile_components(framework.ops);
    in.slurm_segment_nodes = out.placements.front().segment_nodes();
    in.ranks_per_domain = out.placements.front().per_domain;
    SP_ASSIGN_OR_RETURN(out.exported, planner::export_layout(in, *emit));
    if (!o.out.empty()) SP_RETURN_IF_ERROR(write_file_atomic(o.out, out.exported->content));
    for (const auto& n : out.exported->notes) callbacks.notify("--emit " + o.emit + ": " + n);
  }
  return out;
}

}  // namespace scaleplan::api
