// `scaleplan plan`: search every layout of a job, keep those that fit, simulate them, rank them,
// and export the best one for a framework (docs/planner.md).
#include <fmt/core.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calibrate/kernel_model.h"
#include "cli/command.h"
#include "cli/html_report.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sim_json.h"
#include "cli/sweep_output.h"
#include "core/json_util.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/exporters.h"
#include "planner/model_evaluator.h"
#include "planner/planner.h"
#include "planner/robustness.h"
#include "planner/sweep.h"
#include "planner/training_cost.h"
#include "sim/simulate.h"

namespace scaleplan::cli {
namespace {

struct PlanCliOptions {
  // framework empty: megatron, or the --emit target's own conventions.
  std::string model, cluster, emit, out, explain, margin, framework, html;
  std::string moe_imbalance;   // --moe-imbalance, empty: balanced
  std::string moe_dispatcher;  // --moe-dispatcher, empty: alltoall
  std::string host_launch;     // --host-launch, empty: the framework's own
  std::vector<std::string> fixes;
  int64_t gpus = 0, seq = 0, gbs = 0;
  int top = 5;
  int threads = 0;
  int64_t max_simulations = 0;  // no cap: exact branch and bound
  double train_tokens = 0;
  std::string gpu_hour_cost;  // --gpu-hour-cost, empty: none
  std::string deadline;       // --deadline, empty: plan at --gpus
  int64_t max_gpus = planner::kDefaultMaxDeadlineGpus;
  bool gpus_given = false, csv = false;
  bool json = false, quiet = false, allow_cross_node_tp = false, no_robustness = false;
};

std::string secs(Duration d) { return fmt::format("{:.3f}", d.to_seconds()); }

std::string breakdown_line(const planner::Breakdown& b) {
  std::string s = "compute " + secs(b.compute) + " s";
  if (b.recompute > Duration::zero()) s += " (recompute " + secs(b.recompute) + ")";
  s += ", bubble " + secs(b.bubble);
  std::string comm;
  for (int k = 0; k < kNumCommClasses; ++k) {
    if (b.exposed[k] <= Duration::zero()) continue;
    comm += fmt::format("{}{} {}", comm.empty() ? "" : " ", to_string(static_cast<CommClass>(k)),
                        secs(b.exposed[k]));
  }
  s += ", exposed comm " + (comm.empty() ? std::string("0") : comm);
  if (b.other > Duration::zero()) s += ", other " + secs(b.other);
  return s + " (s)";
}

void print_progress(const planner::Progress& p) {
  std::fprintf(
      stderr,
      "plan: %s | candidates %lld, memory-checked %lld, fitting %lld, simulated %lld, "
      "bounded out %lld | best %s\n",
      p.phase, static_cast<long long>(p.candidates), static_cast<long long>(p.seen),
      static_cast<long long>(p.fitting), static_cast<long long>(p.simulated),
      static_cast<long long>(p.bounded),
      p.best_layout.empty()
          ? "-"
          : fmt::format("{:.0f} tok/s/GPU {}", p.best_tokens_per_s_per_gpu, p.best_layout).c_str());
}

// The evaluator of `plan` on a perturbed profile (planner/robustness.h): the perturbed cluster's
// kernel model, scaled by the perturbation's kernel time.
planner::PerturbedEvaluator perturbed_evaluator(const models::ModelSpec& model,
                                                const hw::Cluster& cluster, int64_t seq,
                                                const sim::Framework& framework,
                                                std::optional<Duration> host_launch) {
  return [&model, &cluster, seq, &framework, host_launch](
             const planner::Perturbation& p) -> Result<std::unique_ptr<const planner::Evaluator>> {
    hw::Cluster c = planner::perturbed(cluster, p);
    SP_ASSIGN_OR_RETURN(auto kernels, planner::perturbed_kernel_model(c, p));
    return std::unique_ptr<const planner::Evaluator>(std::make_unique<planner::ModelEvaluator>(
        model, std::move(c), seq, framework, std::move(kernels), host_launch));
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

// One line per perturbation: who comes first, #1's time and its change, and the runner-up.
void print_robustness(std::FILE* table, const planner::Robustness& r,
                      const std::vector<planner::RankedPlan>& plans) {
  fmt::print(table,
             "how sure: the plans above re-simulated with one resource off (docs/planner.md, \"How "
             "sure\")\n");
  fmt::print(table, "  {:<14} {:<6} {:<22} {}\n", "perturbation", "first", "#1 iteration",
             "runner-up");
  const Duration t_nominal = plans.front().prediction.iteration;
  for (const auto& pr : r.rankings) {
    std::string first = pr.first < 0 ? "-" : "#" + std::to_string(pr.first + 1);
    std::string t1 = "failed";
    if (pr.iteration[0]) {
      t1 = fmt::format("{} ({:+.1f}%)", format_duration(*pr.iteration[0]),
                       100 * (pr.iteration[0]->to_seconds() / t_nominal.to_seconds() - 1));
    }
    // The second fastest, and how far behind the first it is.
    int second = -1;
    for (size_t i = 0; i < pr.iteration.size(); ++i) {
      if (!pr.iteration[i] || static_cast<int>(i) == pr.first) continue;
      if (second < 0 || *pr.iteration[i] < *pr.iteration[static_cast<size_t>(second)])
        second = static_cast<int>(i);
    }
    std::string runner_up = "-";
    if (second >= 0 && pr.first >= 0) {
      const double tf = pr.iteration[static_cast<size_t>(pr.first)]->to_seconds();
      const double ts = pr.iteration[static_cast<size_t>(second)]->to_seconds();
      runner_up = fmt::format("#{} {:.1f}% slower", second + 1, 100 * (ts / tf - 1));
    }
    fmt::print(table, "  {:<14} {:<6} {:<22} {}\n", pr.perturbation.name, first, t1, runner_up);
    for (const auto& e : pr.errors) fmt::print(table, "    error: {}\n", e);
  }
  fmt::print(table, "  {}\n\n", r.summary);
}

// --emit asks for a file or a listing of the best plan: without a plan that is an error (exit 2,
// nothing written), although "nothing fits" alone is a result.
Status nothing_to_export(const PlanCliOptions& o, const planner::PlanResult& r) {
  if (o.emit.empty() || !r.plans.empty()) return Status::ok();
  return Status::invalid("--emit " + o.emit + ": no plan to export" +
                         (o.out.empty() ? "" : " (" + o.out + " not written)") + ": " + r.no_fit);
}

Status run_plan(const PlanCliOptions& given) {
  PlanCliOptions o = given;
  if (o.model.empty()) return Status::invalid("--model is required (a preset or a config.json)");
  if (o.cluster.empty()) return Status::invalid("--cluster is required (a profile name or path)");
  if (o.deadline.empty() && !o.gpus_given)
    return Status::invalid(
        "--gpus is required (or --deadline with --train-tokens: the smallest "
        "GPU count that trains them in time)");
  if (!o.deadline.empty() && o.gpus_given)
    return Status::invalid("--gpus " + std::to_string(o.gpus) + " with --deadline " + o.deadline +
                           ": --deadline searches the GPU count; leave out --gpus (--max-gpus "
                           "bounds the search)");
  if (o.deadline.empty() && o.max_gpus != planner::kDefaultMaxDeadlineGpus)
    return Status::invalid("--max-gpus " + std::to_string(o.max_gpus) + ": only with --deadline");
  if (o.gpus_given && o.gpus <= 0)
    return Status::invalid("--gpus: must be positive, got " + std::to_string(o.gpus));
  if (o.seq <= 0) return Status::invalid("--seq: must be positive, got " + std::to_string(o.seq));
  if (o.gbs <= 0) return Status::invalid("--gbs: must be positive, got " + std::to_string(o.gbs));
  planner::Budget budget{o.train_tokens, std::nullopt};
  SP_ASSIGN_OR_RETURN(budget.gpu_hour_cost,
                      planner::check_budget_options(o.train_tokens, o.gpu_hour_cost));
  double deadline_s = 0;
  if (!o.deadline.empty()) {
    SP_ASSIGN_OR_RETURN(deadline_s, planner::parse_wall_time(o.deadline, "--deadline"));
    if (o.train_tokens <= 0)
      return Status::invalid("--deadline " + o.deadline +
                             ": needs --train-tokens (the tokens to train by then)");
    if (o.max_gpus <= 0)
      return Status::invalid("--max-gpus: must be positive, got " + std::to_string(o.max_gpus));
  }
  if (o.csv && !o.emit.empty() && o.out.empty())
    return Status::invalid("--csv with --emit " + o.emit +
                           ": stdout holds the CSV; write the export with --out FILE");
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
      std::fprintf(stderr, "plan: --emit %s: predicting with %s's conventions (--framework %s)\n",
                   o.emit.c_str(), name.c_str(), name.c_str());
    }
  } else {
    SP_ASSIGN_OR_RETURN(framework_id, parse_framework(o.framework));
    if (emit && !same_family(framework_id, planner::conventions_for(*emit))) {
      std::fprintf(stderr,
                   "plan: --emit %s with --framework %s: the prediction uses %s's conventions, "
                   "not those of the exported framework\n",
                   o.emit.c_str(), o.framework.c_str(), o.framework.c_str());
    }
  }

  Result<models::ModelSpec> model = models::load_model(o.model);
  if (!model) return model.status().with_context("--model");
  SP_RETURN_IF_ERROR(sim::check_simulable(*model).with_context("--model"));
  SP_RETURN_IF_ERROR(apply_moe_imbalance(*model, o.moe_imbalance));
  SP_RETURN_IF_ERROR(apply_moe_dispatcher(*model, o.moe_dispatcher));
  SP_ASSIGN_OR_RETURN(const std::optional<Duration> host_launch, parse_host_launch(o.host_launch));
  Result<hw::Cluster> cluster = hw::load_cluster(o.cluster);
  if (!cluster) return cluster.status().with_context("--cluster");
  std::vector<std::string> notes;
  if (std::string n = partial_node_note(o.gpus, cluster->gpus_per_node, cluster->name);
      !n.empty()) {
    std::fprintf(stderr, "plan: %s\n", n.c_str());
    notes.push_back(n);
  }
  // megatron-2022 re-simulates runs of old code (validate, simulate); the planner's lower bound
  // times attention as the fused kernel, which is not a bound on the unfused core, so planning
  // for it could prune a layout wrongly.
  const sim::Framework framework = sim::framework(framework_id);
  if (framework.id == FrameworkId::kMegatron2022 || framework.id == FrameworkId::kDeepspeed2021)
    return Status::invalid("--framework: '" + o.framework +
                           "' is for re-simulating runs of 2021-2022 code (simulate, validate); "
                           "plan for megatron or nanotron");

  planner::PlanRequest req;
  req.search.model = models::layout_constraints(*model, o.seq);
  req.search.gpus = o.gpus;
  req.search.gbs = o.gbs;
  req.search.nvlink_domain_gpus = cluster->gpus_per_domain();
  req.search.allow_cross_node_tp = o.allow_cross_node_tp;
  for (const auto& f : o.fixes) SP_RETURN_IF_ERROR(req.search.fixes.add(f));
  // An exported plan must be one its framework runs as predicted: rank only what it runs.
  if (emit) {
    req.search.runnable = planner::runnable_values(*emit, *model);
    req.search.runnable_by = std::string(planner::framework_name(*emit));
    req.search.refused = planner::refused_combinations(*emit);
  }
  if (req.search.fixes.names("dtype", "fp8"))
    SP_RETURN_IF_ERROR(hw::check_dtype_supported(*cluster, DType::kFp8, "--fix"));
  if (!o.margin.empty()) {
    // A bare number would be bytes: "--memory-margin 6" meant 6 GiB and kept 6 bytes free.
    if (o.margin.find_first_not_of("0123456789. ") == std::string::npos && o.margin != "0")
      return Status::invalid("--memory-margin: '" + o.margin +
                             "' has no unit; write it with one, e.g. " + o.margin + "GiB");
    SP_ASSIGN_OR_RETURN(req.memory_margin, parse_bytes(o.margin, "--memory-margin"));
  }
  req.top_k = o.top;
  req.threads = o.threads;
  req.max_simulations = o.max_simulations;
  req.explain = o.explain;
  if (!o.quiet) {
    req.progress = print_progress;
    req.progress_interval = std::chrono::milliseconds(1000);
  }

  SP_ASSIGN_OR_RETURN(auto kernels, calibrate::kernel_cost_model_for(*cluster));
  const planner::ModelEvaluator evaluator(*model, *cluster, o.seq, framework, std::move(kernels),
                                          host_launch);
  // --deadline: the smallest GPU count that meets it, then the plan at that count.
  std::optional<planner::DeadlineResult> deadline;
  if (!o.deadline.empty()) {
    planner::DeadlineRequest dr;
    dr.plan = req;
    dr.plan.top_k = 1;
    dr.gbs = o.gbs;
    dr.budget = budget;
    dr.deadline_s = deadline_s;
    dr.gpus_per_node = cluster->gpus_per_node;
    dr.max_gpus = o.max_gpus;
    if (!o.quiet)
      dr.on_try = [](const planner::SweepPoint& p) {
        std::fprintf(stderr, "plan: --deadline: %lld GPUs: %s\n", static_cast<long long>(p.gpus),
                     p.cost ? planner::format_wall_time(p.cost->seconds).c_str() : "nothing fits");
      };
    SP_ASSIGN_OR_RETURN(deadline, planner::find_smallest_gpus(dr, evaluator));
    o.gpus = deadline->gpus > 0 ? deadline->gpus : deadline->tried.back().gpus;
    req.search.gpus = o.gpus;
  }
  SP_ASSIGN_OR_RETURN(planner::PlanResult r, planner::plan(req, evaluator));
  // Fixes that no valid layout satisfies are a mistake in the input, not a result.
  if (r.candidates == 0 && r.pruned.empty() && !req.search.fixes.empty())
    return Status::invalid("--fix: " + r.no_fit);

  // How sure: the ranked layouts on perturbed profiles.
  std::optional<planner::Robustness> robustness;
  if (!o.no_robustness && !r.plans.empty()) {
    SP_ASSIGN_OR_RETURN(const auto perturbations, planner::perturbations_for(*cluster));
    SP_ASSIGN_OR_RETURN(
        robustness,
        planner::assess_robustness(
            r.plans, perturbations,
            perturbed_evaluator(*model, *cluster, o.seq, framework, host_launch), o.threads));
  }

  // The export of the best plan.
  std::optional<planner::Export> exported;
  if (emit && !r.plans.empty()) {
    planner::ExportInput in;
    in.model = &*model;
    in.model_source = o.model;
    in.cluster = o.cluster;
    in.gpus = o.gpus;
    in.gpus_per_node = cluster->gpus_per_node;
    in.gpu_sm = hw::sm_version(cluster->gpu);
    in.seq_len = o.seq;
    in.layout = r.plans.front().layout;
    in.prediction = r.plans.front().prediction;
    in.prediction->memory = r.plans.front().memory;
    in.framework = framework.id;
    in.host_launch = host_launch;
    SP_ASSIGN_OR_RETURN(exported, planner::export_layout(in, *emit));
    if (!o.out.empty()) SP_RETURN_IF_ERROR(write_output_file(o.out, exported->content));
    for (const auto& n : exported->notes)
      std::fprintf(stderr, "plan: --emit %s: %s\n", o.emit.c_str(), n.c_str());
  }

  if (o.json || o.csv || !o.html.empty()) {
    Json plans = Json::array();
    for (const auto& p : r.plans) {
      Json j = {{"rank", p.rank}, {"layout", format_layout(p.layout)}, {"reason", p.reason}};
      j.update(prediction_json(p.prediction, p.memory,
                               planner::training_cost(p.prediction.tokens_per_s_per_gpu, o.gpus,
                                                      o.train_tokens, budget.gpu_hour_cost)));
      j["lower_bound_s"] = p.lower_bound.to_seconds();
      plans.push_back(j);
    }
    Json pruned = Json::array();
    for (const auto& p : r.pruned)
      pruned.push_back({{"rule", p.rule}, {"candidates", p.candidates}});
    Json j = {{"model", model->name},
              {"cluster", cluster->name},
              {"gpus", o.gpus},
              {"seq", o.seq},
              {"gbs", o.gbs},
              {"fixes", req.search.fixes.to_string()},
              {"memory_margin_bytes", req.memory_margin.value()},
              {"framework", framework.name()},
              {"moe", moe_options_json(*model)},
              {"plans", plans},
              {"candidates", r.candidates},
              {"fit", r.fit},
              {"simulated", r.simulated},
              {"bounded", r.bounded},
              {"not_simulated", r.not_simulated},
              {"failed", r.failed},
              {"errors", r.errors},
              {"pruned", pruned},
              {"pruned_total",
               [&] {
                 int64_t n = 0;
                 for (const auto& p : r.pruned) n += p.candidates;
                 return n;
               }()},
              {"cross_node_tp_fallback", r.cross_node_tp_fallback},
              {"max_simulations", o.max_simulations},
              {"budget_note", r.budget_note},
              {"no_fit", r.no_fit},
              {"search_s", r.search_s},
              {"threads", r.threads},
              {"notes", notes}};
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
        x["peak_memory_bytes"] = e.memory->peak.value();
        x["memory_capacity_bytes"] = e.memory->capacity.value();
      }
      j["explain"] = x;
    }
    if (robustness) j["robustness"] = robustness_json(*robustness);
    if (deadline)
      j["deadline"] = deadline_json(*deadline, deadline_s, budget, cluster->gpus_per_node);
    if (exported) {
      j["export"] = {
          {"format", o.emit}, {"content", exported->content}, {"notes", exported->notes}};
      if (!o.out.empty()) j["export"]["file"] = o.out;
    }
    if (!o.html.empty())
      SP_RETURN_IF_ERROR(write_output_file(o.html, plan_html(j, command_line())));
    if (o.json) {
      print_json(j);
      return nothing_to_export(o, r);
    }
    if (o.csv) {
      std::vector<std::string> columns = {"rank",
                                          "layout",
                                          "iteration_s",
                                          "tokens_per_s_per_gpu",
                                          "mfu",
                                          "peak_memory_bytes",
                                          "memory_capacity_bytes",
                                          "headroom_bytes"};
      if (o.train_tokens > 0)
        for (const char* k : {"time_to_train_s", "days_to_train", "gpu_hours"})
          columns.push_back(k);
      if (budget.gpu_hour_cost) columns.push_back("cost");
      print_csv(columns, plans);
      return nothing_to_export(o, r);
    }
  }

