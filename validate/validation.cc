// Validation against published runs; the rules are in validation.h.
#include "validate/validation.h"

#include "core/enum_names.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>

#include "core/data_dir.h"
#include "core/suggest.h"
#include "models/run_records.h"
#include "planner/parallel.h"
#include "planner/robustness.h"

namespace scaleplan::planner {
namespace {

// A field of a record object: `fallback` when absent or null, an error naming the record and the
// key when it has another type.
template <typename T>
Result<T> field(const Json& obj, const char* key, T fallback, const std::string& where) {
  if (!obj.is_object() || !obj.contains(key) || obj[key].is_null()) return fallback;
  const Json& v = obj[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (v.is_string()) return v.get<std::string>();
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.is_boolean()) return v.get<bool>();
  } else {
    if (v.is_number_integer()) return v.get<T>();
  }
  return Status::invalid(where + ": " + key + ": unexpected type " + v.type_name());
}

// A measured number; nullopt when absent, null or not a number (the schema's "the source does
// not say").
std::optional<double> number(const Json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return std::nullopt;
  return obj[key].get<double>();
}

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

std::optional<int> record_month(const RunRecord& r) {
  if (auto m = arxiv_month(r.source)) return m;
  for (const std::string* text : {&r.framework, &r.source, &r.id}) {
    if (auto y = standalone_year(*text)) return *y * 12;
  }
  return std::nullopt;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Whether a model config has routed experts.
bool has_routed_experts(const Json& m) {
  bool moe = false;
  for (const char* k : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    moe = moe || (m.is_object() && m.contains(k) && m[k].is_number() && m[k].get<double>() > 1);
  }
  return moe;
}

std::string group_of(const RunRecord& r, const RunFramework& fw) {
  const std::string cluster = lower(r.cluster);
  if (r.id.rfind("korthikanti", 0) == 0) return "korthikanti";
  if (r.id.rfind("megatron2021", 0) == 0 || fw.year_2021) return "megatron-2021";
  if (fw.family == FrameworkFamily::kNanotron) return "nanotron";
  if (r.id.rfind("dgxc", 0) == 0 || fw.dgxc) return "dgxc";
  if (fw.megatron_bridge_first) {
    if (has_routed_experts(*r.model)) return "mbridge-moe";
    if (cluster.find("b200") != std::string::npos || cluster.find("b300") != std::string::npos)
      return "mbridge-blackwell";
    if (cluster.find("h100") != std::string::npos) return "mbridge-h100";
  }
  return "other";
}

}  // namespace

const std::vector<std::string>& record_groups() {
  static const std::vector<std::string> groups = {
      "korthikanti",  "megatron-2021",     "nanotron",    "dgxc",
      "mbridge-h100", "mbridge-blackwell", "mbridge-moe", "other"};
  return groups;
}

std::vector<std::string> validation_set_names() {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(data_dir()) / "validation", ec)) {
    if (e.path().extension() != ".json") continue;
    // A run-record file is an array of records with measurements (README.md of the folder).
    auto j = read_json_file(e.path().string());
    if (j && j->is_array() && !j->empty() && j->front().is_object() &&
        j->front().contains("measured"))
      names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::string> validation_file(const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec) || name_or_path.find('/') != std::string::npos ||
      fs::path(name_or_path).extension() == ".json")
    return name_or_path;  // a path: reading it reports a missing file
  const std::vector<std::string> names = validation_set_names();
  if (std::find(names.begin(), names.end(), name_or_path) != names.end())
    return (fs::path(data_dir()) / "validation" / (name_or_path + ".json")).string();
  if (names.empty()) {
    if (Status st = check_data_dir(); !st.is_ok())
      return st.with_context("'" + text_brief(name_or_path) + "'");
  }
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
  return Status::invalid("'" + text_brief(name_or_path) +
                         "' is neither a file nor a bundled validation set" +
                         did_you_mean(name_or_path, names) + " (sets: " + list + ")");
}

