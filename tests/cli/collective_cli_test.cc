// CLI tests of `scaleplan collective`: the nccl-tests-like table and its JSON.
#include <gtest/gtest.h>

#include "tests/cli/cli_runner.h"

#include <array>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

using scaleplan::testing::RunResult;
RunResult run(const std::string& args) { return scaleplan::testing::run_scaleplan(args); }

TEST(CollectiveCli, SweepJson) {
  // 8B:8GiB with factor 2 is 2^3 .. 2^33: 31 sizes.
  RunResult r =
      run("collective --cluster dgx-h100 --op all_reduce --ranks 16 --sweep 8B:8GiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 31u);
  for (const auto& row : j["results"]) {
    for (const char* key : {"bytes", "time_s", "algbw_gbps", "busbw_gbps", "algorithm"}) {
      ASSERT_TRUE(row.contains(key)) << key;
    }
    // busbw = algbw x 2·15/16 for all-reduce on 16 ranks.
    EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * 30.0 / 16, 1e-6);
  }
  EXPECT_DOUBLE_EQ(j["bus_factor"].get<double>(), 30.0 / 16);
  EXPECT_EQ(j["placement"]["nodes"], 2);
  // Two nodes of 8 NDR NICs: the ring is NVLink- or NIC-bound at min(369, 376) GB/s busbw.
  EXPECT_NEAR(j["results"].back()["busbw_gbps"].get<double>(), 369, 369 * 0.03);
}

TEST(CollectiveCli, TableLooksLikeNcclTests) {
  RunResult r = run("collective --cluster dgx-a100-80g --op all_gather --ranks 8 --bytes 1GiB");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("busbw(GB/s)"), std::string::npos);
  EXPECT_NE(r.out.find("ring/Simple"), std::string::npos) << r.out;
}

TEST(CollectiveCli, BadInputExitsTwo) {
  RunResult r = run("collective --cluster dgx-h100 --op allreduse --ranks 8 --bytes 1GiB");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("allreduse"), std::string::npos);
  r = run("collective --cluster dgx-h100 --ranks 8 --bytes 1parsec");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--bytes"), std::string::npos);
  r = run("collective --cluster dgx-h100 --bytes 1GiB");
  EXPECT_EQ(r.exit_code, 2);
}

TEST(CollectiveCli, NcclLogShowsMeasuredColumn) {
  RunResult r = run("collective --cluster dgx-a100-80g --op all_reduce --nccl-log " +
                    std::string(SCALEPLAN_SOURCE_DIR) +
                    "/examples/nccl-tests/a100_8gpu_all_reduce.log --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["results"].size(), 9u);
  EXPECT_TRUE(j["results"][0].contains("measured_busbw_gbps"));
  EXPECT_TRUE(j.contains("fit"));
}

}  // namespace
