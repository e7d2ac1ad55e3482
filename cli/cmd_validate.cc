// `scaleplan validate FILE`: re-simulates every record of a validation file (schema in
// shared/validation/README.md) and compares predicted with measured step time, throughput or MFU
// (the first of them the record publishes), peak memory, and out-of-memory verdicts. Records run in
// parallel; the output is in file order and does not depend on the thread count.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sim_json.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "hw_profiles/cluster.h"
#include "models/memory_validation.h"
#include "models/model_spec.h"
#include "planner/planner.h"
#include "planner/robustness.h"
#include "sim/simulate.h"

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
  // Simulate every record with these framework conventions (sim::framework_timing) instead of
  // the ones record_framework() picks; empty: per record.
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

struct Row {
  std::string id, group, status, layout, skip;  // skip: why it was not simulated
  std::string framework;                        // the conventions simulated (--framework)
  std::string attention;                        // the attention core simulated
  std::string metric;                         // "step_time", "throughput", "mfu", "tflops" or "hfu"
  std::optional<double> predicted, measured;  // seconds, tokens/s/GPU, MFU, TFLOP/s or HFU
  std::optional<double> mem_predicted, mem_measured;  // GiB
  std::optional<double> how_sure_min, how_sure_max;   // --how-sure: the metric's range
  bool predicted_fits = false;
  Json recipe = Json::object();  // the recipe options set for it (recipe_options)
  double mfu = 0;
  Json breakdown = Json::array();  // per simulated stage, as `simulate --json` prints it
};

// Which published set a record belongs to, for the per-set summary (the sets docs/validation.md
// reports, issue 30): "korthikanti" (Korthikanti et al. 2022), "megatron-2021" (Narayanan et al.
// 2021, its DeepSpeed ZeRO-3 rows included), "nanotron" (the Ultra-Scale Playbook sweep), "dgxc"
// (NVIDIA's dgxc-benchmarking recipes, Grok-1 included), the Megatron-Bridge performance summary
// split into "mbridge-moe" (models with routed experts, any GPU), "mbridge-blackwell" (dense, on
// B200/B300/GB200/GB300) and "mbridge-h100" (dense, on H100), and "other".
std::string group_of(const Json& rec) {
  const std::string id = rec.value("id", "");
  const RunFramework fw = classify_run_framework(rec.value("framework", ""));
  std::string cluster = rec.value("cluster", "");
  std::transform(cluster.begin(), cluster.end(), cluster.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (id.rfind("korthikanti", 0) == 0) return "korthikanti";
  if (id.rfind("megatron2021", 0) == 0 || fw.year_2021) return "megatron-2021";
  if (fw.family == FrameworkFamily::kNanotron) return "nanotron";
  if (id.rfind("dgxc", 0) == 0 || fw.dgxc) return "dgxc";
  if (fw.megatron_bridge_first) {
    bool moe = false;
    if (rec.contains("model") && rec["model"].is_object()) {
      for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"}) {
        const Json& m = rec["model"];
        moe = moe || (m.contains(k) && m[k].is_number() && m[k].get<double>() > 1);
      }
    }
    if (moe) return "mbridge-moe";
    if (cluster.find("b200") != std::string::npos || cluster.find("b300") != std::string::npos)
      return "mbridge-blackwell";
    if (cluster.find("h100") != std::string::npos) return "mbridge-h100";
  }
  return "other";
}

constexpr const char* kGroups[] = {"korthikanti",  "megatron-2021",     "nanotron",    "dgxc",
                                   "mbridge-h100", "mbridge-blackwell", "mbridge-moe", "other"};

