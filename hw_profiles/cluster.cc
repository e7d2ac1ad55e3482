#include "hw_profiles/cluster.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <set>

#include "core/data_dir.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "core/suggest.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::hw {
namespace {

namespace fs = std::filesystem;

// Bounds on a profile's counts (docs/reliability.md, "Bounded work"): the largest NVLink domain
// built is 576 GPUs (NVL576) and the largest node 72; far past those a count is a typo, and
// products of them (GPUs per domain x nodes) must stay within int.
constexpr int64_t kMaxGpusPerNode = 1024;
constexpr int64_t kMaxNvlinkDomainGpus = 1 << 16;
constexpr int64_t kMaxSms = 1 << 16;

std::string bundled_dir() { return data_dir() + "/hw_profiles/bundled"; }

// Keys a section may hold besides its fields: documentation that the loader ignores.
bool is_doc_key(const std::string& k) {
  return k == "sources" || k == "notes" || k.starts_with("_");
}

// Rejects keys that are not fields of the section, so a typo ("nvlink_bandwith") is an error rather
// than a silently used default.
Status check_keys(const Json& obj, const std::string& ctx,
                  std::initializer_list<const char*> known) {
  if (!obj.is_object()) return Status::invalid(ctx + ": expected an object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (is_doc_key(it.key())) continue;
    bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
    if (!ok) return Status::invalid(ctx + ": " + it.key() + ": unknown key");
  }
  return Status::ok();
}

Result<const Json*> section(const Json& root, const char* key, const std::string& file) {
  auto it = root.find(key);
  if (it == root.end() || it->is_null()) return Status::invalid(file + ": " + key + ": missing");
  if (!it->is_object()) return Status::invalid(file + ": " + key + ": expected an object");
  return &*it;
}

// Positive-value checks that json_* do not make (they accept zero).
// Profile quantities carry their unit: a bare number is refused (0 excepted, which is 0 in any
// unit), since the reader cannot know whether "memory": 80 meant 80 GB or 80 bytes, and taking it
// in base units turned a typo into an 80-byte GPU and a misleading "smaller batch" error later.
// `fields` pairs each key with the field written right ("80GB").
Status require_units(const Json& obj, const std::string& ctx,
                     std::initializer_list<std::pair<const char*, const char*>> fields) {
  for (const auto& [key, example] : fields) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_number() || it->get<double>() == 0) continue;
    return Status::invalid(ctx + ": " + key + ": " + json_brief(*it) +
                           " has no unit; write it as a string with one, e.g. \"" + example + "\"");
  }
  return Status::ok();
}

Status positive(double v, const std::string& ctx, const char* key) {
  if (!(v > 0)) return Status::invalid(ctx + ": " + key + ": must be positive, got 0");
  return Status::ok();
}

Status fraction(double v, const std::string& ctx, const char* key) {
  if (!(v > 0 && v <= 1))
    return Status::invalid(ctx + ": " + key + ": must be in (0, 1], got " + std::to_string(v));
  return Status::ok();
}

// Merges `patch` into `base`: objects merge key by key, anything else replaces.
void merge(Json& base, const Json& patch) {
  if (!base.is_object() || !patch.is_object()) {
    base = patch;
    return;
  }
  for (auto it = patch.begin(); it != patch.end(); ++it) {
    if (base.contains(it.key())) {
      merge(base[it.key()], it.value());
    } else {
      base[it.key()] = it.value();
    }
  }
}

