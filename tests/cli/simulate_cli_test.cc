// Golden-style checks of `scaleplan simulate --json`: exit codes and the documented keys.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/cli_runner.h"

namespace {

// A Llama-shaped model of ~1.2B parameters (the nanotron sweep's width and depth, GQA), for the
// records the validate tests write.
constexpr const char* kLlama1B =
    R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
        "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
        "num_key_value_heads": 8, "vocab_size": 32000})";

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
  // Megatron-core on an H100 runs Transformer Engine's cuDNN attention; --attention overrides it,
  // and FlashAttention-2's slower kernel makes the same step longer.
  EXPECT_EQ(j["attention"], "cudnn");
  const auto flash = nlohmann::json::parse(
      run("simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=2,pp=2,dp=2,gbs=16 "
          "--json --attention flash",
          &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(flash["attention"], "flash2");
  EXPECT_GT(flash["iteration_s"].get<double>(), j["iteration_s"].get<double>());
}

// --all-ranks reports its phases on stderr (runs on thousands of GPUs take seconds), the JSON
// on stdout stays whole, and --quiet silences the progress. Every rank is a breakdown entry.
TEST(SimulateCli, AllRanksShowsItsPhasesUnlessQuiet) {
  const std::string args =
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=2,pp=2,dp=2,gbs=8 "
      "--all-ranks --json";
  const auto r = scaleplan::testing::run_scaleplan(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["breakdown"].size(), 8u);
  for (const char* phase : {"simulate: building the program of all 8 GPUs", "simulate: running ",
                            "simulate: timeline done"})
    EXPECT_NE(r.err.find(phase), std::string::npos) << r.err;
  const auto quiet = scaleplan::testing::run_scaleplan(args + " --quiet");
  ASSERT_EQ(quiet.exit_code, 0);
  EXPECT_TRUE(quiet.err.empty()) << quiet.err;
  EXPECT_EQ(nlohmann::json::parse(quiet.out), nlohmann::json::parse(r.out));
}

// The text table under --all-ranks names each row's global rank; past 64 ranks it keeps one row
// per stage (its busiest rank) and says where every rank is.
TEST(SimulateCli, AllRanksTableNamesRanksAndStaysShort) {
  auto rows = [](const std::string& out) {
    int n = 0;
    std::istringstream in(out);
    std::string line;
    bool table = false;
    while (std::getline(in, line)) {
      if (line.rfind("stage   rank", 0) == 0) {
        table = true;
        continue;
      }
      if (table && line.empty()) break;
      n += table;
    }
    return n;
  };
  const std::string base =
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --all-ranks -q --layout ";
  const auto small = scaleplan::testing::run_scaleplan(base + "tp=2,pp=2,dp=2,gbs=8");
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_EQ(rows(small.out), 8);
  const auto large = scaleplan::testing::run_scaleplan(base + "tp=2,pp=2,dp=32,gbs=64");
  ASSERT_EQ(large.exit_code, 0) << large.err;
  EXPECT_EQ(rows(large.out), 2);
  EXPECT_NE(large.out.find("busiest rank"), std::string::npos) << large.out;
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

// issue 44: Transformer Engine's TP communication overlap is Megatron-core's option
// (--tp-comm-overlap); torchtitan has none, so simulating it for torchtitan is refused, naming
// the option, instead of predicting a run torchtitan cannot make.
TEST(SimulateCli, TpCommOverlapOnlyWithMegatronCore) {
  int rc = 0;
  const std::string base =
      "simulate --model llama3-8b --cluster dgx-h100 --seq 4096 --layout tp=8,gbs=8 "
      "--tp-comm-overlap --json ";
  run(base + "--framework megatron", &rc);
  EXPECT_EQ(rc, 0);
  for (const char* f : {"torchtitan", "nanotron"}) {
    const auto r = scaleplan::testing::run_scaleplan(base + "--framework " + f);
    EXPECT_EQ(r.exit_code, 2) << f;
    EXPECT_NE(r.err.find("--tp-comm-overlap"), std::string::npos) << r.err;
  }
}

// --fp8-recipe is Transformer Engine's recipe for Megatron-core's fp8 linears: a name Megatron-core
// does not take, a bf16 layout, another framework, or MXFP8 on a GPU without block-scaled fp8
// tensor cores (H100) is an input error (exit 2) naming the option; tensorwise on an H100 and
// mxfp8 on a B200 run, and the JSON says which recipe ran.
TEST(SimulateCli, Fp8RecipeRunsWhereTransformerEngineWouldAndNamesItselfOtherwise) {
  const std::string base = "simulate --model llama-tiny --seq 1024 --json ";
  const std::string fp8 = "--layout tp=1,dp=2,gbs=4,dtype=fp8 ";
  for (const std::string& bad : std::vector<std::string>{
           "--cluster dgx-h100 " + fp8 + "--fp8-recipe blockwise",
           "--cluster dgx-h100 --layout tp=1,dp=2,gbs=4 --fp8-recipe tensorwise",
           "--cluster dgx-h100 " + fp8 + "--framework torchtitan --fp8-recipe tensorwise",
           "--cluster dgx-h100 " + fp8 + "--fp8-recipe mxfp8"}) {
    const auto r = scaleplan::testing::run_scaleplan(base + bad);
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("recipe"), std::string::npos) << bad << ": " << r.err;
    EXPECT_TRUE(r.out.empty()) << bad;
  }
  for (const std::string& good :
       std::vector<std::string>{"--cluster dgx-h100 " + fp8 + "--fp8-recipe tensorwise",
                                "--cluster dgx-b200 " + fp8 + "--fp8-recipe mxfp8"}) {
    const auto r = scaleplan::testing::run_scaleplan(base + good);
    ASSERT_EQ(r.exit_code, 0) << good << ": " << r.err;
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["fp8_recipe"], good.substr(good.rfind(' ') + 1)) << good;
  }
}

