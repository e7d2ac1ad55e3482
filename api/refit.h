// `refit` as a library call: fold the measured kernel times of `run --trace` files
// (sim/measured_kernels.h) into a calibrated profile's fitted kernel models (calibrate/refit.h),
// with the old and the new model's error on the measured shapes held out of the fit.
//
// api::refit validates the request (errors name the option), writes the refitted profile to `out`
// (atomically: the profile with its calibration section replaced) and returns a RefitOutcome
// whose to_json() is exactly `scaleplan refit --json`.
#pragma once

#include <string>
#include <vector>

#include "calibrate/refit.h"
#include "core/json_util.h"
#include "core/status.h"
#include "sim/measured_kernels.h"

namespace scaleplan::api {

struct RefitRequest {
  std::string profile;                // calibrated profile (scaleplan profile --out)
  std::vector<std::string> measured;  // scaleplan run --trace files
  std::string out;                    // the refitted profile to write
  double holdout = 0.2;  // fraction of the measured shapes left out of the fit to measure the error
};

struct RefitOutcome {
  RefitRequest request;
  std::string generator;    // of the measured traces
  int skipped_unfused = 0;  // unfused attention ops: no fused kernel to fit
  calibrate::RefitResult result;

  // Exactly what `scaleplan refit --json` prints.
  Json to_json() const;
};

Result<RefitOutcome> refit(const RefitRequest& request);

}  // namespace scaleplan::api
