#include "runtime/microbench.h"

#include <algorithm>
#include <vector>

namespace scaleplan::runtime {
namespace {

Duration quantile(std::vector<Duration> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

}  // namespace

Result<Measurement> measure(const TimedRun& run, const MeasureOptions& o, const Agree& agree) {
  auto combine = [&](int64_t v) -> Result<int64_t> {
    return agree ? agree(v) : Result<int64_t>(v);
  };
  for (int i = 0; i < o.warmup; ++i) SP_RETURN_IF_ERROR(run(1).status());
  // Repetitions per sample: double until a sample lasts min_sample_time (or 2^20 calls).
  int64_t reps = 1;
  Duration spent = Duration::zero();
  for (;;) {
    SP_ASSIGN_OR_RETURN(const Duration t, run(static_cast<int>(reps)));
    spent += t;
    const int64_t enough = t >= o.min_sample_time || reps >= (1 << 20) || spent >= o.time_limit;
    SP_ASSIGN_OR_RETURN(const int64_t more, combine(enough ? 0 : 1));
    if (!more) break;
    reps *= 2;
  }
  Measurement m;
  m.reps = static_cast<int>(reps);
  std::vector<Duration> per_call;
  spent = Duration::zero();
  for (;;) {
    SP_ASSIGN_OR_RETURN(const Duration t, run(m.reps));
    spent += t;
    per_call.push_back(t / reps);
    const int n = static_cast<int>(per_call.size());
    bool stop = n >= o.max_samples || spent >= o.time_limit;
    m.converged = false;
    if (n >= o.min_samples) {
      const Duration med = quantile(per_call, 0.5);
      const double noise = med > Duration::zero()
                               ? (quantile(per_call, 0.75) - quantile(per_call, 0.25)) / med
                               : 0.0;
      m.converged = noise <= o.max_noise;
      stop = stop || m.converged;
    }
    SP_ASSIGN_OR_RETURN(const int64_t more, combine(stop ? 0 : 1));
    if (!more) break;
  }
  m.samples = static_cast<int>(per_call.size());
  m.median = quantile(per_call, 0.5);
  m.p25 = quantile(per_call, 0.25);
  m.p75 = quantile(per_call, 0.75);
  m.min = *std::min_element(per_call.begin(), per_call.end());
  m.max = *std::max_element(per_call.begin(), per_call.end());
  m.noise = m.median > Duration::zero() ? (m.p75 - m.p25) / m.median : 0.0;
  m.estimate = o.statistic == Statistic::kMinimum ? m.min : m.median;
  return m;
}

}  // namespace scaleplan::runtime
