// Golden-style tests of `scaleplan plan`: exit codes, the JSON keys the issue lists, exports that
// parse, and errors that name the field. The model is the bundled llama-tiny preset (4 layers,
// 8 heads, 4 KV heads), small enough to search its whole space in about a second.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/cli_runner.h"

namespace {

using scaleplan::testing::RunResult;

RunResult run(const std::string& args) { return scaleplan::testing::run_scaleplan(args); }

const std::string kJob = "plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 1024 --gbs 16 ";

TEST(PlanCli, JsonHasTheIssueKeys) {
  RunResult r = run(kJob + "--top 3 --json -q --fix recompute=none");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"plans", "candidates", "fit", "simulated", "search_s", "pruned"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_EQ(j["plans"].size(), 3u);
  for (const auto& p : j["plans"]) {
    for (const char* key : {"layout", "iteration_s", "tokens_per_s_per_gpu", "mfu",
                            "peak_memory_bytes", "reason", "breakdown", "headroom_bytes"}) {
      EXPECT_TRUE(p.contains(key)) << key;
    }
    // tokens/s/GPU = gbs·seq / (iteration · gpus) = 16·1024 / (iteration · 8).
    EXPECT_NEAR(p["tokens_per_s_per_gpu"].get<double>(),
                16.0 * 1024 / (p["iteration_s"].get<double>() * 8),
                1e-6 * p["tokens_per_s_per_gpu"].get<double>());
    EXPECT_NE(p["layout"].get<std::string>().find("recompute=none"), std::string::npos);
    EXPECT_LE(p["peak_memory_bytes"].get<int64_t>(), p["memory_capacity_bytes"].get<int64_t>());
  }
  EXPECT_GE(j["fit"].get<int64_t>(), j["simulated"].get<int64_t>());
  // Every fitting layout is simulated or bounded out (a lower bound above the #4's time).
  EXPECT_EQ(j["simulated"].get<int64_t>() + j["bounded"].get<int64_t>() +
                j["not_simulated"].get<int64_t>() + j["failed"].get<int64_t>(),
            j["fit"].get<int64_t>());
  EXPECT_GE(j["candidates"].get<int64_t>(), j["fit"].get<int64_t>());
}

TEST(PlanCli, SameAnswerWithOneThreadOrTwo) {
  RunResult a = run(kJob + "--top 5 --json -q --threads 1");
  RunResult b = run(kJob + "--top 5 --json -q --threads 2");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  ASSERT_EQ(b.exit_code, 0) << b.err;
  auto ja = nlohmann::json::parse(a.out), jb = nlohmann::json::parse(b.out);
  EXPECT_EQ(ja["plans"], jb["plans"]);
  EXPECT_EQ(ja["simulated"], jb["simulated"]);
  EXPECT_EQ(ja["bounded"], jb["bounded"]);
}

TEST(PlanCli, EmitsAPlanFileThatParses) {
  const std::string path = scaleplan::testing::unique_temp_path("plan_cli.plan.json");
  RunResult r = run(kJob + "-q --emit json --out " + path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  auto j = nlohmann::json::parse(s.str());
  EXPECT_EQ(j["format"], "scaleplan-plan");
  EXPECT_EQ(j["model"]["config"]["hidden_size"], 256);
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["seq_len"], 1024);
  EXPECT_TRUE(j["predicted"].contains("iteration_s"));
  std::remove(path.c_str());
}

// A plan file carries everything its prediction was simulated with (model config and MoE options,
// cluster, GPUs, sequence, layout, framework, host launch cost), so `simulate --plan` reproduces
// the plan's iteration time to the last bit: the same inputs through the same simulator. Also
// under torchtitan's conventions with a host cost, and for an MoE model with its router imbalance.
TEST(PlanCli, PlanFileReproducesItsIterationInSimulate) {
  const std::vector<std::string> jobs = {
      kJob, kJob + "--framework torchtitan --host-launch 20us ",
      kJob + "--framework torchtitan --compile model,loss ",
      "plan --model mixtral-tiny --cluster dgx-h100 --gpus 8 --seq 1024 --gbs 16 "
      "--moe-imbalance 1.3 "};
  for (const std::string& job : jobs) {
    SCOPED_TRACE(job);
    const std::string path = scaleplan::testing::unique_temp_path("roundtrip.plan.json");
    RunResult plan = run(job + "-q --json --top 1 --emit json --out " + path);
    ASSERT_EQ(plan.exit_code, 0) << plan.err;
    const auto planned = nlohmann::json::parse(plan.out);
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    const auto file = nlohmann::json::parse(text.str());
    RunResult sim = run("simulate --json --plan " + path);
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    const auto simulated = nlohmann::json::parse(sim.out);
    const double iteration = simulated["iteration_s"].get<double>();
    EXPECT_EQ(iteration, file["predicted"]["iteration_s"].get<double>());
    EXPECT_EQ(iteration, planned["plans"][0]["iteration_s"].get<double>());
    EXPECT_EQ(simulated["plan_iteration_s"].get<double>(), iteration);
    EXPECT_EQ(simulated["layout"], file["layout"]);
    // The plan sets the model and the framework: giving them again is an error naming the option.
    RunResult both = run("simulate --json --plan " + path + " --model llama-tiny");
    EXPECT_EQ(both.exit_code, 2);
    EXPECT_NE(both.err.find("--model"), std::string::npos) << both.err;
    std::remove(path.c_str());
  }
}

TEST(PlanCli, MegatronExportOnStdout) {
  RunResult r = run(kJob + "-q --emit megatron");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("pretrain_gpt.py"), std::string::npos);
  EXPECT_NE(r.out.find("--num-layers 4"), std::string::npos);
  EXPECT_NE(r.out.find("--global-batch-size 16"), std::string::npos);
}

