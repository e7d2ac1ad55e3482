#include "calibrate/fitted_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace scaleplan::calibrate {
namespace {

class FittedKernelModel final : public KernelCostModel {
 public:
  FittedKernelModel(Calibration c, std::string source)
      : c_(std::move(c)), source_(std::move(source)) {}

  Duration gemm(const GemmShape& s) const override {
    KernelSample k;
    k.kind = KernelKind::kGemm;
    k.gemm = s;
    return time(k, c_.gemm);
  }
  Duration attention_forward(const AttentionShape& s) const override {
    KernelSample k;
    k.kind = KernelKind::kAttentionFwd;
    k.attention = s;
    return time(k, c_.attention_forward);
  }
  Duration attention_backward(const AttentionShape& s) const override {
    KernelSample k;
    k.kind = KernelKind::kAttentionBwd;
    k.attention = s;
    return time(k, c_.attention_backward);
  }
  Duration memory_bound(const MemoryBoundShape& s) const override {
    // The op's own bandwidth curve on the shape's implementation where the profile has one, else
    // the op's curve (BandwidthFit says why; calibrate/calibration.h memory_family_key).
    const std::string_view op = to_string(s.op);
    for (const std::string& family :
         {memory_family_key(op, s.path), memory_family_key(op, MemPath::kVectorized)}) {
      for (const BandwidthFit& f : c_.memory_families) {
        if (f.family == family) {
          return f.overhead +
                 Duration::seconds(f.seconds_per_byte * static_cast<double>(s.bytes.value()));
        }
      }
    }
    KernelSample k;
    k.kind = KernelKind::kMemoryBound;
    k.memory = s;
    return time(k, c_.memory_bound);
  }
  double overlap_slowdown() const override { return c_.overlap_slowdown; }
  std::string describe() const override { return "fitted(" + c_.backend + ", " + source_ + ")"; }

 private:
  Duration time(const KernelSample& k, const ModelFit& f) const {
    // Never below the fitted fixed overhead (coefficient 0): an empty kernel still launches.
    const double t = std::max(predict_seconds(c_, k), f.coef.empty() ? 0.0 : f.coef[0]);
    return Duration::seconds(t);
  }
  Calibration c_;
  std::string source_;
};

}  // namespace

std::unique_ptr<KernelCostModel> fitted_kernel_model(const Calibration& c,
                                                     const std::string& source) {
  return std::make_unique<FittedKernelModel>(c, source);
}

Result<std::unique_ptr<KernelCostModel>> fitted_kernel_model(const Json& section,
                                                             const std::string& source) {
  SP_ASSIGN_OR_RETURN(const Calibration c, calibration_from_json(section, source));
  return complete_fitted_kernel_model(c, source);
}

Result<std::unique_ptr<KernelCostModel>> complete_fitted_kernel_model(const Calibration& c,
                                                                      const std::string& source) {
  const int needed[] = {4, 4, 4, 3};
  const ModelFit* fits[] = {&c.gemm, &c.attention_forward, &c.attention_backward, &c.memory_bound};
  const char* names[] = {"gemm", "attention_forward", "attention_backward", "memory_bound"};
  for (int i = 0; i < 4; ++i) {
    if (fits[i]->samples < needed[i]) {
      return Status::invalid(source + ": calibration: " + names[i] + ": fitted on " +
                             std::to_string(fits[i]->samples) + " measurements, needs at least " +
                             std::to_string(needed[i]) + " (rerun scaleplan profile)");
    }
  }
  return fitted_kernel_model(c, source);
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