Result<std::string> resolve_path(const std::string& name_or_path, const std::string& relative_to) {
  // error_code overloads: a name too long for the file system or a symbolic-link loop is "not
  // found" here, not an exception.
  std::error_code ec;
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  if (!relative_to.empty()) {
    fs::path p = fs::path(relative_to).parent_path() / name_or_path;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  const std::string bundled = bundled_dir() + "/" + name_or_path + ".json";
  if (name_or_path.find('/') == std::string::npos && fs::is_regular_file(bundled, ec))
    return bundled;
  std::string names;
  const std::vector<std::string> bundled_names = bundled_cluster_names();
  if (bundled_names.empty()) {  // no profiles at all: say where they were looked for
    if (Status st = check_data_dir(); !st.is_ok())
      return st.with_context("cluster '" + text_brief(name_or_path) + "'");
  }
  for (const auto& n : bundled_names) names += (names.empty() ? "" : ", ") + n;
  return Status::not_found("cluster '" + text_brief(name_or_path) +
                           "': no such file and no bundled profile of that name" +
                           did_you_mean(name_or_path, bundled_names) + " (bundled: " + names + ")");
}

// Reads a profile file and folds in the chain of profiles it extends.
Result<Json> read_profile(const std::string& path, int depth) {
  if (depth > 8) return Status::invalid(path + ": extends: chain deeper than 8 (a cycle?)");
  SP_ASSIGN_OR_RETURN(Json j, read_json_file(path));
  if (!j.is_object()) return Status::invalid(path + ": expected a JSON object at the top level");
  auto it = j.find("extends");
  if (it == j.end()) return j;
  if (!it->is_string()) return Status::invalid(path + ": extends: expected a profile name or path");
  auto base_path = resolve_path(it->get<std::string>(), path);
  if (!base_path) return base_path.status().with_context(path + ": extends");
  SP_ASSIGN_OR_RETURN(Json base, read_profile(*base_path, depth + 1));
  Json patch = j;
  patch.erase("extends");
  base.erase("extends");
  merge(base, patch);
  return base;
}

// "9.0" -> 90, "10.0" -> 100: CUDA's major.minor, as nvidia-smi --query-gpu=compute_cap prints it.
Result<int> parse_compute_capability(const Json& g, const std::string& ctx) {
  SP_ASSIGN_OR_RETURN(const std::string cc, json_string(g, "compute_capability", ctx, ""));
  if (cc.empty() && !json_has(g, "compute_capability")) return 0;
  const size_t dot = cc.find('.');
  const auto digits = [](std::string_view d) {
    return !d.empty() &&
           std::all_of(d.begin(), d.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
  };
  if (dot == std::string::npos || dot > 2 || !digits(std::string_view(cc).substr(0, dot)) ||
      cc.size() != dot + 2 || !digits(std::string_view(cc).substr(dot + 1)) || cc[0] == '0') {
    return Status::invalid(ctx + ": compute_capability: '" + text_brief(cc) +
                           "' is not CUDA's major.minor, e.g. \"9.0\"");
  }
  return std::stoi(cc.substr(0, dot)) * 10 + (cc[dot + 1] - '0');
}

// Reads each of `fields` that `obj` gives, each between 0 and `max` (`max_text` in the message).
Status read_bounded(const Json& obj, const std::string& at,
                    std::initializer_list<std::pair<const char*, double*>> fields, double max,
                    const char* max_text) {
  for (auto [name, field] : fields) {
    SP_ASSIGN_OR_RETURN(*field, json_number(obj, name, at, *field));
    if (!(*field >= 0 && *field <= max)) {
      return Status::invalid(at + ": " + name + ": must be between 0 and " + max_text + ", got " +
                             json_brief(obj[name]));
    }
  }
  return Status::ok();
}

// One attention curve of gpu.efficiency ("flash2", "cudnn"); absent keys keep `curve`'s values.
Status parse_attention_curve(const Json& e, const char* key, const std::string& ctx,
                             AttentionCurve& curve) {
  auto it = e.find(key);
  if (it == e.end() || it->is_null()) return Status::ok();
  const std::string at = ctx + ": " + key;
  SP_RETURN_IF_ERROR(check_keys(
      *it, at,
      {"ceiling", "half_tokens", "head_dim_half", "backward_ceiling", "backward_half_tokens"}));
  SP_ASSIGN_OR_RETURN(curve.ceiling, json_number(*it, "ceiling", at, curve.ceiling));
  SP_RETURN_IF_ERROR(fraction(curve.ceiling, at, "ceiling"));
  if (json_has(*it, "backward_ceiling")) {
    SP_ASSIGN_OR_RETURN(curve.backward_ceiling,
                        json_number(*it, "backward_ceiling", at, curve.backward_ceiling));
    SP_RETURN_IF_ERROR(fraction(curve.backward_ceiling, at, "backward_ceiling"));
  }
  return read_bounded(*it, at,
                      {{"half_tokens", &curve.half_tokens},
                       {"head_dim_half", &curve.head_dim_half},
                       {"backward_half_tokens", &curve.backward_half_tokens}},
                      1e9, "1e9");
}

// gpu.efficiency.memory: HBM fractions by memory-bound implementation; absent keys keep `m`'s.
Status parse_memory_paths(const Json& e, const std::string& ctx, MemoryPathEfficiency& m) {
  auto it = e.find("memory");
  if (it == e.end() || it->is_null()) return Status::ok();
  const std::string at = ctx + ": memory";
  SP_RETURN_IF_ERROR(check_keys(*it, at,
                                {"vectorized", "cast_loop", "row_norm", "multi_tensor", "strided",
                                 "strided_copy", "reduce", "segment_sum"}));
  return read_bounded(*it, at,
                      {{"vectorized", &m.vectorized},
                       {"cast_loop", &m.cast_loop},
                       {"row_norm", &m.row_norm},
                       {"multi_tensor", &m.multi_tensor},
                       {"strided", &m.strided},
                       {"strided_copy", &m.strided_copy},
                       {"reduce", &m.reduce},
                       {"segment_sum", &m.segment_sum}},
                      1, "1");
}

// gpu.efficiency.sm_clock (SmClock): the clocks as unit strings; absent keys keep `c`'s.
Status parse_sm_clock(const Json& e, const std::string& ctx, SmClock& c) {
  auto it = e.find("sm_clock");
  if (it == e.end() || it->is_null()) return Status::ok();
  const std::string at = ctx + ": sm_clock";
  SP_RETURN_IF_ERROR(check_keys(*it, at, {"max", "power_limit", "measured_at"}));
  auto clock = [](const Json& o, const char* key, const std::string& where, double& hz) -> Status {
    if (!json_has(o, key)) return Status::ok();
    SP_ASSIGN_OR_RETURN(const std::string text, json_string(o, key, where));
    SP_ASSIGN_OR_RETURN(hz, parse_clock(text, where + ": " + key));
    return Status::ok();
  };
  SP_RETURN_IF_ERROR(clock(*it, "max", at, c.max_hz));
  if (auto p = it->find("power_limit"); p != it->end() && !p->is_null()) {
    const std::string pat = at + ": power_limit";
    SP_RETURN_IF_ERROR(
        check_keys(*p, pat, {"tensor_share", "clock", "tensor_bound_clock", "exponent"}));
    SP_ASSIGN_OR_RETURN(c.tensor_share, json_number(*p, "tensor_share", pat, c.tensor_share));
    SP_ASSIGN_OR_RETURN(c.exponent, json_number(*p, "exponent", pat, c.exponent));
    SP_RETURN_IF_ERROR(clock(*p, "clock", pat, c.mixed_hz));
    SP_RETURN_IF_ERROR(clock(*p, "tensor_bound_clock", pat, c.tensor_bound_hz));
  }
  if (auto m = it->find("measured_at"); m != it->end() && !m->is_null()) {
    const std::string mat = at + ": measured_at";
    SP_RETURN_IF_ERROR(check_keys(*m, mat, {"gemm", "attention", "cast_loop"}));
    SP_RETURN_IF_ERROR(clock(*m, "gemm", mat, c.gemm_hz));
    SP_RETURN_IF_ERROR(clock(*m, "attention", mat, c.attention_hz));
    SP_RETURN_IF_ERROR(clock(*m, "cast_loop", mat, c.cast_loop_hz));
  }
  return validate(c, at);
}

// gpu.efficiency: the fractions of the datasheet peaks the GPU's kernels reach (GpuEfficiency).
Result<GpuEfficiency> parse_efficiency(const Json& g, const std::string& gpu_ctx) {
  GpuEfficiency e;
  auto it = g.find("efficiency");
  if (it == g.end() || it->is_null()) return e;
  const std::string ctx = gpu_ctx + ": efficiency";
  SP_RETURN_IF_ERROR(check_keys(
      *it, ctx, {"gemm_bf16", "gemm_fp8", "gemm_fp4", "flash2", "cudnn", "memory", "sm_clock"}));
  SP_ASSIGN_OR_RETURN(e.gemm_bf16, json_number(*it, "gemm_bf16", ctx, e.gemm_bf16));
  SP_RETURN_IF_ERROR(fraction(e.gemm_bf16, ctx, "gemm_bf16"));
  SP_ASSIGN_OR_RETURN(e.gemm_fp8, json_number(*it, "gemm_fp8", ctx, e.gemm_fp8));
  SP_RETURN_IF_ERROR(fraction(e.gemm_fp8, ctx, "gemm_fp8"));
  SP_ASSIGN_OR_RETURN(e.gemm_fp4, json_number(*it, "gemm_fp4", ctx, e.gemm_fp4));
  if (e.gemm_fp4 != 0) SP_RETURN_IF_ERROR(fraction(e.gemm_fp4, ctx, "gemm_fp4"));
  SP_RETURN_IF_ERROR(parse_attention_curve(*it, "flash2", ctx, e.flash2));
  SP_RETURN_IF_ERROR(parse_attention_curve(*it, "cudnn", ctx, e.cudnn));
  SP_RETURN_IF_ERROR(parse_memory_paths(*it, ctx, e.memory));
  SP_RETURN_IF_ERROR(parse_sm_clock(*it, ctx, e.sm_clock));
  return e;
}

Result<GpuSpec> parse_gpu(const Json& g, const std::string& ctx) {
  SP_RETURN_IF_ERROR(
      check_keys(g, ctx,
                 {"name", "bf16_dense", "fp8_dense", "fp4_dense", "memory", "memory_bandwidth",
                  "sm_count", "compute_capability", "efficiency"}));
  SP_RETURN_IF_ERROR(require_units(g, ctx,
                                   {{"bf16_dense", "989TFLOP/s"},
                                    {"fp8_dense", "1979TFLOP/s"},
                                    {"fp4_dense", "9000TFLOP/s"},
                                    {"memory", "80GB"},
                                    {"memory_bandwidth", "3.35TB/s"}}));
  GpuSpec s;
  SP_ASSIGN_OR_RETURN(s.name, json_string(g, "name", ctx));
  SP_ASSIGN_OR_RETURN(s.bf16_dense, json_flop_rate(g, "bf16_dense", ctx));
  SP_RETURN_IF_ERROR(positive(s.bf16_dense.value(), ctx, "bf16_dense"));
  SP_ASSIGN_OR_RETURN(s.fp8_dense, json_flop_rate(g, "fp8_dense", ctx, FlopsPerSecond(0)));
  SP_ASSIGN_OR_RETURN(s.fp4_dense, json_flop_rate(g, "fp4_dense", ctx, FlopsPerSecond(0)));
  SP_ASSIGN_OR_RETURN(s.memory, json_bytes(g, "memory", ctx));
  SP_RETURN_IF_ERROR(positive(static_cast<double>(s.memory.value()), ctx, "memory"));
  SP_ASSIGN_OR_RETURN(s.memory_bandwidth, json_bandwidth(g, "memory_bandwidth", ctx));
  SP_RETURN_IF_ERROR(positive(s.memory_bandwidth.value(), ctx, "memory_bandwidth"));
  SP_ASSIGN_OR_RETURN(int64_t sms, json_int(g, "sm_count", ctx, std::nullopt, true, kMaxSms));
  s.sm_count = static_cast<int>(sms);
  SP_ASSIGN_OR_RETURN(s.compute_capability, parse_compute_capability(g, ctx));
  SP_ASSIGN_OR_RETURN(s.efficiency, parse_efficiency(g, ctx));
  return s;
}

Result<NodeSpec> parse_node(const Json& n, const std::string& ctx, int* gpus_per_node) {
  SP_RETURN_IF_ERROR(
      check_keys(n, ctx,
                 {"gpus_per_node", "nvlink_generation", "nvlink_bandwidth", "nvlink_domain_gpus",
                  "nvswitches", "nvls", "nvlink_latency", "pcie_bandwidth"}));
  SP_RETURN_IF_ERROR(require_units(
      n, ctx,
      {{"nvlink_bandwidth", "450GB/s"}, {"nvlink_latency", "1us"}, {"pcie_bandwidth", "64GB/s"}}));
  NodeSpec s;
  SP_ASSIGN_OR_RETURN(int64_t gpn,
                      json_int(n, "gpus_per_node", ctx, std::nullopt, true, kMaxGpusPerNode));
  *gpus_per_node = static_cast<int>(gpn);
  SP_ASSIGN_OR_RETURN(s.nvlink_generation, json_string(n, "nvlink_generation", ctx));
  SP_ASSIGN_OR_RETURN(s.nvlink_bandwidth, json_bandwidth(n, "nvlink_bandwidth", ctx));
  SP_RETURN_IF_ERROR(positive(s.nvlink_bandwidth.value(), ctx, "nvlink_bandwidth"));
  SP_ASSIGN_OR_RETURN(int64_t dom,
                      json_int(n, "nvlink_domain_gpus", ctx, gpn, true, kMaxNvlinkDomainGpus));
  s.nvlink_domain_gpus = static_cast<int>(dom);
  if (dom < gpn || dom % gpn != 0) {
    return Status::invalid(ctx + ": nvlink_domain_gpus: " + std::to_string(dom) +
                           " must be a multiple of gpus_per_node=" + std::to_string(gpn));
  }
  SP_ASSIGN_OR_RETURN(int64_t nvs,
                      json_int(n, "nvswitches", ctx, 0, /*positive=*/false, kMaxGpusPerNode));
  s.nvswitches = static_cast<int>(nvs);
  SP_ASSIGN_OR_RETURN(s.nvls, json_bool(n, "nvls", ctx, false));
  SP_ASSIGN_OR_RETURN(s.nvlink_latency,
                      json_duration(n, "nvlink_latency", ctx, Duration::microseconds(1)));
  SP_ASSIGN_OR_RETURN(s.pcie_bandwidth,
                      json_bandwidth(n, "pcie_bandwidth", ctx, BytesPerSecond(64e9)));
  SP_RETURN_IF_ERROR(positive(s.pcie_bandwidth.value(), ctx, "pcie_bandwidth"));
  return s;
}

Result<NetworkSpec> parse_network(const Json& n, const std::string& ctx) {
  SP_RETURN_IF_ERROR(
      check_keys(n, ctx,
                 {"fabric", "nics_per_node", "nic_bandwidth", "rail_optimized", "switch_tiers",
                  "nodes_per_leaf", "oversubscription", "nic_latency", "switch_latency", "sharp"}));
  SP_RETURN_IF_ERROR(require_units(
      n, ctx, {{"nic_bandwidth", "400Gb/s"}, {"nic_latency", "1us"}, {"switch_latency", "130ns"}}));
  NetworkSpec s;
  SP_ASSIGN_OR_RETURN(s.fabric, json_string(n, "fabric", ctx));
  SP_ASSIGN_OR_RETURN(int64_t nics,
                      json_int(n, "nics_per_node", ctx, std::nullopt, true, kMaxGpusPerNode));
  s.nics_per_node = static_cast<int>(nics);
  SP_ASSIGN_OR_RETURN(s.nic_bandwidth, json_bandwidth(n, "nic_bandwidth", ctx));
  SP_RETURN_IF_ERROR(positive(s.nic_bandwidth.value(), ctx, "nic_bandwidth"));
  SP_ASSIGN_OR_RETURN(s.rail_optimized, json_bool(n, "rail_optimized", ctx, true));
  SP_ASSIGN_OR_RETURN(int64_t tiers, json_int(n, "switch_tiers", ctx, 2));
  if (tiers > 3)
    return Status::invalid(ctx + ": switch_tiers: must be 1, 2 or 3, got " + std::to_string(tiers));
  s.switch_tiers = static_cast<int>(tiers);
  SP_ASSIGN_OR_RETURN(int64_t npl, json_int(n, "nodes_per_leaf", ctx, 32, true, kMaxGpus));
  s.nodes_per_leaf = static_cast<int>(npl);
  SP_ASSIGN_OR_RETURN(s.oversubscription, json_number(n, "oversubscription", ctx, 1.0));
  if (!(s.oversubscription >= 1.0))
    return Status::invalid(ctx + ": oversubscription: must be >= 1 (1 = non-blocking)");
  SP_ASSIGN_OR_RETURN(s.nic_latency,
                      json_duration(n, "nic_latency", ctx, Duration::microseconds(1)));
  SP_ASSIGN_OR_RETURN(s.switch_latency,
                      json_duration(n, "switch_latency", ctx, Duration::nanoseconds(130)));
  SP_ASSIGN_OR_RETURN(s.sharp, json_bool(n, "sharp", ctx, false));
  return s;
}

// "network_scaling": [{"op": "all_reduce", "nodes": 2, "fraction": 0.8}, ...]: op optional (an
// nccl-tests name; empty or absent: every collective), nodes at least 2 and strictly increasing
// within each op, fraction positive and at most the line rate (fraction x network_efficiency <= 1).
Result<std::vector<NetworkScalingPoint>> parse_network_scaling(const Json& m, double efficiency,
                                                               const std::string& ctx) {
  std::vector<NetworkScalingPoint> out;
  auto it = m.find("network_scaling");
  if (it == m.end() || it->is_null()) return out;
  if (!it->is_array()) return Status::invalid(ctx + ": network_scaling: expected an array");
  for (size_t i = 0; i < it->size(); ++i) {
    const std::string at = ctx + ": network_scaling[" + std::to_string(i) + "]";
    const Json& p = (*it)[i];
    SP_RETURN_IF_ERROR(check_keys(p, at, {"op", "nodes", "fraction"}));
    NetworkScalingPoint pt;
    SP_ASSIGN_OR_RETURN(pt.op, json_string(p, "op", at, std::string()));
    if (!pt.op.empty()) {
      auto op = parse_collective_op(pt.op);
      if (!op) return Status::invalid(at + ": op: " + op.status().message());
      pt.op = std::string(to_string(*op));
    }
    SP_ASSIGN_OR_RETURN(const int64_t nodes,
                        json_int(p, "nodes", at, std::nullopt, true, kMaxGpus));
    SP_ASSIGN_OR_RETURN(pt.fraction, json_number(p, "fraction", at));
    if (nodes < 2 || nodes > 1'000'000)
      return Status::invalid(at + ": nodes: must be at least 2, got " + std::to_string(nodes));
    pt.nodes = static_cast<int>(nodes);
    for (auto prev = out.rbegin(); prev != out.rend(); ++prev) {
      if (prev->op != pt.op) continue;
      if (pt.nodes <= prev->nodes)
        return Status::invalid(at + ": nodes: must increase within op '" + pt.op + "', got " +
                               std::to_string(pt.nodes) + " after " + std::to_string(prev->nodes));
      break;
    }
    if (!(pt.fraction > 0) || pt.fraction * efficiency > 1 + 1e-9)
      return Status::invalid(
          at + ": fraction: must be positive and at most 1/network_efficiency (" +
          std::to_string(1 / efficiency) + "), got " + std::to_string(pt.fraction));
    out.push_back(pt);
  }
  return out;
}

Result<CostModelParams> parse_cost(const Json& root, const std::string& ctx) {
  CostModelParams c;
  // Defaults: NCCL's tuning model (src/graph/tuning.cc, Ring/Simple) and the NCCL maintainers'
  // published efficiencies; docs/hw_profiles.md gives the source of each.
  c.base_latency = Duration::microseconds(8.4);
  c.nvlink_step_latency = Duration::microseconds(3.4);
  c.network_step_latency = Duration::microseconds(14.0);
  c.ramp_bytes = 8_MiB;
  auto it = root.find("cost_model");
  if (it == root.end() || it->is_null()) return c;
  const Json& m = *it;
  SP_RETURN_IF_ERROR(check_keys(
      m, ctx,
      {"nvlink_efficiency", "nvls_efficiency", "network_efficiency", "base_latency",
       "nvlink_step_latency", "network_step_latency", "ramp_bytes", "ll_bandwidth_fraction",
       "ll128_bandwidth_fraction", "ll128_enabled", "network_scaling", "calibrated_from"}));
  SP_RETURN_IF_ERROR(require_units(m, ctx,
                                   {{"base_latency", "8.4us"},
                                    {"nvlink_step_latency", "0.6us"},
                                    {"network_step_latency", "2us"},
                                    {"ramp_bytes", "8MiB"}}));
  SP_ASSIGN_OR_RETURN(c.nvlink_efficiency,
                      json_number(m, "nvlink_efficiency", ctx, c.nvlink_efficiency));
  SP_RETURN_IF_ERROR(fraction(c.nvlink_efficiency, ctx, "nvlink_efficiency"));
  SP_ASSIGN_OR_RETURN(c.nvls_efficiency, json_number(m, "nvls_efficiency", ctx, c.nvls_efficiency));
  SP_RETURN_IF_ERROR(fraction(c.nvls_efficiency, ctx, "nvls_efficiency"));
  SP_ASSIGN_OR_RETURN(c.network_efficiency,
                      json_number(m, "network_efficiency", ctx, c.network_efficiency));
  SP_RETURN_IF_ERROR(fraction(c.network_efficiency, ctx, "network_efficiency"));
  SP_ASSIGN_OR_RETURN(c.base_latency, json_duration(m, "base_latency", ctx, c.base_latency));
  SP_ASSIGN_OR_RETURN(c.nvlink_step_latency,
                      json_duration(m, "nvlink_step_latency", ctx, c.nvlink_step_latency));
  SP_ASSIGN_OR_RETURN(c.network_step_latency,
                      json_duration(m, "network_step_latency", ctx, c.network_step_latency));
  SP_ASSIGN_OR_RETURN(c.ramp_bytes, json_bytes(m, "ramp_bytes", ctx, c.ramp_bytes));
  SP_ASSIGN_OR_RETURN(c.ll_bandwidth_fraction,
                      json_number(m, "ll_bandwidth_fraction", ctx, c.ll_bandwidth_fraction));
  SP_RETURN_IF_ERROR(fraction(c.ll_bandwidth_fraction, ctx, "ll_bandwidth_fraction"));
  SP_ASSIGN_OR_RETURN(c.ll128_bandwidth_fraction,
                      json_number(m, "ll128_bandwidth_fraction", ctx, c.ll128_bandwidth_fraction));
  SP_RETURN_IF_ERROR(fraction(c.ll128_bandwidth_fraction, ctx, "ll128_bandwidth_fraction"));
  SP_ASSIGN_OR_RETURN(c.ll128_enabled, json_bool(m, "ll128_enabled", ctx, true));
  SP_ASSIGN_OR_RETURN(c.network_scaling, parse_network_scaling(m, c.network_efficiency, ctx));
  SP_ASSIGN_OR_RETURN(c.calibrated_from, json_string(m, "calibrated_from", ctx, std::string()));
  return c;
}

// The measured group of a fit or a measurement: op (normalised), ranks and placement.
Status parse_measured_group(const Json& e, const std::string& at, MeasuredCollective& m) {
  if (!e.is_object()) return Status::invalid(at + ": expected an object");
  SP_ASSIGN_OR_RETURN(m.op, json_string(e, "op", at));
  auto op = parse_collective_op(m.op);
  if (!op) return Status::invalid(at + ": op: " + op.status().message());
  m.op = std::string(to_string(*op));
  SP_ASSIGN_OR_RETURN(const int64_t ranks, json_int(e, "ranks", at));
  if (ranks < 2 || ranks > 1'000'000)
    return Status::invalid(at + ": ranks: must be at least 2, got " + std::to_string(ranks));
  m.ranks = static_cast<int>(ranks);
  SP_ASSIGN_OR_RETURN(m.placement, json_string(e, "placement", at));
  if (m.placement != "intra_node" && m.placement != "host" && m.placement != "inter_node" &&
      m.placement != "multi_node") {
    return Status::invalid(at + ": placement: '" + m.placement +
                           "' is not one of intra_node, host, inter_node, multi_node");
  }
  return Status::ok();
}

// The calibration's collectives: the fits (calibration.collectives) and the measurements they were
// fitted to (calibration.measurements.collectives), one entry per measured group; the fields the
// collective model needs (the calibrate library reads the whole section, errors and sample counts
// included).
Result<std::vector<MeasuredCollective>> parse_measured_collectives(const Json& cal,
                                                                   const std::string& ctx) {
  std::vector<MeasuredCollective> out;
  auto entry = [&](const MeasuredCollective& key) -> MeasuredCollective& {
    for (auto& m : out) {
      if (m.op == key.op && m.ranks == key.ranks && m.placement == key.placement) return m;
    }
    return out.emplace_back(key);
  };
  // Every entry of parent.collectives (absent or null: none), with its group's entry in `out`.
  auto each = [&](const Json& parent, const std::string& at_parent, auto&& read) -> Status {
    auto it = parent.find("collectives");
    if (it == parent.end() || it->is_null()) return Status::ok();
    if (!it->is_array()) return Status::invalid(at_parent + ": collectives: expected an array");
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string at = at_parent + ": collectives[" + std::to_string(i) + "]";
      const Json& e = (*it)[i];
      MeasuredCollective key;
      SP_RETURN_IF_ERROR(parse_measured_group(e, at, key));
      SP_RETURN_IF_ERROR(read(e, at, entry(key)));
    }
    return Status::ok();
  };
  SP_RETURN_IF_ERROR(
      each(cal, ctx, [](const Json& e, const std::string& at, MeasuredCollective& m) -> Status {
        SP_ASSIGN_OR_RETURN(const double latency, json_number(e, "latency_s", at));
        SP_ASSIGN_OR_RETURN(const double per_byte, json_number(e, "seconds_per_byte", at));
        if (!(latency >= 0) || !(per_byte >= 0) || latency + per_byte <= 0 ||
            latency > kMaxParsedSeconds) {
          return Status::invalid(
              at + ": latency_s and seconds_per_byte: must be non-negative and " +
              "not both zero, got " + std::to_string(latency) + " and " + std::to_string(per_byte));
        }
        m.latency = Duration::seconds(latency);
        m.seconds_per_byte = per_byte;
        return Status::ok();
      }));
  if (auto meas = cal.find("measurements"); meas != cal.end() && meas->is_object()) {
    SP_RETURN_IF_ERROR(
        each(*meas, ctx + ": measurements",
             [](const Json& e, const std::string& at, MeasuredCollective& m) -> Status {
               SP_ASSIGN_OR_RETURN(const int64_t bytes,
                                   json_int(e, "bytes", at, std::nullopt, true, kMaxParsedBytes));
               SP_ASSIGN_OR_RETURN(const double time, json_number(e, "time_s", at));
               if (bytes <= 0 || !(time > 0) || time > kMaxParsedSeconds) {
                 return Status::invalid(at + ": bytes and time_s: must be positive, got " +
                                        std::to_string(bytes) + " and " + std::to_string(time) +
                                        " (at most an hour)");
               }
               m.points.emplace_back(Bytes(bytes), Duration::seconds(time));
               return Status::ok();
             }));
  }
  // Points ascending in size, repeats of a size merged into their geometric mean.
  for (auto& m : out) {
    auto& p = m.points;
    std::stable_sort(p.begin(), p.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<std::pair<Bytes, Duration>> merged;
    for (size_t i = 0; i < p.size();) {
      size_t j = i;
      double log_sum = 0;
      for (; j < p.size() && p[j].first == p[i].first; ++j)
        log_sum += std::log(p[j].second.to_seconds());
      merged.emplace_back(p[i].first,
                          Duration::seconds(std::exp(log_sum / static_cast<double>(j - i))));
      i = j;
    }
    p = std::move(merged);
  }
  return out;
}

Result<Cluster> parse_cluster_json(const Json& j, const std::string& file) {
  SP_RETURN_IF_ERROR(check_keys(
      j, file,
      {"name", "description", "gpu", "node", "network", "cost_model", "extends", "calibration"}));
  Cluster c;
  c.path = file;
  SP_ASSIGN_OR_RETURN(c.name, json_string(j, "name", file));
  SP_ASSIGN_OR_RETURN(c.description, json_string(j, "description", file, std::string()));
  SP_ASSIGN_OR_RETURN(const Json* g, section(j, "gpu", file));
  SP_ASSIGN_OR_RETURN(c.gpu, parse_gpu(*g, file + ": gpu"));
  SP_ASSIGN_OR_RETURN(const Json* n, section(j, "node", file));
  SP_ASSIGN_OR_RETURN(c.node, parse_node(*n, file + ": node", &c.gpus_per_node));
  SP_ASSIGN_OR_RETURN(const Json* net, section(j, "network", file));
  SP_ASSIGN_OR_RETURN(c.network, parse_network(*net, file + ": network"));
  SP_ASSIGN_OR_RETURN(c.cost, parse_cost(j, file + ": cost_model"));
  if (auto cal = j.find("calibration"); cal != j.end() && !cal->is_null()) {
    if (!cal->is_object()) return Status::invalid(file + ": calibration: expected an object");
    SP_ASSIGN_OR_RETURN(c.measured_collectives,
                        parse_measured_collectives(*cal, file + ": calibration"));
    SP_ASSIGN_OR_RETURN(c.calibration, profile_calibration_from_json(*cal, file));
    c.calibration_section = cal->dump();
  }
  return c;
}

std::string bw_str(BytesPerSecond b) {
  // Exact and unit-carrying: GB/s with enough digits to round-trip.
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6gGB/s", b.value() / 1e9);
  return buf;
}
std::string dur_str(Duration d) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6gus", d.to_microseconds());
  return buf;
}
std::string flops_str(FlopsPerSecond f) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6gTFLOP/s", f.value() / 1e12);
  return buf;
}

}  // namespace

