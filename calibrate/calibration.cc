#include "calibrate/calibration.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/layout.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::calibrate {
namespace {

std::vector<double> features_of(const KernelSample& s, const TileParams& tiles) {
  switch (s.kind) {
    case KernelKind::kGemm:
      return gemm_features(s.gemm, tiles);
    case KernelKind::kAttentionFwd:
      return attention_features(s.attention, false);
    case KernelKind::kAttentionBwd:
      return attention_features(s.attention, true);
    case KernelKind::kMemoryBound:
      return memory_features(s.memory);
  }
  return {};
}

Result<ModelFit> fit_kernels(const Measurements& m, KernelKind kind,
                             const std::vector<std::string>& names, const TileParams& tiles,
                             int folds, const FitOptions& o) {
  std::vector<std::vector<double>> x, hx;
  std::vector<double> t, ht;
  for (const KernelSample& s : m.kernels) {
    if (s.kind != kind) continue;
    (s.holdout ? hx : x).push_back(features_of(s, tiles));
    (s.holdout ? ht : t).push_back(s.time.to_seconds());
  }
  ModelFit f;
  f.names = names;
  f.samples = static_cast<int>(x.size());
  if (x.size() < names.size()) {
    f.coef.assign(names.size(), 0.0);
    return f;  // not measured: an all-zero model, flagged by samples < coefficients
  }
  const std::string what(to_string(kind));
  SP_ASSIGN_OR_RETURN(const LinearFit fit, fit_relative(x, t, what, o));
  f.coef = fit.coef;
  if (static_cast<int>(x.size()) >= 2 * folds) {
    SP_ASSIGN_OR_RETURN(f.cv, cross_validate(x, t, folds, what, o));
  }
  std::vector<double> errors;
  for (size_t i = 0; i < hx.size(); ++i)
    errors.push_back(std::abs(predict(fit, hx[i]) - ht[i]) / ht[i]);
  f.holdout = summarize_errors(std::move(errors));
  return f;
}

bool is_attention(const KernelSample& s) {
  return s.kind == KernelKind::kAttentionFwd || s.kind == KernelKind::kAttentionBwd;
}

// The attention curve fitted for the shape's kernel, or nullptr.
const ModelFit* kernel_fit(const Calibration& c, const KernelSample& s) {
  const std::string_view name = to_string(s.attention.kernel);
  for (const AttentionKernelFit& k : c.attention_kernels) {
    if (k.kernel != name) continue;
    const ModelFit& f = s.kind == KernelKind::kAttentionFwd ? k.forward : k.backward;
    return f.samples >= static_cast<int>(f.names.size()) ? &f : nullptr;
  }
  return nullptr;
}

// Refuses attention timed on the reference kernels; fits one forward/backward pair per
// implementation measured, in the order first measured.
Status fit_attention(const Measurements& m, const TileParams& tiles, int folds, const FitOptions& o,
                     Calibration& c) {
  int reference = 0;
  std::vector<std::string> order;
  for (const KernelSample& s : m.kernels) {
    if (!is_attention(s)) continue;
    if (s.implementation == kReferenceAttention) ++reference;
    if (!s.implementation.empty() &&
        std::find(order.begin(), order.end(), s.implementation) == order.end())
      order.push_back(s.implementation);
  }
  if (reference > 0) {
    return Status::invalid(
        "attention: " + std::to_string(reference) +
        " measurements were timed on the cuda backend's reference kernels "
        "(runtime/cuda/attention.cu: no tensor cores), which no framework runs; refusing to fit "
        "attention from them (measure the framework's kernel: cuDNN SDPA)");
  }
  for (const std::string& impl : order) {
    Measurements only;
    for (const KernelSample& s : m.kernels) {
      if (is_attention(s) && s.implementation == impl) only.kernels.push_back(s);
    }
    AttentionKernelFit k;
    k.kernel = impl;
    SP_ASSIGN_OR_RETURN(
        k.forward, fit_kernels(only, KernelKind::kAttentionFwd, kAttentionNames, tiles, folds, o));
    SP_ASSIGN_OR_RETURN(
        k.backward, fit_kernels(only, KernelKind::kAttentionBwd, kAttentionNames, tiles, folds, o));
    c.attention_kernels.push_back(std::move(k));
  }
  if (order.size() <= 1) {
    // One implementation (or unnamed samples): the primary curves are fitted on all of them.
    SP_ASSIGN_OR_RETURN(c.attention_forward, fit_kernels(m, KernelKind::kAttentionFwd,
                                                         kAttentionNames, tiles, folds, o));
    SP_ASSIGN_OR_RETURN(c.attention_backward, fit_kernels(m, KernelKind::kAttentionBwd,
                                                          kAttentionNames, tiles, folds, o));
  } else {
    c.attention_forward = c.attention_kernels.front().forward;
    c.attention_backward = c.attention_kernels.front().backward;
  }
  return Status::ok();
}

constexpr std::string_view kMemPathNames[] = {"vectorized",   "cast_loop",  "row_norm",
                                              "multi_tensor", "strided",    "strided_copy",
                                              "reduce",       "segment_sum"};
static_assert(std::size(kMemPathNames) == static_cast<size_t>(MemPath::kSegmentSum) + 1);
}  // namespace