// --moe-imbalance loads the busiest expert-parallel rank: the step and the peak grow; a dense
// model, a ratio under 1 or a non-number is an input error (exit 2) naming the option.
TEST(SimulateCli, MoeImbalanceSlowsTheStepAndChecksItsValue) {
  const std::string base =
      "simulate --model mixtral-tiny --cluster dgx-h100 --seq 1024 --layout tp=1,dp=4,ep=4,gbs=8 "
      "--json";
  int rc = 0;
  const auto even = nlohmann::json::parse(run(base, &rc));
  ASSERT_EQ(rc, 0);
  const auto busy = nlohmann::json::parse(run(base + " --moe-imbalance 1.5", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_GT(busy["iteration_s"].get<double>(), even["iteration_s"].get<double>());
  // The JSON says which MoE options ran.
  EXPECT_EQ(busy["moe"]["imbalance"].get<double>(), 1.5);
  EXPECT_EQ(busy["moe"]["dispatcher"], "alltoall");
  EXPECT_EQ(even["moe"]["imbalance"].get<double>(), 1.0);
  EXPECT_GT(busy["peak_memory_bytes"].get<double>(), even["peak_memory_bytes"].get<double>());
  for (const char* bad : {" --moe-imbalance 0.5", " --moe-imbalance many"}) {
    run(base + bad, &rc);
    EXPECT_EQ(rc, 2) << bad;
  }
  run("simulate --model llama3-8b --cluster dgx-h100 --seq 1024 --layout tp=1,dp=8 "
      "--moe-imbalance 1.2",
      &rc);
  EXPECT_EQ(rc, 2);
  run("memory --model mixtral-tiny --cluster dgx-h100 --seq 1024 --layout tp=1,dp=4,ep=4 "
      "--moe-imbalance 0",
      &rc);
  EXPECT_EQ(rc, 2);
}

// --host-launch: the CPU time per kernel or collective of the host issue model (docs/simulator.md,
// "Host issue"). When the host is so slow that the GPU only waits for it, the step is the host's
// time, launches × cost, so doubling the cost doubles the step. megatron has no host model of its
// own (its host runs ahead of the GPU): the option turns one on. 0 turns nanotron's off. The JSON
// says what ran; a bad value is an input error on simulate, plan and validate alike.
TEST(SimulateCli, HostLaunchSetsTheCpuCostOfEachKernel) {
  const std::string base =
      "simulate --model llama-tiny --cluster dgx-h100 --seq 512 --layout tp=1,dp=1,gbs=2 --json";
  int rc = 0;
  auto step = [&](const std::string& extra) {
    const auto j = nlohmann::json::parse(run(base + extra, &rc));
    EXPECT_EQ(rc, 0) << extra;
    return std::make_pair(j["iteration_s"].get<double>(), j["host_per_launch_s"].get<double>());
  };
  const auto [nanotron, nanotron_cost] = step(" --framework nanotron");
  EXPECT_DOUBLE_EQ(nanotron_cost, 10e-6);  // kEagerLaunchCost
  const auto [off, off_cost] = step(" --framework nanotron --host-launch 0");
  EXPECT_EQ(off_cost, 0);
  EXPECT_LE(off, nanotron);
  const auto [slow, slow_cost] = step(" --framework nanotron --host-launch 10ms");
  const auto [slower, slower_cost] = step(" --framework nanotron --host-launch 20ms");
  EXPECT_DOUBLE_EQ(slow_cost, 0.01);
  EXPECT_GT(slow, 100 * nanotron);                // host-bound: the GPU work is microseconds
  EXPECT_NEAR(slower / slow, 2.0, 0.02) << slow;  // launches × cost
  const auto [megatron, megatron_cost] = step("");
  EXPECT_EQ(megatron_cost, 0);
  const auto [megatron_host, megatron_host_cost] = step(" --host-launch 10ms");
  EXPECT_DOUBLE_EQ(megatron_host_cost, 0.01);
  EXPECT_GT(megatron_host, 100 * megatron);
  const std::string none = scaleplan::testing::unique_temp_path("host_launch_records.json");
  std::ofstream(none) << "[]";
  for (const std::string& cmd :
       {base + " --host-launch -1us", base + " --host-launch fast",
        std::string("plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 512 --gbs 8 "
                    "--host-launch 5"),
        "validate " + none + " --host-launch 1 --quiet"}) {
    run(cmd, &rc);
    EXPECT_EQ(rc, 2) << cmd;
  }
  run("validate " + none + " --host-launch 1us --quiet", &rc);
  EXPECT_EQ(rc, 0);
  std::remove(none.c_str());
}

// --moe-dispatcher deepep: across nodes a token crosses the network once per destination node,
// so an EP group over two nodes runs faster than with the all-to-all; inside one node the
// all-to-alls take the same time and the memory is the same, and the step is shorter only by the
// alltoall dispatcher's regrouping of the received rows by local expert (moe.sort / moe.unsort),
// which DeepEP's dispatch does not need; an unknown name or a dense model is an input error.
TEST(SimulateCli, DeepEpDispatchCrossesNodesOncePerToken) {
  auto sim = [](const std::string& layout, int gpus, const std::string& dispatcher) {
    int rc = 0;
    const auto j = nlohmann::json::parse(
        run("simulate --model qwen3-30b-a3b --cluster dgx-h100 --seq 2048 --gpus " +
                std::to_string(gpus) + " --layout " + layout + " --moe-dispatcher " + dispatcher +
                " --json",
            &rc));
    EXPECT_EQ(rc, 0);
    return j;
  };
  auto step = [&](const std::string& layout, int gpus, const std::string& dispatcher) {
    return sim(layout, gpus, dispatcher)["iteration_s"].get<double>();
  };
  EXPECT_LT(step("tp=1,pp=1,dp=16,ep=16,mbs=1,gbs=16,zero=1", 16, "deepep"),
            step("tp=1,pp=1,dp=16,ep=16,mbs=1,gbs=16,zero=1", 16, "alltoall"));
  const auto one_deepep = sim("tp=1,pp=1,dp=8,ep=8,mbs=1,gbs=8,zero=1", 8, "deepep");
  const auto one_alltoall = sim("tp=1,pp=1,dp=8,ep=8,mbs=1,gbs=8,zero=1", 8, "alltoall");
  EXPECT_EQ(one_deepep["breakdown"][0]["comm"]["ep"].get<double>(),
            one_alltoall["breakdown"][0]["comm"]["ep"].get<double>());
  EXPECT_EQ(one_deepep["peak_memory_bytes"], one_alltoall["peak_memory_bytes"]);
  EXPECT_LT(one_deepep["breakdown"][0]["compute"].get<double>(),
            one_alltoall["breakdown"][0]["compute"].get<double>());
  int rc = 0;
  run("simulate --model qwen3-30b-a3b --cluster dgx-h100 --seq 2048 --layout tp=1,dp=8,ep=8 "
      "--moe-dispatcher nccl",
      &rc);
  EXPECT_EQ(rc, 2);
  run("simulate --model llama3-8b --cluster dgx-h100 --seq 2048 --layout tp=1,dp=8 "
      "--moe-dispatcher deepep",
      &rc);
  EXPECT_EQ(rc, 2);
}

// fp8 on a GPU without fp8 tensor cores (A100) is an input error naming the dtype and the GPU, not
// a run priced at the bf16 rate; on an H100 the same layout runs, faster than in bf16.
TEST(SimulateCli, Fp8NeedsAGpuWithFp8TensorCores) {
  int rc = 0;
  const std::string trace = scaleplan::testing::unique_temp_path("fp8_a100_trace.json");
  std::remove(trace.c_str());
  const std::string job = "simulate --model llama3-8b --seq 4096 --layout tp=2,dp=4,gbs=64,dtype=";
  run(job + "fp8 --cluster dgx-a100-80g --json --trace " + trace, &rc);
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(std::fopen(trace.c_str(), "r"), nullptr);
  const auto r = scaleplan::testing::run_scaleplan(job + "fp8 --cluster dgx-a100-80g");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("dtype=fp8"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("A100"), std::string::npos) << r.err;

  const auto fp8 = nlohmann::json::parse(run(job + "fp8 --cluster dgx-h100 --json", &rc));
  ASSERT_EQ(rc, 0);
  const auto bf16 = nlohmann::json::parse(run(job + "bf16 --cluster dgx-h100 --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_LT(fp8["iteration_s"].get<double>(), bf16["iteration_s"].get<double>());
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

// A two-record validation file: a multi-node data-parallel run timed by throughput, and one that
// ran out of memory.
std::string write_records() {
  const std::string model =
      R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
          "intermediate_size": 8192, "num_hidden_layers": 16, "num_attention_heads": 32,
          "num_key_value_heads": 32, "vocab_size": 131072, "tie_word_embeddings": true})";
  const std::string path =
      ::testing::TempDir() + "/validate_cli_" + std::to_string(::getpid()) + ".json";
  FILE* f = fopen(path.c_str(), "w");
  fprintf(f,
          R"([{"id": "dp64", "framework": "nanotron", "model": %s, "cluster": "dgx-h100",
               "gpus": 64, "seq_len": 4096, "layout": "tp=1,pp=1,dp=64,mbs=1,gbs=128",
               "measured": {"status": "ok", "tokens_per_s_per_gpu": 30000}},
              {"id": "oom", "framework": "nanotron", "model": %s, "cluster": "dgx-h100",
               "gpus": 8, "seq_len": 4096, "layout": "tp=1,pp=1,dp=8,mbs=64,gbs=512",
               "measured": {"status": "oom"}}])",
          model.c_str(), model.c_str());
  fclose(f);
  return path;
}

