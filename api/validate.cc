// `validate` as a library call; contract in validate.h.
#include "api/validate.h"

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <utility>

#include "api/options.h"
#include "api/sim_json.h"
#include "hw_profiles/cluster.h"
#include "planner/planner.h"
#include "sim/framework.h"

namespace scaleplan::api {
namespace {

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
    const std::vector<planner::RunRecord>& records, const ValidateRequest& o) {
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

}  // namespace

std::string metric_name(const planner::RecordPrediction& r) {
  return r.metric ? std::string(planner::to_string(*r.metric)) : std::string();
}

Result<ValidateOutcome> validate(const ValidateRequest& o,
                                 const Callbacks<ValidateProgress>& callbacks) {
  ValidateOutcome out;
  out.request = o;
  // A records file, or a bundled set by name (validation/ of the data directory).
  SP_ASSIGN_OR_RETURN(const std::string path, planner::validation_file(o.file));
  SP_ASSIGN_OR_RETURN(Json file, read_json_file(path));
  SP_ASSIGN_OR_RETURN(const std::vector<planner::RunRecord> all_records,
                      planner::parse_run_records(file, path));
  out.file_records = all_records.size();
  SP_ASSIGN_OR_RETURN(out.records, select_records(all_records, o));
  const std::vector<planner::RunRecord>& records = out.records;
  planner::PredictOptions po;
  po.how_sure = o.how_sure;
  if (!o.framework.empty()) {
    auto f = sim::parse_framework_value(o.framework);
    if (!f) return Status::invalid("--framework: " + f.status().message());
    po.framework = *f;
  }
  SP_ASSIGN_OR_RETURN(out.substitutions, profile_substitutions(o.profiles));
  const auto& substitutions = out.substitutions;
  SP_ASSIGN_OR_RETURN(po.host_launch, parse_host_launch(o.host_launch));
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
  std::function<void(size_t, size_t)> progress;
  if (callbacks.progress) {
    progress = [&callbacks](size_t done, size_t total) { callbacks.progress({done, total}); };
  }
  SP_ASSIGN_OR_RETURN(out.rows,
                      planner::predict_records(records, clusters, po, o.threads, progress));
  out.summary = planner::summarize(out.rows);
  out.host_launch = po.host_launch;
  return out;
}

Json ValidateOutcome::to_json() const {
  const ValidateRequest& o = request;
  const planner::ValidationSummary& sum = summary;
  Json out_rows = Json::array();
  for (const auto& r : rows) {
    const planner::RunRecord& rec = *r.record;
    Json j = {{"id", rec.id}, {"group", rec.group}, {"status", rec.status}, {"layout", rec.layout}};
    if (!r.skip.empty()) {
      j["skipped"] = r.skip;
    } else {
      j["framework"] = r.framework;
      if (!r.attention.empty()) j["attention"] = r.attention;
      j["recipe"] = {
          {"tp_comm_overlap", r.recipe.tp_comm_overlap},
          {"fp8_param_gather", r.recipe.fp8_param_gather},
          {"grad_reduce_in_fp32", r.recipe.grad_reduce_in_fp32 ? Json(*r.recipe.grad_reduce_in_fp32)
                                                               : Json("framework default")}};
      if (r.recipe.tp_comm_overlap)
        j["recipe"]["tp_comm_overlap_preset"] =
            std::string(r.recipe.tp_comm_overlap_preset ? r.recipe.tp_comm_overlap_preset->name
                                                        : models::te_default_ub_preset().name);
      if (r.recipe.fp8_recipe != models::Fp8Recipe::kDelayed)
        j["recipe"]["fp8_recipe"] = std::string(to_string(r.recipe.fp8_recipe));
      if (r.recipe.moe_router_fusion) j["recipe"]["moe_router_fusion"] = true;
      if (r.recipe.moe_router_force_load_balancing)
        j["recipe"]["moe_router_force_load_balancing"] = true;
      if (r.recipe.moe_sequential_experts) j["recipe"]["moe_sequential_experts"] = true;
      if (r.recipe.moe_core_r010) j["recipe"]["moe_core_r010"] = true;
      if (r.recipe.no_fused_attention) j["recipe"]["no_fused_attention"] = true;
      j["metric"] = metric_name(r);
      j["predicted"] = r.predicted ? Json(*r.predicted) : Json();
      j["measured"] = r.measured ? Json(*r.measured) : Json();
      const bool timed = r.timed();
      j["abs_pct_error"] = timed ? Json(planner::abs_pct_error(*r.predicted, *r.measured)) : Json();
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
      for (const auto& st : r.stages) breakdown.push_back(stage_breakdown_json(st));
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
              {"file_records", static_cast<int64_t>(file_records)},
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
  return out;
}

}  // namespace scaleplan::api
