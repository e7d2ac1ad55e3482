// `scaleplan validate FILE`: re-simulates every record of a validation file (schema in
// shared/validation/README.md) and compares predicted with measured step time, throughput or MFU
// (the first of them the record publishes), peak memory, and out-of-memory verdicts. The rules and
// the statistics are validate/validation.h's; this file parses the options and formats. Records run
// in parallel; the output is in file order and does not depend on the thread count.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "api/validate.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "hw_profiles/cluster.h"
#include "planner/planner.h"
#include "sim/framework.h"
#include "validate/validation.h"

namespace scaleplan::cli {
namespace {

struct ValidateCliOptions {
  api::ValidateRequest request;
  bool json = false, quiet = false;
};

Status run(const ValidateCliOptions& c) {
  // Progress on stderr once a second after the first second (the dev_runs.json sweep takes ~9 s
  // on two cores); nothing for a short run or with --quiet.
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  api::Callbacks<api::ValidateProgress> callbacks;
  if (!c.quiet) {
    callbacks.progress = [&](const api::ValidateProgress& p) {
      const auto now = std::chrono::steady_clock::now();
      if (now - last < std::chrono::seconds(1)) return;
      last = now;
      std::fprintf(stderr, "validate: %zu/%zu records simulated (%.0f s)\n", p.done, p.total,
                   std::chrono::duration<double>(now - start).count());
    };
  }
  SP_ASSIGN_OR_RETURN(const api::ValidateOutcome outcome, api::validate(c.request, callbacks));
  if (c.json) {
    print_json(outcome.to_json());
    return Status::ok();
  }
  const api::ValidateRequest& o = outcome.request;
  const std::vector<planner::RecordPrediction>& rows = outcome.rows;
  const planner::ValidationSummary& sum = outcome.summary;
  const std::optional<Duration>& host_launch = outcome.host_launch;
  fmt::print("{:<44} {:<10} {:>12} {:>12} {:>8} {:>7} {:>9} {:>9}\n", "record", "metric",
             "predicted", "measured", "|err| %", "speed", "mem pred", "mem meas");
  // A value the record does not have prints as "-", never "nan".
  auto cell = [](std::optional<double> v, const char* spec) {
    return v ? fmt::format(fmt::runtime(spec), *v) : std::string("-");
  };
  for (const auto& r : rows) {
    if (!r.skip.empty()) continue;
    const planner::RunRecord& rec = *r.record;
    const bool timed = r.timed();
    fmt::print(
        "{:<44} {:<10} {:>12} {:>12} {:>8} {:>7} {:>9} {:>9}\n", rec.id.substr(0, 44),
        r.metric ? api::metric_name(r) : (rec.status == "oom" ? "oom" : "-"),
        cell(timed ? r.predicted : std::nullopt, "{:.4g}"), cell(r.measured, "{:.4g}"),
        cell(
            timed ? std::optional(planner::abs_pct_error(*r.predicted, *r.measured)) : std::nullopt,
            "{:.1f}"),
        cell(timed ? std::optional(planner::speed_ratio(*r.metric, *r.predicted, *r.measured))
                   : std::nullopt,
             "{:.3f}"),
        cell(r.mem_predicted_gib, "{:.2f}"), cell(r.mem_measured_gib, "{:.2f}"));
  }
  fmt::print(
      "(speed: predicted over measured speed, the inverse for a step time; above 1 the "
      "simulation is faster than the run)\n");
  fmt::print("\n{} records: {} simulated, {} skipped\n", rows.size(), sum.simulated, sum.skipped);
  if (outcome.records.size() != outcome.file_records)
    fmt::print("  selected {} of the file's {} records\n", outcome.records.size(),
               outcome.file_records);
  for (const auto& [name, profile] : outcome.substitutions)
    fmt::print("  records of cluster {} simulated on {}\n", name, profile);
  if (host_launch)
    fmt::print("  host issue at {} per kernel or collective (--host-launch)\n",
               format_duration(*host_launch));
  for (const auto& [reason, n] : sum.skip_reasons) fmt::print("  skipped {:>4}: {}\n", n, reason);
  const planner::ErrorStats& overall = sum.time;
  if (overall.n == 0) {
    fmt::print("time/throughput/MFU |error|: no simulated record publishes a time or a speed\n");
  } else {
    fmt::print(
        "time/throughput/MFU |error|: median {:.1f}%  p90 {:.1f}%  max {:.1f}% ({}) over {} "
        "records; predicted faster than measured on {}, median speed ratio {:.3f}\n",
        overall.median, overall.p90, overall.worst, overall.worst_id, overall.n,
        overall.predicted_faster, overall.median_speed_ratio);
  }
  for (const auto& [g, s] : sum.time_by_group) {
    fmt::print(
        "  {:<12} median {:.1f}%  p90 {:.1f}%  max {:.1f}% ({}) over {}; faster on {}, speed "
        "ratio {:.3f}\n",
        g, s.median, s.p90, s.worst, s.worst_id, s.n, s.predicted_faster, s.median_speed_ratio);
  }
  const planner::ErrorStats& memory = sum.memory;
  if (memory.n == 0) {
    fmt::print("peak memory |error|: no simulated record publishes a peak\n");
  } else {
    fmt::print("peak memory |error|: median {:.1f}%  p90 {:.1f}%  max {:.1f}% over {} records\n",
               memory.median, memory.p90, memory.worst, memory.n);
  }
  fmt::print("out of memory called right: {}/{}; runs that fit called fitting: {}/{}\n",
             sum.oom_called_right, sum.oom_rows, sum.ok_called_fits, sum.ok_rows);
  if (o.how_sure) {
    int in = 0, n = 0;
    std::string groups;
    for (const auto& [g, w] : sum.within_how_sure) {
      in += w.first;
      n += w.second;
      groups += fmt::format("{}{} {}/{}", groups.empty() ? "" : ", ", g, w.first, w.second);
    }
    fmt::print(
        "how sure: the measurement lies within the range of the five perturbations "
        "(docs/planner.md) for {}/{} timed records ({})\n",
        in, n, groups);
  }
  return Status::ok();
}

SCALEPLAN_COMMAND(
    validate, "validate", "Re-simulate published runs and report predicted vs measured",
    [](CLI::App& sub) -> Runner {
      auto c = std::make_shared<ValidateCliOptions>();
      api::ValidateRequest* o = &c->request;
      sub.add_option("file", o->file,
                     "validation records: a JSON array, or a bundled set by name (dev_runs, "
                     "dev_runs_2026; validation/README.md)")
          ->required();
      sub.add_option("--threads", o->threads, "worker threads (default: all cores)");
      sub.add_flag("--how-sure", o->how_sure,
                   "also simulate each timed record with one resource off at a time (kernels "
                   "+-10%, NVLink -15%, network -30%, latency x2) and count the measurements "
                   "within that range");
      sub.add_option("--profile", o->profiles,
                     "NAME=PROFILE: simulate the records of cluster NAME on PROFILE (bundled name "
                     "or path), e.g. dgx-h100=hf-h100; repeatable");
      sub.add_option("--match", o->match,
                     "run only records whose id matches this regular expression (ECMAScript, "
                     "searched anywhere in the id), e.g. '^korthikanti' or '530B'");
      sub.add_option("--group", o->groups,
                     "run only this published set: korthikanti, megatron-2021, nanotron, dgxc, "
                     "mbridge-h100, mbridge-blackwell, mbridge-moe or other; repeatable");
      add_choice(sub, "--framework", o->framework, kFrameworksWithHistoric,
                 "simulate every record with these framework conventions instead of the ones "
                 "each record's framework and publication date imply");
      sub.add_option("--host-launch", o->host_launch, kHostLaunchHelp);
      sub.add_flag("--json", c->json, "machine-readable output");
      sub.add_flag("--quiet,-q", c->quiet, "no progress on stderr");
      return [c] { return run(*c); };
    },
    80);

}  // namespace
}  // namespace scaleplan::cli