TEST(ValidateCli, SummaryKeysAndProfileSubstitution) {
  const std::string records = write_records();
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + records + " --json", &rc));
  ASSERT_EQ(rc, 0);
  for (const char* k : {"records", "median_abs_pct_error", "p90_abs_pct_error", "oom_called_right",
                        "oom_rows", "by_group", "rows"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["records"], 2);
  EXPECT_EQ(j["oom_rows"], 1);
  EXPECT_EQ(j["oom_called_right"], 1);  // 64 sequences of 4096 tokens do not fit in 80 GB
  EXPECT_EQ(j["rows"][0]["framework"], "nanotron");
  // Each simulated row carries the breakdown `simulate --json` prints: stage totals equal the
  // predicted iteration (throughput = gbs·seq / (gpus·iteration)).
  ASSERT_EQ(j["rows"][0]["breakdown"].size(), 1u);
  const double total = j["rows"][0]["breakdown"][0]["total"].get<double>();
  EXPECT_NEAR(j["rows"][0]["predicted"].get<double>(), 128.0 * 4096 / (64 * total),
              1e-6 * j["rows"][0]["predicted"].get<double>());
  const double default_tps = j["rows"][0]["predicted"].get<double>();
  // On hf-h100 the 8-node data-parallel all-reduce runs at the measured fraction of the network
  // rate, so the same run is predicted slower; the JSON says which profile stood in.
  auto h =
      nlohmann::json::parse(run("validate " + records + " --profile dgx-h100=hf-h100 --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(h["profiles"]["dgx-h100"], "hf-h100");
  EXPECT_LT(h["rows"][0]["predicted"].get<double>(), default_tps);
  // The table prints "-" for what a row lacks (the OOM row has no timing), never "nan".
  const std::string table = run("validate " + records + " --quiet", &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_NE(table.find("oom "), std::string::npos) << table;
  EXPECT_FALSE(std::regex_search(table, std::regex(R"(\bnan\b)"))) << table;
  // --quiet: nothing on stderr (progress goes there, once a second, on long runs only).
  const auto quiet = scaleplan::testing::run_scaleplan("validate " + records + " --json --quiet");
  EXPECT_EQ(quiet.exit_code, 0);
  EXPECT_TRUE(quiet.err.empty()) << quiet.err;
  // A malformed substitution or an unknown profile: exit 2, nothing on stdout.
  EXPECT_TRUE(run("validate " + records + " --profile dgx-h100", &rc).empty());
  EXPECT_EQ(rc, 2);
  EXPECT_TRUE(run("validate " + records + " --profile dgx-h100=no-such", &rc).empty());
  EXPECT_EQ(rc, 2);
  std::remove(records.c_str());
}

// --match and --group pick records before anything is simulated; the rows and the summary cover
// only those, and a filter that is malformed or selects nothing is an input error (exit 2, nothing
// on stdout) that names the option.
TEST(ValidateCli, MatchAndGroupSelectRecords) {
  const std::string records = write_records();
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + records + " --match '^oo' --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(j["records"], 1);
  EXPECT_EQ(j["file_records"], 2);
  EXPECT_EQ(j["filter"]["match"], "^oo");
  ASSERT_EQ(j["rows"].size(), 1u);
  EXPECT_EQ(j["rows"][0]["id"], "oom");
  EXPECT_EQ(j["oom_rows"], 1);
  EXPECT_EQ(j["timed_records"], 0);
  // Both records are nanotron's: the group keeps them, in file order.
  j = nlohmann::json::parse(run("validate " + records + " --group nanotron --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["id"], "dp64");
  const std::pair<std::string, std::string> bad[] = {
      {"--match '('", "--match: '(' is not a valid regular expression"},
      {"--match nothing-matches", "no record of"},
      {"--group korthikanti", "matches --group korthikanti"},
      {"--group deepspeed",
       "--group: expected one of korthikanti, megatron-2021, nanotron, dgxc, mbridge-h100, "
       "mbridge-blackwell, mbridge-moe, other; got 'deepspeed'"}};
  for (const auto& [args, message] : bad) {
    const auto r = scaleplan::testing::run_scaleplan("validate " + records + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_TRUE(r.out.empty()) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << ": " << r.err;
  }
  // A record that is not an object was an internal JSON error (exit 1); now it names the index.
  const std::string odd = ::testing::TempDir() + "/validate_odd_" + std::to_string(::getpid());
  FILE* f = fopen(odd.c_str(), "w");
  fputs(R"([{"id": "a", "model": {}}, 1])", f);  // every record needs a model (issue 33)
  fclose(f);
  const auto r = scaleplan::testing::run_scaleplan("validate " + odd);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("records[1]: expected a JSON object"), std::string::npos) << r.err;
  std::remove(odd.c_str());
  std::remove(records.c_str());
}

// A small dense and a small MoE model for validation records, and a file of records of one job
// each, measured at 1 s per step: {id, framework, precision, model, cluster, layout}.
const char* const kTinyDense =
    R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 1024,
        "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 16,
        "num_key_value_heads": 8, "vocab_size": 32000})";
const char* const kTinyMoe =
    R"({"model_type": "qwen3_moe", "hidden_act": "silu", "hidden_size": 1024,
        "intermediate_size": 4096, "moe_intermediate_size": 512, "num_experts": 8,
        "num_experts_per_tok": 2, "num_hidden_layers": 4, "num_attention_heads": 16,
        "num_key_value_heads": 8, "vocab_size": 32000})";
struct TinyRecord {
  std::string id, framework, precision, model, cluster, layout;
};
std::string write_tiny_records(const std::string& name, const std::vector<TinyRecord>& recs) {
  std::string body = "[";
  for (const TinyRecord& r : recs) {
    if (body.size() > 1) body += ",";
    body += R"({"id": ")" + r.id + R"(", "framework": ")" + r.framework + R"(", "precision": ")" +
            r.precision + R"(", "model": )" + r.model + R"(, "cluster": ")" + r.cluster +
            R"(", "gpus": 8, "seq_len": 2048, "layout": ")" + r.layout +
            R"(", "measured": {"status": "ok", "sec_per_iter": 1.0}})";
  }
  body += "]";
  const std::string path = scaleplan::testing::unique_temp_path(name);
  FILE* f = fopen(path.c_str(), "w");
  fputs(body.c_str(), f);
  fclose(f);
  return path;
}

