// Golden-style tests of `scaleplan memory`: exit codes, JSON keys, values derived from the model,
// errors that name the field.
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

TEST(MemoryCli, JsonHasTheDocumentedKeys) {
  RunResult r =
      run("memory --model llama3-8b --gpu-memory 80GiB --seq 4096 "
          "--layout tp=2,pp=2,dp=2,gbs=16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"fits", "gpu_memory_bytes", "peak_bytes", "stages"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["gpu_memory_bytes"].get<int64_t>(), int64_t{80} << 30);
  ASSERT_EQ(j["stages"].size(), 2u);
  int64_t peak = 0;
  for (const auto& s : j["stages"]) {
    for (const char* key :
         {"weights", "gradients", "optimizer", "activations", "buffers", "total"}) {
      EXPECT_TRUE(s.contains(key)) << key;
    }
    // Megatron conventions, 18 bytes per parameter without ZeRO: 2 weights, 4 grads, 12 optimizer.
    const int64_t params = s["params"].get<int64_t>();
    EXPECT_EQ(s["weights"].get<int64_t>(), 2 * params);
    EXPECT_EQ(s["gradients"].get<int64_t>(), 4 * params);
    EXPECT_EQ(s["optimizer"].get<int64_t>(), 12 * params);
    peak = std::max(peak, s["reserved"].get<int64_t>());
  }
  EXPECT_EQ(j["peak_bytes"].get<int64_t>(), peak);
  EXPECT_TRUE(j["fits"].get<bool>());
}

TEST(MemoryCli, ClusterGivesTheGpuMemory) {
  RunResult r = run("memory --model llama3-8b --cluster dgx-h100 --seq 2048 --layout tp=8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["gpu_memory_bytes"].get<int64_t>(), int64_t{70} << 30);
}

TEST(MemoryCli, TextTableHasUnits) {
  RunResult r = run("memory --model llama3-8b --gpu-memory 80GiB --seq 2048 --layout tp=8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("GiB"), std::string::npos);
  EXPECT_NE(r.out.find("stage"), std::string::npos);
}

TEST(MemoryCli, NonDividingLayoutNamesTheKey) {
  RunResult r = run("memory --model llama3-8b --gpu-memory 80GiB --seq 4096 --layout tp=3 --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("tp"), std::string::npos) << r.err;
}

TEST(MemoryCli, UnknownLayoutKeyNamesIt) {
  RunResult r = run("memory --model llama3-8b --gpu-memory 80GiB --seq 4096 --layout tq=2");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty());
  EXPECT_NE(r.err.find("tq"), std::string::npos) << r.err;
}

// issue 44: the precision keys' bad values exit 2 naming the key and the value, with no output.
TEST(MemoryCli, BadPrecisionKeysNameTheKey) {
  for (const std::string& bad : {"moments=fp16", "act_cache=e5m6", "act_cache=fp8"}) {
    RunResult r =
        run("memory --model llama3-8b --gpu-memory 80GiB --seq 4096 --layout tp=2," + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_TRUE(r.out.empty()) << r.out;
    const std::string key = bad.substr(0, bad.find('='));
    EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
  }
  // The third one is a valid value where it applies: act_cache=fp8 needs dtype=fp8.
  RunResult ok =
      run("memory --model llama3-8b --gpu-memory 80GiB --seq 4096 --layout "
          "tp=2,dtype=fp8,moments=bf16,act_cache=fp8");
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
}

TEST(MemoryCli, UnknownModelAndMissingCluster) {
  RunResult m = run("memory --model no-such-model --gpu-memory 80GiB --seq 4096 --layout tp=1");
  EXPECT_EQ(m.exit_code, 2);
  EXPECT_TRUE(m.out.empty());
  RunResult c = run("memory --model llama3-8b --seq 4096 --layout tp=1");
  EXPECT_EQ(c.exit_code, 2);
  EXPECT_NE(c.err.find("--cluster"), std::string::npos) << c.err;
  RunResult u = run("memory --model llama3-8b --cluster no-such-cluster --seq 4096 --layout tp=1");
  EXPECT_EQ(u.exit_code, 2);
  EXPECT_TRUE(u.out.empty());
  EXPECT_NE(u.err.find("cluster"), std::string::npos) << u.err;
}

// A record `memory --validate` cannot evaluate is counted as skipped and its reason is printed
// once, naming the record (the reason was only in --json, with the record's id twice).
TEST(MemoryCli, ValidateSaysWhyARecordWasSkipped) {
  const std::string path = ::testing::TempDir() + "/memory_validate_skip.json";
  {
    std::ofstream f(path);
    f << R"([{"id": "deep-mtp", "cluster": "dgx-h100", "gpus": 8, "seq_len": 4096,
              "layout": "tp=8,dp=1,mbs=1,gbs=8", "framework": "megatron-lm",
              "model": {"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
                        "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 8,
                        "vocab_size": 1024, "num_nextn_predict_layers": 1072},
              "measured": {"status": "oom"}}])";
  }
  RunResult r = run("memory --validate " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("0 records evaluated, 1 skipped\n  skipped: deep-mtp: model: "
                       "num_nextn_predict_layers: 1072 is more than the 64"),
            std::string::npos)
      << r.out;
  RunResult j = run("memory --validate " + path + " --json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto reasons = nlohmann::json::parse(j.out)["skip_reasons"];
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_EQ(reasons[0].get<std::string>().rfind("deep-mtp: model: ", 0), 0u) << reasons[0];
  std::remove(path.c_str());
}

}  // namespace
