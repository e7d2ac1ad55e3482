// The measurement protocol shared by every sweep, after nccl-tests (src/common.cu) and nvbench
// (nvbench/stopping_criterion.cuh):
//   1. warm-up calls, untimed (first-call costs: plan selection, page faults, NCCL connections);
//   2. the repetitions per sample are raised until one sample lasts `min_sample_time`, so that
//      timer resolution and launch jitter stay small against it;
//   3. samples are taken until the relative spread (interquartile range / median) is at most
//      `max_noise` with at least `min_samples`, or `time_limit` of measured time is spent, or
//      `max_samples` are taken;
//   4. the result is the median (or the minimum, see Statistic) and the spread; `converged` says
//   which criterion stopped it.
// Correctness is the caller's business, checked before or after `measure`, never inside.
//
// Ranks that measure a collective must take the same number of samples, or the ones that stop
// first leave the others blocked: `agree` (when set) combines each rank's decision over the group
// (the maximum of the values, so any rank that wants another sample gets it).
#pragma once

#include <functional>

#include "core/status.h"
#include "core/units.h"

namespace scaleplan::runtime {

// Which statistic a measurement reports as its estimate. The median is nccl-tests' and nvbench's
// choice on a dedicated GPU. On shared CPU cores the time distribution has a long right tail from
// interference, and its minimum is the robust estimator of the undisturbed time (Chen & Revels
// 2016, "Robust benchmarking in noisy environments", the basis of Julia's BenchmarkTools).
enum class Statistic { kMedian, kMinimum };

struct MeasureOptions {
  Statistic statistic = Statistic::kMedian;
  int warmup = 2;
  int min_samples = 5;
  int max_samples = 100;
  double max_noise = 0.03;
  Duration min_sample_time = Duration::microseconds(50);
  Duration time_limit = Duration::seconds(0.2);
};

struct Measurement {
  Duration estimate;  // of one call: the median or the minimum, per MeasureOptions::statistic
  Duration median;
  Duration p25, p75, min, max;
  double noise = 0;  // (p75 - p25) / median
  int samples = 0;
  int reps = 1;  // calls per sample
  bool converged = false;
};

// Runs the op `reps` times back to back and returns the measured time of all of them.
using TimedRun = std::function<Result<Duration>(int reps)>;
// Combines one integer over the ranks measuring together (maximum); identity when unset.
using Agree = std::function<Result<int64_t>(int64_t)>;

Result<Measurement> measure(const TimedRun& run, const MeasureOptions& options,
                            const Agree& agree = {});

}  // namespace scaleplan::runtime