// Each record is summarized with the published set it belongs to (the groups docs/validation.md
// reports): by its id, its framework, and for the Megatron-Bridge summary its model (routed
// experts) and GPU (Blackwell or H100).
TEST(ValidateCli, RecordsAreGroupedByThePublishedSetTheyComeFrom) {
  struct Rec {
    const char* id;
    const char* framework;
    const char* cluster;
    bool moe;
    const char* group;
  };
  const Rec recs[] = {
      {"korthikanti2022_x", "Megatron-LM", "dgx-a100-80g", false, "korthikanti"},
      {"megatron2021_t1_x", "Megatron-LM (2021)", "dgx-a100-80g", false, "megatron-2021"},
      {"megatron2021_t2_zero3_x", "DeepSpeed ZeRO-3, as benchmarked in the Megatron paper",
       "dgx-a100-80g", false, "megatron-2021"},
      {"nano", "nanotron", "dgx-h100", false, "nanotron"},
      {"dgxc_grok", "NeMo 25.02 (NVIDIA dgxc-benchmarking v25.04.01)", "dgx-h100", true, "dgxc"},
      {"mb_h100", "Megatron-Bridge 26.02 (NeMo container)", "dgx-h100", false, "mbridge-h100"},
      {"mb_gb200", "Megatron-Bridge 26.02 (NeMo container)", "gb200-nvl72", false,
       "mbridge-blackwell"},
      {"mb_b200", "Megatron-Bridge 26.02 (NeMo container)", "dgx-b200", false, "mbridge-blackwell"},
      {"mb_moe_h100", "Megatron-Bridge 26.02 (NeMo container)", "dgx-h100", true, "mbridge-moe"},
      {"mb_moe_b200", "Megatron-Bridge 26.02 (NeMo container)", "dgx-b200", true, "mbridge-moe"},
      {"titan", "torchtitan", "dgx-h100", false, "other"},
  };
  std::vector<TinyRecord> tiny;
  for (const Rec& r : recs)
    tiny.push_back({r.id, r.framework, "BF16", r.moe ? kTinyMoe : kTinyDense, r.cluster,
                    "tp=1,pp=1,dp=8,mbs=1,gbs=8"});
  const std::string path = write_tiny_records("validate_groups.json", tiny);
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), std::size(recs));
  for (size_t i = 0; i < std::size(recs); ++i)
    EXPECT_EQ(j["rows"][i]["group"], recs[i].group) << recs[i].id;
  // Each group has its own summary line, and --group selects by the same rule.
  EXPECT_EQ(j["by_group"]["mbridge-blackwell"]["records"], 2);
  j = nlohmann::json::parse(run("validate " + path + " --group mbridge-moe --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][0]["id"], "mb_moe_h100");
  std::remove(path.c_str());
}

// Writes a validation file of one model and job whose records differ by framework and source
// (each measured at 1 s per step). `job`: the records' cluster, gpus, seq_len and layout keys.
struct DatedRecord {
  const char* id;
  const char* framework;
  const char* source;
};
void write_dated_records(const std::string& path, const std::string& model, const std::string& job,
                         const std::vector<DatedRecord>& recs) {
  std::string body = "[";
  for (const DatedRecord& r : recs) {
    if (body.size() > 1) body += ",";
    body += std::string(R"({"id": ")") + r.id + R"(", "framework": ")" + r.framework +
            R"(", "source": ")" + r.source + R"(", "model": )" + model + ", " + job +
            R"(, "measured": {"status": "ok", "sec_per_iter": 1.0}})";
  }
  body += "]";
  FILE* f = fopen(path.c_str(), "w");
  fputs(body.c_str(), f);
  fclose(f);
}