Result<std::vector<RunRecord>> parse_run_records(const Json& records, const std::string& file) {
  // Every field of every record checked up front: what follows reads them without checks.
  SP_RETURN_IF_ERROR(models::check_records(records, file));
  std::vector<RunRecord> out;
  out.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const Json& rec = records[i];
    const std::string where = file + ": records[" + std::to_string(i) + "]";
    if (!rec.is_object()) return Status::invalid(where + ": expected a JSON object");
    RunRecord r;
    SP_ASSIGN_OR_RETURN(r.id, field<std::string>(rec, "id", "?", where));
    SP_ASSIGN_OR_RETURN(r.source, field<std::string>(rec, "source", "", where));
    SP_ASSIGN_OR_RETURN(r.cluster, field<std::string>(rec, "cluster", "", where));
    SP_ASSIGN_OR_RETURN(r.layout, field<std::string>(rec, "layout", "", where));
    SP_ASSIGN_OR_RETURN(r.framework, field<std::string>(rec, "framework", "", where));
    SP_ASSIGN_OR_RETURN(r.gpus, field<int64_t>(rec, "gpus", 0, where));
    SP_ASSIGN_OR_RETURN(r.seq_len, field<int64_t>(rec, "seq_len", 0, where));
    SP_ASSIGN_OR_RETURN(r.incomplete, field<bool>(rec, "incomplete", false, where));
    r.model = std::make_shared<const Json>(rec.contains("model") ? rec["model"] : Json::object());
    const Json measured =
        rec.contains("measured") && rec["measured"].is_object() ? rec["measured"] : Json::object();
    SP_ASSIGN_OR_RETURN(r.status,
                        field<std::string>(measured, "status", "ok", where + ": measured"));
    SP_ASSIGN_OR_RETURN(r.timing_valid,
                        field<bool>(measured, "timing_valid", true, where + ": measured"));
    r.sec_per_iter = number(measured, "sec_per_iter");
    r.tokens_per_s_per_gpu = number(measured, "tokens_per_s_per_gpu");
    r.mfu = number(measured, "mfu");
    r.tflops_per_gpu = number(measured, "tflops_per_gpu");
    r.hfu = number(measured, "hfu");
    r.peak_memory_gib = number(measured, "peak_memory_gib");
    r.peak_reserved_gib = number(measured, "peak_reserved_gib");
    if (rec.contains("precision") && rec["precision"].is_string())
      r.precision = rec["precision"].get<std::string>();
    const RunFramework run = classify_run_framework(r.framework);
    r.group = group_of(r, run);
    r.month = record_month(r);
    r.conventions = resolve_run_framework(run, r.month);
    out.push_back(std::move(r));
  }
  return out;
}

namespace {
std::string model_type(const Json& cfg) {
  return cfg.is_object() && cfg.contains("model_type") && cfg["model_type"].is_string()
             ? cfg["model_type"].get<std::string>()
             : std::string();
}

// The userbuffers preset a record's recipe hands Transformer Engine (recipe_options; the table
// and its sources are models/ub_presets.cc). The recipe is known from the record's recipes, its
// model (model_type and width identify the script: Llama 3.1 70B and 405B, GPT-3 175B) and the
// GPU its cluster names; nullptr where the recipe names no preset (TE's defaults).
const models::UbPreset* recipe_ub_preset(const RunRecord& record, RunRecipes recipes,
                                         const std::string& precision) {
  const Json& cfg = *record.model;
  auto count = [&](const char* key) {
    return cfg.contains(key) && cfg[key].is_number_integer() ? cfg[key].get<int64_t>() : 0;
  };
  const std::string type = model_type(cfg);
  const int64_t hidden = type == "gpt2" ? count("n_embd") : count("hidden_size");
  const std::string cluster = lower(record.cluster);
  const bool h100 = cluster.find("h100") != std::string::npos;
  const bool blackwell =
      cluster.find("b200") != std::string::npos || cluster.find("b300") != std::string::npos;
  const std::string dtype = precision == "bf16" ? "bf16" : "fp8";
  std::string name;
  if (recipes == RunRecipes::kNemo2 && type == "llama" && h100) {
    // dgxc-benchmarking v25.04.01 llama3.1/pretrain_llama31.py:78-99: ub_cfg[gpu][compute_dtype]
    // for 70B and 405B; the Nemotron-4 scripts it patches set a preset on B200 only
    // (scripts/performance/llm/pretrain_nemotron4_{15b,340b}.py at NeMo d3f25b1, the blob its
    // nemotron/gsw_nemo.patch applies to: `if gpu_type == "b200"`), so H100 runs TE's defaults.
    if (hidden == 8192) name = "nemo-2.2/userbuffers_" + dtype + "_h100_h8192_tp4_mbs1_seqlen8192";
    if (hidden == 16384)
      name = "nemo-2.2/userbuffers_" + dtype + "_h100_h16384_tp8_cp2_mbs1_seqlen8192";
  } else if (recipes == RunRecipes::kNemo && type == "gpt2" && hidden == 12288) {
    name = "dgxc-25.04.01/gpt3_175b_hydra";  // its YAML's ub_tp_comm_overlap_cfg
  } else if (recipes == RunRecipes::kMegatronBridge && type == "llama" && (h100 || blackwell)) {
    // scripts/performance/configs/llama/llama3{,1}_llm_pretrain.py at v0.3.0: the H100 preset on
    // H100, the B200 one on B200, B300, GB200 and GB300; "bf16" for bf16, "fp8" otherwise.
    const std::string gpu = h100 ? "_h100" : "_b200";
    if (hidden == 8192)
      name = "mbridge-0.3/userbuffers_" + dtype + gpu + (h100 ? "_h8192_tp4" : "_h8192_tp2") +
             "_mbs1_seqlen8192";
    if (hidden == 16384)
      name = "mbridge-0.3/userbuffers_" + dtype + gpu +
             (h100 ? "_h16384_tp8_cp2" : "_h16384_tp4_cp2") + "_mbs1_seqlen8192";
  }
  return name.empty() ? nullptr : models::find_ub_preset(name);
}
}  // namespace

