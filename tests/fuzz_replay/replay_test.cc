// Replays every fuzz target's seed corpus (fuzz/corpus/<target>/) and every minimized crasher or
// hang libFuzzer found (tests/data/fuzz/<target>/) in the ordinary build: each input must come
// back from the library with a value or an invalid-input error, the contract the target checks
// (docs/reliability.md). A crasher that breaks it again aborts this test.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#define SCALEPLAN_FUZZ_DECLARE(name) int scaleplan_fuzz_##name(const uint8_t* data, size_t size);
SCALEPLAN_FUZZ_DECLARE(hf_config)
SCALEPLAN_FUZZ_DECLARE(cluster_profile)
SCALEPLAN_FUZZ_DECLARE(calibration)
SCALEPLAN_FUZZ_DECLARE(layout)
SCALEPLAN_FUZZ_DECLARE(units)
SCALEPLAN_FUZZ_DECLARE(nccl_log)
SCALEPLAN_FUZZ_DECLARE(validation_records)
SCALEPLAN_FUZZ_DECLARE(plan_file)
SCALEPLAN_FUZZ_DECLARE(trace)

namespace {

namespace fs = std::filesystem;
using Target = int (*)(const uint8_t*, size_t);

std::vector<fs::path> inputs(const std::string& target) {
  std::vector<fs::path> out;
  for (const std::string dir : {std::string(SCALEPLAN_SOURCE_DIR) + "/fuzz/corpus/" + target,
                                std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/fuzz/" + target}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Runs the target on every input; each must finish well within libFuzzer's -timeout (10 s).
void replay(const std::string& target, Target fn, size_t min_inputs) {
  const auto files = inputs(target);
  EXPECT_GE(files.size(), min_inputs) << "seed corpus of " << target << " missing";
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    std::ifstream in(f, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(fn(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()), 0);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  }
}

TEST(FuzzReplay, HfConfig) { replay("hf_config", scaleplan_fuzz_hf_config, 10); }
TEST(FuzzReplay, ClusterProfile) { replay("cluster_profile", scaleplan_fuzz_cluster_profile, 8); }
TEST(FuzzReplay, Calibration) { replay("calibration", scaleplan_fuzz_calibration, 2); }
TEST(FuzzReplay, Layout) { replay("layout", scaleplan_fuzz_layout, 5); }
TEST(FuzzReplay, Units) { replay("units", scaleplan_fuzz_units, 10); }
TEST(FuzzReplay, NcclLog) { replay("nccl_log", scaleplan_fuzz_nccl_log, 1); }
TEST(FuzzReplay, ValidationRecords) {
  replay("validation_records", scaleplan_fuzz_validation_records, 5);
}
TEST(FuzzReplay, PlanFile) { replay("plan_file", scaleplan_fuzz_plan_file, 1); }
TEST(FuzzReplay, Trace) { replay("trace", scaleplan_fuzz_trace, 2); }

}  // namespace