// A Megatron-core record whose layers do not divide into its pp·vpp chunks but do once the
// embedding and the loss count as layers ran with both counted (Megatron-core's TransformerConfig
// accepts nothing else without first/last-stage counts; Megatron-Bridge's Llama 3.1 405B recipe
// sets both): 30 layers on pp 4 x vpp 8 = 32 chunks simulate; under the 2021-22 conventions,
// which had no such option, the layout is an error and the record is skipped with it.
TEST(ValidateCli, MegatronCoreRecordsCountEmbeddingAndLossWhereTheSplitNeedsThem) {
  const std::string model =
      R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 1024,
          "intermediate_size": 4096, "num_hidden_layers": 30, "num_attention_heads": 16,
          "num_key_value_heads": 8, "vocab_size": 32000})";
  const std::string path = scaleplan::testing::unique_temp_path("validate_ppacc.json");
  write_dated_records(path, model,
                      R"("cluster": "dgx-h100", "gpus": 4, "seq_len": 2048, )"
                      R"("layout": "tp=1,pp=4,dp=1,vpp=8,schedule=interleaved,mbs=1,gbs=32")",
                      {{"bridge", "Megatron-Bridge 26.02", "a 2026 table"},
                       {"old", "Megatron-LM", "arXiv:2205.05198"}});
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_FALSE(j["rows"][0].contains("skipped")) << j["rows"][0].dump();
  EXPECT_GT(j["rows"][0]["predicted"].get<double>(), 0);
  ASSERT_TRUE(j["rows"][1].contains("skipped"));
  EXPECT_NE(j["rows"][1]["skipped"].get<std::string>().find("more than the 30 layers"),
            std::string::npos);
  std::remove(path.c_str());
}

// What each record's recipe set beyond its layout (recipe_options in validate/validation.cc,
// each from the recipe's source): Megatron-Bridge's performance configs reduce gradients in bf16,
// keep fp8 weights as the parameters (current scaling, MXFP8; not NVFP4) and overlap TP
// communication (not for NVFP4); NeMo 2's fp8 scripts the same; the NeMo launcher's Grok-1 MoE
// runs (grok1/configure.sh's command line over its YAML) overlap TP, keep fp8 parameters under
// fp8, reduce in bf16 (grad_sync_dtype) and run FlashAttention-2 (NVTE_FUSED_ATTN=0); other
// frameworks keep their defaults.
TEST(ValidateCli, RecipeOptionsFollowEachRecordsRecipe) {
  struct Rec {
    const char* id;
    const char* framework;
    const char* precision;
    const char* dtype;
    bool moe;
    bool tp_overlap, fp8_params;
    const char* fp32_grads;  // "false" or "framework default"
  };
  const Rec recs[] = {
      {"bridge_fp8", "Megatron-Bridge 26.02", "FP8", "fp8", false, true, true, "false"},
      {"bridge_nvfp4", "Megatron-Bridge 26.02", "NVFP4", "fp8", false, false, false, "false"},
      {"bridge_bf16", "Megatron-Bridge 26.02", "BF16", "bf16", false, true, false, "false"},
      {"nemo2_fp8", "NeMo 25.02 container (NeMo 2 scripts/performance recipe)", "FP8", "fp8", false,
       true, true, "false"},
      {"nemo2_bf16", "NeMo 25.02 container (NeMo 2 scripts/performance recipe)", "BF16", "bf16",
       false, true, false, "framework default"},
      {"grok", "NeMo 24.12 container (NeMo-Framework-Launcher hydra config)", "FP8", "fp8", true,
       true, true, "false"},
      {"titan", "torchtitan", "BF16", "bf16", false, false, false, "framework default"},
  };
  std::vector<TinyRecord> tiny;
  // NVFP4 runs on Blackwell only (the recipe is refused below compute capability 10.0).
  for (const Rec& r : recs)
    tiny.push_back({r.id, r.framework, r.precision, r.moe ? kTinyMoe : kTinyDense,
                    std::string(r.precision) == "NVFP4" ? "dgx-b200" : "dgx-h100",
                    std::string("tp=2,dp=4,") + (r.moe ? "ep=2," : "") +
                        "mbs=1,gbs=8,zero=1,dtype=" + r.dtype});
  const std::string path = write_tiny_records("validate_recipes.json", tiny);
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), std::size(recs));
  for (size_t i = 0; i < std::size(recs); ++i) {
    const auto& recipe = j["rows"][i]["recipe"];
    EXPECT_EQ(recipe["tp_comm_overlap"], recs[i].tp_overlap) << recs[i].id;
    EXPECT_EQ(recipe["fp8_param_gather"], recs[i].fp8_params) << recs[i].id;
    // Grok-1's launcher exports NVTE_FUSED_ATTN=0: FlashAttention-2 where the others' Megatron-core
    // and torchtitan take cuDNN on H100 and B200.
    const bool grok = std::string(recs[i].id) == "grok";
    EXPECT_EQ(j["rows"][i]["attention"], grok ? "flash2" : "cudnn") << recs[i].id;
    EXPECT_EQ(recipe.contains("no_fused_attention"), grok) << recs[i].id;
    if (std::string(recs[i].precision) == "NVFP4") EXPECT_EQ(recipe["fp8_recipe"], "nvfp4");
    EXPECT_EQ(recipe["grad_reduce_in_fp32"].dump(),
              std::string(recs[i].fp32_grads) == "false" ? "false" : "\"framework default\"")
        << recs[i].id;
  }
  std::remove(path.c_str());
}

