// Refit: fold measured kernel times into a profile's fitted kernel models (`scaleplan refit`).
//
// The measured ops (one KernelSample per op of a `run --trace` file, sim/measured_kernels.h) are
// first grouped by shape: the ops of one shape (the same GEMM of every layer, rank and
// micro-batch) become one sample, their median time, with the spread as its noise, as `profile`
// summarises its repetitions. Each shape is then held out or fitted by a stable hash of its
// shape (FNV-1a of the kind and the shape's fields, so the split does not depend on the order of
// the files or on the machine): a held-out shape is never fitted, in any layout, so its error is
// an error on a shape the new model has not seen. The fitted shapes join the profile's own
// measurements (its "measurements" section) and every kernel model is fitted again with
// fit_calibration, the same code `profile` runs. A model whose kind gained no fitted sample, or
// that still has fewer samples than coefficients, keeps its old coefficients; the collective
// models, the overlap slowdown, the tiles, the backend and the device are kept as they are.
//
// The report sets the old and the new model's error beside each other on the held-out shapes,
// per kernel kind and memory-bound op: median |predicted - measured| / measured, each model
// timing a shape as the simulator does (calibrate/fitted_model.h, with per-op memory bandwidth);
// a kind the refit leaves without a model (a roofline profile's, not measured) is timed by the
// old model on both sides.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <vector>

#include "calibrate/calibration.h"
#include "calibrate/cost_model.h"

namespace scaleplan::calibrate {

struct RefitOptions {
  double holdout = 0.2;  // fraction of the measured shapes held out, in [0, 1)
  int folds = 5;         // cross-validation folds of the refit, as profile's
};

// Old and new median relative error of one group of held-out shapes.
struct RefitError {
  std::string kind;  // "gemm", "attention_fwd", "attention_bwd", "memory_bound", "all"
  int shapes = 0;    // held-out shapes
  double old_median = 0, new_median = 0;
  // The median of the shapes' own spread (IQR / median of the ops of each shape): how far apart
  // two timings of one shape lie, so a difference of errors below it is not told apart.
  double noise_median = 0;
};

struct RefitResult {
  Calibration calibration;    // the new one
  Measurements measurements;  // the profile's own and the fitted measured shapes
  int measured_ops = 0;       // measured ops read
  int fitted_shapes = 0, held_out_shapes = 0;
  std::vector<RefitError> errors;  // per kind with held-out shapes, then "all"
  std::vector<std::string> kept;   // models that kept their old coefficients, and why
};

// One sample per distinct shape: the median time of its ops; noise = IQR / median.
std::vector<KernelSample> group_by_shape(const std::vector<KernelSample>& ops);

// A stable text of a sample's kind and shape (the grouping and hashing key).
std::string shape_key(const KernelSample& s);

// Whether a shape is held out: FNV-1a(shape_key) mapped to [0, 1) is below `fraction`.
bool held_out(const KernelSample& s, double fraction);

// Refits `old` (whose profile stored `own`, possibly empty) with the measured ops. `old_model` is
// the kernel model the old profile simulates with, the "old" of the report: null for
// fitted_kernel_model(old); the roofline for a profile without kernel models, whose `old` then
// has none (samples 0) and only gains the ones the measured shapes fit.
Result<RefitResult> refit(const Calibration& old, const Measurements& own,
                          const std::vector<KernelSample>& measured_ops,
                          const RefitOptions& options = {},
                          const KernelCostModel* old_model = nullptr);

}  // namespace scaleplan::calibrate
