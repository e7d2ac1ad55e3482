// The SM clock under the power limit (hw_profiles/sm_clock.h): the power balance through the two
// measured ends, and the profile field's checks.
#include "hw_profiles/sm_clock.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "hw_profiles/cluster.h"

namespace scaleplan::hw {
namespace {

SmClock h200() {
  auto c = load_cluster("hgx-h200");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c->gpu.efficiency.sm_clock;
}

// A step of one second of busy kernel time at clock f with tensor share d (no other clock-bound
// kernels): tensor cycles d·f, the rest fixed.
double clock_of_step(const SmClock& c, double d, double f) {
  return step_clock(c, d * f, 0, 1 - d);
}

TEST(StepClock, TheSolvedClockReproducesBothMeasuredEnds) {
  const SmClock c = h200();
  ASSERT_TRUE(c.power_limited());
  // Tensor-core kernels only: the back-to-back clock, whatever their time.
  EXPECT_NEAR(step_clock(c, 5e9, 0, 0), c.tensor_bound_hz, 1e-6 * c.max_hz);
  // The measured eager step: tensor share d_0 at its clock f_0 gives f_0.
  EXPECT_NEAR(clock_of_step(c, c.tensor_share, c.mixed_hz), c.mixed_hz, 1e-6 * c.max_hz);
  // Nothing on the tensor cores: no faster than the maximum.
  EXPECT_EQ(step_clock(c, 0, 0, 1), c.max_hz);
  // Between the ends the clock falls as the tensor share rises (the balance's slope).
  const double busier = clock_of_step(c, 0.9, c.mixed_hz);
  EXPECT_LT(busier, c.mixed_hz);
  EXPECT_GT(busier, c.tensor_bound_hz);
  // The balance holds at the solution: f^alpha (d + (1-d) r) at the tensor-bound end's power,
  // with d the share at the solved clock (tensor time 0.9·f_0/f, fixed 0.1).
  const double d = 0.9 * c.mixed_hz / busier / (0.9 * c.mixed_hz / busier + 0.1);
  EXPECT_NEAR(std::pow(busier / c.tensor_bound_hz, c.exponent) * (d + (1 - d) * c.other_power()),
              1.0, 1e-6);
}

// The power balance's bisection as the header defines it, with std::pow at every step.
double bisect_with_pow(const SmClock& c, double tensor, double other, double fixed) {
  const double r = c.other_power();
  const double limit = std::pow(c.tensor_bound_hz, c.exponent);
  auto power = [&](double f) {
    const double d = tensor / (tensor + other + f * fixed);
    return std::pow(f, c.exponent) * (d + (1 - d) * r);
  };
  if (power(c.max_hz) <= limit) return c.max_hz;
  double lo = c.tensor_bound_hz, hi = c.max_hz;
  for (int i = 0; i < 48; ++i) {
    const double mid = 0.5 * (lo + hi);
    (power(mid) > limit ? hi : lo) = mid;
  }
  return lo;
}

// step_clock decides each step of the bisection on f·f·f where that is far enough from the limit
// for rounding not to matter (sm_clock.cc): the clocks must equal pow's bit for bit, over steps
// from all tensor to all memory-bound, with and without casting-loop cycles, at a few scales.
TEST(StepClock, BisectsExactlyAsWithPowAlone) {
  const SmClock c = h200();
  ASSERT_TRUE(c.power_limited());
  ASSERT_EQ(c.exponent, 3);
  std::mt19937_64 rng(45);
  std::uniform_real_distribution<double> share(0, 1), scale(-3, 2);
  int solved = 0;  // steps whose clock falls below the maximum (the bisection ran)
  for (int i = 0; i < 20000; ++i) {
    const double seconds = std::pow(10.0, scale(rng));
    const double d = share(rng), cast = i % 3 == 0 ? share(rng) * (1 - d) : 0;
    const double tensor = d * seconds * c.max_hz, other = cast * seconds * c.max_hz;
    const double fixed = (1 - d - cast) * seconds;
    const double got = step_clock(c, tensor, other, fixed);
    EXPECT_EQ(got, bisect_with_pow(c, tensor, other, fixed))
        << tensor << " " << other << " " << fixed;
    if (got < c.max_hz) ++solved;
  }
  EXPECT_GT(solved, 5000);
}

// step_clock keeps recent solves by their inputs (sm_clock.cc): the same sums under another
// profile's clock must be solved for that clock, not answered from the first.
TEST(StepClock, RecentSolvesAreKeptPerClock) {
  const SmClock a = h200();
  SmClock b = a;
  b.tensor_bound_hz = 0.5 * (a.tensor_bound_hz + a.mixed_hz);  // a higher limit: a faster clock
  ASSERT_TRUE(validate(b, "b").is_ok());
  const double tensor = 0.9 * a.mixed_hz, fixed = 0.1;
  const double fa = step_clock(a, tensor, 0, fixed), fb = step_clock(b, tensor, 0, fixed);
  EXPECT_EQ(fa, bisect_with_pow(a, tensor, 0, fixed));
  EXPECT_EQ(fb, bisect_with_pow(b, tensor, 0, fixed));
  EXPECT_GT(fb, fa);
  EXPECT_EQ(step_clock(a, tensor, 0, fixed), fa);  // and again, after the other
}

TEST(StepClock, WithoutAPowerLimitTheStepRunsAtTheMaximum) {
  SmClock c;
  EXPECT_EQ(step_clock(c, 1, 0, 1), 0);  // no clock model
  c.max_hz = 1.98e9;
  EXPECT_EQ(step_clock(c, 1e9, 0, 0), 1.98e9);
}

TEST(StepClock, ClocksAreUnitStrings) {
  EXPECT_DOUBLE_EQ(*parse_clock("1980MHz", "x"), 1.98e9);
  EXPECT_DOUBLE_EQ(*parse_clock("1.98GHz", "x"), 1.98e9);
  EXPECT_DOUBLE_EQ(*parse_clock("1732.5 MHz", "x"), 1.7325e9);
  for (const char* bad : {"1980", "1980 MHZ", "-5MHz", "fastMHz", ""}) {
    auto r = parse_clock(bad, "gpu: efficiency: sm_clock: max");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("gpu: efficiency: sm_clock: max: '" + std::string(bad) +
                                        "' is not a clock"),
              std::string::npos)
        << r.status().message();
  }
}

// A profile's sm_clock that the power balance cannot hold is refused, naming the field.
TEST(StepClock, AProfileWhoseEndsDoNotFitIsRefusedNamingTheField) {
  auto base = load_cluster("hgx-h200");
  ASSERT_TRUE(base.is_ok());
  auto j = nlohmann::json::parse(cluster_to_json(*base));
  auto refused = [&](const nlohmann::json& profile, const std::string& what) {
    auto r = parse_cluster(profile.dump(), "my.json");
    ASSERT_FALSE(r.is_ok()) << what;
    EXPECT_NE(r.status().message().find("my.json: gpu: efficiency: sm_clock"), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find(what), std::string::npos) << r.status().message();
  };
  // Back to back faster than the mixed step: the tensor kernels would draw less than the rest.
  auto j1 = j;
  j1["gpu"]["efficiency"]["sm_clock"]["power_limit"]["tensor_bound_clock"] = "1900MHz";
  refused(j1, "tensor_bound_clock");
  // Ends so far apart that the other kernels would draw negative power (r < 0).
  auto j2 = j;
  j2["gpu"]["efficiency"]["sm_clock"]["power_limit"]["tensor_bound_clock"] = "1000MHz";
  refused(j2, "power of");
  auto j3 = j;
  j3["gpu"]["efficiency"]["sm_clock"]["measured_at"]["gemm"] = "2100MHz";
  refused(j3, "measured_at: gemm");
  auto j4 = j;
  j4["gpu"]["efficiency"]["sm_clock"]["max"] = 1980;
  refused(j4, "max");
}

}  // namespace
}  // namespace scaleplan::hw
