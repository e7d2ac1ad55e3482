#include "calibrate/fitted_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace scaleplan::calibrate {
namespace {

class FittedKernelModel final : public KernelCostModel {
 public:
  FittedKernelModel(Calibration c, std::string source,
                    std::shared_ptr<const KernelCostModel> roofline,
                    std::shared_ptr<const KernelCostModel> waves)
      : c_(std::move(c)),
        source_(std::move(source)),
        roofline_(std::move(roofline)),
        waves_(std::move(waves)) {}

  Duration gemm(const GemmShape& s) const override {
    if (by_roofline(c_.gemm)) return roofline_->gemm(s);
    KernelSample k;
    k.kind = KernelKind::kGemm;
    k.gemm = s;
    k.gemm.sm_margin = 0;
    const Duration all_sms = time(k, c_.gemm);
    if (s.sm_margin <= 0 || waves_ == nullptr) return all_sms;
    // The profile timed GEMMs on every SM; on fewer (GemmShape::sm_margin) it takes what the
    // roofline's wave model says fewer SMs cost.
    const Duration base = waves_->gemm(k.gemm);
    if (base <= Duration::zero()) return all_sms;
    return all_sms * (waves_->gemm(s) / base);
  }
  Duration attention_forward(const AttentionShape& s) const override {
    if (by_roofline(c_.attention_forward)) return roofline_->attention_forward(s);
    KernelSample k;
    k.kind = KernelKind::kAttentionFwd;
    k.attention = s;
    return time(k, c_.attention_forward);
  }
  Duration attention_backward(const AttentionShape& s) const override {
    if (by_roofline(c_.attention_backward)) return roofline_->attention_backward(s);
    KernelSample k;
    k.kind = KernelKind::kAttentionBwd;
    k.attention = s;
    return time(k, c_.attention_backward);
  }
  Duration memory_bound(const MemoryBoundShape& s) const override {
    // The op's own bandwidth curve on the shape's implementation where the profile has one, else
    // the op's curve (BandwidthFit says why; calibrate/calibration.h memory_family_key); where
    // the family-blind model names the families it was fitted on, a shape of none of them
    // without a curve of its own is the roofline's (ModelFit::families).
    const std::string_view op = to_string(s.op);
    const std::string key = memory_family_key(op, s.path);
    const std::vector<std::string>& covered = c_.memory_bound.families;
    const bool coverage = !covered.empty() && roofline_ != nullptr;
    for (const std::string& family : {key, memory_family_key(op, MemPath::kVectorized)}) {
      for (const BandwidthFit& f : c_.memory_families) {
        if (f.family == family) {
          if (f.roofline && roofline_) return roofline_->memory_bound(s);
          return f.overhead +
                 Duration::seconds(f.seconds_per_byte * static_cast<double>(s.bytes.value()));
        }
      }
      if (coverage) break;  // no other path's curve: the family-blind model, or the roofline
    }
    if (coverage && std::find(covered.begin(), covered.end(), key) == covered.end())
      return roofline_->memory_bound(s);
    if (by_roofline(c_.memory_bound)) return roofline_->memory_bound(s);
    KernelSample k;
    k.kind = KernelKind::kMemoryBound;
    k.memory = s;
    return time(k, c_.memory_bound);
  }
  double overlap_slowdown() const override { return c_.overlap_slowdown; }
  // Where the roofline times some kernels, its SM clock model times them at the step's clock as
  // it does in a roofline profile (sim/emit_clock.cc); the fitted ones keep their times (fitted
  // at the clock they were measured at, which at_sm_clock's ratio leaves at 1).
  const hw::SmClock* sm_clock() const override {
    return roofline_ ? roofline_->sm_clock() : nullptr;
  }
  std::shared_ptr<const KernelCostModel> at_sm_clock(double hz) const override {
    auto at = roofline_ ? roofline_->at_sm_clock(hz) : nullptr;
    if (!at) return nullptr;
    return std::make_shared<FittedKernelModel>(c_, source_, std::move(at), waves_);
  }
  std::string describe() const override {
    return "fitted(" + c_.backend + ", " + source_ + (roofline_ ? ", roofline where marked" : "") +
           ")";
  }

