// Bundled data a user reaches by name (issue 32): the validation sets that docs/validation.md
// measures ship in validation/ and `validate` / `memory --validate` take them by name; --version
// says which data directory the binary reads. The installed copy is checked by
// tests/install/check_install.sh (ctest label `install`).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.h"

namespace {

using scaleplan::testing::RunResult;
RunResult run(const std::string& args) { return scaleplan::testing::run_scaleplan(args); }

const std::string kSets = std::string(SCALEPLAN_SOURCE_DIR) + "/validation/";

// `validate dev_runs_2026` reads the shipped file: the same records and predictions as the path.
TEST(DataCli, ValidateTakesABundledSetByName) {
  const std::string pick = " --match '^dgxc_v250401_llama31_8b_bf16_h100_8gpu$' --json -q";
  RunResult by_name = run("validate dev_runs_2026" + pick);
  RunResult by_path = run("validate " + kSets + "dev_runs_2026.json" + pick);
  ASSERT_EQ(by_name.exit_code, 0) << by_name.err;
  ASSERT_EQ(by_path.exit_code, 0) << by_path.err;
  nlohmann::json a = nlohmann::json::parse(by_name.out), b = nlohmann::json::parse(by_path.out);
  ASSERT_EQ(a["rows"].size(), 1u) << by_name.out.substr(0, 500);
  a.erase("file");
  b.erase("file");
  EXPECT_EQ(a, b);
}

TEST(DataCli, MemoryValidateTakesABundledSetByName) {
  RunResult r = run("memory --validate dev_runs --validate-framework Megatron --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(nlohmann::json::parse(r.out).empty());
}

// A name that is neither a file nor a set: exit 2, the name, the closest set and the list; the
// component figures (not run records) are not offered as a set.
TEST(DataCli, AnUnknownSetNamesTheSets) {
  RunResult r = run("validate dev_runs_2025");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'dev_runs_2025' is neither a file nor a bundled validation set"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("did you mean 'dev_runs_2026'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(sets: dev_runs, dev_runs_2026)"), std::string::npos) << r.err;
  r = run("memory --validate nosuchset");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--validate: 'nosuchset' is neither a file"), std::string::npos) << r.err;
  // A path is read as a path, whatever its name.
  r = run("validate ./no-such-records");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no-such-records"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("bundled validation set"), std::string::npos) << r.err;
}

// --version names the data directory and where it came from: the source tree for a build used
// uninstalled, SCALEPLAN_DATA_DIR when set.
TEST(DataCli, VersionNamesTheDataDirectory) {
  RunResult r = run("--version");
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("data: " + std::string(SCALEPLAN_SOURCE_DIR) + " (the source tree"),
            std::string::npos)
      << r.out;
  const std::string elsewhere = scaleplan::testing::unique_temp_path("no_data");
  setenv("SCALEPLAN_DATA_DIR", elsewhere.c_str(), 1);
  r = run("--version");
  EXPECT_NE(r.out.find("data: " + elsewhere + " (SCALEPLAN_DATA_DIR; it holds no bundled data)"),
            std::string::npos)
      << r.out;
  // Where it holds no data, a preset or profile by name fails naming where it looked.
  r = run("model --model llama3-8b");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("model 'llama3-8b': the bundled data (models/presets, hw_profiles/bundled) "
                       "was not found; searched SCALEPLAN_DATA_DIR=" +
                       elsewhere),
            std::string::npos)
      << r.err;
  r = run("cluster show dgx-h100");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("searched SCALEPLAN_DATA_DIR=" + elsewhere), std::string::npos) << r.err;
  unsetenv("SCALEPLAN_DATA_DIR");
}

}  // namespace
