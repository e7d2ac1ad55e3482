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
// The memory-bound models (the family-blind one and each curve of an op and path) replace the
// model the profile had for their shapes (the base: its own fitted model, or the roofline) only
// where they predict their own training shapes better: each is refitted leaving one shape out at
// a time, and its mean leave-one-out error must be below the base's mean error on the same shapes
// by more than one standard error (the one-standard-error rule) and than the shapes' own timing
// spread; otherwise the base is kept, and said so. A curve of too few shapes to check keeps the
// base too, and one whose shapes are all the profile's own (no measured shape) is kept as it was.
// Held-out shapes play no part in the choice.
//
// A profile without kernel models (a roofline profile: one PyTorch trace of a user's step) gains
// the models its traces support, and each other one keeps the roofline (ModelFit::roofline: one
// attention shape per pass is fewer than the model's four coefficients). Its base is the
// roofline, and a curve of too few shapes to check is not written on the vectorized path (the
// family-blind model, chosen the same way, times its shapes) and keeps the roofline on another.
//
// The report sets the old and the new model's error beside each other on the held-out shapes,
// per kernel kind and memory-bound op: median |predicted - measured| / measured, each model
// timing a shape as the simulator does (calibrate/fitted_model.h, with per-op memory bandwidth);
// a kind the refit leaves without a model (a roofline profile's, not measured) is timed by the
// old model on both sides.
// Pure functions; thread-safe.
#pragma once

#include <memory>
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

// How the refitted profile times one kernel model or memory-bound curve, and why.
struct RefitChoice {
  // "gemm", "attention_forward", "attention_backward", "memory_bound" (the calibration's keys),
  // or "memory_families: <family>" for one curve
  std::string model;
  // "fitted", "old" (the profile's own, kept: "kept the profile's"), "roofline", or for a curve of
  // too few shapes to check on the vectorized path of a roofline profile "memory_bound" (none is
  // written: the family-blind model times its shapes)
  std::string source;
  int shapes = 0;      // shapes it was (or would have been) fitted on
  std::string reason;  // the counts or the leave-one-out errors that decided
};

struct RefitResult {
  Calibration calibration;    // the new one
  Measurements measurements;  // the profile's own and the fitted measured shapes
  int measured_ops = 0;       // measured ops read
  int fitted_shapes = 0, held_out_shapes = 0;
  std::vector<RefitError> errors;    // per kind with held-out shapes, then "all"
  std::vector<RefitChoice> choices;  // each kernel model, then each memory-bound curve fitted
  // Models not fitted: "<model>: kept the profile's: <reason>" (the old kept),
  // "<model>: kept the roofline: <reason>"
  std::vector<std::string> kept;
};

// One sample per distinct shape: the median time of its ops; noise = IQR / median.
std::vector<KernelSample> group_by_shape(const std::vector<KernelSample>& ops);

// A stable text of a sample's kind and shape (the grouping and hashing key).
std::string shape_key(const KernelSample& s);

// Whether a shape is held out: FNV-1a(shape_key) mapped to [0, 1) is below `fraction`.
bool held_out(const KernelSample& s, double fraction);

// Refits `old` (whose profile stored `own`, possibly empty) with the measured ops. `roofline` is
// the profile's roofline model (calibrate::kernel_model.h peaks_of); it times what a
// calibration marks `roofline`. When `old` has no kernel models (old.kernel_models false: a
// roofline profile) it is the "old" of the report, required, and the refit keeps it for every
// model the measured shapes do not support; else the old model is fitted_kernel_model(old).
Result<RefitResult> refit(const Calibration& old, const Measurements& own,
                          const std::vector<KernelSample>& measured_ops,
                          const RefitOptions& options = {},
                          std::shared_ptr<const KernelCostModel> roofline = nullptr);

}  // namespace scaleplan::calibrate
