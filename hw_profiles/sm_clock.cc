#include "hw_profiles/sm_clock.h"

#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>

namespace scaleplan::hw {

double SmClock::other_power() const {
  if (!power_limited()) return 1;
  return (std::pow(tensor_bound_hz / mixed_hz, exponent) - tensor_share) / (1 - tensor_share);
}

Status validate(const SmClock& c, const std::string& ctx) {
  if (!c.enabled()) {
    if (c.power_limited() || c.gemm_hz > 0 || c.attention_hz > 0 || c.cast_loop_hz > 0)
      return Status::invalid(ctx + ": max: missing (the other clocks are stated against it)");
    return Status::ok();
  }
  auto clock = [&](double hz, const char* key) -> Status {
    if (hz < 0 || hz > c.max_hz)
      return Status::invalid(ctx + ": " + key + ": " + format_clock(hz) +
                             " must be positive and at most max (" + format_clock(c.max_hz) + ")");
    return Status::ok();
  };
  SP_RETURN_IF_ERROR(clock(c.gemm_hz, "measured_at: gemm"));
  SP_RETURN_IF_ERROR(clock(c.attention_hz, "measured_at: attention"));
  SP_RETURN_IF_ERROR(clock(c.cast_loop_hz, "measured_at: cast_loop"));
  if (!c.power_limited() && (c.mixed_hz > 0 || c.tensor_share > 0))
    return Status::invalid(ctx + ": power_limit: tensor_bound_clock: missing");
  if (!c.power_limited()) return Status::ok();
  SP_RETURN_IF_ERROR(clock(c.mixed_hz, "power_limit: clock"));
  SP_RETURN_IF_ERROR(clock(c.tensor_bound_hz, "power_limit: tensor_bound_clock"));
  const std::string at = ctx + ": power_limit: ";
  if (!(c.tensor_share > 0 && c.tensor_share < 1))
    return Status::invalid(at + "tensor_share: must be between 0 and 1 (exclusive), got " +
                           std::to_string(c.tensor_share));
  if (!(c.mixed_hz > 0) || c.tensor_bound_hz > c.mixed_hz)
    return Status::invalid(at + "tensor_bound_clock: " + format_clock(c.tensor_bound_hz) +
                           " must be at most the mixed step's clock (" + format_clock(c.mixed_hz) +
                           ")");
  if (!(c.exponent >= 1 && c.exponent <= 4))
    return Status::invalid(at + "exponent: must be between 1 and 4, got " +
                           std::to_string(c.exponent));
  const double r = c.other_power();
  if (!(r >= 0 && r < 1))
    return Status::invalid(
        at + "the two ends give the other kernels a power of " + std::to_string(r) +
        " of the tensor kernels' (must be in [0, 1)): a tensor-bound clock of " +
        format_clock(c.tensor_bound_hz) + " and " + format_clock(c.mixed_hz) + " at tensor share " +
        std::to_string(c.tensor_share) + " do not fit exponent " + std::to_string(c.exponent));
  return Status::ok();
}

namespace {

// The power balance's solve (step_clock below).
double solve_step_clock(const SmClock& c, double tensor_cycles, double other_cycles,
                        double fixed_seconds) {
  const double r = c.other_power();
  const double limit = std::pow(c.tensor_bound_hz, c.exponent);
  // Whether the average power at clock f, in units of the tensor kernels' at f = 1 Hz, exceeds
  // the limit; it rises with f (d falls at most as 1/f, f^alpha rises faster for alpha > 1).
  // The planner solves this for every pipeline stage of every layout it bounds (issue 45: 48
  // std::pow calls per solve were a fifth of a large MoE search), so for alpha = 3 the power is
  // first taken as f·f·f·g, which differs from pow(f, 3)·g by a few units in the last place
  // (glibc's pow is within 1 ulp, each product rounds once): outside a band of 1e-14 around the
  // limit, a hundred times wider than that, the two give the same answer, and inside it pow
  // decides, so the bisection takes the same steps as with pow alone, bit for bit (test
  // StepClock.BisectsExactlyAsWithPowAlone).
  const bool cube = c.exponent == 3;
  auto above = [&](double f) {
    const double d = tensor_cycles / (tensor_cycles + other_cycles + f * fixed_seconds);
    const double g = d + (1 - d) * r;
    if (cube) {
      const double q = f * f * f * g;
      if (q > limit * (1 + 1e-14)) return true;
      if (q < limit * (1 - 1e-14)) return false;
    }
    return std::pow(f, c.exponent) * g > limit;
  };
  if (!above(c.max_hz)) return c.max_hz;
  double lo = c.tensor_bound_hz, hi = c.max_hz;  // not above(lo) since d <= 1
  for (int i = 0; i < 48; ++i) {
    const double mid = 0.5 * (lo + hi);
    (above(mid) ? hi : lo) = mid;
  }
  return lo;
}

// A thread's recent solves, by their inputs: the planner's bound solves each stage of every layout
// it meets, and layouts that differ only in their schedule (AFAB, 1F1B, ZB-H1 share the chunks)
// or their ZeRO stage above 0 (the same optimizer shard) give a stage equal sums (issue 45). A
// hit returns what the solve returned for equal inputs, so nothing changes but the time.
struct Solved {
  SmClock clock;
  double tensor = -1, other = 0, fixed = 0, hz = 0;
};
constexpr size_t kSolvedSlots = 4096;

size_t slot_of(double tensor, double other, double fixed) {
  auto bits = [](double x) { return std::bit_cast<uint64_t>(x); };
  uint64_t h = bits(tensor) * 0x9e3779b97f4a7c15ULL;
  h = (h ^ (h >> 29) ^ bits(other)) * 0xbf58476d1ce4e5b9ULL;
  h = (h ^ (h >> 31) ^ bits(fixed)) * 0x94d049bb133111ebULL;
  return static_cast<size_t>(h >> 52) % kSolvedSlots;
}

}  // namespace

double step_clock(const SmClock& c, double tensor_cycles, double other_cycles,
                  double fixed_seconds) {
  if (!c.enabled()) return 0;
  if (!c.power_limited() || tensor_cycles <= 0) return c.max_hz;
  thread_local std::unique_ptr<std::array<Solved, kSolvedSlots>> solved;
  if (!solved) solved = std::make_unique<std::array<Solved, kSolvedSlots>>();
  Solved& e = (*solved)[slot_of(tensor_cycles, other_cycles, fixed_seconds)];
  if (e.tensor == tensor_cycles && e.other == other_cycles && e.fixed == fixed_seconds &&
      e.clock == c)
    return e.hz;
  const double hz = solve_step_clock(c, tensor_cycles, other_cycles, fixed_seconds);
  e = Solved{c, tensor_cycles, other_cycles, fixed_seconds, hz};
  return hz;
}

Result<double> parse_clock(std::string_view text, std::string_view what) {
  const std::string_view t = text;
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  std::string_view unit(end, static_cast<size_t>(t.data() + t.size() - end));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  double scale = 0;
  if (unit == "Hz") scale = 1;
  if (unit == "MHz") scale = 1e6;
  if (unit == "GHz") scale = 1e9;
  if (ec != std::errc() || scale == 0 || !(v > 0) || v * scale > 1e11)
    return Status::invalid(std::string(what) + ": '" + std::string(text) +
                           "' is not a clock; write it as e.g. \"1980MHz\" or \"1.98GHz\"");
  return v * scale;
}

std::string format_clock(double hz) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6gMHz", hz / 1e6);
  return buf;
}

}  // namespace scaleplan::hw