// Each record runs the conventions of its framework as it was when the run was published
// (resolve_run_framework, core/framework.h): the date comes from an arXiv id in the source
// (YYMM), else a year in the framework or the source. Megatron-LM before 2023 is "megatron-2022"
// (unfused attention, DP reduction after the backward); DeepSpeed before July 2021 is
// "deepspeed-2021" (per-tensor synchronous ZeRO-3); later or undated runs get today's Megatron-core
// conventions. --framework overrides the choice for every record.
TEST(ValidateCli, EachRecordRunsItsFrameworksConventions) {
  const std::string model =
      R"({"model_type": "gpt2", "hidden_act": "gelu", "hidden_size": 2048,
          "intermediate_size": 8192, "num_hidden_layers": 8, "num_attention_heads": 16,
          "vocab_size": 51200, "tie_word_embeddings": true})";
  const std::string path =
      ::testing::TempDir() + "/validate_fw_" + std::to_string(::getpid()) + ".json";
  const char* layout = "tp=1,pp=1,dp=64,mbs=1,gbs=64,zero=3,recompute=full";
  struct Rec {
    const char* id;
    const char* framework;
    const char* source;
    const char* expected;
  };
  const Rec recs[] = {
      {"megatron_zero3", "Megatron-LM (2021)", "a table", "megatron-2022"},
      {"ds_zero3", "DeepSpeed ZeRO-3", "Narayanan et al., arXiv:2104.04473, Table 2",
       "deepspeed-2021"},
      {"korthikanti_like", "Megatron-LM", "Korthikanti et al., MLSys'23, arXiv:2205.05198",
       "megatron-2022"},
      {"ds_2022", "Megatron-DeepSpeed", "BLOOM, arXiv:2211.05100", "megatron-2022"},
      {"mcore_2024", "Megatron-LM", "a 2024 report, arXiv 2406.12345", "megatron"},
      {"ds_2023", "DeepSpeed ZeRO-3", "a blog post of 2023", "megatron"},
      {"undated", "torchtitan", "README table, 2048 GPUs", "torchtitan"},
      {"titan_2024", "torchtitan", "Liang et al., arXiv:2410.06511", "torchtitan-2025"},
      {"titan_2026", "torchtitan", "a 2026 blog post", "torchtitan"},
      {"titan_compiled", "torchtitan (torch.compile)", "README table", "megatron"},
      {"undated_mcore", "Megatron-core", "README table, 2048 GPUs", "megatron"},
      {"megatron2021_by_id", "Megatron-LM", "a table", "megatron-2022"},
  };
  std::vector<DatedRecord> dated;
  for (const Rec& r : recs) dated.push_back({r.id, r.framework, r.source});
  write_dated_records(path, model,
                      std::string(R"("cluster": "dgx-a100-80g", "gpus": 64, "seq_len": 2048, )") +
                          R"("layout": ")" + layout + R"(")",
                      dated);
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), std::size(recs));
  for (size_t i = 0; i < std::size(recs); ++i)
    EXPECT_EQ(j["rows"][i]["framework"], recs[i].expected) << recs[i].id;
  // The same ZeRO-3 layout under DeepSpeed's 2021 ZeRO-3 is slower than with prefetching.
  EXPECT_GT(j["rows"][1]["predicted"].get<double>(), j["rows"][0]["predicted"].get<double>());

  auto forced =
      nlohmann::json::parse(run("validate " + path + " --json --framework nanotron", &rc));
  ASSERT_EQ(rc, 0);
  for (const auto& row : forced["rows"]) EXPECT_EQ(row["framework"], "nanotron");
  EXPECT_EQ(run("validate " + path + " --framework torch", &rc), "");
  EXPECT_EQ(rc, 2);
  std::remove(path.c_str());
}

// The attention kernel follows the record's framework and date on its GPU (docs/simulator.md,
// "Attention kernels"): on H100, Megatron-core runs cuDNN, torchtitan of 2025 FlashAttention-2 and
// of today cuDNN; a torch.compile'd torchtitan run takes Megatron-core's conventions but keeps
// torchtitan's SDPA backend order; the 2021-22 Megatron-LM runs the unfused core.
TEST(ValidateCli, EachRecordRunsItsFrameworksAttentionKernel) {
  const std::string model =
      R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 2048,
          "intermediate_size": 8192, "num_hidden_layers": 8, "num_attention_heads": 16,
          "num_key_value_heads": 8, "vocab_size": 32000})";
  const std::string path = scaleplan::testing::unique_temp_path("validate_attention.json");
  struct Rec {
    const char* id;
    const char* framework;
    const char* source;
    const char* conventions;
    const char* attention;
  };
  const Rec recs[] = {
      {"mcore", "Megatron-core", "README table", "megatron", "cudnn"},
      {"titan_2024", "torchtitan", "arXiv:2410.06511", "torchtitan-2025", "flash2"},
      {"titan_compiled_2024", "torchtitan, torch.compile", "arXiv:2410.06511", "megatron",
       "flash2"},
      {"titan_compiled", "torchtitan, torch.compile", "README table", "megatron", "cudnn"},
      {"mlm_2022", "Megatron-LM", "arXiv:2205.05198", "megatron-2022", "unfused"},
  };
  std::vector<DatedRecord> dated;
  for (const Rec& r : recs) dated.push_back({r.id, r.framework, r.source});
  write_dated_records(
      path, model,
      R"("cluster": "dgx-h100", "gpus": 8, "seq_len": 4096, "layout": "tp=1,dp=8,gbs=8")", dated);
  int rc = 0;
  auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(j["rows"].size(), std::size(recs));
  for (size_t i = 0; i < std::size(recs); ++i) {
    EXPECT_EQ(j["rows"][i]["framework"], recs[i].conventions) << recs[i].id;
    EXPECT_EQ(j["rows"][i]["attention"], recs[i].attention) << recs[i].id;
  }
  // Same conventions, slower kernel: the 2024 compiled run is predicted slower than today's.
  EXPECT_GT(j["rows"][2]["predicted"].get<double>(), j["rows"][3]["predicted"].get<double>());
  std::remove(path.c_str());
}

