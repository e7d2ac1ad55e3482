#include "calibrate/kernel_model.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "calibrate/roofline.h"

namespace scaleplan::calibrate {

Result<std::unique_ptr<KernelCostModel>> kernel_cost_model_for(const hw::Cluster& cluster) {
  if (!cluster.calibration_json.empty()) {
    const std::string source = cluster.path.empty() ? cluster.name : cluster.path;
    SP_ASSIGN_OR_RETURN(Json section,
                        parse_json(cluster.calibration_json, source + ": calibration"));
    // A calibration of collectives only (written by hand from nccl-tests fits) leaves the kernels
    // to the roofline; one with any kernel model must have all of them.
    const bool kernels = section.contains("gemm") || section.contains("attention_forward") ||
                         section.contains("attention_backward") || section.contains("memory_bound");
    if (kernels) return fitted_kernel_model(section, source);
    SP_RETURN_IF_ERROR(check_calibration_format(section, source));
  }
  return std::unique_ptr<KernelCostModel>(std::make_unique<RooflineCostModel>(peaks_of(cluster)));
}

Result<std::optional<double>> fitted_kernel_error(const hw::Cluster& cluster) {
  if (cluster.calibration_json.empty()) return std::optional<double>();
  const std::string source = cluster.path.empty() ? cluster.name : cluster.path;
  SP_ASSIGN_OR_RETURN(Json section, parse_json(cluster.calibration_json, source + ": calibration"));
  if (!section.contains("gemm")) return std::optional<double>();
  SP_ASSIGN_OR_RETURN(Calibration c, calibration_from_json(section, source));
  double worst = 0;
  for (const ModelFit* f :
       {&c.gemm, &c.attention_forward, &c.attention_backward, &c.memory_bound}) {
    if (f->samples == 0) continue;
    worst = std::max(worst, f->holdout.n > 0 ? f->holdout.p90 : f->cv.p90);
  }
  return std::optional<double>(worst);
}

GpuPeaks peaks_of(const hw::Cluster& cluster) {
  return GpuPeaks{cluster.gpu.name, cluster.gpu.bf16_dense, cluster.gpu.fp8_dense,
                  cluster.gpu.memory_bandwidth, cluster.gpu.sm_count};
}

}  // namespace scaleplan::calibrate
