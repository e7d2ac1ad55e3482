// The profile run: every sweep of runtime/sweeps.h on one backend, resumable.
//
// Kernel points run on rank 0 (host: a single thread, so that no other rank competes for the
// cores; cuda: one GPU); collective points and the overlap point run on all ranks. After each
// point `on_point` reports progress and `checkpoint` receives the measurements so far and the ids
// done, so that the caller can save them atomically; a later run given those back skips the
// points already done (`scaleplan profile --resume`). Callbacks run on rank 0's thread.
#pragma once

#include <functional>
#include <set>
#include <string>

#include "calibrate/calibration.h"
#include "runtime/launch.h"
#include "runtime/microbench.h"
#include "runtime/sweeps.h"

namespace scaleplan::runtime {

struct ProfileOptions {
  BackendKind backend = BackendKind::kHost;
  int ranks = 4;  // host: threads for the collective sweeps; cuda: GPUs (0 = all local)
  bool quick = false;
};

struct ProfileState {
  calibrate::Measurements measurements;
  std::set<std::string> done;  // ids of finished points
  std::string device;          // the backend's device_name(), set by run_profile
};

struct ProfileCallbacks {
  std::function<void(int done, int total, const std::string& id)> on_point;
  std::function<Status(const ProfileState&)> checkpoint;
};

// The measurement options of a sweep: quick runs stop sooner and accept more noise.
MeasureOptions profile_measure_options(BackendKind backend, bool quick);

// The cluster profile a profile run extends. cuda: hw::choose_profile_base over the GPUs `query`
// returns (no GPU: "no GPU visible", exit 2; a --cluster of another GPU: refused unless `force`);
// host: `requested`, or hgx-h200 (the host has no cluster of its own; its profile extends one
// only so that the topology fields exist).
Result<hw::ProfileBase> profile_base(BackendKind backend, const std::string& requested, bool force,
                                     const DeviceQuery& query);

// Runs the remaining points, adding to `state`.
Status run_profile(const ProfileOptions& options, ProfileState& state, const ProfileCallbacks& cb);

}  // namespace scaleplan::runtime