std::string_view mem_path_name(MemPath p) { return kMemPathNames[static_cast<size_t>(p)]; }

std::optional<MemPath> parse_mem_path(std::string_view name) {
  for (size_t i = 0; i < std::size(kMemPathNames); ++i)
    if (kMemPathNames[i] == name) return static_cast<MemPath>(i);
  return std::nullopt;
}

std::string memory_family_key(std::string_view family, MemPath path) {
  std::string key(family);
  if (path != MemPath::kVectorized) key += "/" + std::string(mem_path_name(path));
  return key;
}

Result<Calibration> fit_calibration(const Measurements& m, const TileParams& tiles, int folds,
                                    const FitOptions& o) {
  Calibration c;
  c.tiles = tiles;
  SP_ASSIGN_OR_RETURN(c.gemm, fit_kernels(m, KernelKind::kGemm, kGemmNames, tiles, folds, o));
  SP_RETURN_IF_ERROR(fit_attention(m, tiles, folds, o, c));
  // The family-blind model times bytes at one rate: the vectorized kernels' (all that profile's
  // sweeps time). A PyTorch trace's casting-loop or strided kernels move bytes at half that rate
  // or less (docs/validation.md, issue 43) and get curves of their own below; fitted in, they
  // would slow every op that has none.
  Measurements vectorized;
  for (const KernelSample& s : m.kernels)
    if (s.kind == KernelKind::kMemoryBound && s.memory.path == MemPath::kVectorized)
      vectorized.kernels.push_back(s);
  SP_ASSIGN_OR_RETURN(c.memory_bound, fit_kernels(vectorized, KernelKind::kMemoryBound,
                                                  kMemoryNames, tiles, folds, o));
  c.overlap_slowdown = std::max(1.0, m.overlap_slowdown.value_or(1.0));

  std::map<std::string, std::pair<std::vector<std::vector<double>>, std::vector<double>>> families;
  for (const KernelSample& s : m.kernels) {
    if (s.kind != KernelKind::kMemoryBound || s.holdout) continue;
    auto& family = families[memory_family_key(s.family, s.memory.path)];
    family.first.push_back(collective_features(s.memory.bytes));
    family.second.push_back(s.time.to_seconds());
  }
  for (const auto& [family, data] : families) {
    if (data.first.size() < 2) continue;
    SP_ASSIGN_OR_RETURN(const LinearFit fit, fit_relative(data.first, data.second, family, o));
    BandwidthFit f;
    f.family = family;
    f.overhead = Duration::seconds(fit.coef[0]);
    f.seconds_per_byte = fit.coef[1];
    f.samples = static_cast<int>(data.first.size());
    if (static_cast<int>(data.first.size()) >= 2 * folds) {
      SP_ASSIGN_OR_RETURN(f.cv, cross_validate(data.first, data.second, folds, family, o));
    }
    c.memory_families.push_back(f);
  }

  // Collectives: one latency-bandwidth fit per (op, ranks, placement).
  std::map<std::tuple<std::string, int, std::string>, std::vector<const CollectiveSample*>> groups;
  for (const CollectiveSample& s : m.collectives)
    groups[{s.op, s.ranks, s.placement}].push_back(&s);
  for (const auto& [key, samples] : groups) {
    const auto& [op, ranks, placement] = key;
    std::vector<std::vector<double>> x;
    std::vector<double> t;
    for (const CollectiveSample* s : samples) {
      x.push_back(collective_features(s->size));
      t.push_back(s->time.to_seconds());
    }
    if (x.size() < 2) continue;
    const std::string what = op + " on " + std::to_string(ranks) + " ranks (" + placement + ")";
    SP_ASSIGN_OR_RETURN(const LinearFit fit, fit_relative(x, t, what, o));
    CollectiveFit f{op, ranks, placement, Duration::seconds(fit.coef[0]), fit.coef[1], 0.0, 0, {}};
    f.samples = static_cast<int>(x.size());
    auto parsed = parse_collective_op(op);
    const double factor = parsed.is_ok() ? hw::bus_factor(*parsed, ranks) : 1.0;
    f.busbw_gbps = fit.coef[1] > 0 ? factor / fit.coef[1] / 1e9 : 0.0;
    if (static_cast<int>(x.size()) >= 2 * folds) {
      SP_ASSIGN_OR_RETURN(f.cv, cross_validate(x, t, folds, what, o));
    }
    c.collectives.push_back(f);
  }
  return c;
}