sim::RecipeOptions recipe_options(const RunRecord& record, const Layout& layout) {
  const RunRecipes recipes = classify_run_framework(record.framework).recipes;
  const std::string precision = lower(record.precision);
  const bool fp8 = layout.dtype == DType::kFp8;
  const bool moe = has_routed_experts(*record.model);
  const bool sp = layout.tp > 1 && layout.sequence_parallel();
  sim::RecipeOptions r;
  if (recipes == RunRecipes::kMegatronBridge) {
    r.tp_comm_overlap = sp && precision != "nvfp4";
    r.grad_reduce_in_fp32 = false;
    r.fp8_param_gather = fp8 && precision != "nvfp4";
    if (fp8 && precision == "fp8") r.fp8_recipe = models::Fp8Recipe::kTensorwise;
    if (fp8 && precision == "mxfp8") r.fp8_recipe = models::Fp8Recipe::kMxfp8;
    if (fp8 && precision == "nvfp4") r.fp8_recipe = models::Fp8Recipe::kNvfp4;
    r.moe_router_fusion = moe;
    r.moe_router_force_load_balancing = moe;
  } else if (recipes == RunRecipes::kNemo || recipes == RunRecipes::kNemo2) {
    r.tp_comm_overlap = sp;
    if ((recipes == RunRecipes::kNemo2 && fp8) || (recipes == RunRecipes::kNemo && moe))
      r.grad_reduce_in_fp32 = false;
    r.fp8_param_gather = fp8;
    if (recipes == RunRecipes::kNemo)
      r.moe_sequential_experts = r.moe_core_r010 = r.no_fused_attention = moe;
  }
  if (r.tp_comm_overlap) r.tp_comm_overlap_preset = recipe_ub_preset(record, recipes, precision);
  return r;
}

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

void apply_deepseek_v3_recipe(const RunRecord& record, RecordSetup& s) {
  if (classify_run_framework(record.framework).recipes != RunRecipes::kMegatronBridge) return;
  const Json& cfg = *record.model;
  const std::string type = model_type(cfg);
  const bool deepseek_v3 = type == "deepseek_v3";
  if ((!deepseek_v3 && type != "kimi_k2") || s.model.num_layers != 61) return;
  // One MTP module (deepseek_v3.py:198,244), where the record's config does not say otherwise.
  if (deepseek_v3 && !cfg.contains("num_nextn_predict_layers")) s.model.mtp_layers = 1;
  // Selective recompute of MLA's up projections (every fp8 workload config; the bf16 ones differ
  // by system, and no record runs them).
  if (s.layout.dtype == DType::kFp8 && !layout_gives(record.layout, "recompute")) {
    s.layout.recompute = Recompute::kSelective;
    s.layout.recompute_modules = kRecomputeMlaUpProj;
  }
  // The pipeline layout of the recipes' maps: pp·vpp = C chunks of ceil(61 / C) layers, the last
  // chunk the rest (with the MTP module and the loss), the first with the embedding.
  if (s.layout.pp_first || s.layout.pp_last || s.layout.pp_embedding || s.layout.pp_loss ||
      s.layout.schedule == Schedule::kDualPipe || v_shaped(s.layout.schedule))
    return;
  const int chunks = s.layout.pp * s.layout.vpp_degree();
  if (chunks != 4 && chunks != 8 && chunks != 16) return;
  const int per = static_cast<int>((s.model.num_layers + chunks - 1) / chunks);
  s.chunk_layers.assign(static_cast<size_t>(chunks), per);
  s.chunk_layers.back() = static_cast<int>(s.model.num_layers) - per * (chunks - 1);
}

