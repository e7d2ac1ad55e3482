#include "hw_profiles/calibration.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/layout.h"

namespace scaleplan::hw {

Result<Duration> calibration_seconds(const Json& j, const char* key, const std::string& ctx) {
  SP_ASSIGN_OR_RETURN(const double v, json_number(j, key, ctx));
  if (v < 0 || v > kMaxParsedSeconds)
    return Status::invalid(ctx + ": " + key + ": " + json_brief(j[key]) +
                           " is not between 0 and 3600 seconds");
  return Duration::seconds(v);
}

namespace {

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

// A rate coefficient (seconds per byte or FLOP): finite and non-negative.
Result<double> non_negative(const Json& j, const char* key, const std::string& ctx) {
  SP_ASSIGN_OR_RETURN(const double v, json_number(j, key, ctx));
  if (v < 0) return Status::invalid(ctx + ": " + key + ": must be >= 0, got " + json_brief(j[key]));
  return v;
}

// A model that keeps the roofline says so: `"model": "roofline"` and `reason`; a fitted one
// writes no `model` (every profile before 2026-11-30 is fitted).
void roofline_json(bool roofline, const std::string& reason, Json& j) {
  if (!roofline) return;
  j["model"] = "roofline";
  j["reason"] = reason;
}
// The optional `model` ("fitted", the default, or "roofline") and `reason` of a kernel model.
Status roofline_from(const Json& j, const std::string& ctx, bool& roofline, std::string& reason) {
  SP_ASSIGN_OR_RETURN(const std::string model, json_string(j, "model", ctx, std::string("fitted")));
  if (model != "fitted" && model != "roofline")
    return Status::invalid(ctx + ": model: expected \"fitted\" or \"roofline\", got " +
                           json_brief(j["model"]));
  roofline = model == "roofline";
  SP_ASSIGN_OR_RETURN(reason, json_string(j, "reason", ctx, std::string()));
  return Status::ok();
}

Json model_json(const ModelFit& f) {
  Json coef = Json::object();
  for (size_t i = 0; i < f.names.size(); ++i) coef[f.names[i]] = f.coef[i];
  Json j{{"coefficients", coef},
         {"samples", f.samples},
         {"cv_error", errors_json(f.cv)},
         {"holdout_error", errors_json(f.holdout)}};
  roofline_json(f.roofline, f.reason, j);
  if (!f.families.empty()) j["families"] = f.families;
  return j;
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
  SP_RETURN_IF_ERROR(roofline_from(j, ctx, f.roofline, f.reason));
  if (json_has(j, "families")) {
    const Json& fams = j["families"];
    if (!fams.is_array())
      return Status::invalid(ctx + ": families: expected an array of family names, got " +
                             json_brief(fams));
    for (const Json& e : fams) {
      if (!e.is_string())
        return Status::invalid(ctx + ": families: expected a family name, got " + json_brief(e));
      f.families.push_back(e.get<std::string>());
    }
  }
  return f;
}

}  // namespace

const char* kernel_model_key(KernelKind k) {
  switch (k) {
    case KernelKind::kGemm:
      return "gemm";
    case KernelKind::kAttentionFwd:
      return "attention_forward";
    case KernelKind::kAttentionBwd:
      return "attention_backward";
    case KernelKind::kMemoryBound:
      return "memory_bound";
  }
  return "";
}

ModelFit& kernel_model(Calibration& c, KernelKind k) {
  return const_cast<ModelFit&>(kernel_model(std::as_const(c), k));
}

const ModelFit& kernel_model(const Calibration& c, KernelKind k) {
  switch (k) {
    case KernelKind::kGemm:
      return c.gemm;
    case KernelKind::kAttentionFwd:
      return c.attention_forward;
    case KernelKind::kAttentionBwd:
      return c.attention_backward;
    case KernelKind::kMemoryBound:
      break;
  }
  return c.memory_bound;
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
    Json j{{"family", f.family},
           {"overhead_s", f.overhead.to_seconds()},
           {"seconds_per_byte", f.seconds_per_byte},
           {"bandwidth_GBps", f.seconds_per_byte > 0 ? 1e-9 / f.seconds_per_byte : 0.0},
           {"samples", f.samples},
           {"cv_error", errors_json(f.cv)}};
    roofline_json(f.roofline, f.reason, j);
    fams.push_back(std::move(j));
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
      SP_ASSIGN_OR_RETURN(f.overhead, calibration_seconds(e, "overhead_s", e_ctx));
      SP_ASSIGN_OR_RETURN(f.seconds_per_byte, non_negative(e, "seconds_per_byte", e_ctx));
      SP_RETURN_IF_ERROR(fit_extras(e, e_ctx, f.samples, &f.cv, nullptr));
      SP_RETURN_IF_ERROR(roofline_from(e, e_ctx, f.roofline, f.reason));
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
      SP_ASSIGN_OR_RETURN(f.latency, calibration_seconds(e, "latency_s", e_ctx));
      SP_ASSIGN_OR_RETURN(f.seconds_per_byte, non_negative(e, "seconds_per_byte", e_ctx));
      SP_ASSIGN_OR_RETURN(f.busbw_gbps, json_number(e, "busbw_GBps", e_ctx, 0.0));
      SP_RETURN_IF_ERROR(fit_extras(e, e_ctx, f.samples, &f.cv, nullptr));
      c.collectives.push_back(f);
    }
  }
  return c;
}

Result<Calibration> profile_calibration_from_json(const Json& j, const std::string& ctx) {
  const bool kernels = j.contains("gemm") || j.contains("attention_forward") ||
                       j.contains("attention_backward") || j.contains("memory_bound");
  if (kernels) return calibration_from_json(j, ctx);
  SP_RETURN_IF_ERROR(check_calibration_format(j, ctx));
  const std::string c_ctx = ctx + ": calibration";
  Calibration c;
  c.kernel_models = false;
  SP_ASSIGN_OR_RETURN(c.backend, json_string(j, "backend", c_ctx, std::string("unknown")));
  SP_ASSIGN_OR_RETURN(c.device, json_string(j, "device", c_ctx, std::string()));
  return c;
}

}  // namespace scaleplan::hw