// A record that publishes only its MFU is timed by it: MFU is proportional to throughput at a
// fixed FLOP count, so its error is the throughput error of the same measured speed. A record that
// publishes its throughput too is timed by the throughput.
TEST(ValidateCli, MfuOnlyRecordsAreTimedByTheirMfu) {
  const std::string model = kLlama1B;
  const std::string path = scaleplan::testing::unique_temp_path("validate_mfu.json");
  auto write = [&](const std::string& measured) {
    FILE* f = fopen(path.c_str(), "w");
    fprintf(f,
            R"([{"id": "run", "framework": "torchtitan", "model": %s, "cluster": "dgx-h100",
                 "gpus": 16, "seq_len": 4096, "layout": "tp=2,pp=1,dp=8,mbs=1,gbs=64,zero=1",
                 "measured": {"status": "ok", %s}}])",
            model.c_str(), measured.c_str());
    fclose(f);
  };
  int rc = 0;
  write(R"("tokens_per_s_per_gpu": 20000)");
  auto t = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  const auto& by_throughput = t["rows"][0];
  ASSERT_EQ(by_throughput["metric"], "throughput");
  // The MFU a run at the measured 20,000 tokens/s/GPU has by the simulator's FLOP count.
  const double mfu = by_throughput["predicted_mfu"].get<double>() * 20000 /
                     by_throughput["predicted"].get<double>();
  write(R"("mfu": )" + std::to_string(mfu));
  auto m = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(m["records"], 1);
  EXPECT_EQ(m["rows"][0]["metric"], "mfu");
  EXPECT_NEAR(m["rows"][0]["abs_pct_error"].get<double>(),
              by_throughput["abs_pct_error"].get<double>(), 1e-3);
  EXPECT_NEAR(m["median_abs_pct_error"].get<double>(), by_throughput["abs_pct_error"].get<double>(),
              1e-3);
  write(R"("tokens_per_s_per_gpu": 20000, "mfu": 0.9)");
  auto both = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(both["rows"][0]["metric"], "throughput");
  // Model TFLOP/s per GPU alone: the MFU times the H100's dense bf16 peak (989 TFLOP/s,
  // NVIDIA H100 SXM datasheet), so the same measured speed gives the same error.
  write(R"("tflops_per_gpu": )" + std::to_string(mfu * 989));
  auto tf = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(tf["rows"][0]["metric"], "tflops");
  EXPECT_NEAR(tf["rows"][0]["abs_pct_error"].get<double>(),
              by_throughput["abs_pct_error"].get<double>(), 1e-3);
  // HFU alone: recompute=none, so the hardware FLOPs are the model FLOPs.
  write(R"("hfu": )" + std::to_string(mfu));
  auto h = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_EQ(h["rows"][0]["metric"], "hfu");
  EXPECT_NEAR(h["rows"][0]["abs_pct_error"].get<double>(),
              by_throughput["abs_pct_error"].get<double>(), 1e-3);
  // No record publishes a peak: the summary says so instead of a median of nothing.
  const std::string text = run("validate " + path, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_NE(text.find("peak memory |error|: no simulated record publishes a peak"),
            std::string::npos)
      << text;
  std::remove(path.c_str());
}

// The |error| says how far a prediction is off, the speed ratio which way: predicted speed over
// measured speed, whatever the record publishes. A step time is the inverse of a speed, so a run
// measured 25% slower than simulated has a ratio of 1.25 as a step time (an |error| of 20%) and as
// a throughput (an |error| of 25%) alike.
TEST(ValidateCli, SpeedRatioSaysWhichWayThePredictionIsOff) {
  const std::string model = kLlama1B;
  const std::string path = scaleplan::testing::unique_temp_path("validate_speed.json");
  auto write = [&](const std::string& slow, const std::string& fast) {
    FILE* f = fopen(path.c_str(), "w");
    const char* rec =
        R"({"id": "%s", "framework": "torchtitan", "model": %s, "cluster": "dgx-h100",
            "gpus": 16, "seq_len": 4096, "layout": "tp=2,pp=1,dp=8,mbs=1,gbs=64,zero=1",
            "measured": {"status": "ok", %s}})";
    fprintf(f, "[");
    fprintf(f, rec, "slow_run", model.c_str(), slow.c_str());
    fprintf(f, ",");
    fprintf(f, rec, "fast_run", model.c_str(), fast.c_str());
    fprintf(f, "]");
    fclose(f);
  };
  int rc = 0;
  write(R"("sec_per_iter": 1)", R"("tokens_per_s_per_gpu": 1000)");
  auto probe = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  const double step = probe["rows"][0]["predicted"].get<double>();
  const double tps = probe["rows"][1]["predicted"].get<double>();
  // slow_run: the run took 1.25x the simulated step; fast_run: it ran at 1.25x the simulated
  // throughput.
  write(R"("sec_per_iter": )" + std::to_string(step * 1.25),
        R"("tokens_per_s_per_gpu": )" + std::to_string(tps * 1.25));
  auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_NEAR(j["rows"][0]["speed_ratio"].get<double>(), 1.25, 1e-4);
  EXPECT_NEAR(j["rows"][0]["abs_pct_error"].get<double>(), 20, 1e-2);
  EXPECT_NEAR(j["rows"][1]["speed_ratio"].get<double>(), 0.8, 1e-4);
  EXPECT_NEAR(j["rows"][1]["abs_pct_error"].get<double>(), 20, 1e-2);
  EXPECT_EQ(j["predicted_faster"], 1);
  EXPECT_NEAR(j["median_speed_ratio"].get<double>(), (1.25 + 0.8) / 2, 1e-4);
  EXPECT_EQ(j["by_group"]["other"]["predicted_faster"], 1);
  // The memory summary has no speed.
  EXPECT_FALSE(j["memory"].contains("median_speed_ratio"));
  const std::string text = run("validate " + path, &rc);
  ASSERT_EQ(rc, 0);
  EXPECT_NE(text.find("predicted faster than measured on 1, median speed ratio 1.025"),
            std::string::npos)
      << text;
  std::remove(path.c_str());
}

// A record the simulator cannot run is skipped with its whole reason, in the table's summary and
// in the JSON (a reason cut at a byte count could end inside a UTF-8 character such as "·" and
// make the JSON unwritable).
TEST(ValidateCli, SkippedRecordsKeepTheirWholeReason) {
  const std::string model =
      R"({"model_type": "llama", "hidden_act": "silu", "hidden_size": 1024,
          "intermediate_size": 4096, "num_hidden_layers": 4, "num_attention_heads": 16,
          "num_key_value_heads": 16, "vocab_size": 32000})";
  const std::string path = scaleplan::testing::unique_temp_path("validate_skip.json");
  FILE* f = fopen(path.c_str(), "w");
  fprintf(f,
          R"([{"id": "too_deep", "framework": "Megatron-core", "model": %s, "cluster": "dgx-h100",
               "gpus": 8, "seq_len": 2048, "layout": "tp=1,pp=8,dp=1,mbs=1,gbs=8",
               "measured": {"status": "ok", "sec_per_iter": 1.0}}])",
          model.c_str());
  fclose(f);
  int rc = 0;
  const std::string table = run("validate " + path, &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(table.find("pipeline chunks is more than the 4 layers"), std::string::npos) << table;
  const auto j = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  EXPECT_EQ(rc, 0);
  ASSERT_EQ(j["skip_reasons"].size(), 1u);
  EXPECT_NE(j["skip_reasons"].begin().key().find("more than the 4 layers"), std::string::npos);
  std::remove(path.c_str());
}

}  // namespace