TEST(PlanCli, ExplainAndProgress) {
  RunResult r = run(kJob + "--json --explain tp=1,pp=1,mbs=1,zero=0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("explain"));
  EXPECT_TRUE(j["explain"]["valid"].get<bool>());
  EXPECT_GE(j["explain"]["rank"].get<int>(), 1);
  EXPECT_FALSE(j["explain"]["why"].get<std::string>().empty());
  EXPECT_NE(r.err.find("plan: done"), std::string::npos) << r.err;  // progress on stderr
}

TEST(PlanCli, BadInputNamesTheField) {
  RunResult r = run(kJob + "--fix zero=7");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("zero"), std::string::npos) << r.err;
  r = run(kJob + "--fix speed=1");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("speed"), std::string::npos) << r.err;
  r = run(kJob + "--emit slurm");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("slurm"), std::string::npos) << r.err;
  // The old-Megatron conventions re-simulate past runs; the planner's bound does not cover them.
  for (const char* old_code : {"megatron-2022", "deepspeed-2021"}) {
    r = run(kJob + "--framework " + old_code);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(std::string("--framework: '") + old_code), std::string::npos) << r.err;
  }
  // A unitless margin would be bytes, never what was meant (6 = 6 bytes, not 6 GiB).
  r = run(kJob + "--memory-margin 6");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--memory-margin: '6' has no unit"), std::string::npos) << r.err;
  // fp8 where the GPU has none (A100): an error naming the fix, not plans priced at the bf16 rate.
  r =
      run("plan --model llama-tiny --cluster dgx-a100-80g --gpus 8 --seq 1024 --gbs 16 "
          "--fix dtype=fp8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("--fix: dtype=fp8"), std::string::npos) << r.err;
  EXPECT_EQ(run(kJob + "--fix dtype=fp8 -q").exit_code, 0);
  r = run("plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 1024");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--gbs"), std::string::npos) << r.err;
}

