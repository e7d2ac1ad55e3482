// `sweep` as a library call and the JSON of sweep points; contract in sweep.h.
#include "api/sweep.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "api/options.h"
#include "api/plan.h"
#include "core/layout.h"
#include "planner/training_cost.h"

namespace scaleplan::api {

Json sweep_point_json(const planner::SweepPoint& p) {
  Json j = {{"gpus", p.gpus}, {"gbs", p.gbs}};
  if (p.result.plans.empty()) {
    j["layout"] = nullptr;
  } else {
    const planner::RankedPlan& best = p.result.plans.front();
    j["layout"] = format_layout(best.layout);
    j.update(prediction_json(best.prediction, best.memory, p.cost));
  }
  j["layout_change"] = p.layout_change;
  j["no_fit"] = p.result.no_fit;
  j["candidates"] = p.result.candidates;
  j["fit"] = p.result.fit;
  j["simulated"] = p.result.simulated;
  j["not_simulated"] = p.result.not_simulated;  // left by --max-simulations
  j["budget_note"] = p.result.budget_note;
  j["search_s"] = p.result.search_s;
  return j;
}

Json deadline_json(const planner::DeadlineResult& r, double deadline_s,
                   const planner::Budget& budget, int gpus_per_node) {
  Json tried = Json::array();
  for (const planner::SweepPoint& p : r.tried) {
    Json t = sweep_point_json(p);
    t["meets_deadline"] = p.cost.has_value() && p.cost->seconds <= deadline_s;
    tried.push_back(t);
  }
  Json j = {{"deadline_s", deadline_s},
            {"deadline_days", deadline_s / planner::kSecondsPerDay},
            {"train_tokens", budget.train_tokens},
            {"met", r.met},
            {"gpus", r.gpus},
            {"nodes", gpus_per_node > 0 ? r.gpus / gpus_per_node : 0},
            {"tried", tried}};
  if (const planner::SweepPoint* c = r.chosen(); c != nullptr && c->cost) {
    j["time_to_train_s"] = c->cost->seconds;
    j["days_to_train"] = c->cost->days;
    j["gpu_hours"] = c->cost->gpu_hours;
    if (c->cost->cost) j["cost"] = *c->cost->cost;
  }
  return j;
}

Json SweepOutcome::to_json() const {
  const SweepRequest& o = request;
  Json points = Json::array();
  for (const auto& p : result.points) points.push_back(sweep_point_json(p));
  return {{"model", model.name},
          {"cluster", cluster_name},
          {"gpus_per_node", gpus_per_node},
          {"seq", o.seq},
          {"gbs", o.gbs > 0 ? Json(o.gbs) : Json(nullptr)},
          {"gbs_per_gpu", o.gbs_per_gpu > 0 ? Json(o.gbs_per_gpu) : Json(nullptr)},
          {"fixes", fixes},
          {"framework", framework},
          {"memory_margin_bytes", memory_margin.value()},
          {"max_simulations", o.max_simulations},
          {"moe", moe_options_json(model)},
          {"train_tokens", o.train_tokens},
          {"gpu_hour_cost", budget.gpu_hour_cost ? Json(*budget.gpu_hour_cost) : Json(nullptr)},
          {"points", points},
          {"sweep_s", result.sweep_s},
          {"notes", notes}};
}

Result<SweepOutcome> sweep(const SweepRequest& o, const Callbacks<SweepProgress>& callbacks) {
  SP_RETURN_IF_ERROR(require_model_and_cluster(o));
  if (o.seq <= 0) return Status::invalid("--seq: must be positive, got " + std::to_string(o.seq));
  if (o.gbs_per_gpu < 0 || std::isnan(o.gbs_per_gpu))
    return Status::invalid("--gbs-per-gpu: must be positive, got " + std::to_string(o.gbs_per_gpu));
  if (o.gbs <= 0 && !(o.gbs_per_gpu > 0))
    return Status::invalid(
        "--gbs (a fixed global batch) or --gbs-per-gpu (one that grows with "
        "the GPU count) is required");
  if (o.gbs < 0) return Status::invalid("--gbs: must be positive, got " + std::to_string(o.gbs));
  if (o.gbs > 0 && o.gbs_per_gpu > 0) return Status::invalid("--gbs-per-gpu excludes --gbs");
  planner::SweepRequest req;
  SP_ASSIGN_OR_RETURN(req.gpus, planner::parse_gpu_counts(o.gpus, "--gpus"));
  req.gbs = o.gbs;
  req.gbs_per_gpu = o.gbs_per_gpu;
  SP_ASSIGN_OR_RETURN(req.budget, job_budget(o));
  if (o.max_simulations < 0)
    return Status::invalid("--max-simulations: must not be negative, got " +
                           std::to_string(o.max_simulations));
  SP_ASSIGN_OR_RETURN(Job job, load_job(o));
  FrameworkId framework_id = FrameworkId::kMegatron;
  if (!o.framework.empty()) {
    SP_ASSIGN_OR_RETURN(framework_id, parse_framework(o.framework));
  }
  SP_ASSIGN_OR_RETURN(req.plan, job_search(o, job));
  req.plan.top_k = 1;  // the best layout per point; its bound prunes the rest
  if (callbacks.progress) {
    req.on_point = [&callbacks](const planner::SweepPoint& p, size_t i, size_t n) {
      callbacks.progress(SweepProgress{p, i, n});
    };
  }

  // One model, cluster, kernel model and evaluator (with its memory and bound caches) for every
  // point: ModelEvaluator takes the GPU count from each layout.
  const sim::Framework framework = with_host_launch(sim::framework(framework_id), job.host_launch);
  SP_ASSIGN_OR_RETURN(const auto evaluator, job_evaluator(job, framework));
  SweepOutcome out;
  SP_ASSIGN_OR_RETURN(out.result, planner::sweep(req, *evaluator));
  out.request = o;
  describe_job(job, req.plan, framework, out);
  out.budget = req.budget;
  for (int64_t g : req.gpus)
    if (std::string n = partial_node_note(g, job.cluster.gpus_per_node, job.cluster.name);
        !n.empty())
      out.notes.push_back(n);
  return out;
}

std::vector<Field> sweep_fields(SweepRequest& r) {
  return {
      Field("model", &r.model, "Preset name or path to a HF config.json").short_option("-m"),
      Field("cluster", &r.cluster, "Bundled cluster profile name or profile path")
          .short_option("-c"),
      Field("gpus", &r.gpus,
            "GPU counts: FROM:TO doubles (256:4096 is 256, 512, ..., 4096), FROM:TO:xF "
            "multiplies by F, FROM:TO:+S steps by S GPUs, or a list 256,384,512")
          .required_option(),
      Field("seq", &r.seq, "Sequence length in tokens").required_option(),
      {"gbs", &r.gbs, "Global batch in sequences, the same at every count"},
      {"gbs_per_gpu", &r.gbs_per_gpu,
       "Instead of --gbs: global batch = this x GPUs (weak scaling; may be a fraction, e.g. 0.5, "
       "when it comes out whole at every count)"},
      {"fix", &r.fixes, "Restrict a layout key at every point: KEY=V1|V2... (repeatable)"},
      Field("framework", &r.framework, "Memory and timing conventions (default megatron)")
          .one_of(kFrameworks),
      {"memory_margin", &r.memory_margin,
       "Memory kept free on every GPU (default 4GiB; docs/planner.md)"},
      {"moe_imbalance", &r.moe_imbalance, kMoeImbalanceHelp},
      {"moe_dispatcher", &r.moe_dispatcher, kMoeDispatcherHelp},
      {"host_launch", &r.host_launch, kHostLaunchHelp},
      Field("max_simulations", &r.max_simulations,
            "Cap on simulations at each point (default 0: none; each point's note says what the "
            "cap left)")
          .counted(CountSuffix::kDecimal),
      {"threads", &r.threads,
       "Worker threads in all (default: all cores); points are searched side by side, each on "
       "its share"},
      Field("train_tokens", &r.train_tokens,
            "Report the days, GPU-hours (and cost) to train this many tokens at each count")
          .counted(CountSuffix::kDecimal),
      {"gpu_hour_cost", &r.gpu_hour_cost,
       "With --train-tokens: price of one GPU-hour (any currency), to report the cost"},
      {"allow_cross_node_tp", &r.allow_cross_node_tp,
       "Search TP degrees above the GPUs of one node"},
  };
}

}  // namespace scaleplan::api