// When a record's run was published, as year·12 + month − 1 (month 0 when only the year is
// known): from an arXiv identifier in its source (arXiv:YYMM.NNNNN, the month of first
// submission), else from a year 2017-2035 standing alone in its framework ("Megatron-LM (2021)"),
// its source or its id ("korthikanti2022_..."), in that order. nullopt: undated.
//
// Scanned by hand, not with std::regex: libstdc++'s regex recurses once per character and
// overflows the stack on a source of ~50,000 characters.
std::optional<int> arxiv_month(std::string_view s) {
  auto digits = [&](size_t at, size_t n) {
    if (at + n > s.size()) return false;
    for (size_t k = at; k < at + n; ++k)
      if (!std::isdigit(static_cast<unsigned char>(s[k]))) return false;
    return true;
  };
  auto two = [&](size_t at) { return (s[at] - '0') * 10 + (s[at + 1] - '0'); };
  for (size_t p = 0; p + 5 < s.size(); ++p) {
    // "arxiv" (any case), one of ':', '/', ' ', optional spaces, then YYMM.NNNN[N].
    bool word = true;
    for (size_t k = 0; k < 5; ++k)
      word = word && std::tolower(static_cast<unsigned char>(s[p + k])) == "arxiv"[k];
    if (!word || (s[p + 5] != ':' && s[p + 5] != '/' && s[p + 5] != ' ')) continue;
    size_t q = p + 6;
    while (q < s.size() && std::isspace(static_cast<unsigned char>(s[q]))) ++q;
    if (!digits(q, 4) || q + 4 >= s.size() || s[q + 4] != '.' || !digits(q + 5, 4)) continue;
    const int month = two(q + 2);
    if (month >= 1 && month <= 12) return (2000 + two(q)) * 12 + month - 1;
    return std::nullopt;  // the first arXiv identifier decides, as the search did
  }
  return std::nullopt;
}

// A year 2017-2035 standing alone: a run of exactly four digits.
std::optional<int> standalone_year(std::string_view s) {
  for (size_t p = 0; p < s.size();) {
    if (!std::isdigit(static_cast<unsigned char>(s[p]))) {
      ++p;
      continue;
    }
    size_t e = p;
    while (e < s.size() && std::isdigit(static_cast<unsigned char>(s[e]))) ++e;
    if (e - p == 4) {
      const int y = std::stoi(std::string(s.substr(p, 4)));
      if (y >= 2017 && y <= 2035) return y;
    }
    p = e;
  }
  return std::nullopt;
}

std::optional<int> record_month(const Json& rec) {
  const std::string source = rec.value("source", ""), fw = rec.value("framework", "");
  const std::string id = rec.value("id", "");
  if (auto m = arxiv_month(source)) return m;
  for (const std::string* text : {&fw, &source, &id}) {
    if (auto y = standalone_year(*text)) return *y * 12;
  }
  return std::nullopt;
}

// The framework conventions a record ran under: its framework's, as they were when the run was
// published (core/framework.h resolve_run_framework).
sim::Framework record_framework(const Json& rec) {
  return sim::run_framework(
      resolve_run_framework(classify_run_framework(rec.value("framework", "")), record_month(rec)));
}

// The Megatron-core options a record's recipe set beyond its layout (sim::RecipeOptions):
//  - tp_comm_overlap, Transformer Engine's userbuffers overlap (needs TP > 1 with SP). NeMo's and
//    Megatron-Bridge's performance recipes turn it on: dgxc-benchmarking v25.04.01
//    llama3.1/pretrain_llama31.py (70B, 405B: tp_comm_overlap_cfg userbuffers_{bf16,fp8}_h100_*),
//    nemotron/gsw_nemo.patch (pretrain_nemotron4_15b/340b.py set tp_comm_overlap_cfg),
//    nemo_megatron/cfg/gpt3_175b_hydra.yaml (ub_tp_comm_overlap: true); Megatron-Bridge v0.3.0
//    scripts/performance/configs: llama3 and llama31 CommOverlapConfig(tp_comm_overlap=tp > 1)
//    but off for NVFP4, qwen3 CommOverlapConfig(tp_comm_overlap=True). dgxc's one MoE recipe,
//    grok1/cfg/grok1_314b.yaml, sets ub_tp_comm_overlap: false.
//  - grad_reduce_in_fp32 = false (bf16 main gradients): every Megatron-Bridge v0.3.0 performance
//    config (cfg.ddp.grad_reduce_in_fp32 = False), and NeMo 2's performance scripts for fp8
//    (pretrain_llama31.py: plugins.grad_reduce_in_fp32 = False after bf16_with_fp8_mixed()).
//  - fp8_param_gather under dtype=fp8: NeMo 2's bf16_with_fp8_mixed (fp8_param_gather = True),
//    the NeMo launcher's fp8 configs (gpt3_175b_hydra.yaml fp8_params: true; grok1's fp8_params:
//    false), Megatron-Bridge's current-scaling and MXFP8 recipes (training/mixed_precision.py
//    fp8_param_gather = True; NVFP4 False).
sim::RecipeOptions recipe_options(const Json& rec, const Layout& layout) {
  const RunRecipes recipes = classify_run_framework(rec.value("framework", "")).recipes;
  std::string precision = rec.value("precision", "");
  std::transform(precision.begin(), precision.end(), precision.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  const bool bridge = recipes == RunRecipes::kMegatronBridge;
  const bool nemo = recipes == RunRecipes::kNemo || recipes == RunRecipes::kNemo2;
  const bool nemo2 = recipes == RunRecipes::kNemo2;
  const bool fp8 = layout.dtype == DType::kFp8;
  bool moe = false;
  const Json& m = rec.contains("model") ? rec["model"] : Json::object();
  for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    moe = moe || (m.is_object() && m.contains(k) && m[k].is_number() && m[k].get<double>() > 1);
  }
  const bool sp = layout.tp > 1 && layout.sequence_parallel();
  sim::RecipeOptions r;
  if (bridge) {
    r.tp_comm_overlap = sp && precision != "nvfp4";
    r.grad_reduce_in_fp32 = false;
    r.fp8_param_gather = fp8 && precision != "nvfp4";
  } else if (nemo) {
    r.tp_comm_overlap = sp && !moe;
    if (nemo2 && fp8) r.grad_reduce_in_fp32 = false;
    r.fp8_param_gather = fp8 && !moe;
  }
  return r;
}

