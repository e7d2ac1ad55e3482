// `refit` as a library call: fold the measured kernel times of `run --trace` files
// (sim/measured_kernels.h) into a calibrated profile's fitted kernel models (calibrate/refit.h),
// with the old and the new model's error on the measured shapes held out of the fit.
//
// api::refit validates the request (errors name the option), writes the refitted profile to `out`
// (atomically: the profile with its calibration section replaced) and returns a RefitOutcome
// whose to_json() is exactly `scaleplan refit --json`. The profile is a path or a bundled name;
// one without kernel models (a roofline profile) is refitted on the measured shapes alone, its
// roofline the "old" model of the report, and gains the models the measured shapes support; every
// other kind and memory-bound curve is written marked to keep the roofline (`"model":
// "roofline"`, calibrate/refit.h). A calibrated profile keeps its own model where the refitted
// one does not predict its training shapes better (`"source": "old"`). Each is named with why in
// `kept` and `models`.
#pragma once

#include <string>
#include <vector>

#include "calibrate/refit.h"
#include "core/json_util.h"
#include "core/status.h"
#include "sim/measured_kernels.h"

namespace scaleplan::api {

struct RefitRequest {
  std::string profile;  // calibrated profile (scaleplan profile --out)
  // scaleplan run --trace files, or PyTorch profiler traces recorded with record_shapes
  std::vector<std::string> measured;
  std::string out;       // the refitted profile to write
  double holdout = 0.2;  // fraction of the measured shapes left out of the fit to measure the error
};

struct RefitOutcome {
  RefitRequest request;
  std::string generator;    // of the measured traces
  int skipped_unfused = 0;  // unfused attention ops: no fused kernel to fit
  int skipped_unread = 0;   // Kineto ops whose shape refit does not read (MeasuredKernels)
  std::string old_model;    // "fitted" (the profile's calibration) or "roofline" (it has none)
  bool written = false;     // whether `out` was written
  std::string not_written;  // why not: the refitted calibration would not load
  calibrate::RefitResult result;

  // Exactly what `scaleplan refit --json` prints.
  Json to_json() const;
};

Result<RefitOutcome> refit(const RefitRequest& request);

}  // namespace scaleplan::api