void apply_gpt_oss_recipe(const RunRecord& record, RecordSetup& s) {
  if (classify_run_framework(record.framework).recipes != RunRecipes::kMegatronBridge) return;
  if (model_type(*record.model) != "gpt_oss") return;
  // No load-balancing loss, whatever the config's router_aux_loss_coef (validation.h).
  if (s.model.moe) s.model.moe->aux_loss_coeff = 0;
  // The 26.08 MXFP8 workloads run the experts through Transformer Engine's op fuser, which fuses
  // the clamp into the activation (validation.h).
  if (s.layout.dtype == DType::kFp8 && record.framework.find("26.08") != std::string::npos)
    s.framework.ops.te_op_fuser = true;
  if (s.layout.dtype != DType::kBf16) return;
  if (layout_gives(record.layout, "recompute")) return;
  // The bf16 workload configs of GB200, B200 and H100 recompute the norms and the experts'
  // activation; GB300's and B300's recompute nothing (validation.h).
  if (record.cluster != "gb200-nvl72" && record.cluster != "dgx-b200" &&
      record.cluster != "dgx-h100")
    return;
  s.layout.recompute = Recompute::kSelective;
  s.layout.recompute_modules = kRecomputeLayernorm | kRecomputeMoeAct;
}

void apply_moe_dispatcher_recipe(const RunRecord& record, RecordSetup& s) {
  if (classify_run_framework(record.framework).recipes != RunRecipes::kMegatronBridge) return;
  if (!s.model.moe || s.model.moe->dispatcher != models::MoeDispatcher::kAllToAll) return;
  const std::string type = model_type(*record.model);
  const bool hopper_or_dgx_blackwell =
      record.cluster == "dgx-b300" || record.cluster == "dgx-b200" || record.cluster == "dgx-h100";
  const bool alltoall =
      type == "gpt_oss" ||
      (type == "qwen3_moe" && s.model.num_layers == 94 && hopper_or_dgx_blackwell) ||
      (type == "qwen3_moe" && s.model.num_layers == 48 && record.cluster == "dgx-b200" &&
       record.framework.find("26.02 ") != std::string::npos);
  if (!alltoall) s.model.moe->dispatcher = models::MoeDispatcher::kDeepEp;
}

Result<RecordSetup> setup_record(const RunRecord& record,
                                 const std::optional<sim::Framework>& framework) {
  RecordSetup s;
  SP_ASSIGN_OR_RETURN(s.model,
                      models::model_from_config(*record.model, record.id, record.id + ": model"));
  SP_ASSIGN_OR_RETURN(s.layout, parse_layout(record.layout));
  // Megatron-Bridge's performance launcher submits its jobs with sbatch --segment = the largest
  // divisor of the node count up to 18, the trays of an NVL72 rack (scripts/performance/utils/
  // executors.py lines 168-176 at 067f987df03b), so on GB200/GB300 racks each rack holds whole
  // segments: the packed placement (docs/simulator.md, "Rank placement"). It is the launcher's,
  // not the record's: the records leave it out, and it coincides with linear on 8-GPU nodes.
  if (!s.layout.place &&
      classify_run_framework(record.framework).recipes == RunRecipes::kMegatronBridge)
    s.layout.place = Placement::kPacked;
  s.framework = framework ? *framework : sim::run_framework(record.conventions);
  infer_pipeline_accounting(s.layout, s.model.num_layers, s.framework.id);
  apply_deepseek_v3_recipe(record, s);
  apply_gpt_oss_recipe(record, s);
  apply_moe_dispatcher_recipe(record, s);
  // A record of the fp16 era that names dtype=bf16 trained in bf16 (the records leave dtype out
  // for fp16, which the layout grammar has no name for).
  if (layout_gives(record.layout, "dtype") && s.layout.dtype == DType::kBf16)
    s.framework = sim::with_bf16_named(s.framework);
  s.recipe = recipe_options(record, s.layout);
  s.framework = sim::with_recipe(s.framework, s.recipe);
  // nanotron places pipeline blocks by cumulative compute cost, not evenly; a record's layout
  // string does not spell that out. The run's framework decides, whatever conventions simulate it.
  if (record.conventions.framework == FrameworkId::kNanotron && s.layout.pp > 1 &&
      s.layout.vpp_degree() == 1)
    s.chunk_layers = models::nanotron_chunk_layers(s.model, s.layout.pp);
  return s;
}

