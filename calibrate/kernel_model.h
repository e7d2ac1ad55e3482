// The kernel cost model for a cluster: the fitted model when its profile carries a calibration
// (written by `scaleplan profile`), the roofline model from its GPU peaks otherwise (also when the
// calibration holds only collective fits). The simulator
// and the planner both build theirs here, so a calibrated profile changes every prediction.
#pragma once

#include <memory>
#include <optional>

#include "calibrate/cost_model.h"
#include "calibrate/roofline.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::calibrate {

Result<std::unique_ptr<KernelCostModel>> kernel_cost_model_for(const hw::Cluster& cluster);

// How far the profile's fitted kernel models are off on shapes they were not fitted to: the
// largest 90th-percentile relative error of its GEMM, attention (forward, backward) and
// memory-bound fits, each on its hold-out shapes where it has some, else k-fold cross-validated.
// nullopt for a profile without fitted kernels (the roofline); an error for a calibration that
// does not parse.
Result<std::optional<double>> fitted_kernel_error(const hw::Cluster& cluster);

// The datasheet peaks of a cluster's GPU, for a RooflineCostModel with parameters of one's own.
GpuPeaks peaks_of(const hw::Cluster& cluster);

}  // namespace scaleplan::calibrate