// An exported plan must run as predicted: with --emit F only the schedules F's framework runs are
// ranked (Megatron-LM: 1F1B and interleaved), the others counted under a rule that --fix lifts.
TEST(PlanCli, EmitRanksOnlySchedulesTheTargetRuns) {
  auto schedules_of = [](const nlohmann::json& j) {
    std::set<std::string> out;
    for (const auto& p : j["plans"]) {
      const std::string l = p["layout"];
      const size_t at = l.find("schedule=") + 9;
      out.insert(l.substr(at, l.find(',', at) - at));
    }
    return out;
  };
  auto rule_count = [](const nlohmann::json& j, const std::string& text) {
    for (const auto& r : j["pruned"])
      if (r["rule"].get<std::string>().find(text) != std::string::npos) return r["candidates"];
    return nlohmann::json(0);
  };
  const std::string job = kJob + "--top 50 --json -q --fix 'pp=2|4' ";
  RunResult any = run(job);
  ASSERT_EQ(any.exit_code, 0) << any.err;
  auto all = nlohmann::json::parse(any.out);
  EXPECT_TRUE(schedules_of(all).count("zb-h1") || schedules_of(all).count("afab"));
  EXPECT_EQ(rule_count(all, "cannot run"), 0);

  RunResult mg = run(job + "--emit megatron");
  ASSERT_EQ(mg.exit_code, 0) << mg.err;
  auto megatron = nlohmann::json::parse(mg.out);
  ASSERT_FALSE(megatron["plans"].empty());
  for (const std::string& s : schedules_of(megatron))
    EXPECT_TRUE(s == "1f1b" || s == "interleaved") << s;
  EXPECT_GT(rule_count(megatron, "layouts Megatron-LM cannot run as predicted"), 0);

  // nanotron: AFAB or 1F1B, ZeRO 0 or 1, no selective recompute.
  RunResult nt = run(job + "--emit nanotron --framework nanotron");
  ASSERT_EQ(nt.exit_code, 0) << nt.err;
  auto nanotron = nlohmann::json::parse(nt.out);
  ASSERT_FALSE(nanotron["plans"].empty());
  for (const auto& p : nanotron["plans"]) {
    const std::string l = p["layout"];
    EXPECT_TRUE(l.find("zero=0") != std::string::npos || l.find("zero=1") != std::string::npos)
        << l;
    EXPECT_EQ(l.find("recompute=selective"), std::string::npos) << l;
  }
  for (const std::string& s : schedules_of(nanotron)) EXPECT_TRUE(s == "afab" || s == "1f1b") << s;

  // --explain says which rule set a layout aside, or that a --fix excluded it.
  RunResult why = run(kJob + "--json -q --emit megatron --explain tp=1,pp=2,dp=4,schedule=zb-h1");
  ASSERT_EQ(why.exit_code, 0) << why.err;
  auto wj = nlohmann::json::parse(why.out);
  EXPECT_FALSE(wj["explain"]["in_space"].get<bool>());
  EXPECT_NE(wj["explain"]["why"].get<std::string>().find(
                "set aside by the rule \"layouts Megatron-LM cannot run as predicted"),
            std::string::npos)
      << wj["explain"]["why"];
  why = run(kJob + "--json -q --fix zero=0 --explain tp=1,pp=2,dp=4,zero=1");
  ASSERT_EQ(why.exit_code, 0) << why.err;
  EXPECT_NE(nlohmann::json::parse(why.out)["explain"]["why"].get<std::string>().find(
                "the --fix restrictions (zero=0) exclude it"),
            std::string::npos)
      << why.out;

  // Named in --fix, a schedule Megatron-LM lacks is ranked and exported with the note.
  RunResult zb = run(job + "--emit megatron --fix schedule=zb-h1");
  ASSERT_EQ(zb.exit_code, 0) << zb.err;
  EXPECT_NE(zb.err.find("no ZB-H1 schedule"), std::string::npos) << zb.err;
}

// "Nothing fits" is an answer (exit 0, `no_fit` names the closest layout); asking to export the
// best plan when there is none is an error, and the file is not written.
TEST(PlanCli, NothingToExportIsAnErrorAndWritesNoFile) {
  const std::string none_fit = kJob + "-q --memory-margin 80GiB ";  // more than an H100 holds
  RunResult r = run(none_fit + "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_TRUE(j["plans"].empty());
  EXPECT_NE(j["no_fit"].get<std::string>().find("the closest"), std::string::npos) << j["no_fit"];

  const std::string path = scaleplan::testing::unique_temp_path("plan_cli.none.sh");
  r = run(none_fit + "--emit megatron --out " + path);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--emit megatron: no plan to export (" + path + " not written)"),
            std::string::npos)
      << r.err;
  EXPECT_FALSE(std::ifstream(path).good());
  r = run(none_fit + "--emit torchtitan --json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["plans"].empty());  // the result is still printed
}

// A layout that fails to simulate is listed with its error in the text, above the ranking, not only
// in --json. A network of 1 bit/s makes every gradient reduction across the two nodes overflow
// the simulated clock (16 GPUs, 8 per node: every layout but those inside one node fails).
TEST(PlanCli, LayoutsThatFailToSimulateAreListedWithTheirErrors) {
  const std::string profile = scaleplan::testing::unique_temp_path("slow_network.json");
  std::ofstream(profile) << R"({"extends": "dgx-h100", "name": "slow",
                               "network": {"nic_bandwidth": "1b/s"}})";
  const std::string job = "plan --model llama-tiny --cluster " + profile +
                          " --gpus 16 --seq 1024 --gbs 16 --no-robustness -q ";
  RunResult j = run(job + "--json");
  ASSERT_EQ(j.exit_code, 0) << j.err;
  const auto json = nlohmann::json::parse(j.out);
  const int64_t failed = json["failed"].get<int64_t>();
  ASSERT_GT(failed, 0);
  RunResult t = run(job);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const size_t listed = t.out.find(std::to_string(failed) + " layouts failed to simulate");
  ASSERT_NE(listed, std::string::npos) << t.out;
  EXPECT_LT(listed, t.out.find("#1 "));  // above the ranking
  for (const auto& e : json["errors"]) {
    EXPECT_NE(t.out.find("  error: " + e.get<std::string>()), std::string::npos) << e;
  }
  std::remove(profile.c_str());
}

