// The fitted KernelCostModel: kernel times from a profile's "calibration" section.
//
// The simulator uses it instead of the roofline model when the cluster profile it was given
// carries a calibration (written by `scaleplan profile`). It is immutable after construction and
// safe for concurrent const calls. Shapes outside the measured range extrapolate linearly in FLOPs
// and bytes (the models are sums of per-unit costs), never below the fitted overhead.
//
// Usage (sim / cli):
//   SP_ASSIGN_OR_RETURN(Json profile, read_json_file(path));
//   if (has_calibration(profile)) {
//     SP_ASSIGN_OR_RETURN(auto model, fitted_kernel_model(profile["calibration"], path));
//   }
// or in one call: load_fitted_kernel_model(path) -> nullptr when the profile has no calibration.
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

bool has_calibration(const Json& profile);

// Reads a profile file; nullptr (ok) when it has no "calibration" section.
Result<std::unique_ptr<KernelCostModel>> load_fitted_kernel_model(const std::string& path);

// Fitted collective times, per (op, group size, placement); nullopt where nothing was measured.
// `op` uses the core/comm.h to_string names ("all_reduce", "alltoall", ...).
std::optional<Duration> fitted_collective_time(const Calibration& c, std::string_view op, int ranks,
                                               std::string_view placement, Bytes size);

}  // namespace scaleplan::calibrate
