// The cluster's kernel model: fitted when its profile carries a calibration, roofline otherwise.
#include "calibrate/kernel_model.h"

#include <gtest/gtest.h>

#include <string>

#include "hw_profiles/cluster.h"

namespace scaleplan::calibrate {
namespace {

// dgx-h100 with a calibration section, parsed as the loader parses a profile.
Result<hw::Cluster> calibrated(const std::string& section) {
  return hw::parse_cluster(
      R"({"extends": "dgx-h100", "name": "calibrated", "calibration": )" + section + "}",
      "calibrated.json");
}

// A calibration whose kernel models are 1 ps per FLOP (memory-bound: per byte) and nothing else,
// the GEMM's fitted on `gemm_samples` measurements, the others on 8.
std::string fitted_section(int gemm_samples) {
  return R"({"format": 1, "backend": "test",
      "gemm": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
                                "seconds_per_padded_flop": 0, "seconds_per_byte": 0}, "samples": )" +
         std::to_string(gemm_samples) + R"(},
      "attention_forward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
                                             "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "attention_backward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
                                              "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "memory_bound": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 0,
                                        "seconds_per_byte": 1e-12}, "samples": 8}})";
}

TEST(KernelModelFor, RooflineWithoutCalibration) {
  auto c = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(c.is_ok());
  auto m = kernel_cost_model_for(*c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->describe().rfind("roofline", 0), 0u) << (*m)->describe();
}

TEST(KernelModelFor, FittedWhenTheProfileIsCalibrated) {
  // A calibration (each model claims 8 measurements: the loader refuses fits on fewer than 4)
  // whose GEMM model is 1 ps per FLOP and nothing else: a 1024³ GEMM is
  // 2·1024³ = 2^31 FLOPs, so 2^31 ps = 2.147483648 ms.
  auto c = calibrated(fitted_section(8));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  auto m = kernel_cost_model_for(*c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->describe().rfind("fitted", 0), 0u) << (*m)->describe();
  const GemmShape g{.m = 1024, .n = 1024, .k = 1024};
  EXPECT_NEAR((*m)->gemm(g).to_seconds(), 2147483648e-12, 1e-9);
  // The model is built from the profile's parsed calibration, not from its text: a changed
  // coefficient changes the time.
  c->calibration->gemm.coef[1] = 2e-12;
  auto twice = kernel_cost_model_for(*c);
  ASSERT_TRUE(twice.is_ok()) << twice.status().message();
  EXPECT_NEAR((*twice)->gemm(g).to_seconds(), 2 * 2147483648e-12, 1e-9);
}

// The calibration is parsed and checked once, when the profile is read: a broken one is refused
// there, naming the field.
TEST(KernelModelFor, BrokenCalibrationIsRefusedWhenTheProfileIsRead) {
  auto c = calibrated(R"({"format": 7})");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().message(), "calibrated.json: calibration: format: 7 is not 1");
  auto half = calibrated(R"({"format": 1, "gemm": {"coefficients": {}}})");
  ASSERT_FALSE(half.is_ok());
  EXPECT_EQ(half.status().message(),
            "calibrated.json: calibration: gemm: coefficients: overhead_s: missing");
}

TEST(KernelModelFor, CollectivesOnlyCalibrationKeepsTheRoofline) {
  auto c = calibrated(R"({"format": 1, "collectives": []})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_TRUE(c->calibration.has_value());
  EXPECT_FALSE(c->calibration->kernel_models);
  auto m = kernel_cost_model_for(*c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->describe().rfind("roofline", 0), 0u) << (*m)->describe();
  EXPECT_EQ(fitted_kernel_error(*c).value(), std::nullopt);
  auto bad = calibrated(R"({"format": 2, "collectives": []})");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(), "calibrated.json: calibration: format: 2 is not 1");
}

// A fit on fewer measurements than coefficients is refused when a kernel model is built from it,
// naming the model (the profile itself loads: `refit` and `cluster show` read it).
TEST(KernelModelFor, TooFewMeasurementsNameTheModel) {
  auto c = calibrated(fitted_section(2));
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  auto m = kernel_cost_model_for(*c);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().message(),
            "calibrated.json: calibration: gemm: fitted on 2 measurements, needs at least 4 "
            "(rerun scaleplan profile)");
}

}  // namespace
}  // namespace scaleplan::calibrate