 private:
  bool by_roofline(const ModelFit& f) const { return f.roofline && roofline_ != nullptr; }
  Duration time(const KernelSample& k, const ModelFit& f) const {
    // Never below the fitted fixed overhead (coefficient 0): an empty kernel still launches.
    const double t = std::max(predict_seconds(c_, k), f.coef.empty() ? 0.0 : f.coef[0]);
    return Duration::seconds(t);
  }
  Calibration c_;
  std::string source_;
  std::shared_ptr<const KernelCostModel> roofline_;  // null when no kind keeps the roofline
  // The roofline as given, for what a GEMM's SM margin costs (null: the margin costs nothing).
  std::shared_ptr<const KernelCostModel> waves_;
};

}  // namespace

bool uses_roofline(const Calibration& c) {
  for (const ModelFit* f : {&c.gemm, &c.attention_forward, &c.attention_backward, &c.memory_bound})
    if (f->roofline) return true;
  if (!c.memory_bound.families.empty()) return true;
  return std::any_of(c.memory_families.begin(), c.memory_families.end(),
                     [](const BandwidthFit& f) { return f.roofline; });
}

std::unique_ptr<KernelCostModel> fitted_kernel_model(
    const Calibration& c, const std::string& source,
    std::shared_ptr<const KernelCostModel> roofline) {
  std::shared_ptr<const KernelCostModel> waves = roofline;
  if (!uses_roofline(c)) roofline = nullptr;  // describe() names it only where it times something
  return std::make_unique<FittedKernelModel>(c, source, std::move(roofline), std::move(waves));
}

Result<std::unique_ptr<KernelCostModel>> fitted_kernel_model(
    const Json& section, const std::string& source,
    std::shared_ptr<const KernelCostModel> roofline) {
  SP_ASSIGN_OR_RETURN(const Calibration c, calibration_from_json(section, source));
  return complete_fitted_kernel_model(c, source, std::move(roofline));
}

Result<std::unique_ptr<KernelCostModel>> complete_fitted_kernel_model(
    const Calibration& c, const std::string& source,
    std::shared_ptr<const KernelCostModel> roofline) {
  if (uses_roofline(c) && roofline == nullptr) {
    return Status::invalid(source +
                           ": calibration: a kernel model keeps the roofline (\"model\": "
                           "\"roofline\"), but no roofline model was given to time it");
  }
  const int needed[] = {4, 4, 4, 3};  // in KernelKind's order
  for (int i = 0; i < 4; ++i) {
    const auto kind = static_cast<KernelKind>(i);
    const ModelFit& fit = kernel_model(c, kind);
    if (!fit.roofline && fit.samples < needed[i]) {
      return Status::invalid(source + ": calibration: " + kernel_model_key(kind) + ": fitted on " +
                             std::to_string(fit.samples) + " measurements, needs at least " +
                             std::to_string(needed[i]) + " (rerun scaleplan profile)");
    }
  }
  return fitted_kernel_model(c, source, std::move(roofline));
}

bool has_calibration(const Json& profile) {
  return profile.is_object() && profile.contains("calibration") &&
         profile["calibration"].is_object();
}

std::optional<Duration> fitted_collective_time(const Calibration& c, std::string_view op, int ranks,
                                               std::string_view placement, Bytes size) {
  for (const CollectiveFit& f : c.collectives) {
    if (f.op == op && f.ranks == ranks && f.placement == placement) {
      return f.latency + Duration::seconds(f.seconds_per_byte * static_cast<double>(size.value()));
    }
  }
  return std::nullopt;
}

}  // namespace scaleplan::calibrate
