#include "calibrate/kernel_model.h"

#include <nlohmann/json.hpp>

#include "calibrate/fitted_model.h"
#include "calibrate/roofline.h"

namespace scaleplan::calibrate {

Result<std::unique_ptr<KernelCostModel>> kernel_cost_model_for(const hw::Cluster& cluster) {
  if (!cluster.calibration_json.empty()) {
    const std::string source = cluster.path.empty() ? cluster.name : cluster.path;
    SP_ASSIGN_OR_RETURN(Json section,
                        parse_json(cluster.calibration_json, source + ": calibration"));
    return fitted_kernel_model(section, source);
  }
  return std::unique_ptr<KernelCostModel>(std::make_unique<RooflineCostModel>(
      GpuPeaks{cluster.gpu.name, cluster.gpu.bf16_dense, cluster.gpu.fp8_dense,
               cluster.gpu.memory_bandwidth, cluster.gpu.sm_count}));
}

}  // namespace scaleplan::calibrate
