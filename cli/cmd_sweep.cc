// `scaleplan sweep`: the best plan of one job at several GPU counts (planner/sweep.h), as a table,
// JSON, CSV or a self-contained HTML chart; with --train-tokens the days, GPU-hours and cost of
// each point (docs/planner.md, "Sweeps over scale").
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/options.h"
#include "api/sweep_json.h"
#include "calibrate/kernel_model.h"
#include "cli/command.h"
#include "cli/html_report.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sweep_output.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/model_evaluator.h"
#include "planner/sweep.h"
#include "planner/training_cost.h"
#include "sim/simulate.h"

namespace scaleplan::cli {
namespace {

struct SweepCliOptions {
  std::string model, cluster, gpus, framework, html, gpu_hour_cost;
  std::string memory_margin, moe_imbalance, moe_dispatcher, host_launch;
  int64_t max_simulations = 0;
  std::vector<std::string> fixes;
  int64_t seq = 0, gbs = 0;
  double gbs_per_gpu = 0;
  double train_tokens = 0;
  int threads = 0;
  bool json = false, csv = false, quiet = false, allow_cross_node_tp = false;
};

Status run_sweep(const SweepCliOptions& o) {
  if (o.model.empty()) return Status::invalid("--model is required (a preset or a config.json)");
  if (o.cluster.empty()) return Status::invalid("--cluster is required (a profile name or path)");
  if (o.seq <= 0) return Status::invalid("--seq: must be positive, got " + std::to_string(o.seq));
  if (o.gbs_per_gpu < 0 || std::isnan(o.gbs_per_gpu))
    return Status::invalid("--gbs-per-gpu: must be positive, got " + std::to_string(o.gbs_per_gpu));
  if (o.gbs <= 0 && !(o.gbs_per_gpu > 0))
    return Status::invalid(
        "--gbs (a fixed global batch) or --gbs-per-gpu (one that grows with "
        "the GPU count) is required");
  if (o.gbs < 0) return Status::invalid("--gbs: must be positive, got " + std::to_string(o.gbs));
  planner::SweepRequest req;
  SP_ASSIGN_OR_RETURN(req.gpus, planner::parse_gpu_counts(o.gpus, "--gpus"));
  req.gbs = o.gbs;
  req.gbs_per_gpu = o.gbs_per_gpu;
  req.budget.train_tokens = o.train_tokens;
  SP_ASSIGN_OR_RETURN(req.budget.gpu_hour_cost,
                      planner::check_budget_options(o.train_tokens, o.gpu_hour_cost));

  Result<models::ModelSpec> model = models::load_model(o.model);
  if (!model) return model.status().with_context("--model");
  SP_RETURN_IF_ERROR(sim::check_simulable(*model).with_context("--model"));
  SP_RETURN_IF_ERROR(api::apply_moe_imbalance(*model, o.moe_imbalance));
  SP_RETURN_IF_ERROR(api::apply_moe_dispatcher(*model, o.moe_dispatcher));
  SP_ASSIGN_OR_RETURN(const std::optional<Duration> host_launch,
                      api::parse_host_launch(o.host_launch));
  SP_ASSIGN_OR_RETURN(const std::optional<Bytes> margin, api::parse_memory_margin(o.memory_margin));
  if (o.max_simulations < 0)
    return Status::invalid("--max-simulations: must not be negative, got " +
                           std::to_string(o.max_simulations));
  Result<hw::Cluster> cluster = hw::load_cluster(o.cluster);
  if (!cluster) return cluster.status().with_context("--cluster");
  FrameworkId framework_id = FrameworkId::kMegatron;
  if (!o.framework.empty()) {
    SP_ASSIGN_OR_RETURN(framework_id, parse_framework(o.framework));
  }

  req.plan.search.model = models::layout_constraints(*model, o.seq);
  req.plan.search.nvlink_domain_gpus = cluster->gpus_per_domain();
  req.plan.search.allow_cross_node_tp = o.allow_cross_node_tp;
  for (const auto& f : o.fixes) SP_RETURN_IF_ERROR(req.plan.search.fixes.add(f));
  if (req.plan.search.fixes.names("dtype", "fp8"))
    SP_RETURN_IF_ERROR(hw::check_dtype_supported(*cluster, DType::kFp8, "--fix"));
  req.plan.top_k = 1;  // the best layout per point; its bound prunes the rest
  req.plan.threads = o.threads;
  if (margin) req.plan.memory_margin = *margin;
  req.plan.max_simulations = o.max_simulations;
  if (!o.quiet) {
    req.on_point = [](const planner::SweepPoint& p, size_t i, size_t n) {
      std::fprintf(stderr, "sweep: %zu/%zu: %lld GPUs, gbs %lld: %s (%.1f s)\n", i + 1, n,
                   static_cast<long long>(p.gpus), static_cast<long long>(p.gbs),
                   p.result.plans.empty()
                       ? "nothing fits"
                       : fmt::format("{:.0f} tokens/s/GPU {}", p.best_tokens_per_s_per_gpu(),
                                     format_layout(p.result.plans.front().layout))
                             .c_str(),
                   p.result.search_s);
    };
  }

  // One model, cluster, kernel model and evaluator (with its memory and bound caches) for every
  // point: ModelEvaluator takes the GPU count from each layout.
  SP_ASSIGN_OR_RETURN(auto kernels, calibrate::kernel_cost_model_for(*cluster));
  const sim::Framework framework = sim::framework(framework_id);
  const planner::ModelEvaluator evaluator(*model, *cluster, o.seq, framework, std::move(kernels),
                                          host_launch);
  SP_ASSIGN_OR_RETURN(const planner::SweepResult r, planner::sweep(req, evaluator));

  std::vector<std::string> notes;
  for (int64_t g : req.gpus)
    if (std::string n = api::partial_node_note(g, cluster->gpus_per_node, cluster->name);
        !n.empty())
      notes.push_back(n);

  if (o.json || o.csv || !o.html.empty()) {
    Json points = Json::array();
    for (const auto& p : r.points) points.push_back(api::sweep_point_json(p));
    Json j = {{"model", model->name},
              {"cluster", cluster->name},
              {"gpus_per_node", cluster->gpus_per_node},
              {"seq", o.seq},
              {"gbs", o.gbs > 0 ? Json(o.gbs) : Json(nullptr)},
              {"gbs_per_gpu", o.gbs_per_gpu > 0 ? Json(o.gbs_per_gpu) : Json(nullptr)},
              {"fixes", req.plan.search.fixes.to_string()},
              {"framework", framework.name()},
              {"memory_margin_bytes", req.plan.memory_margin.value()},
              {"max_simulations", o.max_simulations},
              {"moe", api::moe_options_json(*model)},
              {"train_tokens", o.train_tokens},
              {"gpu_hour_cost",
               req.budget.gpu_hour_cost ? Json(*req.budget.gpu_hour_cost) : Json(nullptr)},
              {"points", points},
              {"sweep_s", r.sweep_s},
              {"notes", notes}};
    if (!o.html.empty())
      SP_RETURN_IF_ERROR(write_output_file(o.html, sweep_html(j, command_line())));
    if (o.json) {
      print_json(j);
      return Status::ok();
    }
    if (o.csv) {
      print_csv(sweep_csv_columns(req.budget), points);
      return Status::ok();
    }
  }

  fmt::print("sweep {} on {} ({} per node), seq {}, {}\n", model->name, cluster->name,
             cluster->gpus_per_node, o.seq,
             o.gbs > 0 ? fmt::format("gbs {} at every count", o.gbs)
                       : fmt::format("gbs {} per GPU", o.gbs_per_gpu));
  if (!req.plan.search.fixes.empty()) fmt::print("fixed: {}\n", req.plan.search.fixes.to_string());
  if (o.train_tokens > 0) {
    fmt::print("time and GPU-hours to train {} tokens", format_count(o.train_tokens));
    if (req.budget.gpu_hour_cost)
      fmt::print(", cost at {} per GPU-hour", *req.budget.gpu_hour_cost);
    fmt::print("\n");
  }
  for (const auto& n : notes) fmt::print("note: {}\n", n);
  fmt::print("{} points in {:.1f} s\n\n", r.points.size(), r.sweep_s);
  print_sweep_table(stdout, r.points, req.budget);
  if (!o.html.empty()) fmt::print("chart written to {}\n", o.html);
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    sweep, "sweep",
    "The best layout of one job at several GPU counts: throughput, MFU, time and cost to train",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SweepCliOptions>();
      sub.add_option("--model,-m", o->model, "Preset name or path to a HF config.json");
      sub.add_option("--cluster,-c", o->cluster, "Bundled cluster profile name or profile path");
      sub.add_option("--gpus", o->gpus,
                     "GPU counts: FROM:TO doubles (256:4096 is 256, 512, ..., 4096), FROM:TO:xF "
                     "multiplies by F, FROM:TO:+S steps by S GPUs, or a list 256,384,512")
          ->required();
      add_count(sub, "--seq", o->seq, "Sequence length in tokens")->required();
      CLI::Option* gbs =
          add_count(sub, "--gbs", o->gbs, "Global batch in sequences, the same at every count");
      sub.add_option("--gbs-per-gpu", o->gbs_per_gpu,
                     "Instead of --gbs: global batch = this x GPUs (weak scaling; may be a "
                     "fraction, e.g. 0.5, when it comes out whole at every count)")
          ->excludes(gbs);
      sub.add_option("--fix", o->fixes,
                     "Restrict a layout key at every point: KEY=V1|V2... (repeatable)");
      add_choice(sub, "--framework", o->framework, kFrameworks,
                 "Memory and timing conventions (default megatron)");
      sub.add_option("--memory-margin", o->memory_margin,
                     "Memory kept free on every GPU (default 4GiB; docs/planner.md)");
      sub.add_option("--moe-imbalance", o->moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--moe-dispatcher", o->moe_dispatcher, kMoeDispatcherHelp);
      sub.add_option("--host-launch", o->host_launch, kHostLaunchHelp);
      add_count(sub, "--max-simulations", o->max_simulations,
                "Cap on simulations at each point (default 0: none; each point's note says what "
                "the cap left)",
                CountSuffix::kDecimal);
      sub.add_option("--threads", o->threads,
                     "Worker threads in all (default: all cores); points are searched side by "
                     "side, each on its share");
      add_count(sub, "--train-tokens", o->train_tokens,
                "Report the days, GPU-hours (and cost) to train this many tokens at each count",
                CountSuffix::kDecimal);
      sub.add_option(
          "--gpu-hour-cost", o->gpu_hour_cost,
          "With --train-tokens: price of one GPU-hour (any currency), to report the cost");
      sub.add_flag("--allow-cross-node-tp", o->allow_cross_node_tp,
                   "Search TP degrees above the GPUs of one node");
      sub.add_option("--html", o->html,
                     "Write a self-contained HTML chart of tokens/s/GPU and MFU against GPUs here");
      sub.add_flag("--quiet,-q", o->quiet, "No progress on stderr");
      CLI::Option* json = sub.add_flag("--json", o->json, "Machine-readable output on stdout");
      sub.add_flag("--csv", o->csv, "The table as CSV on stdout (one row per GPU count)")
          ->excludes(json);
      return [o] { return run_sweep(*o); };
    },
    55);

}  // namespace scaleplan::cli
