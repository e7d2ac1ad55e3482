// The simulator's expert GEMMs against their measurement on one H200 (issue 43; docs/simulator.md,
// "Expert GEMMs measured on an H200"; bench/expert_gemm_table prints every case).
#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/expert_gemm_table.h"
#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::expert_gemms {
namespace {

const std::string kMeasured = std::string(SCALEPLAN_SOURCE_DIR) + "/docs/measured/h200-2026-11-30/";

// Megatron-core's expert GEMMs run as Transformer Engine's multi_stream_cublas_gemm launches them:
// one cuBLAS GEMM per local expert over 4 streams (the simulator: ceil(E/4) rounds of at most 4).
// Call S measured that launch pattern captured in a CUDA graph (so that the host's launches do
// not count) at the rows per expert the Megatron-Bridge MoE records run, 1,024 to 8,192 per
// micro-batch (docs/validation.md, mbridge-moe, "Session 13"), for fc1 and fc2 of GPT-OSS-120B,
// Qwen3-30B-A3B, Qwen3-235B-A22B and DeepSeek-V3, forward, input and weight gradient: 96 GEMMs.
// The GPU ran under its 700 W limit at 1,335-1,980 MHz (median of the busy samples 1,545,
// interquartile 1,470-1,699: -5% / +10%); the model is read at that median clock. There, the
// dense GEMM of the same FLOPs (the rate the model's ceiling and clock stand for) comes out
// within 5% of its measurement in the median, and the simulated expert GEMMs within 10% of
// theirs: the clock's interquartile spread, since one clock stands for every case. This is what a
// user relies on when the simulator charges a Megatron-core rank's experts at these sizes; the
// records' 1.27 speed ratio is not in these GEMMs.
TEST(ExpertGemmsH200, MegatronRoundsMatchTheMeasuredFourStreamsAtTheRecordsRows) {
  auto cluster = hw::load_cluster("hgx-h200");
  ASSERT_TRUE(cluster.is_ok()) << cluster.status().message();
  auto own = calibrate::kernel_cost_model_for(*cluster);
  ASSERT_TRUE(own.is_ok());
  const double clock = busy_clock_hz(kMeasured + "callS_clocks.csv", "", "");
  ASSERT_GT(clock, 1.0e9);
  const std::shared_ptr<const calibrate::KernelCostModel> k = (*own)->at_sm_clock(clock);
  ASSERT_NE(k, nullptr) << "hgx-h200 states the clocks its figures were measured at";
  std::ifstream in(kMeasured + "callS_moe_gemm_streams.json");
  ASSERT_TRUE(in.good());
  const auto cases = nlohmann::json::parse(in);
  std::vector<double> rounds, dense;
  for (const auto& c : cases) {
    if (c["r"].get<int64_t>() < 1024) continue;
    ASSERT_TRUE(c.contains("graph4")) << c.dump();
    auto s = simulated(streams_presets().at(c["m"]), c["E"], c["r"], c["g"], c["p"], *k);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    rounds.push_back(s->megatron / c["graph4"].get<double>());
    dense.push_back(s->dense / c["dense"].get<double>());
  }
  ASSERT_EQ(rounds.size(), 96u);
  EXPECT_NEAR(median(dense), 1.0, 0.05);
  EXPECT_NEAR(median(rounds), 1.0, 0.10);
}

}  // namespace
}  // namespace scaleplan::expert_gemms