std::vector<std::string> bundled_cluster_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(bundled_dir(), ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<Cluster> parse_cluster(const std::string& json_text, const std::string& file) {
  SP_ASSIGN_OR_RETURN(Json j, parse_json(json_text, file));
  if (!j.is_object()) return Status::invalid(file + ": expected a JSON object at the top level");
  if (auto it = j.find("extends"); it != j.end()) {
    if (!it->is_string())
      return Status::invalid(file + ": extends: expected a profile name or path");
    auto base_path = resolve_path(it->get<std::string>(), file);
    if (!base_path) return base_path.status().with_context(file + ": extends");
    SP_ASSIGN_OR_RETURN(Json base, read_profile(*base_path, 1));
    Json patch = j;
    patch.erase("extends");
    base.erase("extends");
    merge(base, patch);
    j = std::move(base);
  }
  return parse_cluster_json(j, file);
}

Status check_dtype_supported(const Cluster& cluster, DType dtype, std::string_view what) {
  if (dtype != DType::kFp8 || cluster.gpu.fp8_dense.value() > 0) return Status::ok();
  return Status::invalid(std::string(what) + ": dtype=fp8 needs fp8 tensor cores; " +
                         cluster.gpu.name + " of cluster " + cluster.name +
                         " has none (gpu.fp8_dense = 0): use dtype=bf16");
}

double interpolate_network_fraction(const std::vector<NetworkScalingPoint>& t, int nodes) {
  if (t.empty()) return 1.0;
  if (nodes <= t.front().nodes) return t.front().fraction;
  if (nodes >= t.back().nodes) return t.back().fraction;
  const auto hi = std::lower_bound(t.begin(), t.end(), nodes,
                                   [](const NetworkScalingPoint& p, int n) { return p.nodes < n; });
  const auto lo = hi - 1;
  const double a = std::log(static_cast<double>(nodes) / lo->nodes) /
                   std::log(static_cast<double>(hi->nodes) / lo->nodes);
  return std::exp((1 - a) * std::log(lo->fraction) + a * std::log(hi->fraction));
}

std::vector<NetworkScalingPoint> CostModelParams::network_scaling_for(std::string_view op) const {
  std::vector<NetworkScalingPoint> own, generic;
  for (const auto& p : network_scaling) {
    if (p.op == op) own.push_back(p);
    if (p.op.empty()) generic.push_back(p);
  }
  return own.empty() ? generic : own;
}

Result<Cluster> load_cluster(const std::string& name_or_path) {
  SP_ASSIGN_OR_RETURN(std::string path, resolve_path(name_or_path, ""));
  SP_ASSIGN_OR_RETURN(Json j, read_profile(path, 0));
  return parse_cluster_json(j, path);
}

std::string cluster_to_json(const Cluster& c, int indent) {
  Json j;
  j["name"] = c.name;
  if (!c.description.empty()) j["description"] = c.description;
  j["gpu"] = {{"name", c.gpu.name},
              {"bf16_dense", flops_str(c.gpu.bf16_dense)},
              {"fp8_dense", flops_str(c.gpu.fp8_dense)},
              {"memory", std::to_string(c.gpu.memory.value()) + "B"},
              {"memory_bandwidth", bw_str(c.gpu.memory_bandwidth)},
              {"sm_count", c.gpu.sm_count}};
  if (c.gpu.fp4_dense.value() > 0) j["gpu"]["fp4_dense"] = flops_str(c.gpu.fp4_dense);
  if (c.gpu.compute_capability > 0) {
    j["gpu"]["compute_capability"] = std::to_string(c.gpu.compute_capability / 10) + "." +
                                     std::to_string(c.gpu.compute_capability % 10);
  }
  const GpuEfficiency& e = c.gpu.efficiency;
  auto curve = [](const AttentionCurve& a) {
    Json c{
        {"ceiling", a.ceiling}, {"half_tokens", a.half_tokens}, {"head_dim_half", a.head_dim_half}};
    if (a.backward_ceiling > 0) {
      c["backward_ceiling"] = a.backward_ceiling;
      c["backward_half_tokens"] = a.backward_half_tokens;
    }
    return c;
  };
  j["gpu"]["efficiency"] = {{"gemm_bf16", e.gemm_bf16},
                            {"gemm_fp8", e.gemm_fp8},
                            {"flash2", curve(e.flash2)},
                            {"cudnn", curve(e.cudnn)},
                            {"memory",
                             {{"vectorized", e.memory.vectorized},
                              {"cast_loop", e.memory.cast_loop},
                              {"row_norm", e.memory.row_norm},
                              {"multi_tensor", e.memory.multi_tensor},
                              {"strided", e.memory.strided},
                              {"strided_copy", e.memory.strided_copy},
                              {"reduce", e.memory.reduce},
                              {"segment_sum", e.memory.segment_sum}}}};
  if (e.gemm_fp4 > 0) j["gpu"]["efficiency"]["gemm_fp4"] = e.gemm_fp4;
  if (e.sm_clock.enabled()) {
    const SmClock& k = e.sm_clock;
    Json clock{{"max", format_clock(k.max_hz)}, {"measured_at", Json::object()}};
    if (k.power_limited()) {
      clock["power_limit"] = {{"tensor_share", k.tensor_share},
                              {"clock", format_clock(k.mixed_hz)},
                              {"tensor_bound_clock", format_clock(k.tensor_bound_hz)},
                              {"exponent", k.exponent}};
    }
    for (auto [key, hz] : {std::pair<const char*, double>{"gemm", k.gemm_hz},
                           {"attention", k.attention_hz},
                           {"cast_loop", k.cast_loop_hz}}) {
      if (hz > 0) clock["measured_at"][key] = format_clock(hz);
    }
    j["gpu"]["efficiency"]["sm_clock"] = clock;
  }
  j["node"] = {{"gpus_per_node", c.gpus_per_node},
               {"nvlink_generation", c.node.nvlink_generation},
               {"nvlink_bandwidth", bw_str(c.node.nvlink_bandwidth)},
               {"nvlink_domain_gpus", c.node.nvlink_domain_gpus},
               {"nvswitches", c.node.nvswitches},
               {"nvls", c.node.nvls},
               {"nvlink_latency", dur_str(c.node.nvlink_latency)},
               {"pcie_bandwidth", bw_str(c.node.pcie_bandwidth)}};
  j["network"] = {{"fabric", c.network.fabric},
                  {"nics_per_node", c.network.nics_per_node},
                  {"nic_bandwidth", bw_str(c.network.nic_bandwidth)},
                  {"rail_optimized", c.network.rail_optimized},
                  {"switch_tiers", c.network.switch_tiers},
                  {"nodes_per_leaf", c.network.nodes_per_leaf},
                  {"oversubscription", c.network.oversubscription},
                  {"nic_latency", dur_str(c.network.nic_latency)},
                  {"switch_latency", dur_str(c.network.switch_latency)},
                  {"sharp", c.network.sharp}};
  Json cm = {{"nvlink_efficiency", c.cost.nvlink_efficiency},
             {"nvls_efficiency", c.cost.nvls_efficiency},
             {"network_efficiency", c.cost.network_efficiency},
             {"base_latency", dur_str(c.cost.base_latency)},
             {"nvlink_step_latency", dur_str(c.cost.nvlink_step_latency)},
             {"network_step_latency", dur_str(c.cost.network_step_latency)},
             {"ramp_bytes", std::to_string(c.cost.ramp_bytes.value()) + "B"},
             {"ll_bandwidth_fraction", c.cost.ll_bandwidth_fraction},
             {"ll128_bandwidth_fraction", c.cost.ll128_bandwidth_fraction},
             {"ll128_enabled", c.cost.ll128_enabled}};
  if (!c.cost.network_scaling.empty()) {
    Json scaling = Json::array();
    for (const auto& p : c.cost.network_scaling) {
      Json point = {{"nodes", p.nodes}, {"fraction", p.fraction}};
      if (!p.op.empty()) point["op"] = p.op;
      scaling.push_back(point);
    }
    cm["network_scaling"] = scaling;
  }
  if (!c.cost.calibrated_from.empty()) cm["calibrated_from"] = c.cost.calibrated_from;
  j["cost_model"] = cm;
  if (!c.calibration_section.empty()) j["calibration"] = Json::parse(c.calibration_section);
  return j.dump(indent);
}

}  // namespace scaleplan::hw
