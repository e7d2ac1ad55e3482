// `simulate --emit-chakra DIR` and `simulate --chakra DIR`: the round trip through the command
// line and the input errors (exit 2, nothing written).
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.h"

namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The traces of an iteration read back carry its DAG, durations and matches exactly, so the
// iteration time --chakra prints is the one simulate printed (the same Duration, the same double).
TEST(ChakraCli, TracesWrittenThenTimedGiveTheSameIteration) {
  const fs::path dir = fresh_dir("scaleplan_chakra_cli");
  const auto sim = scaleplan::testing::run_scaleplan(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=2,pp=2,dp=2,gbs=8 "
      "--all-ranks --quiet --json --emit-chakra " + dir.string());
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto s = nlohmann::json::parse(sim.out);
  // One trace per GPU (all 8 simulated) and the communicator-group file.
  EXPECT_EQ(s["chakra"]["files"].size(), 9u);
  for (int r = 0; r < 8; ++r)
    EXPECT_TRUE(fs::exists(dir / ("scaleplan." + std::to_string(r) + ".et"))) << r;
  const auto back = scaleplan::testing::run_scaleplan("simulate --chakra " + dir.string() +
                                                      " --cluster dgx-h100 --json");
  ASSERT_EQ(back.exit_code, 0) << back.err;
  const auto b = nlohmann::json::parse(back.out);
  EXPECT_EQ(b["ranks"], 8);
  EXPECT_EQ(b["ops"], s["chakra"]["ops"]);
  EXPECT_EQ(b["iteration_s"].get<double>(), s["iteration_s"].get<double>());
}

TEST(ChakraCli, BadDirectoriesAndAMissingClusterExitTwo) {
  const fs::path missing = fs::path(::testing::TempDir()) / "scaleplan_chakra_missing";
  fs::remove_all(missing);
  const auto emit = scaleplan::testing::run_scaleplan(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=2,gbs=8 "
      "--emit-chakra " + missing.string());
  EXPECT_EQ(emit.exit_code, 2);
  EXPECT_NE(emit.err.find("--emit-chakra"), std::string::npos) << emit.err;
  EXPECT_FALSE(fs::exists(missing));  // nothing written
  const fs::path empty = fresh_dir("scaleplan_chakra_empty");
  const auto none = scaleplan::testing::run_scaleplan("simulate --chakra " + empty.string() +
                                                      " --cluster dgx-h100");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--chakra"), std::string::npos) << none.err;
  const auto no_cluster = scaleplan::testing::run_scaleplan("simulate --chakra " + empty.string());
  EXPECT_EQ(no_cluster.exit_code, 2);
  EXPECT_NE(no_cluster.err.find("--cluster"), std::string::npos) << no_cluster.err;
}

}  // namespace