Result<models::MemoryResult> record_memory(const RecordSetup& setup, const RunRecord& record,
                                           const hw::Cluster& cluster) {
  SP_ASSIGN_OR_RETURN(
      Layout l,
      resolve_layout(setup.layout, models::layout_constraints(setup.model, record.seq_len),
                     record.gpus));
  models::MemoryOptions mo;
  mo.framework = setup.framework.memory;
  mo.ops = setup.framework.ops;
  mo.gpu_memory = cluster.gpu.memory;
  if (!setup.chunk_layers.empty()) mo.chunk_layers = setup.chunk_layers;
  return models::estimate_memory(setup.model, l, record.seq_len, mo);
}

Bytes predicted_peak(const RunRecord& record, const models::MemoryResult& memory) {
  if (record.conventions.framework == FrameworkId::kNanotron && !memory.stages.empty())
    return memory.stages.front().step_peak;
  return memory.peak_allocated;
}

constexpr std::string_view kMetricNames[] = {"step_time", "throughput", "mfu", "tflops", "hfu"};
static_assert(std::ssize(kMetricNames) == static_cast<int>(Metric::kHfu) + 1);

std::string_view to_string(Metric m) { return name_in(kMetricNames, m); }

std::optional<Measured> timed_measurement(const RunRecord& r) {
  if (r.status != "ok" || !r.timing_valid) return std::nullopt;
  if (r.sec_per_iter) return Measured{Metric::kStepTime, *r.sec_per_iter};
  if (r.tokens_per_s_per_gpu) return Measured{Metric::kThroughput, *r.tokens_per_s_per_gpu};
  // Only the MFU published (model FLOPs per second over the dense 16-bit peak, the schema's
  // definition and the simulator's): at equal FLOP counts its error is the throughput error.
  // Sources count attention and the LM head their own way; on records that publish both, the two
  // MFUs at equal speed differ by ~1% (Korthikanti) and ~11% (nanotron's formula).
  if (r.mfu && *r.mfu > 0) return Measured{Metric::kMfu, *r.mfu};
  // Only the model TFLOP/s per GPU published: the simulated model FLOPs per second per GPU, the
  // MFU times the dense 16-bit peak (the same caveat on each source's FLOP count).
  if (r.tflops_per_gpu && *r.tflops_per_gpu > 0)
    return Measured{Metric::kTflops, *r.tflops_per_gpu};
  // Only the hardware FLOPs utilization published (recomputation counted).
  if (r.hfu && *r.hfu > 0) return Measured{Metric::kHfu, *r.hfu};
  return std::nullopt;
}

double predicted_value(Metric metric, const sim::SimulationResult& r, const hw::GpuSpec& gpu) {
  switch (metric) {
    case Metric::kStepTime:
      return r.iteration.to_seconds();
    case Metric::kThroughput:
      return r.tokens_per_s_per_gpu;
    case Metric::kMfu:
      return r.mfu;
    case Metric::kTflops:
      return r.mfu * gpu.bf16_dense.value() / 1e12;
    case Metric::kHfu:
      return r.hfu;
  }
  return 0;
}

double abs_pct_error(double predicted, double measured) {
  return 100.0 * std::abs(predicted - measured) / measured;
}

double speed_ratio(Metric metric, double predicted, double measured) {
  return metric == Metric::kStepTime ? measured / predicted : predicted / measured;
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos)), hi = static_cast<size_t>(std::ceil(pos));
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

