// simulate and plan with a calibrated profile: the fitted kernel model replaces the roofline.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "tests/cli/cli_runner.h"

namespace {

using scaleplan::testing::run_scaleplan;

// A profile as `scaleplan profile` writes it: a bundled base plus a calibration section. The fitted
// models here are synthetic (1 ps per FLOP or byte), enough to tell which model ran.
std::string write_calibrated_profile() {
  const std::string path = scaleplan::testing::unique_temp_path("calibrated.json");
  std::ofstream(path) << R"({"extends": "dgx-h100", "name": "h100-calibrated",
    "calibration": {"format": 1, "backend": "test",
      "gemm": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
               "seconds_per_padded_flop": 0, "seconds_per_byte": 0}, "samples": 8},
      "attention_forward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
               "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "attention_backward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
               "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8},
      "memory_bound": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 0,
               "seconds_per_byte": 1e-12}, "samples": 8}}})";
  return path;
}

TEST(CalibratedCli, SimulateUsesTheFittedKernelModel) {
  const std::string profile = write_calibrated_profile();
  auto r = run_scaleplan("simulate --model llama-tiny --cluster " + profile +
                         " --seq 512 --layout tp=1,gbs=2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel_model"].get<std::string>().rfind("fitted", 0), 0u) << j["kernel_model"];
  auto base = run_scaleplan(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 512 --layout tp=1,gbs=2 --json");
  ASSERT_EQ(base.exit_code, 0) << base.err;
  EXPECT_EQ(nlohmann::json::parse(base.out)["kernel_model"].get<std::string>().rfind("roofline", 0),
            0u);
  std::remove(profile.c_str());
}

TEST(CalibratedCli, BrokenCalibrationExitsTwoNamingTheField) {
  const std::string path = scaleplan::testing::unique_temp_path("broken_calibration.json");
  std::ofstream(path) << R"({"extends": "dgx-h100", "calibration": {"format": 7}})";
  auto r = run_scaleplan("simulate --model llama-tiny --cluster " + path +
                         " --seq 512 --layout tp=1,gbs=2 --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("format"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  std::remove(path.c_str());
}

// A calibration of collectives only (as written from nccl-tests fits): the kernels stay on the
// roofline, and the measured all-reduce is what `collective` and `simulate` use on its group.
TEST(CalibratedCli, MeasuredCollectivesAreUsed) {
  const std::string path = scaleplan::testing::unique_temp_path("coll_calibration.json");
  std::ofstream(path) << R"({"extends": "dgx-h100", "name": "h100-nccl",
    "calibration": {"format": 1, "backend": "cuda", "collectives": [
      {"op": "all_reduce", "ranks": 8, "placement": "intra_node", "latency_s": 3e-5,
       "seconds_per_byte": 1e-11}]}})";
  auto c = run_scaleplan("collective --cluster " + path +
                         " --op all_reduce --ranks 8 --bytes 1GiB --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto cj = nlohmann::json::parse(c.out);
  // 30 us + 2^30 B x 1e-11 s/B = 10.767 ms, the fit itself.
  EXPECT_NEAR(cj["results"][0]["time_s"].get<double>(), 3e-5 + 1073741824e-11, 1e-8);
  EXPECT_EQ(cj["collective_model"], "nccl-model x measured (1 group: all_reduce)");
  auto r = run_scaleplan("simulate --model llama-tiny --cluster " + path +
                         " --seq 512 --layout tp=8,gbs=8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["kernel_model"].get<std::string>().rfind("roofline", 0), 0u) << j["kernel_model"];
  EXPECT_EQ(j["collective_model"], "nccl-model x measured (1 group: all_reduce)");
  std::remove(path.c_str());
}

TEST(CalibratedCli, BadMeasuredCollectiveExitsTwoNamingIt) {
  const std::string path = scaleplan::testing::unique_temp_path("bad_coll_calibration.json");
  std::ofstream(path) << R"({"extends": "dgx-h100", "name": "h100-nccl",
    "calibration": {"collectives": [{"op": "all_reduce", "ranks": 8, "placement": "rack",
      "latency_s": 3e-5, "seconds_per_byte": 1e-11}]}})";
  auto r = run_scaleplan("simulate --model llama-tiny --cluster " + path +
                         " --seq 512 --layout tp=8,gbs=8 --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("calibration: collectives[0]: placement"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
  std::remove(path.c_str());
}

}  // namespace

namespace {

// A calibrated profile's "how sure" perturbs kernel time by its fits' own error (the largest
// 90th-percentile error on shapes not fitted: hold-out where measured, else cross-validated), not
// by the roofline's 10% (docs/planner.md, "How sure").
TEST(CalibratedCli, HowSureUsesTheFitsOwnError) {
  const std::string path = scaleplan::testing::unique_temp_path("calibrated_errors.json");
  // GEMM: hold-out p90 4% (its cross-validated 50% is not used); attention forward: no hold-out,
  // cross-validated p90 7%; backward 3%; memory-bound 2%. The largest is 7%.
  std::ofstream(path) << R"({"extends": "dgx-h100", "name": "h100-calibrated",
    "calibration": {"format": 1, "backend": "test",
      "gemm": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
               "seconds_per_padded_flop": 0, "seconds_per_byte": 0}, "samples": 8,
               "cv_error": {"n": 8, "median": 0.2, "p90": 0.5, "max": 0.6},
               "holdout_error": {"n": 4, "median": 0.02, "p90": 0.04, "max": 0.05}},
      "attention_forward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
               "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8,
               "cv_error": {"n": 8, "median": 0.03, "p90": 0.07, "max": 0.08}},
      "attention_backward": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 1e-12,
               "seconds_per_byte": 0, "seconds_per_row": 0}, "samples": 8,
               "cv_error": {"n": 8, "median": 0.01, "p90": 0.03, "max": 0.04}},
      "memory_bound": {"coefficients": {"overhead_s": 0, "seconds_per_flop": 0,
               "seconds_per_byte": 1e-12}, "samples": 8,
               "cv_error": {"n": 8, "median": 0.01, "p90": 0.02, "max": 0.02}}}})";
  auto r = run_scaleplan("simulate --model llama-tiny --cluster " + path +
                         " --seq 512 --layout tp=1,gbs=2 --how-sure --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  std::vector<double> kernel_times;
  for (const auto& p : j["how_sure"]["perturbations"]) {
    if (p["kernel_time"].get<double>() != 1.0) {
      kernel_times.push_back(p["kernel_time"].get<double>());
    }
  }
  ASSERT_EQ(kernel_times.size(), 2u);
  EXPECT_DOUBLE_EQ(kernel_times[0], 1.07);
  EXPECT_DOUBLE_EQ(kernel_times[1], 1 / 1.07);
  EXPECT_EQ(j["how_sure"]["perturbations"][0]["name"], "kernels +7.0%");
  EXPECT_EQ(j["how_sure"]["perturbations"][1]["name"], "kernels -6.5%");
  // The roofline profile keeps the documented 10%.
  auto base = run_scaleplan(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 512 --layout tp=1,gbs=2 --how-sure "
      "--json");
  ASSERT_EQ(base.exit_code, 0) << base.err;
  EXPECT_DOUBLE_EQ(
      nlohmann::json::parse(base.out)["how_sure"]["perturbations"][0]["kernel_time"].get<double>(),
      1.1);
  std::remove(path.c_str());
}

}  // namespace
