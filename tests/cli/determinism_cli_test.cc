// Determinism (docs/reliability.md, STYLE.md 4): the same inputs give byte-identical outputs,
// across runs and across thread counts. The suite's name says "Thread", so the TSan build runs
// it too (tests/CMakeLists.txt): `plan` and `validate` then run their thread pools under TSan.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.h"

namespace {

using scaleplan::testing::run_scaleplan;
using scaleplan::testing::RunResult;
using scaleplan::testing::unique_temp_path;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string ok_output(const std::string& args) {
  const RunResult r = run_scaleplan(args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
  return r.out;
}

TEST(DeterminismAcrossThreads, SimulateTraceIsByteIdenticalAcrossRuns) {
  // A pipeline with interleaving, TP and DP: many equal-time events, ordered by (time, sequence).
  const std::string args =
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --json "
      "--layout tp=2,pp=2,dp=2,vpp=2,schedule=interleaved,gbs=16 --trace ";
  const std::string a = unique_temp_path("trace_a.json"), b = unique_temp_path("trace_b.json");
  const std::string out_a = ok_output(args + a), out_b = ok_output(args + b);
  const std::string trace_a = slurp(a), trace_b = slurp(b);
  ASSERT_GT(trace_a.size(), 1000u);
  EXPECT_TRUE(trace_a == trace_b) << "traces differ";
  EXPECT_EQ(out_a, out_b);
  std::remove(a.c_str());
  std::remove(b.c_str());
}

// plan --json without the two fields that describe the run rather than the answer: its wall time
// and the thread count it was given.
std::string plan_answer(int threads) {
  auto j = nlohmann::json::parse(
      ok_output("plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 1024 --gbs 32 --top 10 "
                "--json -q --threads " +
                std::to_string(threads)));
  EXPECT_EQ(j["threads"], threads);
  j.erase("search_s");
  j.erase("threads");
  return j.dump(1);
}

TEST(DeterminismAcrossThreads, PlanJsonIsByteIdenticalAcrossThreadCounts) {
  const std::string one = plan_answer(1);
  EXPECT_EQ(one, plan_answer(1));  // across runs
  EXPECT_EQ(one, plan_answer(2));
  EXPECT_EQ(one, plan_answer(3));
}

TEST(DeterminismAcrossThreads, ValidateJsonIsByteIdenticalAcrossThreadCounts) {
  // Records in file order whatever the thread that simulated each; three layouts, one out of
  // memory, one timed by MFU.
  const std::string model =
      R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
          "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
          "vocab_size": 1024})";
  const std::string path = unique_temp_path("determinism_records.json");
  std::ofstream(path) << R"([
    {"id": "a", "model": )"
                      << model << R"(, "cluster": "dgx-h100", "gpus": 8, "seq_len": 1024,
     "layout": "tp=2,pp=2,dp=2,gbs=16", "framework": "Megatron-LM",
     "measured": {"status": "ok", "sec_per_iter": 0.05}},
    {"id": "b", "model": )"
                      << model << R"(, "cluster": "dgx-a100-80g", "gpus": 4, "seq_len": 512,
     "layout": "tp=4,gbs=8", "framework": "nanotron",
     "measured": {"status": "ok", "mfu": 0.3, "peak_memory_gib": 1.5}},
    {"id": "c", "model": )"
                      << model << R"(, "cluster": "dgx-h100", "gpus": 8, "seq_len": 2048,
     "layout": "dp=8,mbs=2,gbs=64", "framework": "torchtitan",
     "measured": {"status": "oom"}}])";
  const std::string base = "validate " + path + " --json --quiet --threads ";
  const std::string one = ok_output(base + "1");
  ASSERT_NE(one.find("\"records\": 3"), std::string::npos) << one.substr(0, 500);
  EXPECT_EQ(one, ok_output(base + "1"));
  EXPECT_EQ(one, ok_output(base + "2"));
  EXPECT_EQ(one, ok_output(base + "3"));
  std::remove(path.c_str());
}

}  // namespace