ErrorStats error_stats(const std::vector<ErrorSample>& samples) {
  ErrorStats s;
  std::vector<double> v, ratios;
  for (const ErrorSample& e : samples) {
    v.push_back(e.abs_error);
    ratios.push_back(e.speed_ratio);
    s.predicted_faster += e.speed_ratio > 1;
    if (e.abs_error > s.worst) {
      s.worst = e.abs_error;
      s.worst_id = e.id;
    }
  }
  s.n = static_cast<int>(v.size());
  s.median = percentile(v, 0.5);
  s.p90 = percentile(v, 0.9);
  s.median_speed_ratio = percentile(ratios, 0.5);
  return s;
}

RecordPrediction predict_record(const RunRecord& rec, const ClusterSet& clusters,
                                const PredictOptions& o) {
  RecordPrediction row;
  row.record = &rec;
  if (rec.incomplete) {
    row.skip = "incomplete layout";
    return row;
  }
  if (rec.status == "failed") {
    row.skip = "failed run";
    return row;
  }
  auto model = models::model_from_config(*rec.model, rec.id, rec.id + ": model");
  if (!model) {
    row.skip = model.status().message();
    return row;
  }
  auto cl = clusters.find(rec.cluster);
  if (cl == clusters.end()) {
    row.skip = "unknown cluster";
    return row;
  }
  auto setup = setup_record(rec, o.framework);
  if (!setup) {
    row.skip = setup.status().message();
    return row;
  }
  sim::SimulateOptions so;
  so.gpus = rec.gpus;
  so.framework = setup->framework;
  so.chunk_layers = setup->chunk_layers;
  if (o.host_launch) so.host = sim::framework_host_issue(so.framework, *o.host_launch);
  row.framework = std::string(so.framework.name());
  row.recipe = setup->recipe;
  auto r = sim::simulate(setup->model, cl->second, rec.seq_len, setup->layout, so);
  if (!r) {
    row.skip = r.status().message();
    return row;
  }
  row.attention = std::string(to_string(r->attention));
  row.predicted_fits = r->fits;
  row.mfu = r->mfu;
  row.stages = r->stages;
  // The memory the record measured (validation.h): the same estimate the simulation made.
  if (auto mem = record_memory(*setup, rec, cl->second))
    row.mem_predicted_gib = to_gib(predicted_peak(rec, *mem));
  row.mem_measured_gib = rec.peak_memory_gib;
  const std::optional<Measured> measured = timed_measurement(rec);
  if (!measured) return row;
  row.metric = measured->metric;
  row.measured = measured->value;
  const hw::GpuSpec& gpu = cl->second.gpu;
  row.predicted = predicted_value(measured->metric, *r, gpu);
  if (!o.how_sure) return row;
  // The same record on each perturbed profile (planner/robustness.h); a perturbation that fails
  // to simulate leaves the range to the others.
  auto perturbations = perturbations_for(cl->second);
  if (!perturbations) return row;  // the nominal simulation already read the same calibration
  row.how_sure_min = row.how_sure_max = row.predicted;
  for (const auto& p : *perturbations) {
    auto rp = simulate_perturbed(setup->model, cl->second, rec.seq_len, setup->layout, so, p);
    if (!rp) continue;
    const double v = predicted_value(measured->metric, *rp, gpu);
    row.how_sure_min = std::min(*row.how_sure_min, v);
    row.how_sure_max = std::max(*row.how_sure_max, v);
  }
  return row;
}

Result<std::vector<RecordPrediction>> predict_records(
    const std::vector<RunRecord>& records, const ClusterSet& clusters,
    const PredictOptions& options, int threads,
    const std::function<void(size_t, size_t)>& progress) {
  std::vector<RecordPrediction> rows(records.size());
  std::atomic<size_t> done{0};
  ParallelOptions parallel;
  parallel.threads = threads;
  parallel.item = "record";
  parallel.interval = std::chrono::milliseconds(50);
  if (progress) parallel.tick = [&] { progress(done.load(), rows.size()); };
  SP_RETURN_IF_ERROR(parallel_for(static_cast<int64_t>(rows.size()), parallel, [&](int64_t i) {
                       rows[static_cast<size_t>(i)] =
                           predict_record(records[static_cast<size_t>(i)], clusters, options);
                       ++done;
                     }).with_context("validate"));
  return rows;
}

