// `scaleplan sweep`: the best plan of one job at several GPU counts (planner/sweep.h), as a table,
// JSON, CSV or a self-contained HTML chart; with --train-tokens the days, GPU-hours and cost of
// each point (docs/planner.md, "Sweeps over scale").
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/sweep.h"
#include "cli/command.h"
#include "cli/html_report.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sweep_output.h"
#include "core/layout.h"
#include "core/units.h"
#include "planner/sweep.h"

namespace scaleplan::cli {
namespace {

struct SweepCliOptions {
  api::SweepRequest request;
  std::string html;
  bool json = false, csv = false, quiet = false;
};

Status run_sweep(const SweepCliOptions& o) {
  api::Callbacks<api::SweepProgress> callbacks;
  if (!o.quiet) {
    callbacks.progress = [](const api::SweepProgress& progress) {
      const planner::SweepPoint& p = progress.point;
      std::fprintf(stderr, "sweep: %zu/%zu: %lld GPUs, gbs %lld: %s (%.1f s)\n", progress.index + 1,
                   progress.total, static_cast<long long>(p.gpus), static_cast<long long>(p.gbs),
                   p.result.plans.empty()
                       ? "nothing fits"
                       : fmt::format("{:.0f} tokens/s/GPU {}", p.best_tokens_per_s_per_gpu(),
                                     format_layout(p.result.plans.front().layout))
                             .c_str(),
                   p.result.search_s);
    };
  }
  SP_ASSIGN_OR_RETURN(const api::SweepOutcome out, api::sweep(o.request, callbacks));
  const api::SweepRequest& r = out.request;

  if (o.json || o.csv || !o.html.empty()) {
    const Json j = out.to_json();
    if (!o.html.empty())
      SP_RETURN_IF_ERROR(write_output_file(o.html, sweep_html(j, command_line())));
    if (o.json) {
      print_json(j);
      return Status::ok();
    }
    if (o.csv) {
      print_csv(sweep_csv_columns(out.budget), j["points"]);
      return Status::ok();
    }
  }

  fmt::print("sweep {} on {} ({} per node), seq {}, {}\n", out.model.name, out.cluster_name,
             out.gpus_per_node, r.seq,
             r.gbs > 0 ? fmt::format("gbs {} at every count", r.gbs)
                       : fmt::format("gbs {} per GPU", r.gbs_per_gpu));
  if (!out.fixes.empty()) fmt::print("fixed: {}\n", out.fixes);
  if (r.train_tokens > 0) {
    fmt::print("time and GPU-hours to train {} tokens", format_count(r.train_tokens));
    if (out.budget.gpu_hour_cost)
      fmt::print(", cost at {} per GPU-hour", *out.budget.gpu_hour_cost);
    fmt::print("\n");
  }
  for (const auto& n : out.notes) fmt::print("note: {}\n", n);
  fmt::print("{} points in {:.1f} s\n\n", out.result.points.size(), out.result.sweep_s);
  print_sweep_table(stdout, out.result.points, out.budget);
  if (!o.html.empty()) fmt::print("chart written to {}\n", o.html);
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    sweep, "sweep",
    "The best layout of one job at several GPU counts: throughput, MFU, time and cost to train",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SweepCliOptions>();
      api::SweepRequest& r = o->request;
      const auto options = add_fields(sub, api::sweep_fields(r));
      options.at("gbs_per_gpu")->excludes(options.at("gbs"));
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
