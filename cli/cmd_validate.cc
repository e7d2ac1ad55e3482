// `scaleplan validate FILE`: re-simulates every record of a validation file (schema in
// shared/validation/README.md) and compares predicted with measured step time, throughput or MFU
// (the first of them the record publishes), peak memory, and out-of-memory verdicts. The rules and
// the statistics are planner/validation.h's; this file parses the options and formats. Records run
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

#include "api/options.h"
#include "api/sim_json.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "hw_profiles/cluster.h"
#include "planner/planner.h"
#include "planner/validation.h"
#include "sim/framework.h"

namespace scaleplan::cli {
namespace {

struct ValidateCliOptions {
  std::string file;
  bool json = false, quiet = false;
  int threads = 0;
  // "NAME=PROFILE": simulate the records of cluster NAME on PROFILE (a bundled name or a path),
  // e.g. a calibrated profile of the cluster the records ran on.
  std::vector<std::string> profiles;
  // Which records to run: ids matching --match (ECMAScript regex, searched anywhere in the id)
  // and, when given, belonging to one of the --group sets. Empty: every record.
  std::string match;
  std::vector<std::string> groups;
  // Simulate every record with these framework conventions (sim::framework) instead of the ones
  // its framework and publication date imply (planner/validation.h); empty: per record.
  std::string framework;
  // Also simulate each timed record on the five perturbed profiles of planner/robustness.h and
  // report whether its measurement lies within their range.
  bool how_sure = false;
  // --host-launch: every record's host issue model at this cost per kernel or collective (its
  // framework's glue kernels and blocking receives kept); empty: each framework's own.
  std::string host_launch;
};

// The --profile substitutions, NAME -> PROFILE.
Result<std::map<std::string, std::string>> profile_substitutions(
    const std::vector<std::string>& specs) {
  std::map<std::string, std::string> out;
  for (const auto& spec : specs) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      return Status::invalid("--profile: expected NAME=PROFILE (e.g. dgx-h100=hf-h100), got '" +
                             spec + "'");
    out[spec.substr(0, eq)] = spec.substr(eq + 1);
  }
  return out;
}

// The records --match and --group select, in file order; an error names the option and value.
Result<std::vector<planner::RunRecord>> select_records(
    const std::vector<planner::RunRecord>& records, const ValidateCliOptions& o) {
  const auto& groups = planner::record_groups();
  for (const auto& g : o.groups) {
    if (std::find(groups.begin(), groups.end(), g) == groups.end()) {
      std::string names;
      for (const auto& k : groups) names += (names.empty() ? "" : ", ") + k;
      return Status::invalid("--group: expected one of " + names + "; got '" + g + "'");
    }
  }
  std::optional<std::regex> re;
  if (!o.match.empty()) {
    try {
      re.emplace(o.match, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return Status::invalid("--match: '" + o.match + "' is not a valid regular expression (" +
                             e.what() + ")");
    }
  }
  if (!re && o.groups.empty()) return records;
  std::vector<planner::RunRecord> out;
  for (const auto& rec : records) {
    if (re && !std::regex_search(rec.id, *re)) continue;
    if (!o.groups.empty() &&
        std::find(o.groups.begin(), o.groups.end(), rec.group) == o.groups.end())
      continue;
    out.push_back(rec);
  }
  if (out.empty()) {
    std::string why = re ? " --match '" + o.match + "'" : "";
    for (const auto& g : o.groups) why += " --group " + g;
    return Status::invalid("no record of " + o.file + " matches" + why);
  }
  return out;
}

// `timed`: the errors are of times or speeds, so the speed ratio means something.
Json stats_json(const planner::ErrorStats& s, bool timed) {
  Json j = {{"records", s.n},
            {"median_abs_pct_error", s.median},
            {"p90_abs_pct_error", s.p90},
            {"max_abs_pct_error", s.worst},
            {"worst_id", s.worst_id}};
  if (timed) {
    j["median_speed_ratio"] = s.median_speed_ratio;
    j["predicted_faster"] = s.predicted_faster;
  }
  return j;
}

std::string metric_name(const planner::RecordPrediction& r) {
  return r.metric ? std::string(planner::to_string(*r.metric)) : std::string();
}

Status run(const ValidateCliOptions& o) {
  SP_ASSIGN_OR_RETURN(Json file, read_json_file(o.file));
  SP_ASSIGN_OR_RETURN(const std::vector<planner::RunRecord> all_records,
                      planner::parse_run_records(file, o.file));
  SP_ASSIGN_OR_RETURN(const std::vector<planner::RunRecord> records,
                      select_records(all_records, o));
  planner::PredictOptions po;
  po.how_sure = o.how_sure;
  if (!o.framework.empty()) {
    auto f = sim::parse_framework_value(o.framework);
    if (!f) return Status::invalid("--framework: " + f.status().message());
    po.framework = *f;
  }
  SP_ASSIGN_OR_RETURN(const auto substitutions, profile_substitutions(o.profiles));
  SP_ASSIGN_OR_RETURN(po.host_launch, api::parse_host_launch(o.host_launch));
  if (o.threads < 0 || o.threads > planner::kMaxThreads)
    return Status::invalid("--threads: " + std::to_string(o.threads) +
                           " is not between 0 (all cores) and " +
                           std::to_string(planner::kMaxThreads));
  planner::ClusterSet clusters;
  for (const auto& [name, profile] : substitutions) {
    // A substitute that does not load is the user's error, not a skipped record.
    SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(profile));
    clusters.emplace(name, std::move(c));
  }
  for (const auto& rec : records) {
    if (clusters.count(rec.cluster)) continue;
    Result<hw::Cluster> c = hw::load_cluster(rec.cluster);
    if (c) clusters.emplace(rec.cluster, *c);
  }
  // Progress on stderr once a second after the first second (the dev_runs.json sweep takes ~9 s
  // on two cores); nothing for a short run or with --quiet.
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  auto progress = [&](size_t done, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (o.quiet || now - last < std::chrono::seconds(1)) return;
    last = now;
    std::fprintf(stderr, "validate: %zu/%zu records simulated (%.0f s)\n", done, total,
                 std::chrono::duration<double>(now - start).count());
  };
  SP_ASSIGN_OR_RETURN(const std::vector<planner::RecordPrediction> rows,
                      planner::predict_records(records, clusters, po, o.threads, progress));
  const planner::ValidationSummary sum = planner::summarize(rows);
  const std::optional<Duration>& host_launch = po.host_launch;
  if (o.json) {
    Json out_rows = Json::array();
    for (const auto& r : rows) {
      const planner::RunRecord& rec = *r.record;
      Json j = {
          {"id", rec.id}, {"group", rec.group}, {"status", rec.status}, {"layout", rec.layout}};
      if (!r.skip.empty()) {
        j["skipped"] = r.skip;
      } else {
        j["framework"] = r.framework;
        if (!r.attention.empty()) j["attention"] = r.attention;
        j["recipe"] = {{"tp_comm_overlap", r.recipe.tp_comm_overlap},
                       {"fp8_param_gather", r.recipe.fp8_param_gather},
                       {"grad_reduce_in_fp32", r.recipe.grad_reduce_in_fp32
                                                   ? Json(*r.recipe.grad_reduce_in_fp32)
                                                   : Json("framework default")}};
        j["metric"] = metric_name(r);
        j["predicted"] = r.predicted ? Json(*r.predicted) : Json();
        j["measured"] = r.measured ? Json(*r.measured) : Json();
        const bool timed = r.timed();
        j["abs_pct_error"] =
            timed ? Json(planner::abs_pct_error(*r.predicted, *r.measured)) : Json();
        j["speed_ratio"] =
            timed ? Json(planner::speed_ratio(*r.metric, *r.predicted, *r.measured)) : Json();
        j["predicted_memory_gib"] = r.mem_predicted_gib ? Json(*r.mem_predicted_gib) : Json();
        j["measured_memory_gib"] = r.mem_measured_gib ? Json(*r.mem_measured_gib) : Json();
        j["predicted_fits"] = r.predicted_fits;
        j["predicted_mfu"] = r.mfu;
        if (r.how_sure_min) {
          j["how_sure_min"] = *r.how_sure_min;
          j["how_sure_max"] = *r.how_sure_max;
          j["within_how_sure"] = r.within_how_sure();
        }
        Json breakdown = Json::array();
        for (const auto& st : r.stages) breakdown.push_back(api::stage_breakdown_json(st));
        j["breakdown"] = breakdown;
      }
      out_rows.push_back(j);
    }
    Json groups = Json::object();
    for (const auto& [g, e] : sum.time_by_group) groups[g] = stats_json(e, true);
    Json used = Json::object();
    for (const auto& [name, profile] : substitutions) used[name] = profile;
    Json filter = Json::object();
    if (!o.match.empty()) filter["match"] = o.match;
    if (host_launch) filter["host_launch_s"] = host_launch->to_seconds();
    if (!o.groups.empty()) filter["groups"] = o.groups;
    Json out = {{"file", o.file},
                {"profiles", used},
                {"filter", filter},
                {"file_records", static_cast<int64_t>(all_records.size())},
                {"records", static_cast<int64_t>(rows.size())},
                {"simulated", sum.simulated},
                {"skipped", sum.skipped},
                {"skip_reasons", sum.skip_reasons},
                {"timed_records", sum.time.n},
                {"median_abs_pct_error", sum.time.median},
                {"p90_abs_pct_error", sum.time.p90},
                {"max_abs_pct_error", sum.time.worst},
                {"median_speed_ratio", sum.time.median_speed_ratio},
                {"predicted_faster", sum.time.predicted_faster},
                {"by_group", groups},
                {"memory", stats_json(sum.memory, false)},
                {"oom_rows", sum.oom_rows},
                {"oom_called_right", sum.oom_called_right},
                {"ok_rows", sum.ok_rows},
                {"ok_called_fits", sum.ok_called_fits},
                {"rows", out_rows}};
    if (o.how_sure) {
      Json by = Json::object();
      int in = 0, n = 0;
      for (const auto& [g, w] : sum.within_how_sure) {
        by[g] = {{"within", w.first}, {"timed_records", w.second}};
        in += w.first;
        n += w.second;
      }
      out["how_sure"] = {{"within", in}, {"timed_records", n}, {"by_group", by}};
    }
    print_json(out);
    return Status::ok();
  }
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
        r.metric ? metric_name(r) : (rec.status == "oom" ? "oom" : "-"),
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
  if (records.size() != all_records.size())
    fmt::print("  selected {} of the file's {} records\n", records.size(), all_records.size());
  for (const auto& [name, profile] : substitutions)
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
      auto o = std::make_shared<ValidateCliOptions>();
      sub.add_option("file", o->file, "validation records (JSON array)")->required();
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
      sub.add_flag("--json", o->json, "machine-readable output");
      sub.add_flag("--quiet,-q", o->quiet, "no progress on stderr");
      return [o] { return run(*o); };
    },
    80);

}  // namespace
}  // namespace scaleplan::cli
