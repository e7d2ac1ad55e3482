// torchtitan's torch.compile option end to end (docs/simulator.md, "torchtitan with
// torch.compile"): refused outside torchtitan, off by default, written into the torchtitan exports.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.h"

namespace {

using scaleplan::testing::RunResult;

RunResult run(const std::string& args) { return scaleplan::testing::run_scaleplan(args); }

const std::string kSim =
    "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=1,pp=1,dp=1,mbs=1,gbs=4 "
    "--json ";
const std::string kPlan =
    "plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 1024 --gbs 16 "
    "--top 1 -q --no-robustness ";

TEST(CompileCli, RefusedWhereTorchtitanDoesNotRunIt) {
  RunResult megatron = run(kSim + "--framework megatron --compile model");
  EXPECT_EQ(megatron.exit_code, 2);
  EXPECT_NE(megatron.err.find("--compile"), std::string::npos) << megatron.err;
  EXPECT_TRUE(megatron.out.empty()) << megatron.out;
  RunResult bad = run(kSim + "--framework torchtitan --compile blocks");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("'blocks'"), std::string::npos) << bad.err;
  RunResult tp =
      run("simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --framework "
          "torchtitan --compile model --layout tp=2,pp=1,dp=1,mbs=1,gbs=4");
  EXPECT_EQ(tp.exit_code, 2);
  EXPECT_NE(tp.err.find("tp=2"), std::string::npos) << tp.err;
  RunResult emit = run(kPlan + "--compile model --emit megatron");
  EXPECT_EQ(emit.exit_code, 2);
  EXPECT_NE(emit.err.find("--compile"), std::string::npos) << emit.err;
}

// Fewer bytes through HBM, the same GEMMs and attention: the compiled step is shorter, and the
// eager prediction does not mention the option.
TEST(CompileCli, CompiledStepRunsFewerBytes) {
  RunResult eager = run(kSim + "--framework torchtitan");
  RunResult compiled = run(kSim + "--framework torchtitan --compile model,loss");
  ASSERT_EQ(eager.exit_code, 0) << eager.err;
  ASSERT_EQ(compiled.exit_code, 0) << compiled.err;
  const auto e = nlohmann::json::parse(eager.out), c = nlohmann::json::parse(compiled.out);
  EXPECT_FALSE(e.contains("compile"));
  EXPECT_EQ(c["compile"], "model,loss");
  EXPECT_LT(c["iteration_s"].get<double>(), e["iteration_s"].get<double>());
}

// torchtitan's [compile] section (v0.2.2 TOML) and CompileConfig (main's Python config): written
// only when the option is on, with its components.
TEST(CompileCli, TorchtitanExportsTurnCompileOn) {
  // torchtitan has a flavor of Llama-3-8B's shape (none of llama-tiny's).
  const std::string job =
      "plan --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 --gbs 32 --top 1 -q "
      "--no-robustness --framework torchtitan ";
  RunResult toml = run(job + "--compile model,loss --emit torchtitan-0.2.2");
  ASSERT_EQ(toml.exit_code, 0) << toml.err;
  EXPECT_NE(toml.out.find("[compile]\nenable = true\ncomponents = [\"model\", \"loss\"]\n"),
            std::string::npos)
      << toml.out;
  EXPECT_NE(toml.out.find("tensor_parallel_degree = 1\n"), std::string::npos) << toml.out;
  RunResult py = run(job + "--compile model --emit torchtitan");
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_NE(py.out.find("config.compile.enable = True\n"), std::string::npos) << py.out;
  EXPECT_NE(py.out.find("config.compile.components = [\"model\"]\n"), std::string::npos) << py.out;
  RunResult eager = run(job + "--emit torchtitan-0.2.2");
  ASSERT_EQ(eager.exit_code, 0) << eager.err;
  EXPECT_EQ(eager.out.find("[compile]"), std::string::npos) << eager.out;
}

}  // namespace
