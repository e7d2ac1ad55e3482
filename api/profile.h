// `profile` as a library call: calibrate this machine. Runs the kernel, collective and overlap
// sweeps (runtime/profile.h), saving the measurements to OUT.partial (atomically, at most every
// 0.5 s) so that an interrupted run continues with `resume`; fits the cost models
// (calibrate/calibration.h) with cross-validation; and writes OUT, a profile that extends the
// cluster BASE with a "calibration" section. With the cuda backend BASE is the bundled profile of
// the GPU found (a `cluster` of another GPU is refused unless `force_base`; no GPU: "no GPU
// visible", an invalid input); nccl-tests logs join the collective measurements before the fit.
//
// api::profile returns a ProfileOutcome whose to_json() is exactly `scaleplan profile --json`.
#pragma once

#include <string>
#include <vector>

#include "api/callbacks.h"
#include "calibrate/calibration.h"
#include "core/json_util.h"
#include "core/status.h"

namespace scaleplan::api {

struct ProfileRequest {
  std::string backend = "host";  // host (CPU threads as ranks) or cuda (GPUs, NCCL)
  std::string out;               // the profile JSON to write
  // The profile the result extends (cuda: default the bundled profile of the GPU found; host:
  // default hgx-h200).
  std::string cluster;
  bool quick = false;       // fewer shapes and sizes, shorter measurements
  bool resume = false;      // continue from OUT.partial of an interrupted run
  bool force_base = false;  // extend `cluster` (and fit nccl_logs) even when its GPU differs
  int ranks = -1;  // host: threads for the collective sweeps (default 4); cuda: GPUs (default all)
  std::vector<std::string> nccl_logs;  // nccl-tests output to fit with the collective measurements
};

// One measured point: points done, points in all, and the point's name.
struct ProfileProgress {
  int done = 0, total = 0;
  std::string id;
};

struct ProfileOutcome {
  ProfileRequest request;
  calibrate::Calibration calibration;
  double seconds = 0;  // the measurement's wall time

  // Exactly what `scaleplan profile --json` prints.
  Json to_json() const;
};

// Notes: the base chosen, a resumed run, an nccl-tests log of another GPU fitted with force_base.
// Progress: after every point.
Result<ProfileOutcome> profile(const ProfileRequest& request,
                               const Callbacks<ProfileProgress>& callbacks = {});

}  // namespace scaleplan::api