// TP stays inside the NVLink domain, which is the rack on a GB200 NVL72 (72 GPUs, trays of 4),
// not the node: llama3-70b's 64 heads allow tp up to 8 on 72 GPUs, and none of it leaves NVLink,
// so no layout is set aside by the rule. On 8-GPU DGX H100 nodes tp = 16 and 32 do leave it.
TEST(PlanCli, TensorParallelismStaysInTheNvlinkDomainNotTheNode) {
  auto pruned_by_nvlink_rule = [](const std::string& cluster, int gpus) {
    RunResult r =
        run("plan --model llama3-70b --cluster " + cluster + " --gpus " + std::to_string(gpus) +
            " --seq 4096 --gbs " + std::to_string(2 * gpus) + " --no-robustness -q --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    int64_t n = 0;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& p : j["pruned"]) {
      if (p["rule"].get<std::string>().find("NVLink domain") != std::string::npos)
        n += p["candidates"].get<int64_t>();
    }
    return n;
  };
  EXPECT_EQ(pruned_by_nvlink_rule("gb200-nvl72", 72), 0);
  EXPECT_GT(pruned_by_nvlink_rule("dgx-h100", 32), 0);
}

// A --fix that no valid layout meets is a mistake in the input: llama-tiny has 8 heads, so tp=3
// divides neither them nor the 8 GPUs. A fix whose layouts are only set aside by a policy rule
// is not: the output lists the rule and how to lift it.
TEST(PlanCli, FixThatNoLayoutMeetsIsBadInput) {
  RunResult r = run(kJob + "-q --fix tp=3");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--fix: no layout of 8 GPUs and gbs 16 with --fix tp=3"), std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  // 64 GPUs, one sequence per step: dp = 1, and with 8 heads and 4 layers tp·pp is at most 32,
  // so every valid layout has cp >= 2, whose 512-token shards the cp rule sets aside.
  r = run("plan --model llama-tiny --cluster dgx-h100 --gpus 64 --seq 1024 --gbs 1 -q --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["candidates"], 0);
  ASSERT_EQ(j["pruned"].size(), 1u);
  EXPECT_NE(j["pruned"][0]["rule"].get<std::string>().find("--fix cp="), std::string::npos);
  EXPECT_NE(j["no_fit"].get<std::string>().find("set aside by a policy rule"), std::string::npos)
      << j["no_fit"];
}

}  // namespace