// Megatron-core accepts an interleaved or plain pipeline whose decoder layers do not divide into
// its pp·vpp chunks only with first/last-stage counts, a layout string, or with the embedding and
// the loss counted as pipeline layers (TransformerConfig.__post_init__, Megatron-LM d98e8a6:
// "num_layers ... after enable account_for_embedding_in_pipeline_split or
// account_for_loss_in_pipeline_split must be divisible"). Where the layers plus those two divide
// and the layers alone do not, the record ran with both (Megatron-Bridge v0.3.0
// llama31_405b_pretrain_config sets both for Llama 3.1 405B); the layout string has no such key,
// so it is set here.
void infer_pipeline_accounting(Layout& layout, int64_t layers, FrameworkId framework) {
  if (framework != FrameworkId::kMegatron || layout.pp <= 1 || layout.pp_embedding ||
      layout.pp_loss)
    return;
  const int64_t chunks = static_cast<int64_t>(layout.pp) * layout.vpp_degree();
  if (layers % chunks != 0 && (layers + 2) % chunks == 0) {
    layout.pp_embedding = true;
    layout.pp_loss = true;
  }
}

// The records --match and --group select, in file order; an error names the option and value.
Result<Json> select_records(const Json& records, const ValidateCliOptions& o) {
  for (const auto& g : o.groups) {
    if (std::find(std::begin(kGroups), std::end(kGroups), g) == std::end(kGroups)) {
      std::string names;
      for (const char* k : kGroups) names += std::string(names.empty() ? "" : ", ") + k;
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
  Json out = Json::array();
  for (const auto& rec : records) {
    if (re && !std::regex_search(rec.value("id", ""), *re)) continue;
    if (!o.groups.empty() &&
        std::find(o.groups.begin(), o.groups.end(), group_of(rec)) == o.groups.end())
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

std::optional<double> number(const Json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}

// The simulated value of a record's metric (Row::metric).
double metric_value(const std::string& metric, const sim::SimulationResult& r,
                    const hw::GpuSpec& gpu) {
  if (metric == "step_time") return r.iteration.to_seconds();
  if (metric == "throughput") return r.tokens_per_s_per_gpu;
  if (metric == "mfu") return r.mfu;
  if (metric == "tflops") return r.mfu * gpu.bf16_dense.value() / 1e12;
  return r.hfu;  // "hfu"
}

Row evaluate(const Json& rec, const std::map<std::string, hw::Cluster>& clusters,
             const std::optional<sim::Framework>& framework, bool how_sure,
             std::optional<Duration> host_launch) {
  Row row;
  row.id = rec.value("id", "?");
  row.group = group_of(rec);
  row.layout = rec.value("layout", "");
  const Json& measured = rec.contains("measured") ? rec["measured"] : Json::object();
  row.status = measured.value("status", "ok");
  if (rec.value("incomplete", false)) {
    row.skip = "incomplete layout";
    return row;
  }
  if (row.status == "failed") {
    row.skip = "failed run";
    return row;
  }
  auto model = models::model_from_config(rec["model"], row.id, row.id + ": model");
  if (!model) {
    row.skip = model.status().message();
    return row;
  }
  auto cl = clusters.find(rec.value("cluster", ""));
  if (cl == clusters.end()) {
    row.skip = "unknown cluster";
    return row;
  }
  auto layout = parse_layout(row.layout);
  if (!layout) {
    row.skip = layout.status().message();
    return row;
  }
  sim::SimulateOptions so;
  so.gpus = rec.value("gpus", int64_t{0});
  // The conventions of the framework the record ran, as it was when the run was published
  // (record_framework), unless --framework says otherwise.
  so.framework = framework ? *framework : record_framework(rec);
  infer_pipeline_accounting(*layout, model->num_layers, so.framework.id);
  // A record of the fp16 era that names dtype=bf16 trained in bf16 (the records leave dtype out
  // for fp16, which the layout grammar has no name for).
  if (layout_gives(row.layout, "dtype") && layout->dtype == DType::kBf16)
    so.framework = sim::with_bf16_named(so.framework);
  row.framework = std::string(so.framework.name());
  if (host_launch) so.host = sim::framework_host_issue(so.framework, *host_launch);
  const sim::RecipeOptions recipe = recipe_options(rec, *layout);
  so.framework = sim::with_recipe(so.framework, recipe);
  row.recipe = {
      {"tp_comm_overlap", recipe.tp_comm_overlap},
      {"fp8_param_gather", recipe.fp8_param_gather},
      {"grad_reduce_in_fp32",
       recipe.grad_reduce_in_fp32 ? Json(*recipe.grad_reduce_in_fp32) : Json("framework default")}};
  // nanotron places pipeline blocks by cumulative compute cost, not evenly (memory_validation.h).
  if (row.group == "nanotron" && layout->pp > 1 && layout->vpp_degree() == 1)
    so.chunk_layers = models::nanotron_chunk_layers(*model, layout->pp);
  auto r = sim::simulate(*model, cl->second, rec.value("seq_len", int64_t{0}), *layout, so);
  if (!r) {
    row.skip = r.status().message();
    return row;
  }
  row.attention = std::string(to_string(r->attention));
  row.predicted_fits = r->fits;
  row.mfu = r->mfu;
  for (const auto& st : r->stages) row.breakdown.push_back(stage_breakdown_json(st));
  // What the record measured: nanotron logs torch.cuda.max_memory_allocated() of global rank 0
  // after a reset that leaves only the gradient sync + optimizer step in the window (see
  // docs/validation.md "Memory model"): the first stage's optimizer-phase peak. Others: the
  // allocated peak.
  row.mem_predicted =
      to_gib(row.group == "nanotron" && !r->stages.empty() ? r->stages.front().step_peak_memory
                                                           : r->peak_memory);
  row.mem_measured = number(measured, "peak_memory_gib");
  if (row.status != "ok" || measured.value("timing_valid", true) == false) return row;
  if (auto s = number(measured, "sec_per_iter")) {
    row.metric = "step_time";
    row.measured = *s;
  } else if (auto t = number(measured, "tokens_per_s_per_gpu")) {
    row.metric = "throughput";
    row.measured = *t;
  } else if (auto u = number(measured, "mfu"); u && *u > 0) {
    // Only the MFU published (model FLOPs per second over the dense 16-bit peak, the schema's
    // definition and the simulator's): at equal FLOP counts its error is the throughput error.
    // Sources count attention and the LM head their own way; on records that publish both, the
    // two MFUs at equal speed differ by ~1% (Korthikanti) and ~11% (nanotron's formula).
    row.metric = "mfu";
    row.measured = *u;
  } else if (auto f = number(measured, "tflops_per_gpu"); f && *f > 0) {
    // Only the model TFLOP/s per GPU published: the simulated model FLOPs per second per GPU,
    // the MFU times the dense 16-bit peak (the same caveat on each source's FLOP count).
    row.metric = "tflops";
    row.measured = *f;
  } else if (auto hf = number(measured, "hfu"); hf && *hf > 0) {
    // Only the hardware FLOPs utilization published (recomputation counted).
    row.metric = "hfu";
    row.measured = *hf;
  }
  if (row.metric.empty()) return row;
  const hw::GpuSpec& gpu = cl->second.gpu;
  row.predicted = metric_value(row.metric, *r, gpu);
  if (!how_sure) return row;
  // The same record on each perturbed profile (planner/robustness.h); a perturbation that fails
  // to simulate leaves the range to the others.
  auto perturbations = planner::perturbations_for(cl->second);
  if (!perturbations) return row;  // the nominal simulation already read the same calibration
  row.how_sure_min = row.how_sure_max = row.predicted;
  for (const auto& p : *perturbations) {
    auto rp = planner::simulate_perturbed(*model, cl->second, rec.value("seq_len", int64_t{0}),
                                          *layout, so, p);
    if (!rp) continue;
    const double v = metric_value(row.metric, *rp, gpu);
    row.how_sure_min = std::min(*row.how_sure_min, v);
    row.how_sure_max = std::max(*row.how_sure_max, v);
  }
  return row;
}

struct Stats {
  int n = 0;
  double median = 0, p90 = 0, worst = 0;
  std::string worst_id;
  // Predicted speed over measured speed (speed_ratio): the median, and how many records the
  // simulation makes faster than measured. The |error| says how far; this says which way.
  double median_speed_ratio = 0;
  int predicted_faster = 0;
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// One timed record: its |error| in percent, its speed ratio and its id.
struct Timed {
  double abs_pct_error;
  double speed_ratio;
  std::string id;
};

Stats stats(const std::vector<Timed>& errors) {
  Stats s;
  std::vector<double> v, ratios;
  for (const auto& [e, ratio, id] : errors) {
    v.push_back(e);
    ratios.push_back(ratio);
    s.predicted_faster += ratio > 1;
    if (e > s.worst) {
      s.worst = e;
      s.worst_id = id;
    }
  }
  s.n = static_cast<int>(v.size());
  s.median = percentile(v, 0.5);
  s.p90 = percentile(v, 0.9);
  s.median_speed_ratio = percentile(ratios, 0.5);
  return s;
}

// `timed`: the errors are of times or speeds, so the speed ratio means something.
Json stats_json(const Stats& s, bool timed) {
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

double abs_pct(double predicted, double measured) {
  return 100.0 * std::abs(predicted - measured) / measured;
}

// Predicted speed over measured speed: above 1 the simulation is faster than the run. A step time
// is the inverse of a speed; throughput, MFU, TFLOP/s and HFU are speeds.
double speed_ratio(const std::string& metric, double predicted, double measured) {
  return metric == "step_time" ? measured / predicted : predicted / measured;
}

Status run(const ValidateCliOptions& o) {
  SP_ASSIGN_OR_RETURN(Json all_records, read_json_file(o.file));
  // Every field of every record checked up front: what follows reads them without checks.
  SP_RETURN_IF_ERROR(models::check_records(all_records, o.file));
  SP_ASSIGN_OR_RETURN(const Json records, select_records(all_records, o));
  std::optional<sim::Framework> framework;
  if (!o.framework.empty()) {
    auto f = sim::parse_framework_value(o.framework);
    if (!f) return Status::invalid("--framework: " + f.status().message());
    framework = *f;
  }
  SP_ASSIGN_OR_RETURN(const auto substitutions, profile_substitutions(o.profiles));
  SP_ASSIGN_OR_RETURN(const std::optional<Duration> host_launch, parse_host_launch(o.host_launch));
  std::map<std::string, hw::Cluster> clusters;
  for (const auto& [name, profile] : substitutions) {
    // A substitute that does not load is the user's error, not a skipped record.
    SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(profile));
    clusters.emplace(name, std::move(c));
  }
  for (const auto& rec : records) {
    const std::string name = rec.value("cluster", "");
    if (clusters.count(name)) continue;
    Result<hw::Cluster> c = hw::load_cluster(name);
    if (c) clusters.emplace(name, *c);
  }
  std::vector<Row> rows(records.size());
  if (o.threads < 0 || o.threads > planner::kMaxThreads)
    return Status::invalid("--threads: " + std::to_string(o.threads) +
                           " is not between 0 (all cores) and " +
                           std::to_string(planner::kMaxThreads));
  const int threads = o.threads > 0 ? o.threads : std::max(1u, std::thread::hardware_concurrency());
  std::atomic<size_t> next{0}, done{0};
  // An exception in a worker (a bug, std::bad_alloc) must not escape the thread, which would
  // abort the process: the first one is kept and reported as an internal failure.
  std::mutex error_mu;
  std::string error;
  std::vector<std::thread> pool;
  auto worker = [&] {
    for (size_t i = next++; i < rows.size(); i = next++) {
      try {
        rows[i] = evaluate(records[i], clusters, framework, o.how_sure, host_launch);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (error.empty()) error = "record " + std::to_string(i) + ": " + e.what();
      }
      ++done;
    }
  };
  for (int t = 0; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {
      if (pool.empty()) return Status::internal(std::string("cannot start a thread: ") + e.what());
      break;  // the threads started share the records
    }
  }
  // Progress on stderr once a second after the first second (the dev_runs.json sweep takes ~9 s
  // on two cores); nothing for a short run or with --quiet.
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  while (done < rows.size()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = std::chrono::steady_clock::now();
    if (o.quiet || now - last < std::chrono::seconds(1)) continue;
    last = now;
    std::fprintf(stderr, "validate: %zu/%zu records simulated (%.0f s)\n", done.load(), rows.size(),
                 std::chrono::duration<double>(now - start).count());
  }
  for (auto& t : pool) t.join();
  if (!error.empty()) return Status::internal("validate: " + error);

  std::map<std::string, std::vector<Timed>> time_errors;  // per group
  std::vector<Timed> all_time, mem;                       // mem: speed_ratio unused
  int oom_rows = 0, oom_right = 0, ok_rows = 0, ok_right = 0, simulated = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  // --how-sure: per group, timed records and those whose measurement lies within the range.
  std::map<std::string, std::pair<int, int>> within;  // group -> (within, timed)
  auto is_within = [](const Row& r) {
    return r.how_sure_min && r.measured && *r.measured >= *r.how_sure_min &&
           *r.measured <= *r.how_sure_max;
  };
  for (const Row& r : rows) {
    if (!r.skip.empty()) {
      ++skipped;
      ++skip_reasons[r.skip];  // whole: a byte cut could split a UTF-8 character ("·")
      continue;
    }
    ++simulated;
    if (r.status == "oom") {
      ++oom_rows;
      oom_right += !r.predicted_fits;
    } else if (r.status == "ok") {
      ++ok_rows;
      ok_right += r.predicted_fits;
    }
    if (r.predicted && r.measured && *r.measured > 0) {
      const double e = abs_pct(*r.predicted, *r.measured);
      const Timed t{e, speed_ratio(r.metric, *r.predicted, *r.measured), r.id};
      time_errors[r.group].push_back(t);
      all_time.push_back(t);
      if (r.how_sure_min) {
        within[r.group].second += 1;
        within[r.group].first += is_within(r);
      }
    }
    if (r.status == "ok" && r.mem_predicted && r.mem_measured && *r.mem_measured > 0) {
      mem.push_back({abs_pct(*r.mem_predicted, *r.mem_measured), 0, r.id});
    }
  }
  const Stats overall = stats(all_time), memory = stats(mem);
  if (o.json) {
    Json out_rows = Json::array();
    for (const Row& r : rows) {
      Json j = {{"id", r.id}, {"group", r.group}, {"status", r.status}, {"layout", r.layout}};
      if (!r.skip.empty()) {
        j["skipped"] = r.skip;
      } else {
        j["framework"] = r.framework;
        if (!r.attention.empty()) j["attention"] = r.attention;
        j["recipe"] = r.recipe;
        j["metric"] = r.metric;
        j["predicted"] = r.predicted ? Json(*r.predicted) : Json();
        j["measured"] = r.measured ? Json(*r.measured) : Json();
        const bool timed = r.predicted && r.measured && *r.measured > 0;
        j["abs_pct_error"] = timed ? Json(abs_pct(*r.predicted, *r.measured)) : Json();
        j["speed_ratio"] = timed ? Json(speed_ratio(r.metric, *r.predicted, *r.measured)) : Json();
        j["predicted_memory_gib"] = r.mem_predicted ? Json(*r.mem_predicted) : Json();
        j["measured_memory_gib"] = r.mem_measured ? Json(*r.mem_measured) : Json();
        j["predicted_fits"] = r.predicted_fits;
        j["predicted_mfu"] = r.mfu;
        if (r.how_sure_min) {
          j["how_sure_min"] = *r.how_sure_min;
          j["how_sure_max"] = *r.how_sure_max;
          j["within_how_sure"] = is_within(r);
        }
        j["breakdown"] = r.breakdown;
      }
      out_rows.push_back(j);
    }
    Json groups = Json::object();
    for (const auto& [g, e] : time_errors) groups[g] = stats_json(stats(e), true);
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
                {"simulated", simulated},
                {"skipped", skipped},
                {"skip_reasons", skip_reasons},
                {"timed_records", overall.n},
                {"median_abs_pct_error", overall.median},
                {"p90_abs_pct_error", overall.p90},
                {"max_abs_pct_error", overall.worst},
                {"median_speed_ratio", overall.median_speed_ratio},
                {"predicted_faster", overall.predicted_faster},
                {"by_group", groups},
                {"memory", stats_json(memory, false)},
                {"oom_rows", oom_rows},
                {"oom_called_right", oom_right},
                {"ok_rows", ok_rows},
                {"ok_called_fits", ok_right},
                {"rows", out_rows}};
    if (o.how_sure) {
      Json by = Json::object();
      int in = 0, n = 0;
      for (const auto& [g, w] : within) {
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
  for (const Row& r : rows) {
    if (!r.skip.empty()) continue;
    const bool timed = r.predicted && r.measured && *r.measured > 0;
    fmt::print(
        "{:<44} {:<10} {:>12} {:>12} {:>8} {:>7} {:>9} {:>9}\n", r.id.substr(0, 44),
        r.metric.empty() ? (r.status == "oom" ? "oom" : "-") : r.metric,
        cell(timed ? r.predicted : std::nullopt, "{:.4g}"), cell(r.measured, "{:.4g}"),
        cell(timed ? std::optional(abs_pct(*r.predicted, *r.measured)) : std::nullopt, "{:.1f}"),
        cell(timed ? std::optional(speed_ratio(r.metric, *r.predicted, *r.measured)) : std::nullopt,
             "{:.3f}"),
        cell(r.mem_predicted, "{:.2f}"), cell(r.mem_measured, "{:.2f}"));
  }
  fmt::print(
      "(speed: predicted over measured speed, the inverse for a step time; above 1 the "
      "simulation is faster than the run)\n");
  fmt::print("\n{} records: {} simulated, {} skipped\n", rows.size(), simulated, skipped);
  if (records.size() != all_records.size())
    fmt::print("  selected {} of the file's {} records\n", records.size(), all_records.size());
  for (const auto& [name, profile] : substitutions)
    fmt::print("  records of cluster {} simulated on {}\n", name, profile);
  if (host_launch)
    fmt::print("  host issue at {} per kernel or collective (--host-launch)\n",
               format_duration(*host_launch));
  for (const auto& [reason, n] : skip_reasons) fmt::print("  skipped {:>4}: {}\n", n, reason);
  if (overall.n == 0) {
    fmt::print("time/throughput/MFU |error|: no simulated record publishes a time or a speed\n");
  } else {
    fmt::print(
        "time/throughput/MFU |error|: median {:.1f}%  p90 {:.1f}%  max {:.1f}% ({}) over {} "
        "records; predicted faster than measured on {}, median speed ratio {:.3f}\n",
        overall.median, overall.p90, overall.worst, overall.worst_id, overall.n,
        overall.predicted_faster, overall.median_speed_ratio);
  }
  for (const auto& [g, e] : time_errors) {
    const Stats s = stats(e);
    fmt::print(
        "  {:<12} median {:.1f}%  p90 {:.1f}%  max {:.1f}% ({}) over {}; faster on {}, speed "
        "ratio {:.3f}\n",
        g, s.median, s.p90, s.worst, s.worst_id, s.n, s.predicted_faster, s.median_speed_ratio);
  }
  if (memory.n == 0) {
    fmt::print("peak memory |error|: no simulated record publishes a peak\n");
  } else {
    fmt::print("peak memory |error|: median {:.1f}%  p90 {:.1f}%  max {:.1f}% over {} records\n",
               memory.median, memory.p90, memory.worst, memory.n);
  }
  fmt::print("out of memory called right: {}/{}; runs that fit called fitting: {}/{}\n", oom_right,
             oom_rows, ok_right, ok_rows);
  if (o.how_sure) {
    int in = 0, n = 0;
    std::string groups;
    for (const auto& [g, w] : within) {
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