namespace {

// --how-sure: the same layout on perturbed profiles (docs/planner.md, "How sure").
TEST(SimulateCli, HowSureMovesTheIterationOnlyThroughWhatItPerturbs) {
  int rc = 0;
  // dp = 16 over two DGX H100s: the gradient all-reduce crosses the NICs.
  const std::string two_nodes =
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=1,pp=1,dp=16,gbs=32 "
      "--how-sure --json";
  auto j = nlohmann::json::parse(run(two_nodes, &rc));
  ASSERT_EQ(rc, 0);
  const double nominal = j["iteration_s"].get<double>();
  const auto& hs = j["how_sure"];
  ASSERT_EQ(hs["perturbations"].size(), 5u);
  for (const auto& p : hs["perturbations"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    const double t = p["iteration_s"].get<double>(), k = p["kernel_time"].get<double>();
    // Kernels k times as long and communication unchanged: every path through the step scales
    // by at most k (and at least 1 for k > 1).
    if (k > 1) {
      EXPECT_TRUE(t >= nominal && t <= k * nominal * (1 + 1e-9)) << t << " " << nominal;
    }
    if (k < 1) {
      EXPECT_TRUE(t <= nominal && t >= k * nominal * (1 - 1e-9)) << t << " " << nominal;
    }
    if (p["network_bandwidth"].get<double>() < 1 || p["latency"].get<double>() > 1) {
      EXPECT_GT(t, nominal);
    }
    EXPECT_GE(t, hs["min_iteration_s"].get<double>());
    EXPECT_LE(t, hs["max_iteration_s"].get<double>());
  }
  // One node: nothing crosses a NIC, so the network perturbation changes nothing.
  auto one = nlohmann::json::parse(run(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=2,pp=1,dp=4,gbs=32 "
      "--how-sure --json",
      &rc));
  ASSERT_EQ(rc, 0);
  for (const auto& p : one["how_sure"]["perturbations"]) {
    if (p["network_bandwidth"].get<double>() < 1) {
      EXPECT_EQ(p["iteration_s"].get<double>(), one["iteration_s"].get<double>());
    }
  }
  // Without the flag there is no such key, and the text form prints the table.
  auto plain = nlohmann::json::parse(run(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=1,pp=1,dp=16,gbs=32 "
      "--json",
      &rc));
  EXPECT_FALSE(plain.contains("how_sure"));
  EXPECT_EQ(plain["iteration_s"], j["iteration_s"]);
  const std::string text = run(
      "simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=1,pp=1,dp=16,gbs=32 "
      "--how-sure",
      &rc);
  EXPECT_NE(text.find("how sure"), std::string::npos);
  EXPECT_NE(text.find("range"), std::string::npos);
}

}  // namespace

namespace {

// validate --how-sure: each timed record's range over the perturbed profiles is what
// `simulate --how-sure` gives for the same run, and the count says which measurements lie in it.
TEST(ValidateCli, HowSureCountsTheMeasurementsWithinThePerturbedRange) {
  const std::string model = kLlama1B;
  const std::string model_path = scaleplan::testing::unique_temp_path("how_sure_model.json");
  FILE* mf = fopen(model_path.c_str(), "w");
  fprintf(mf, "%s", model.c_str());
  fclose(mf);
  const std::string layout = "tp=2,pp=1,dp=8,mbs=1,gbs=64,zero=1";
  int rc = 0;
  auto sim = nlohmann::json::parse(run("simulate --model " + model_path +
                                           " --cluster dgx-h100 --seq 4096 --layout " + layout +
                                           " --how-sure --json",
                                       &rc));
  ASSERT_EQ(rc, 0);
  const double lo = sim["how_sure"]["min_iteration_s"].get<double>();
  const double hi = sim["how_sure"]["max_iteration_s"].get<double>();
  ASSERT_LT(lo, hi);
  const std::string path = scaleplan::testing::unique_temp_path("validate_how_sure.json");
  FILE* f = fopen(path.c_str(), "w");
  for (int i = 0; i < 2; ++i) {
    // The first measured in the middle of the range, the second half again above its top.
    const double measured = i == 0 ? (lo + hi) / 2 : 1.5 * hi;
    fprintf(f, "%s", i == 0 ? "[" : ",");
    fprintf(f,
            R"({"id": "run%d", "framework": "Megatron-LM", "model": %s, "cluster": "dgx-h100",
                "gpus": 16, "seq_len": 4096, "layout": "%s",
                "measured": {"status": "ok", "sec_per_iter": %.9f}})",
            i, model.c_str(), layout.c_str(), measured);
  }
  fprintf(f, "]");
  fclose(f);
  auto v = nlohmann::json::parse(run("validate " + path + " --how-sure --json", &rc));
  ASSERT_EQ(rc, 0);
  ASSERT_EQ(v["rows"].size(), 2u);
  for (const auto& row : v["rows"]) {
    EXPECT_NEAR(row["how_sure_min"].get<double>(), lo, 1e-9 * lo);
    EXPECT_NEAR(row["how_sure_max"].get<double>(), hi, 1e-9 * hi);
  }
  EXPECT_TRUE(v["rows"][0]["within_how_sure"].get<bool>());
  EXPECT_FALSE(v["rows"][1]["within_how_sure"].get<bool>());
  EXPECT_EQ(v["how_sure"]["within"], 1);
  EXPECT_EQ(v["how_sure"]["timed_records"], 2);
  // Without the flag: no range and no count, and the same predictions.
  auto plain = nlohmann::json::parse(run("validate " + path + " --json", &rc));
  ASSERT_EQ(rc, 0);
  EXPECT_FALSE(plain.contains("how_sure"));
  EXPECT_FALSE(plain["rows"][0].contains("how_sure_min"));
  EXPECT_EQ(plain["rows"][0]["predicted"], v["rows"][0]["predicted"]);
  std::remove(path.c_str());
  std::remove(model_path.c_str());
}

}  // namespace