namespace {

// The "how sure" table (docs/planner.md): the ranked plans re-simulated on perturbed profiles.
TEST(PlanCli, HowSureReSimulatesThePlansOnPerturbedProfiles) {
  RunResult r = run(kJob + "--top 4 --json -q");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("robustness"));
  const auto& rb = j["robustness"];
  const auto& plans = j["plans"];
  ASSERT_EQ(rb["perturbations"].size(), 5u);
  int first = 0;
  for (const auto& p : rb["perturbations"]) {
    SCOPED_TRACE(p["name"].get<std::string>());
    ASSERT_EQ(p["iteration_s"].size(), plans.size());
    first += p["first_rank"].get<int>() == 1;
    for (size_t i = 0; i < plans.size(); ++i) {
      const double nominal = plans[i]["iteration_s"].get<double>();
      const double t = p["iteration_s"][i].get<double>();
      if (p["network_bandwidth"].get<double>() != 1.0) {
        // 8 GPUs are one DGX H100: nothing crosses a NIC, so a slower network changes nothing.
        EXPECT_EQ(t, nominal);
      } else if (p["kernel_time"].get<double>() > 1.0) {
        // Every kernel 10% longer and communication unchanged: no path through the step grows
        // by more than 10%, and none shrinks.
        EXPECT_GE(t, nominal);
        EXPECT_LE(t, nominal * p["kernel_time"].get<double>() * (1 + 1e-9));
      } else if (p["kernel_time"].get<double>() < 1.0) {
        EXPECT_LE(t, nominal);
        EXPECT_GE(t, nominal * p["kernel_time"].get<double>() * (1 - 1e-9));
      } else {
        // Slower NVLink or longer latencies can only lengthen the step.
        EXPECT_GE(t, nominal);
      }
    }
  }
  EXPECT_EQ(rb["stays_first"].get<int>(), first);
  EXPECT_FALSE(rb["summary"].get<std::string>().empty());

  // On two nodes the gradient all-reduce of dp = 16 crosses the NICs, and its last bucket waits
  // after the backward: a slower network lengthens the step.
  RunResult two =
      run("plan --model llama-tiny --cluster dgx-h100 --gpus 16 --seq 1024 --gbs 32 --fix tp=1 "
          "--fix pp=1 --top 2 --json -q");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  auto j2 = nlohmann::json::parse(two.out);
  for (const auto& p : j2["robustness"]["perturbations"]) {
    if (p["network_bandwidth"].get<double>() == 1.0) continue;
    EXPECT_GT(p["iteration_s"][0].get<double>(), j2["plans"][0]["iteration_s"].get<double>());
  }

  RunResult off = run(kJob + "--top 4 --json -q --no-robustness");
  ASSERT_EQ(off.exit_code, 0) << off.err;
  auto jo = nlohmann::json::parse(off.out);
  EXPECT_FALSE(jo.contains("robustness"));
  EXPECT_EQ(jo["plans"], plans);

  RunResult text = run(kJob + "--top 2 -q");
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("how sure"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("network -30%"), std::string::npos) << text.out;
}

}  // namespace

