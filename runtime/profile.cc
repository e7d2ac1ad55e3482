#include "runtime/profile.h"

#include <algorithm>
#include <random>

namespace scaleplan::runtime {

MeasureOptions profile_measure_options(BackendKind backend, bool quick) {
  MeasureOptions o;
  if (backend == BackendKind::kHost) {
    // Host timings share two cores with everything else on the machine: take the minimum of a few
    // samples (the one least disturbed by the other work) rather than waiting for a low spread
    // that may never come.
    o.statistic = Statistic::kMinimum;
    o.warmup = 1;
    o.min_samples = 5;
    o.max_samples = quick ? 15 : 50;
    o.max_noise = 0.05;
    o.min_sample_time = Duration::microseconds(200);
    o.time_limit = Duration::seconds(quick ? 0.03 : 0.2);
  } else {
    o.warmup = 3;
    o.min_samples = 10;
    o.max_samples = quick ? 50 : 200;
    o.max_noise = 0.02;
    o.min_sample_time = Duration::microseconds(100);
    o.time_limit = Duration::seconds(quick ? 0.1 : 0.5);
  }
  return o;
}

Result<hw::ProfileBase> profile_base(BackendKind backend, const std::string& requested, bool force,
                                     const DeviceQuery& query) {
  if (backend == BackendKind::kHost) {
    return hw::ProfileBase{requested.empty() ? "hgx-h200" : requested,
                           "profile: host backend, base " +
                               (requested.empty() ? std::string("hgx-h200") : requested) +
                               " (topology fields only; the fits are this host's)",
                           {}};
  }
  const std::vector<hw::DeviceIdentity> devices = query ? query() : cuda_devices();
  auto base = hw::choose_profile_base(devices, requested, force);
  if (!base.is_ok() && devices.empty() && !cuda_backend_compiled())
    return Status::invalid(base.status().message() +
                           "; this scaleplan was built without the CUDA backend");
  return base;
}

Status run_profile(const ProfileOptions& options, ProfileState& state, const ProfileCallbacks& cb) {
  const SweepOptions so{options.backend, options.quick};
  const MeasureOptions mo = profile_measure_options(options.backend, options.quick);
  // Kernel points in a fixed shuffled order, so that slow drifts of the machine (clocks, other
  // processes on shared cores) spread over all shapes, hold-out ones included, instead of biasing
  // whichever shapes happen to be measured during them.
  std::vector<SweepPoint> kernels = kernel_points(so);
  std::shuffle(kernels.begin(), kernels.end(), std::mt19937(7));
  const bool host = options.backend == BackendKind::kHost;
  int done = static_cast<int>(state.done.size());
  int total = 0;  // known once the world size is: set in the collective phase
  auto report = [&](const std::string& id) -> Status {
    ++done;
    if (cb.on_point) cb.on_point(done, std::max(total, done), id);
    return cb.checkpoint ? cb.checkpoint(state) : Status::ok();
  };

  // Phase 1: kernels, on rank 0.
  const int kernel_ranks = host ? 1 : options.ranks;
  SP_RETURN_IF_ERROR(run_ranks({options.backend, kernel_ranks}, [&](Backend& be) -> Status {
    if (be.rank() != 0) return Status::ok();
    state.device = be.device_name();
    // Total: the kernel points plus an estimate of the collective ones (exact in phase 2).
    total = static_cast<int>(kernels.size()) +
            static_cast<int>(collective_points(so, host ? options.ranks : be.world_size(),
                                               host ? options.ranks : be.local_size())
                                 .size()) +
            1;
    for (const SweepPoint& p : kernels) {
      if (state.done.count(p.id)) continue;
      SP_ASSIGN_OR_RETURN(calibrate::KernelSample k, run_kernel_point(be, p, mo));
      state.measurements.kernels.push_back(std::move(k));
      state.done.insert(p.id);
      SP_RETURN_IF_ERROR(report(p.id));
    }
    return Status::ok();
  }));

  // Phase 2: collectives and the overlap point, on every rank.
  if (options.ranks == 1 && host) return Status::ok();
  return run_ranks({options.backend, options.ranks}, [&](Backend& be) -> Status {
    const std::vector<SweepPoint> colls = collective_points(so, be.world_size(), be.local_size());
    GroupCache groups;
    for (const SweepPoint& p : colls) {
      if (state.done.count(p.id)) continue;  // every rank reads the same set: same points run
      SP_ASSIGN_OR_RETURN(auto sample, run_collective_point(be, p, mo, groups));
      if (be.rank() == 0) {
        if (sample) state.measurements.collectives.push_back(*sample);
        state.done.insert(p.id);
        SP_RETURN_IF_ERROR(report(p.id));
      }
      // On the host the ranks share `state`: rank 0 inserts the id after the point's closing
      // barrier, and this barrier keeps the others from reading the set until it has.
      SP_RETURN_IF_ERROR(be.collective(be.world(), {CollectiveOp::kBarrier}));
    }
    const std::string overlap_id = "overlap/gemm+all_reduce";
    if (!state.done.count(overlap_id) && be.world_size() > 1) {
      SP_ASSIGN_OR_RETURN(const double slowdown, run_overlap_point(be, mo, options.quick));
      if (be.rank() == 0) {
        state.measurements.overlap_slowdown = slowdown;
        state.done.insert(overlap_id);
        SP_RETURN_IF_ERROR(report(overlap_id));
      }
    }
    return Status::ok();
  });
}

}  // namespace scaleplan::runtime