  // --emit without -o: stdout is the exported file alone (redirect it, pipe it), the table goes
  // to stderr.
  std::FILE* table = exported && o.out.empty() ? stderr : stdout;
  const double tokens = static_cast<double>(o.gbs) * static_cast<double>(o.seq);
  fmt::print(table, "plan {} on {} x {} ({} per node), seq {}, gbs {} ({} tokens per step)\n",
             model->name, o.gpus, cluster->name, cluster->gpus_per_node, o.seq, o.gbs,
             format_count(tokens));
  if (!req.search.fixes.empty()) fmt::print(table, "fixed: {}\n", req.search.fixes.to_string());
  if (deadline) print_deadline(table, *deadline, deadline_s, budget, cluster->gpus_per_node);
  fmt::print(
      table,
      "{} layouts searched; {} fit with a {} margin; {} simulated ({} failed), {} bounded out "
      "(a lower bound on their time exceeds the #{} simulated) in {:.2f} s on {} threads\n",
      r.candidates, r.fit, format_bytes(req.memory_margin), r.simulated, r.failed, r.bounded,
      o.top + 1, r.search_s, r.threads);
  if (r.cross_node_tp_fallback) {
    fmt::print(table, "nothing fitted with TP inside a node, so TP across nodes was allowed\n");
  }
  if (!r.no_fit.empty()) fmt::print(table, "{}\n", r.no_fit);
  if (!r.budget_note.empty()) fmt::print(table, "{}\n", r.budget_note);
  if (r.failed > 0) {
    // A layout that could not be simulated is not ranked; say which and why, above the ranking.
    fmt::print(table, "{} layout{} failed to simulate{}:\n", r.failed, r.failed == 1 ? "" : "s",
               static_cast<int64_t>(r.errors.size()) < r.failed
                   ? fmt::format(" (the first {})", r.errors.size())
                   : "");
    for (const auto& e : r.errors) fmt::print(table, "  error: {}\n", e);
  }
  fmt::print(table, "\n");
  for (const auto& p : r.plans) {
    fmt::print(table, "#{:<2} {}\n", p.rank, format_layout(p.layout));
    fmt::print(table,
               "    iteration {} s, {:.0f} tokens/s/GPU, MFU {:.1f}%, peak {} of {} (headroom {})",
               secs(p.prediction.iteration), p.prediction.tokens_per_s_per_gpu,
               100 * p.prediction.mfu, format_bytes(p.memory.peak), format_bytes(p.memory.capacity),
               format_bytes(p.memory.headroom()));
    if (auto c = planner::training_cost(p.prediction.tokens_per_s_per_gpu, o.gpus, o.train_tokens,
                                        budget.gpu_hour_cost)) {
      fmt::print(table, "\n    {} days to train {} tokens, {} GPU-hours", format_amount(c->days),
                 format_count(o.train_tokens), format_amount(c->gpu_hours));
      if (c->cost) fmt::print(table, ", cost {}", format_amount(*c->cost));
    }
    fmt::print(table, "\n    {}\n    {}\n\n", breakdown_line(p.prediction.breakdown), p.reason);
  }
  if (robustness) print_robustness(table, *robustness, r.plans);
  if (r.explanation) {
    const auto& e = *r.explanation;
    fmt::print(table, "--explain {}\n    {}\n", e.layout ? format_layout(*e.layout) : e.layout_text,
               e.why);
    if (e.prediction) {
      fmt::print(table, "    iteration {} s, {:.0f} tokens/s/GPU, MFU {:.1f}%\n    {}\n",
                 secs(e.prediction->iteration), e.prediction->tokens_per_s_per_gpu,
                 100 * e.prediction->mfu, breakdown_line(e.prediction->breakdown));
    }
    fmt::print(table, "\n");
  }
  if (!r.pruned.empty()) {
    fmt::print(table, "not searched (policy rules; each is lifted as it says):\n");
    for (const auto& p : r.pruned) fmt::print(table, "  {:>10}  {}\n", p.candidates, p.rule);
  }
  if (exported && o.out.empty()) fmt::print(stdout, "{}", exported->content);
  if (exported && !o.out.empty()) fmt::print(table, "\nwrote {} ({})\n", o.out, o.emit);
  if (!o.html.empty()) fmt::print(table, "report written to {}\n", o.html);
  return nothing_to_export(o, r);
}

}  // namespace