namespace {

// --emit X predicts with X's conventions (the header's prediction is that framework's), says so
// on stderr, and --framework still overrides it.
TEST(PlanCli, EmitPredictsWithTheTargetsConventions) {
  // A model torchtitan has a flavor of (llama-tiny has none: that export is refused).
  const std::string job =
      "plan --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 --gbs 64 --top 1 --json -q "
      "--no-robustness ";
  RunResult tt = run(job + "--emit torchtitan");
  ASSERT_EQ(tt.exit_code, 0) << tt.err;
  EXPECT_EQ(nlohmann::json::parse(tt.out)["framework"], "torchtitan");
  EXPECT_NE(tt.err.find("predicting with torchtitan's conventions"), std::string::npos) << tt.err;
  RunResult mg = run(job + "--emit megatron");
  ASSERT_EQ(mg.exit_code, 0) << mg.err;
  EXPECT_EQ(nlohmann::json::parse(mg.out)["framework"], "megatron");
  RunResult forced = run(job + "--emit torchtitan --framework megatron");
  ASSERT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(nlohmann::json::parse(forced.out)["framework"], "megatron");
  EXPECT_NE(forced.err.find("not those of the exported framework"), std::string::npos);
}

// issue 44: without --emit each ranked layout names the frameworks that run it as simulated
// (text and --json); a ZB-H1 layout is not Megatron-LM's (it has no zero-bubble schedule).
TEST(PlanCli, RankedLayoutsNameTheFrameworksThatRunThem) {
  const std::string job = kJob + "--top 3 -q --no-robustness --fix pp=2 --fix schedule=zb-h1 ";
  RunResult r = run(job + "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["plans"].empty());
  for (const auto& p : j["plans"]) {
    ASSERT_EQ(p["frameworks"].size(), 6u)
        << p;  // the four targets, Megatron-Bridge, torchtitan main
    EXPECT_EQ(p["frameworks"][0]["framework"], "Megatron-LM");
    EXPECT_FALSE(p["frameworks"][0]["runs"].get<bool>());
    EXPECT_EQ(p["frameworks"][0]["needs"], "schedule=1f1b|interleaved");
  }
  RunResult text = run(job);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("runs on: "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("not on Megatron-LM (needs schedule=1f1b|interleaved)"),
            std::string::npos)
      << text.out;
}

// issue 44: --emit torchtitan ranks only what torchtitan v0.2.2 starts and runs as simulated:
// no ZeRO-0 (DDP) beside TP or PP (its parallelize.py raises "DDP has not supported > 1D
// parallelism"), and interleaved / zero-bubble pipelines only with a micro-batch count that
// PyTorch's rounds rule takes (m a multiple of max(1, m // pp)).
TEST(PlanCli, EmitTorchtitanRanksOnlyWhatTorchtitanStarts) {
  const std::string job =
      "plan --model llama3-8b --cluster dgx-h100 --gpus 16 --seq 4096 --gbs 40 --top 20 --json -q "
      "--no-robustness --fix 'pp=2|4' --fix 'schedule=interleaved|zb-h1|1f1b' --emit "
      "torchtitan-0.2.2";  // v0.2.2's TOML target: torchtitan main has no DDP path
  RunResult r = run(job);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["plans"].empty());
  auto value = [](const std::string& l, const std::string& key) {
    const size_t at = l.find(key + "=");
    if (at == std::string::npos) return std::string();
    const size_t from = at + key.size() + 1;
    return l.substr(from, l.find(',', from) - from);
  };
  for (const auto& p : j["plans"]) {
    const std::string l = p["layout"];
    const int tp = std::stoi(value(l, "tp")), pp = std::stoi(value(l, "pp"));
    const int dp = std::stoi(value(l, "dp")), mbs = std::stoi(value(l, "mbs"));
    if (dp > 1 && (tp > 1 || pp > 1)) EXPECT_NE(value(l, "zero"), "0") << l;
    const std::string s = value(l, "schedule");
    if (s == "interleaved" || s == "zb-h1") {
      const int m = 40 / (mbs * dp);
      EXPECT_EQ(m % std::max(1, m / pp), 0) << l;
    }
  }
}

// issue 44: plan --tp-comm-overlap predicts with Transformer Engine's overlap and writes
// --tp-comm-overlap into the Megatron export; torchtitan has no such option (exit 2).
TEST(PlanCli, TpCommOverlapIsMegatronsAndExported) {
  const std::string job = kJob + "--top 1 -q --no-robustness --fix tp=2 --fix sp=on ";
  RunResult mg = run(job + "--tp-comm-overlap --emit megatron");
  ASSERT_EQ(mg.exit_code, 0) << mg.err;
  EXPECT_NE(mg.out.find("--tp-comm-overlap"), std::string::npos) << mg.out;
  RunResult tt = run(job + "--tp-comm-overlap --emit torchtitan");
  EXPECT_EQ(tt.exit_code, 2);
  EXPECT_NE(tt.err.find("--tp-comm-overlap"), std::string::npos) << tt.err;
}

// issue 44: plan and simulate print the same peak for the same layout: "peak" is the allocated
// peak, "reserved" what must fit, in both commands' text and --json.
TEST(PlanCli, PlanAndSimulatePrintTheSamePeak) {
  RunResult p = run(kJob + "--top 1 --json -q --no-robustness");
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto best = nlohmann::json::parse(p.out)["plans"][0];
  const std::string layout = best["layout"];
  RunResult s =
      run("simulate --model llama-tiny --cluster dgx-h100 --seq 1024 --json --layout " + layout);
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const auto sim = nlohmann::json::parse(s.out);
  EXPECT_EQ(best["peak_memory_bytes"], sim["peak_memory_bytes"]) << layout;
  EXPECT_EQ(best["reserved_memory_bytes"], sim["peak_reserved_bytes"]) << layout;
  EXPECT_LT(best["peak_memory_bytes"].get<int64_t>(), best["reserved_memory_bytes"].get<int64_t>());
}

// The degree `key` of a layout string ("ep" in "tp=1,...,ep=16,..."), `dflt` where it is not given.
int degree(const std::string& layout, const std::string& key, int dflt = 1) {
  const std::string l = "," + layout;
  const size_t at = l.find("," + key + "=");
  if (at == std::string::npos) return dflt;
  return std::stoi(l.substr(at + key.size() + 2));
}

// Whether every EP group of a ranked plan lies inside one NVLink domain of `per_domain` ranks
// (rank r in domain r / per_domain, the plan's ranks_per_nvlink_domain). Megatron's expert grid:
// stage s holds ranks s·S .. s·S+S-1 (S = tp·cp·dp, pp outermost), re-divided etp-ep-edp, etp
// fastest, so EP group (s, e, t) is s·S + e·etp·ep + t + k·etp for k < ep.
bool ep_inside_domains(const std::string& layout, int per_domain) {
  const int tp = degree(layout, "tp"), cp = degree(layout, "cp"), dp = degree(layout, "dp");
  const int pp = degree(layout, "pp"), ep = degree(layout, "ep"), etp = degree(layout, "etp");
  const int stage = tp * cp * dp;
  for (int s = 0; s < pp; ++s) {
    for (int e = 0; e < stage / (ep * etp); ++e) {
      for (int t = 0; t < etp; ++t) {
        const int first = s * stage + e * etp * ep + t;
        for (int k = 0; k < ep; ++k) {
          if ((first + k * etp) / per_domain != first / per_domain) return false;
        }
      }
    }
  }
  return true;
}

// issue 44: qwen3-235b-a22b on 576 GB200 (8 NVL72 racks) with the issue's pipeline (pp=9, ZB-H1):
// the planner's EP choice keeps every EP group inside a rack. 576 GPUs hold 8 racks, so packing
// (which would need 9 for stages of 64) is not compared, and linear is the placement.
TEST(PlanCli, Qwen3On576Gb200KeepsExpertParallelismInsideARack) {
  RunResult r = run(
      "plan --model qwen3-235b-a22b --cluster gb200-nvl72 --gpus 576 --seq 4096 --gbs 2048 --top 1 "
      "--json -q --no-robustness --fix tp=1 --fix pp=9 --fix schedule=zb-h1 --fix mbs=1 "
      "--fix zero=1 --fix recompute=selective");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["plans"].empty()) << r.out;
  const auto& best = j["plans"][0];
  const std::string layout = best["layout"];
  EXPECT_EQ(best["placement"], "linear") << layout;
  EXPECT_EQ(best["ranks_per_nvlink_domain"], 72) << layout;
  EXPECT_TRUE(ep_inside_domains(layout, 72)) << layout;
}