ValidationSummary summarize(const std::vector<RecordPrediction>& predictions) {
  ValidationSummary s;
  std::map<std::string, std::vector<ErrorSample>> time_errors;
  std::vector<ErrorSample> all_time, mem;
  for (const RecordPrediction& r : predictions) {
    if (!r.skip.empty()) {
      ++s.skipped;
      ++s.skip_reasons[r.skip];
      continue;
    }
    ++s.simulated;
    const RunRecord& rec = *r.record;
    if (rec.status == "oom") {
      ++s.oom_rows;
      s.oom_called_right += !r.predicted_fits;
    } else if (rec.status == "ok") {
      ++s.ok_rows;
      s.ok_called_fits += r.predicted_fits;
    }
    if (r.timed()) {
      const ErrorSample e{abs_pct_error(*r.predicted, *r.measured),
                          speed_ratio(*r.metric, *r.predicted, *r.measured), rec.id};
      time_errors[rec.group].push_back(e);
      all_time.push_back(e);
      if (r.how_sure_min) {
        s.within_how_sure[rec.group].second += 1;
        s.within_how_sure[rec.group].first += r.within_how_sure();
      }
    }
    if (rec.status == "ok" && r.mem_predicted_gib && r.mem_measured_gib && *r.mem_measured_gib > 0)
      mem.push_back({abs_pct_error(*r.mem_predicted_gib, *r.mem_measured_gib), 0, rec.id});
  }
  s.time = error_stats(all_time);
  for (const auto& [g, e] : time_errors) s.time_by_group[g] = error_stats(e);
  s.memory = error_stats(mem);
  return s;
}

MemoryValidation validate_memory(const std::vector<RunRecord>& records, const ClusterSet& clusters,
                                 std::string_view framework_filter) {
  MemoryValidation v;
  std::vector<ErrorSample> alloc_errs, res_errs;
  const std::string filter = lower(framework_filter);
  for (const RunRecord& rec : records) {
    auto skip = [&](const std::string& why) {
      ++v.skipped;
      if (why.empty()) return;
      // setup_record's errors already name the record.
      const bool named = why.rfind(rec.id + ": ", 0) == 0;
      v.skip_reasons.push_back(named ? why : rec.id + ": " + why);
    };
    if ((!filter.empty() && lower(rec.framework).find(filter) == std::string::npos) ||
        rec.incomplete || (rec.status != "ok" && rec.status != "oom")) {
      skip("");
      continue;
    }
    const std::optional<double> alloc = rec.peak_memory_gib, reserved = rec.peak_reserved_gib;
    if (rec.status == "ok" && !alloc && !reserved) {
      skip("");
      continue;
    }
    auto setup = setup_record(rec, std::nullopt);
    if (!setup) {
      skip(setup.status().message());
      continue;
    }
    auto cl = clusters.find(rec.cluster);
    if (cl == clusters.end()) {
      skip("unknown cluster '" + rec.cluster + "'");
      continue;
    }
    auto mem = record_memory(*setup, rec, cl->second);
    if (!mem) {
      skip(mem.status().message());
      continue;
    }
    const models::StageMemory& first = mem->stages.front();
    MemoryRecordCheck row;
    row.id = rec.id;
    row.status = rec.status;
    row.layout = format_layout(*resolve_layout(
        setup->layout, models::layout_constraints(setup->model, rec.seq_len), rec.gpus));
    row.predicted_fits = mem->fits;
    row.predicted_allocated_gib = to_gib(predicted_peak(rec, *mem));
    row.predicted_reserved_gib = to_gib(first.reserved);
    row.predicted_peak_reserved_gib = to_gib(mem->peak_reserved);
    if (rec.status == "ok") {
      row.measured_allocated_gib = alloc;
      row.measured_reserved_gib = reserved;
      ++v.ok_rows;
      if (!mem->fits) ++v.ok_called_oom;
      if (alloc && *alloc > 0) {
        alloc_errs.push_back({std::abs(row.predicted_allocated_gib - *alloc) / *alloc, 0, rec.id});
      }
      if (reserved && *reserved > 0) {
        res_errs.push_back(
            {std::abs(row.predicted_reserved_gib - *reserved) / *reserved, 0, rec.id});
      }
    } else {
      ++v.oom_rows;
      if (!mem->fits) ++v.oom_called_oom;
    }
    v.rows.push_back(std::move(row));
  }
  v.allocated = error_stats(alloc_errs);
  v.reserved = error_stats(res_errs);
  return v;
}

}  // namespace scaleplan::planner
