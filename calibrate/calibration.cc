#include "calibrate/calibration.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/layout.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::calibrate {
namespace {

const std::vector<std::string> kGemmNames = {"overhead_s", "seconds_per_flop",
                                             "seconds_per_padded_flop", "seconds_per_byte"};
const std::vector<std::string> kAttentionNames = {"overhead_s", "seconds_per_flop",
                                                  "seconds_per_byte", "seconds_per_row"};
const std::vector<std::string> kMemoryNames = {"overhead_s", "seconds_per_byte",
                                               "seconds_per_flop"};

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

Json errors_json(const ErrorSummary& e) {
  return Json{{"n", e.n}, {"median", e.median}, {"p90", e.p90}, {"max", e.max}};
}
// A fit's error summary; every field is optional, a mistyped one is an error naming it.
Result<ErrorSummary> errors_from(const Json& j, const std::string& ctx) {
  ErrorSummary e;
  if (!j.is_object()) return Status::invalid(ctx + ": expected an object, got " + json_brief(j));
  SP_ASSIGN_OR_RETURN(const int64_t n, json_int(j, "n", ctx, 0, false));
  e.n = static_cast<int>(n);
  SP_ASSIGN_OR_RETURN(e.median, json_number(j, "median", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(e.p90, json_number(j, "p90", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(e.max, json_number(j, "max", ctx, 0.0));
  return e;
}

// The optional `samples` count, `cv_error` and `holdout_error` of a fit.
Status fit_extras(const Json& j, const std::string& ctx, int& samples, ErrorSummary* cv,
                  ErrorSummary* holdout) {
  SP_ASSIGN_OR_RETURN(const int64_t n, json_int(j, "samples", ctx, 0, false));
  samples = static_cast<int>(n);
  if (cv && json_has(j, "cv_error")) {
    SP_ASSIGN_OR_RETURN(*cv, errors_from(j["cv_error"], ctx + ": cv_error"));
  }
  if (holdout && json_has(j, "holdout_error")) {
    SP_ASSIGN_OR_RETURN(*holdout, errors_from(j["holdout_error"], ctx + ": holdout_error"));
  }
  return Status::ok();
}

// A time in seconds from a calibration: finite, non-negative, at most an hour (a latency or an
// overhead beyond that is no measurement; units.h kMaxParsedSeconds).
Result<Duration> seconds_field(const Json& j, const char* key, const std::string& ctx,
                               std::optional<double> fallback = std::nullopt) {
  SP_ASSIGN_OR_RETURN(const double v, json_number(j, key, ctx, fallback));
  if (v < 0 || v > kMaxParsedSeconds)
    return Status::invalid(ctx + ": " + key + ": " + json_brief(j[key]) +
                           " is not between 0 and 3600 seconds");
  return Duration::seconds(v);
}

// A rate coefficient (seconds per byte or FLOP): finite and non-negative.
Result<double> non_negative(const Json& j, const char* key, const std::string& ctx) {
  SP_ASSIGN_OR_RETURN(const double v, json_number(j, key, ctx));
  if (v < 0) return Status::invalid(ctx + ": " + key + ": must be >= 0, got " + json_brief(j[key]));
  return v;
}

Json model_json(const ModelFit& f) {
  Json coef = Json::object();
  for (size_t i = 0; i < f.names.size(); ++i) coef[f.names[i]] = f.coef[i];
  return Json{{"coefficients", coef},
              {"samples", f.samples},
              {"cv_error", errors_json(f.cv)},
              {"holdout_error", errors_json(f.holdout)}};
}

Result<ModelFit> model_from(const Json& j, const std::vector<std::string>& names,
                            const std::string& ctx) {
  ModelFit f;
  f.names = names;
  if (!j.is_object()) return Status::invalid(ctx + ": missing");
  auto it = j.find("coefficients");
  if (it == j.end() || !it->is_object()) return Status::invalid(ctx + ": coefficients: missing");
  for (const std::string& n : names) {
    SP_ASSIGN_OR_RETURN(const double v, json_number(*it, n, ctx + ": coefficients"));
    if (v < 0 || !std::isfinite(v))
      return Status::invalid(ctx + ": coefficients: " + n + ": must be >= 0, got " +
                             json_brief((*it)[n]));
    f.coef.push_back(v);
  }
  SP_RETURN_IF_ERROR(fit_extras(j, ctx, f.samples, &f.cv, &f.holdout));
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

}  // namespace

Result<Calibration> fit_calibration(const Measurements& m, const TileParams& tiles, int folds,
                                    const FitOptions& o) {
  Calibration c;
  c.tiles = tiles;
  SP_ASSIGN_OR_RETURN(c.gemm, fit_kernels(m, KernelKind::kGemm, kGemmNames, tiles, folds, o));
  SP_RETURN_IF_ERROR(fit_attention(m, tiles, folds, o, c));
  SP_ASSIGN_OR_RETURN(c.memory_bound,
                      fit_kernels(m, KernelKind::kMemoryBound, kMemoryNames, tiles, folds, o));
  c.overlap_slowdown = std::max(1.0, m.overlap_slowdown.value_or(1.0));

  std::map<std::string, std::pair<std::vector<std::vector<double>>, std::vector<double>>> families;
  for (const KernelSample& s : m.kernels) {
    if (s.kind != KernelKind::kMemoryBound || s.holdout) continue;
    families[s.family].first.push_back(collective_features(s.memory.bytes));
    families[s.family].second.push_back(s.time.to_seconds());
  }
  for (const auto& [family, data] : families) {
    if (data.first.size() < 2) continue;
    SP_ASSIGN_OR_RETURN(const LinearFit fit, fit_relative(data.first, data.second, family, o));
    BandwidthFit f{family,
                   Duration::seconds(fit.coef[0]),
                   fit.coef[1],
                   static_cast<int>(data.first.size()),
                   {}};
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

Json to_json(const Calibration& c) {
  Json colls = Json::array();
  for (const CollectiveFit& f : c.collectives) {
    colls.push_back(Json{{"op", f.op},
                         {"ranks", f.ranks},
                         {"placement", f.placement},
                         {"latency_s", f.latency.to_seconds()},
                         {"seconds_per_byte", f.seconds_per_byte},
                         {"busbw_GBps", f.busbw_gbps},
                         {"samples", f.samples},
                         {"cv_error", errors_json(f.cv)}});
  }
  Json fams = Json::array();
  for (const BandwidthFit& f : c.memory_families) {
    fams.push_back(
        Json{{"family", f.family},
             {"overhead_s", f.overhead.to_seconds()},
             {"seconds_per_byte", f.seconds_per_byte},
             {"bandwidth_GBps", f.seconds_per_byte > 0 ? 1e-9 / f.seconds_per_byte : 0.0},
             {"samples", f.samples},
             {"cv_error", errors_json(f.cv)}});
  }
  Json kernels = Json::array();
  for (const AttentionKernelFit& k : c.attention_kernels) {
    kernels.push_back(Json{{"kernel", k.kernel},
                           {"forward", model_json(k.forward)},
                           {"backward", model_json(k.backward)}});
  }
  return Json{{"format", 1},
              {"attention_kernels", kernels},
              {"memory_families", fams},
              {"backend", c.backend},
              {"device", c.device},
              {"gemm_tile", c.tiles.tile},
              {"gemm_units", c.tiles.units},
              {"gemm", model_json(c.gemm)},
              {"attention_forward", model_json(c.attention_forward)},
              {"attention_backward", model_json(c.attention_backward)},
              {"memory_bound", model_json(c.memory_bound)},
              {"overlap_slowdown", c.overlap_slowdown},
              {"collectives", colls}};
}

Status check_calibration_format(const Json& j, const std::string& ctx) {
  if (!j.is_object()) return Status::invalid(ctx + ": calibration: expected an object");
  const std::string c_ctx = ctx + ": calibration";
  SP_ASSIGN_OR_RETURN(const int64_t format, json_int(j, "format", c_ctx));
  if (format != 1)
    return Status::invalid(c_ctx + ": format: " + std::to_string(format) + " is not 1");
  return Status::ok();
}

Result<Calibration> calibration_from_json(const Json& j, const std::string& ctx) {
  SP_RETURN_IF_ERROR(check_calibration_format(j, ctx));
  const std::string c_ctx = ctx + ": calibration";
  Calibration c;
  SP_ASSIGN_OR_RETURN(c.backend, json_string(j, "backend", c_ctx, std::string("unknown")));
  SP_ASSIGN_OR_RETURN(c.device, json_string(j, "device", c_ctx, std::string()));
  // Tile edge and tile units of the GEMM wave model (features.h): a tile past 2^16 or more units
  // than 2^20 is no GPU's.
  SP_ASSIGN_OR_RETURN(c.tiles.tile, json_int(j, "gemm_tile", c_ctx, 128, true, 1 << 16));
  SP_ASSIGN_OR_RETURN(c.tiles.units, json_int(j, "gemm_units", c_ctx, 1, true, 1 << 20));
  SP_ASSIGN_OR_RETURN(c.gemm, model_from(j.value("gemm", Json()), kGemmNames, c_ctx + ": gemm"));
  SP_ASSIGN_OR_RETURN(c.attention_forward,
                      model_from(j.value("attention_forward", Json()), kAttentionNames,
                                 c_ctx + ": attention_forward"));
  SP_ASSIGN_OR_RETURN(c.attention_backward,
                      model_from(j.value("attention_backward", Json()), kAttentionNames,
                                 c_ctx + ": attention_backward"));
  SP_ASSIGN_OR_RETURN(c.memory_bound, model_from(j.value("memory_bound", Json()), kMemoryNames,
                                                 c_ctx + ": memory_bound"));
  SP_ASSIGN_OR_RETURN(c.overlap_slowdown, json_number(j, "overlap_slowdown", c_ctx, 1.0));
  if (c.overlap_slowdown < 1.0 || c.overlap_slowdown > 100)
    return Status::invalid(c_ctx + ": overlap_slowdown: must be between 1 and 100, got " +
                           json_brief(j["overlap_slowdown"]));
  for (const char* key : {"memory_families", "collectives", "attention_kernels"}) {
    if (json_has(j, key) && !j[key].is_array())
      return Status::invalid(c_ctx + ": " + key + ": expected an array, got " + json_brief(j[key]));
  }
  if (auto it = j.find("attention_kernels"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& e = (*it)[i];
      const std::string e_ctx = c_ctx + ": attention_kernels[" + std::to_string(i) + "]";
      AttentionKernelFit k;
      SP_ASSIGN_OR_RETURN(k.kernel, json_string(e, "kernel", e_ctx));
      if (k.kernel == kReferenceAttention) {
        return Status::invalid(e_ctx +
                               ": kernel: 'reference' (the cuda backend's test kernels) "
                               "is no kernel a profile may hold");
      }
      SP_ASSIGN_OR_RETURN(
          k.forward, model_from(e.value("forward", Json()), kAttentionNames, e_ctx + ": forward"));
      SP_ASSIGN_OR_RETURN(k.backward, model_from(e.value("backward", Json()), kAttentionNames,
                                                 e_ctx + ": backward"));
      c.attention_kernels.push_back(std::move(k));
    }
  }
  if (auto it = j.find("memory_families"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& e = (*it)[i];
      const std::string e_ctx = c_ctx + ": memory_families[" + std::to_string(i) + "]";
      BandwidthFit f;
      SP_ASSIGN_OR_RETURN(f.family, json_string(e, "family", e_ctx));
      SP_ASSIGN_OR_RETURN(f.overhead, seconds_field(e, "overhead_s", e_ctx));
      SP_ASSIGN_OR_RETURN(f.seconds_per_byte, non_negative(e, "seconds_per_byte", e_ctx));
      SP_RETURN_IF_ERROR(fit_extras(e, e_ctx, f.samples, &f.cv, nullptr));
      c.memory_families.push_back(f);
    }
  }
  if (auto it = j.find("collectives"); it != j.end() && it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& e = (*it)[i];
      const std::string e_ctx = c_ctx + ": collectives[" + std::to_string(i) + "]";
      CollectiveFit f;
      SP_ASSIGN_OR_RETURN(f.op, json_string(e, "op", e_ctx));
      SP_ASSIGN_OR_RETURN(const int64_t ranks,
                          json_int(e, "ranks", e_ctx, std::nullopt, true, kMaxGpus));
      f.ranks = static_cast<int>(ranks);
      SP_ASSIGN_OR_RETURN(f.placement, json_string(e, "placement", e_ctx));
      SP_ASSIGN_OR_RETURN(f.latency, seconds_field(e, "latency_s", e_ctx));
      SP_ASSIGN_OR_RETURN(f.seconds_per_byte, non_negative(e, "seconds_per_byte", e_ctx));
      SP_ASSIGN_OR_RETURN(f.busbw_gbps, json_number(e, "busbw_GBps", e_ctx, 0.0));
      SP_RETURN_IF_ERROR(fit_extras(e, e_ctx, f.samples, &f.cv, nullptr));
      c.collectives.push_back(f);
    }
  }
  return c;
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
  } else {
    return Status::invalid(ctx + ": kind: '" + kind +
                           "' is not gemm, attention_fwd, attention_bwd or memory_bound");
  }
  SP_ASSIGN_OR_RETURN(s.family, json_string(j, "family", ctx, kind));
  SP_ASSIGN_OR_RETURN(s.time, seconds_field(j, "time_s", ctx));
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
  SP_ASSIGN_OR_RETURN(s.time, seconds_field(j, "time_s", ctx));
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