// issue 44: on 256 GB200 (4 racks: 3·72 < 256) with EP groups of 64 on stages of 64, linear puts
// stages 1-3 across racks and packed puts one stage per rack, 64 of its 72 GPUs (NVIDIA's
// sbatch --segment=16): the planner keeps packed, says so in the layout string and --json, and the
// Megatron export tells the launcher.
TEST(PlanCli, PlannerPacksStagesIntoRacksWhereThatIsFaster) {
  const std::string job =
      "plan --model qwen3-235b-a22b --cluster gb200-nvl72 --gpus 256 --seq 4096 --gbs 2048 --top 1 "
      "-q --no-robustness --fix tp=1 --fix pp=4 --fix ep=64 --fix schedule=1f1b --fix mbs=1 "
      "--fix zero=1 --fix recompute=selective ";
  RunResult r = run(job + "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_FALSE(j["plans"].empty()) << r.out;
  const auto& best = j["plans"][0];
  const std::string layout = best["layout"];
  EXPECT_EQ(best["placement"], "packed") << layout;
  EXPECT_NE(layout.find("place=packed"), std::string::npos) << layout;
  EXPECT_EQ(best["ranks_per_nvlink_domain"], 64);
  EXPECT_EQ(best["slurm_segment_nodes"], 16);
  EXPECT_TRUE(ep_inside_domains(layout, 64)) << layout;
  EXPECT_FALSE(ep_inside_domains(layout, 72)) << layout;  // linear would straddle
  RunResult mg = run(job + "--emit megatron");
  ASSERT_EQ(mg.exit_code, 0) << mg.err;
  EXPECT_NE(mg.out.find("sbatch --segment=16"), std::string::npos) << mg.out;
}

// --fix cannot name the placement: the planner chooses it per layout.
TEST(PlanCli, FixPlaceIsRefusedNamingTheKey) {
  RunResult r = run(kJob + "--fix place=packed -q");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("place"), std::string::npos) << r.err;
}

}  // namespace