SCALEPLAN_COMMAND(
    plan, "plan", "Rank the parallel layouts that fit, fastest first, and export the best",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<PlanCliOptions>();
      sub.add_option("--model,-m", o->model, "Preset name or path to a HF config.json");
      sub.add_option("--cluster,-c", o->cluster, "Bundled cluster profile name or profile path");
      CLI::Option* gpus = add_count(sub, "--gpus", o->gpus, "GPUs of the job");
      add_count(sub, "--seq", o->seq, "Sequence length in tokens")->required();
      add_count(sub, "--gbs", o->gbs, "Global batch in sequences")->required();
      sub.add_option("--top", o->top, "Plans to show (default 5)");
      sub.add_option("--emit", o->emit,
                     "Export the best plan: megatron, torchtitan, deepspeed, nanotron or json");
      sub.add_option("--out,-o", o->out, "With --emit: write the export to this file");
      sub.add_option("--explain", o->explain, "A layout string: where it ranks and why");
      sub.add_option("--memory-margin", o->margin,
                     "Memory kept free on every GPU (default 4GiB; docs/planner.md)");
      sub.add_option("--fix", o->fixes,
                     "Restrict a layout key: KEY=V1|V2... (repeatable), e.g. --fix zero=0|1");
      add_choice(sub, "--framework", o->framework, kFrameworks,
                 "Memory and timing conventions (torchtitan-2025: PyTorch <= 2.8); default: the "
                 "--emit target's (megatron for megatron, deepspeed and json)");
      sub.add_option("--moe-imbalance", o->moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--moe-dispatcher", o->moe_dispatcher, kMoeDispatcherHelp);
      sub.add_option("--host-launch", o->host_launch, kHostLaunchHelp);
      sub.add_option("--threads", o->threads, "Worker threads (default: all cores)");
      add_count(sub, "--max-simulations", o->max_simulations,
                "Cap on simulations (default 0: none; the search stops exactly where lower "
                "bounds prove the rest slower)",
                CountSuffix::kDecimal);
      add_count(sub, "--train-tokens", o->train_tokens,
                "Also report the days, GPU-hours (and cost) to train this many tokens",
                CountSuffix::kDecimal);
      sub.add_option(
          "--gpu-hour-cost", o->gpu_hour_cost,
          "With --train-tokens: price of one GPU-hour (any currency), to report the cost");
      sub.add_option(
          "--deadline", o->deadline,
          "With --train-tokens: find the smallest GPU count (whole nodes) that trains "
          "them within this wall-clock time, e.g. 60d, 8w, 1440h; --gpus is then left out");
      add_count(sub, "--max-gpus", o->max_gpus,
                "With --deadline: the largest GPU count to try (default 131072)");
      sub.add_flag("--allow-cross-node-tp", o->allow_cross_node_tp,
                   "Search TP degrees above the GPUs of one node");
      sub.add_flag("--no-robustness", o->no_robustness,
                   "Do not re-simulate the ranked plans on perturbed profiles (the \"how sure\" "
                   "table)");
      sub.add_flag("--quiet,-q", o->quiet, "No progress on stderr");
      sub.add_option("--html", o->html,
                     "Write a self-contained HTML report of the ranking here (charts of "
                     "tokens/s/GPU, MFU, breakdown, memory; the how-sure table)");
      CLI::Option* json = sub.add_flag("--json", o->json, "Machine-readable output on stdout");
      sub.add_flag("--csv", o->csv, "The ranked table as CSV on stdout (one row per plan)")
          ->excludes(json);
      return [o, gpus] {
        o->gpus_given = gpus->count() > 0;
        return run_plan(*o);
      };
    },
    50);

}  // namespace scaleplan::cli
