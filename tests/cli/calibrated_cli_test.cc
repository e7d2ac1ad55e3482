// simulate and plan with a calibrated profile: the fitted kernel model replaces the roofline.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

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
