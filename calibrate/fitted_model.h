// The fitted KernelCostModel: kernel times from a profile's "calibration" section.
//
// The simulator uses it instead of the roofline model when the cluster profile it was given
// carries a calibration (written by `scaleplan profile`). It is immutable after construction and
// safe for concurrent const calls. Shapes outside the measured range extrapolate linearly in FLOPs
// and bytes (the models are sums of per-unit costs), never below the fitted overhead.
//
// A kind or a memory-bound curve marked `roofline` (ModelFit::roofline, BandwidthFit::roofline:
// what `refit` writes where the traces did not support a fit), and a memory-bound shape of a
// family the family-blind model was not fitted on where it lists them (ModelFit::families), are
// timed by `roofline`, the base cluster's RooflineCostModel, which the model then holds (shared,
// immutable), its SM clock model included; a calibration that needs one and has none is refused.
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
// `roofline` times the kinds the calibration marks roofline, and scales a fitted GEMM launched on
// fewer SMs (GemmShape::sm_margin) by its ratio with and without the margin; without it a margin
// costs a fitted GEMM nothing.
Result<std::unique_ptr<KernelCostModel>> fitted_kernel_model(
    const Json& calibration_section, const std::string& source,
    std::shared_ptr<const KernelCostModel> roofline = nullptr);
// Unchecked: a kind marked roofline without a `roofline` model is timed by its coefficients.
std::unique_ptr<KernelCostModel> fitted_kernel_model(
    const Calibration& c, const std::string& source,
    std::shared_ptr<const KernelCostModel> roofline = nullptr);
// The model of a calibration whose kernel models were each fitted on at least as many
// measurements as they have coefficients (3 for memory_bound, 4 for the others) or keep the
// roofline; an error naming the first that does neither (`source: calibration: gemm: fitted on 2
// measurements, ...`), or a calibration that marks the roofline given none.
Result<std::unique_ptr<KernelCostModel>> complete_fitted_kernel_model(
    const Calibration& c, const std::string& source,
    std::shared_ptr<const KernelCostModel> roofline = nullptr);

// Whether any kernel kind or memory-bound curve of `c` is timed by the roofline, or its
// family-blind memory-bound model leaves the families it was not fitted on to it.
bool uses_roofline(const Calibration& c);

bool has_calibration(const Json& profile);

// Fitted collective times, per (op, group size, placement); nullopt where nothing was measured.
// `op` uses the core/comm.h to_string names ("all_reduce", "alltoall", ...).
std::optional<Duration> fitted_collective_time(const Calibration& c, std::string_view op, int ranks,
                                               std::string_view placement, Bytes size);

}  // namespace scaleplan::calibrate
