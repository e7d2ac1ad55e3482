#include "calibrate/kernel_model.h"

#include <algorithm>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "calibrate/roofline.h"

namespace scaleplan::calibrate {

Result<std::unique_ptr<KernelCostModel>> kernel_cost_model_for(const hw::Cluster& cluster) {
  // A calibration of collectives only (written by hand from nccl-tests fits) leaves the kernels
  // to the roofline; one with any kernel model must have all of them (the loader checked), each
  // fitted or marked to keep this cluster's roofline (what `refit` writes where its traces did
  // not support a fit).
  auto roofline = std::make_shared<const RooflineCostModel>(peaks_of(cluster));
  if (cluster.calibration && cluster.calibration->kernel_models) {
    const std::string source = cluster.path.empty() ? cluster.name : cluster.path;
    return complete_fitted_kernel_model(*cluster.calibration, source, std::move(roofline));
  }
  return std::unique_ptr<KernelCostModel>(std::make_unique<RooflineCostModel>(peaks_of(cluster)));
}

Result<std::optional<double>> fitted_kernel_error(const hw::Cluster& cluster) {
  if (!cluster.calibration || !cluster.calibration->kernel_models) return std::optional<double>();
  const Calibration& c = *cluster.calibration;
  double worst = 0;
  for (const ModelFit* f :
       {&c.gemm, &c.attention_forward, &c.attention_backward, &c.memory_bound}) {
    if (f->samples == 0) continue;
    worst = std::max(worst, f->holdout.n > 0 ? f->holdout.p90 : f->cv.p90);
  }
  return std::optional<double>(worst);
}

GpuPeaks peaks_of(const hw::Cluster& cluster) {
  return GpuPeaks{cluster.gpu.name,      cluster.gpu.bf16_dense,
                  cluster.gpu.fp8_dense, cluster.gpu.memory_bandwidth,
                  cluster.gpu.sm_count,  cluster.gpu.efficiency,
                  cluster.gpu.fp4_dense};
}

}  // namespace scaleplan::calibrate