double predict_seconds(const Calibration& c, const KernelSample& s) {
  const ModelFit* f = nullptr;
  switch (s.kind) {
    case KernelKind::kGemm:
      f = &c.gemm;
      break;
    case KernelKind::kAttentionFwd:
      f = &c.attention_forward;
      break;
    case KernelKind::kAttentionBwd:
      f = &c.attention_backward;
      break;
    case KernelKind::kMemoryBound:
      f = &c.memory_bound;
      break;
  }
  if (is_attention(s)) {
    if (const ModelFit* k = kernel_fit(c, s)) f = k;
  }
  const std::vector<double> x = features_of(s, c.tiles);
  double t = 0;
  for (size_t i = 0; i < x.size() && i < f->coef.size(); ++i) t += f->coef[i] * x[i];
  return t;
}

Json to_json(const KernelSample& s) {
  Json j{{"kind", std::string(to_string(s.kind))},
         {"family", s.family},
         {"time_s", s.time.to_seconds()},
         {"noise", s.noise},
         {"holdout", s.holdout}};
  switch (s.kind) {
    case KernelKind::kGemm:
      j["m"] = s.gemm.m, j["n"] = s.gemm.n, j["k"] = s.gemm.k, j["batch"] = s.gemm.batch;
      break;
    case KernelKind::kAttentionFwd:
    case KernelKind::kAttentionBwd: {
      const AttentionShape& a = s.attention;
      j["batch"] = a.batch, j["heads"] = a.heads, j["kv_heads"] = a.kv_heads, j["q_len"] = a.q_len;
      j["kv_len"] = a.kv_len, j["head_dim"] = a.head_dim, j["v_head_dim"] = a.v_head_dim;
      j["causal"] = a.causal;
      if (a.window > 0) j["window"] = a.window;
      if (!s.implementation.empty()) j["implementation"] = s.implementation;
      break;
    }
    case KernelKind::kMemoryBound:
      j["bytes"] = s.memory.bytes.value(), j["flops"] = s.memory.flops.value();
      if (s.memory.path != MemPath::kVectorized) j["path"] = mem_path_name(s.memory.path);
      break;
  }
  return j;
}

