// Golden-style checks of `scaleplan simulate --json`: exit codes and the documented keys.
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

std::string run(const std::string& args, int* rc) {
  std::string out;
  FILE* f = popen((std::string(SCALEPLAN_BINARY) + " " + args + " 2>/dev/null").c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  *rc = WEXITSTATUS(status);
  return out;
}

TEST(SimulateCli, JsonHasTheDocumentedKeys) {
  int rc = 0;
  const std::string out =
      run("simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=2,pp=2,dp=2,gbs=16 "
          "--json",
          &rc);
  ASSERT_EQ(rc, 0);
  const auto j = nlohmann::json::parse(out);
  for (const char* k : {"iteration_s", "tokens_per_s", "tokens_per_s_per_gpu", "mfu", "hfu",
                        "peak_memory_bytes", "fits", "breakdown"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  // One breakdown entry per pipeline stage; tokens/s = gbs·seq / iteration.
  EXPECT_EQ(j["breakdown"].size(), 2u);
  EXPECT_NEAR(j["tokens_per_s"].get<double>(), 16.0 * 4096 / j["iteration_s"].get<double>(),
              1e-6 * j["tokens_per_s"].get<double>());
  for (const auto& s : j["breakdown"]) {
    for (const char* k : {"compute", "comm", "bubble", "idle"}) EXPECT_TRUE(s.contains(k)) << k;
  }
}

TEST(SimulateCli, BadLayoutExitsTwo) {
  int rc = 0;
  run("simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=3,gbs=8 --json", &rc);
  EXPECT_EQ(rc, 2);
}

// Unknown framework or attention names are input errors (exit 2) that write no trace.
TEST(SimulateCli, BadFrameworkOrAttentionExitsTwo) {
  int rc = 0;
  const std::string trace = ::testing::TempDir() + "/scaleplan_bad_framework_trace.json";
  std::remove(trace.c_str());
  run("simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=8,gbs=8 "
      "--framework deepspeed --trace " +
          trace,
      &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(std::fopen(trace.c_str(), "r"), nullptr);
  run("simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=8,gbs=8 "
      "--attention sdpa",
      &rc);
  EXPECT_EQ(rc, 2);
}

// The 2021-2022 Megatron-LM conventions (unfused attention, gradients reduced after the backward)
// make the same layout slower than today's Megatron-core on the same hardware.
TEST(SimulateCli, Megatron2022IsSlowerThanMegatronCore) {
  int rc = 0;
  const std::string base =
      "simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=8,pp=1,dp=4,gbs=32 "
      "--gpus 32 --json";
  const auto core = nlohmann::json::parse(run(base, &rc));
  ASSERT_EQ(rc, 0);
  const auto legacy = nlohmann::json::parse(run(base + " --framework megatron-2022", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_GT(legacy["iteration_s"].get<double>(), core["iteration_s"].get<double>());
}

}  // namespace
