// The cluster's kernel model: fitted when its profile carries a calibration, roofline otherwise.
#include "calibrate/kernel_model.h"

#include <gtest/gtest.h>

#include "hw_profiles/cluster.h"

namespace scaleplan::calibrate {
namespace {

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
  auto c = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(c.is_ok());
  c->calibration_json = R"({"format": 1, "backend": "test",
      "gemm": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
                                "seconds_per_padded_flop": 0, "seconds_per_byte": 0}, "samples": 8},
      "attention_forward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
                                             "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "attention_backward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
                                              "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "memory_bound": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 0,
                                        "seconds_per_byte": 1e-12}, "samples": 8}})";
  auto m = kernel_cost_model_for(*c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->describe().rfind("fitted", 0), 0u) << (*m)->describe();
  const GemmShape g{.m = 1024, .n = 1024, .k = 1024};
  EXPECT_NEAR((*m)->gemm(g).to_seconds(), 2147483648e-12, 1e-9);
}

TEST(KernelModelFor, BrokenCalibrationNamesTheField) {
  auto c = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(c.is_ok());
  c->calibration_json = R"({"format": 7})";
  auto m = kernel_cost_model_for(*c);
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("format"), std::string::npos) << m.status().message();
}

TEST(KernelModelFor, CollectivesOnlyCalibrationKeepsTheRoofline) {
  auto c = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(c.is_ok());
  c->calibration_json = R"({"format": 1, "collectives": []})";
  auto m = kernel_cost_model_for(*c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ((*m)->describe().rfind("roofline", 0), 0u) << (*m)->describe();
  c->calibration_json = R"({"format": 2, "collectives": []})";
  auto bad = kernel_cost_model_for(*c);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("format"), std::string::npos);
}

}  // namespace
}  // namespace scaleplan::calibrate