Result<KernelSample> kernel_sample_from_json(const Json& j, const std::string& ctx) {
  KernelSample s;
  SP_ASSIGN_OR_RETURN(const std::string kind, json_string(j, "kind", ctx));
  if (kind == "gemm") {
    s.kind = KernelKind::kGemm;
    SP_ASSIGN_OR_RETURN(s.gemm.m, json_int(j, "m", ctx));
    SP_ASSIGN_OR_RETURN(s.gemm.n, json_int(j, "n", ctx));
    SP_ASSIGN_OR_RETURN(s.gemm.k, json_int(j, "k", ctx));
    SP_ASSIGN_OR_RETURN(s.gemm.batch, json_int(j, "batch", ctx, 1));
  } else if (kind == "attention_fwd" || kind == "attention_bwd") {
    s.kind = kind == "attention_fwd" ? KernelKind::kAttentionFwd : KernelKind::kAttentionBwd;
    AttentionShape& a = s.attention;
    SP_ASSIGN_OR_RETURN(a.batch, json_int(j, "batch", ctx));
    SP_ASSIGN_OR_RETURN(a.heads, json_int(j, "heads", ctx));
    SP_ASSIGN_OR_RETURN(a.kv_heads, json_int(j, "kv_heads", ctx));
    SP_ASSIGN_OR_RETURN(a.q_len, json_int(j, "q_len", ctx));
    SP_ASSIGN_OR_RETURN(a.kv_len, json_int(j, "kv_len", ctx));
    SP_ASSIGN_OR_RETURN(a.head_dim, json_int(j, "head_dim", ctx));
    SP_ASSIGN_OR_RETURN(a.v_head_dim, json_int(j, "v_head_dim", ctx));
    SP_ASSIGN_OR_RETURN(a.causal, json_bool(j, "causal", ctx));
    SP_ASSIGN_OR_RETURN(a.window, json_int(j, "window", ctx, 0));
    SP_ASSIGN_OR_RETURN(s.implementation, json_string(j, "implementation", ctx, std::string()));
    // A sample is timed by the curve of its implementation, which a shape names as its kernel.
    if (s.implementation == "cudnn") a.kernel = AttentionKernel::kCudnn;
    if (s.implementation == "unfused") a.kernel = AttentionKernel::kUnfused;
  } else if (kind == "memory_bound") {
    s.kind = KernelKind::kMemoryBound;
    SP_ASSIGN_OR_RETURN(const int64_t bytes,
                        json_int(j, "bytes", ctx, std::nullopt, true, kMaxParsedBytes));
    s.memory.bytes = Bytes(bytes);
    SP_ASSIGN_OR_RETURN(const double flops, json_number(j, "flops", ctx, 0.0));
    s.memory.flops = Flops(flops);
    // Measurements written before 2026-11-30 name no path: the vectorized kernels profile times.
    SP_ASSIGN_OR_RETURN(
        const std::string path,
        json_string(j, "path", ctx, std::string(mem_path_name(MemPath::kVectorized))));
    const std::optional<MemPath> p = parse_mem_path(path);
    if (!p)
      return Status::invalid(ctx + ": path: '" + path +
                             "' is not vectorized, cast_loop, row_norm, multi_tensor, strided, "
                             "strided_copy, reduce or segment_sum");
    s.memory.path = *p;
  } else {
    return Status::invalid(ctx + ": kind: '" + kind +
                           "' is not gemm, attention_fwd, attention_bwd or memory_bound");
  }
  SP_ASSIGN_OR_RETURN(s.family, json_string(j, "family", ctx, kind));
  SP_ASSIGN_OR_RETURN(s.time, hw::calibration_seconds(j, "time_s", ctx));
  if (s.time <= Duration::zero())
    return Status::invalid(ctx + ": time_s: must be positive, got " + json_brief(j["time_s"]));
  SP_ASSIGN_OR_RETURN(s.noise, json_number(j, "noise", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(s.holdout, json_bool(j, "holdout", ctx, false));
  return s;
}

Json to_json(const CollectiveSample& s) {
  return Json{{"op", s.op},
              {"ranks", s.ranks},
              {"placement", s.placement},
              {"bytes", s.size.value()},
              {"time_s", s.time.to_seconds()},
              {"noise", s.noise},
              {"source", s.source}};
}

Result<CollectiveSample> collective_sample_from_json(const Json& j, const std::string& ctx) {
  CollectiveSample s;
  SP_ASSIGN_OR_RETURN(s.op, json_string(j, "op", ctx));
  SP_ASSIGN_OR_RETURN(const int64_t ranks, json_int(j, "ranks", ctx, std::nullopt, true, kMaxGpus));
  s.ranks = static_cast<int>(ranks);
  SP_ASSIGN_OR_RETURN(s.placement, json_string(j, "placement", ctx));
  SP_ASSIGN_OR_RETURN(const int64_t bytes,
                      json_int(j, "bytes", ctx, std::nullopt, true, kMaxParsedBytes));
  s.size = Bytes(bytes);
  SP_ASSIGN_OR_RETURN(s.time, hw::calibration_seconds(j, "time_s", ctx));
  if (s.time <= Duration::zero())
    return Status::invalid(ctx + ": time_s: must be positive, got " + json_brief(j["time_s"]));
  SP_ASSIGN_OR_RETURN(s.noise, json_number(j, "noise", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(s.source, json_string(j, "source", ctx, std::string("profile")));
  return s;
}

Json to_json(const Measurements& m) {
  Json k = Json::array(), c = Json::array();
  for (const auto& s : m.kernels) k.push_back(to_json(s));
  for (const auto& s : m.collectives) c.push_back(to_json(s));
  Json j{{"kernels", k}, {"collectives", c}};
  if (m.overlap_slowdown) j["overlap_slowdown"] = *m.overlap_slowdown;
  return j;
}

Result<Measurements> measurements_from_json(const Json& j, const std::string& ctx) {
  Measurements m;
  if (!j.is_object()) return Status::invalid(ctx + ": measurements: expected an object");
  for (const char* key : {"kernels", "collectives"}) {
    if (json_has(j, key) && !j[key].is_array())
      return Status::invalid(ctx + ": measurements: " + key + ": expected an array, got " +
                             json_brief(j[key]));
  }
  if (auto it = j.find("kernels"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      SP_ASSIGN_OR_RETURN(
          KernelSample s,
          kernel_sample_from_json((*it)[i], ctx + ": kernels[" + std::to_string(i) + "]"));
      m.kernels.push_back(std::move(s));
    }
  }
  if (auto it = j.find("collectives"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      SP_ASSIGN_OR_RETURN(
          CollectiveSample s,
          collective_sample_from_json((*it)[i], ctx + ": collectives[" + std::to_string(i) + "]"));
      m.collectives.push_back(std::move(s));
    }
  }
  if (json_has(j, "overlap_slowdown")) {
    SP_ASSIGN_OR_RETURN(m.overlap_slowdown,
                        json_number(j, "overlap_slowdown", ctx + ": measurements"));
  }
  return m;
}

}  // namespace scaleplan::calibrate
