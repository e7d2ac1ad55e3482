// Golden-style tests of `scaleplan model`: exit codes, JSON keys, and values derived from the
// architecture rather than pasted from a previous run.
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

TEST(ModelCli, JsonHasTheDocumentedKeys) {
  RunResult r = run("model --model llama3-8b --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"model", "params_total", "params_active", "flops_per_token",
                          "params_by_component", "flops", "seq"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["model"], "llama3-8b");
  EXPECT_EQ(j["seq"], 4096);  // the default
  // Llama-3-8B: 32·(2·4096² + 2·1024·4096 + 3·4096·14336 + 2·4096) + 2·128256·4096 + 4096.
  EXPECT_EQ(j["params_total"].get<int64_t>(), 8'030'261'248);
  EXPECT_EQ(j["params_active"].get<int64_t>(), 8'030'261'248);
  // Model FLOPs per token = 6·(N − embedding − norms) + 6·L·s·h/... : the matmul weights are
  // 8,030,261,248 − 525,336,576 (embedding) − 266,240 (65 norms of 4096) = 7,504,658,432;
  // attention forward a·(2d)·s·L = 32·256·4096·32 = 1,073,741,824; model = 3·(2N + attn).
  const double expected = 3.0 * (2.0 * 7'504'658'432 + 1'073'741'824.0);
  EXPECT_DOUBLE_EQ(j["flops_per_token"].get<double>(), expected);
  int64_t sum = 0;
  for (auto& [k, v] : j["params_by_component"].items()) sum += v.get<int64_t>();
  EXPECT_EQ(sum, j["params_total"].get<int64_t>());
}

TEST(ModelCli, SeqChangesOnlyTheAttentionTerm) {
  RunResult a = run("model --model llama-tiny --json --seq 1024");
  RunResult b = run("model --model llama-tiny --json --seq 2048");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  // Doubling s doubles the causal attention term: model FLOPs grow by 3·L·a·2d·1024
  // = 3·4·8·64·1024 = 6,291,456.
  EXPECT_DOUBLE_EQ(jb["flops_per_token"].get<double>() - ja["flops_per_token"].get<double>(),
                   6'291'456.0);
}

TEST(ModelCli, MoeActiveBelowTotal) {
  RunResult r = run("model --model mixtral-8x7b --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_LT(j["params_active"].get<int64_t>(), j["params_total"].get<int64_t>());
  EXPECT_TRUE(j["params_by_component"].contains("routed_experts"));
}

TEST(ModelCli, TableAndList) {
  RunResult r = run("model --model deepseek-v3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("671.03B"), std::string::npos) << r.out;
  // `model list` lists as `cluster list` does: a table headed by name, JSON objects with a name.
  RunResult l = run("model list --json");
  ASSERT_EQ(l.exit_code, 0) << l.err;
  auto j = nlohmann::json::parse(l.out);
  ASSERT_TRUE(j["models"].is_array());
  EXPECT_GE(j["models"].size(), 9u);
  EXPECT_EQ(j["models"][0]["name"], "deepseek-tiny");
  RunResult t = run("model list");
  ASSERT_EQ(t.exit_code, 0);
  EXPECT_EQ(t.out.rfind("name ", 0), 0u) << t.out;
  EXPECT_NE(t.out.find("qwen3-235b-a22b"), std::string::npos);
  RunResult c = run("cluster list");
  ASSERT_EQ(c.exit_code, 0);
  EXPECT_EQ(c.out.rfind("name ", 0), 0u) << c.out;
  EXPECT_EQ(run("model --list").out, t.out);  // the older spelling still works
}

TEST(ModelCli, BadInputExitsTwoWithTheField) {
  RunResult unknown = run("model --model no-such-model");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("llama3-8b"), std::string::npos) << unknown.err;  // lists presets

  const std::string path = scaleplan::testing::unique_temp_path("cli_neg.json");
  {
    std::ofstream out(path);
    out << R"({"model_type": "llama", "hidden_size": -4, "num_hidden_layers": 2,
               "num_attention_heads": 2, "vocab_size": 10, "intermediate_size": 8})";
  }
  RunResult neg = run("model --model " + path);
  EXPECT_EQ(neg.exit_code, 2);
  EXPECT_NE(neg.err.find("hidden_size: must be positive, got -4"), std::string::npos) << neg.err;
  {
    std::ofstream out(path);  // a family scaleplan does not model: refused by name, exit 2
    out << R"({"model_type": "mamba", "hidden_size": 768, "num_hidden_layers": 24,
               "vocab_size": 50280})";
  }
  RunResult mamba = run("model --model " + path);
  EXPECT_EQ(mamba.exit_code, 2);
  EXPECT_NE(mamba.err.find("model_type 'mamba' is not supported: state-space layers are not "
                           "modelled"),
            std::string::npos)
      << mamba.err;
  std::remove(path.c_str());

  EXPECT_EQ(run("model --model llama3-8b --seq 0").exit_code, 2);
  EXPECT_EQ(run("model").exit_code, 2);
}

}  // namespace
