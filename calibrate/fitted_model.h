// The fitted KernelCostModel: kernel times from a profile's "calibration" section.
//
// The simulator uses it instead of the roofline model when the cluster profile it was given
// carries a calibration (written by `scaleplan profile`). It is immutable after construction and
// safe for concurrent const calls. Shapes outside the measured range extrapolate linearly in FLOPs
// and bytes (the models are sums of per-unit costs), never below the fitted overhead.
//
// A loaded profile's calibration is already parsed (hw::Cluster::calibration):
// calibrate::kernel_cost_model_for builds its model with complete_fitted_kernel_model. The JSON
// overload serves a section read on its own (`refit`, the fuzzers).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "calibrate/calibration.h"
#include "calibrate/cost_model.h"
#include "core/json_util.h"

namespace scaleplan::calibrate {

// Builds the model from a "calibration" section; `source` names it in errors and describe().
Result<std::unique_ptr<KernelCostModel>> fitted_kernel_model(const Json& calibration_section,
                                                             const std::string& source);
std::unique_ptr<KernelCostModel> fitted_kernel_model(const Calibration& c,
                                                     const std::string& source);
// The model of a calibration whose kernel models were each fitted on at least as many
// measurements as they have coefficients (3 for memory_bound, 4 for the others); an error naming
// the first that was not (`source: calibration: gemm: fitted on 2 measurements, ...`).
Result<std::unique_ptr<KernelCostModel>> complete_fitted_kernel_model(const Calibration& c,
                                                                      const std::string& source);

bool has_calibration(const Json& profile);

// Fitted collective times, per (op, group size, placement); nullopt where nothing was measured.
// `op` uses the core/comm.h to_string names ("all_reduce", "alltoall", ...).
std::optional<Duration> fitted_collective_time(const Calibration& c, std::string_view op, int ranks,
                                               std::string_view placement, Bytes size);

}  // namespace scaleplan::calibrate
