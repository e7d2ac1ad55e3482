// The commands moved behind api/ (sweep, refit, compare, memory --validate, cluster) and the
// request fields described once (api/fields.h): each outcome's to_json() is what the command's
// --json prints for the same inputs (the CLI only prints it), and a request read from a binding's
// JSON through the field table takes what the command line takes ("4k", the framework choices)
// and refuses what it refuses, naming the option. llama-tiny (4 layers) keeps the searches short.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/cluster.h"
#include "api/compare.h"
#include "api/describe.h"
#include "api/fields.h"
#include "api/memory.h"
#include "api/simulate.h"
#include "api/sweep.h"
#include "tests/cli/cli_runner.h"

namespace scaleplan::api {
namespace {

using scaleplan::testing::run_scaleplan;
using scaleplan::testing::unique_temp_path;

// The --json of a command, which must succeed.
Json cli_json(const std::string& args) {
  const auto r = run_scaleplan(args);
  EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
  return Json::parse(r.out);
}

// Wall-clock seconds differ between two runs of the same search.
void drop_timings(Json& j) {
  if (j.is_object()) {
    for (const char* k : {"sweep_s", "search_s", "seconds"}) j.erase(k);
    for (auto& [k, v] : j.items()) drop_timings(v);
  } else if (j.is_array()) {
    for (auto& v : j) drop_timings(v);
  }
}

// llama-tiny at sequence 1024 on dgx-h100, at `gpus`.
SweepRequest tiny_sweep(const std::string& gpus) {
  SweepRequest r;
  r.model = "llama-tiny";
  r.cluster = "dgx-h100";
  r.seq = 1024;
  r.gpus = gpus;
  return r;
}

TEST(ApiSweep, OutcomeIsTheSweepJson) {
  SweepRequest r = tiny_sweep("8,16");
  r.gbs = 32;
  r.fixes = {"tp=1|2"};
  r.train_tokens = 1e9;
  r.gpu_hour_cost = "2";
  Result<SweepOutcome> out = sweep(r);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  Json api_json = out->to_json();
  Json cli = cli_json(
      "sweep --model llama-tiny --cluster dgx-h100 --seq 1k --gpus 8,16 --gbs 32 --fix 'tp=1|2' "
      "--train-tokens 1G --gpu-hour-cost 2 --json -q");
  drop_timings(api_json);
  drop_timings(cli);
  EXPECT_EQ(api_json, cli);
  EXPECT_EQ(out->result.points.size(), 2u);
}

// The command line refuses both through CLI11; a binding passes both as values, and the request
// names the conflict instead of silently preferring one.
TEST(ApiSweep, AFixedAndAPerGpuBatchTogetherAreRefused) {
  SweepRequest r = tiny_sweep("8");
  r.gbs = 32;
  r.gbs_per_gpu = 2;
  Result<SweepOutcome> out = sweep(r);
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().message(), "--gbs-per-gpu excludes --gbs");
}

TEST(ApiSweep, ErrorsNameTheOption) {
  SweepRequest r = tiny_sweep("8");
  Result<SweepOutcome> out = sweep(r);
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().message().rfind("--gbs (a fixed global batch)", 0), 0u)
      << out.status().message();
  r.gbs = 8;
  r.model = "";
  out = sweep(r);
  ASSERT_FALSE(out.is_ok());
  EXPECT_EQ(out.status().message().rfind("--model is required", 0), 0u);
}

TEST(ApiFields, SimulateRequestFromJsonTakesCountSuffixesAndEqualsTheCommand) {
  SimulateRequest r;
  const std::vector<Field> fields = simulate_fields(r);
  ASSERT_TRUE(read_fields(Json{{"model", "llama-tiny"},
                               {"cluster", "dgx-h100"},
                               {"seq", "1k"},
                               {"layout", "tp=2,pp=2,dp=2,gbs=16"},
                               {"framework", "nanotron"},
                               {"host_launch", nullptr}},
                          fields)
                  .is_ok());
  EXPECT_EQ(r.inputs.seq, 1024);  // "1k" as --seq 1k reads it
  EXPECT_EQ(r.inputs.framework, "nanotron");
  EXPECT_TRUE(r.inputs.host_launch.empty());  // null: not given
  Result<SimulateOutcome> out = simulate(r);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out->to_json(), cli_json("simulate --model llama-tiny --cluster dgx-h100 --seq 1k "
                                     "--layout tp=2,pp=2,dp=2,gbs=16 --framework nanotron --json"));
}

TEST(ApiFields, BadValuesAreRefusedNamingTheOption) {
  SimulateRequest r;
  const std::vector<Field> fields = simulate_fields(r);
  Status s = read_fields(Json{{"framework", "megatorn"}}, fields);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind("--framework: 'megatorn' is not one of megatron, ", 0), 0u)
      << s.message();
  EXPECT_NE(s.message().find("(did you mean 'megatron'?)"), std::string::npos) << s.message();
  s = read_fields(Json{{"seq", "4q"}}, fields);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message().rfind("--seq", 0), 0u) << s.message();
  s = read_fields(Json{{"all_ranks", 1}}, fields);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.message(), "--all-ranks: expected True or False, got 1");
  s = read_fields(Json{{"layuot", "tp=2"}}, fields);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'layuot' is not a field"), std::string::npos) << s.message();
}

// The table is where the command line's options come from: every field is an option of
// `simulate --help`, with its help text, and the description carries each default.
TEST(ApiFields, EveryFieldIsAnOptionOfTheCommand) {
  SimulateRequest r;
  const std::vector<Field> fields = simulate_fields(r);
  const auto help = run_scaleplan("simulate --help");
  ASSERT_EQ(help.exit_code, 0);
  for (const Field& f : fields) {
    EXPECT_NE(help.out.find("  " + f.option() + " "), std::string::npos) << f.option();
    EXPECT_NE(help.out.find(f.help.substr(0, 40)), std::string::npos) << f.option();
  }
  const Json d = fields_json(fields);
  ASSERT_EQ(d.size(), fields.size());
  for (const Json& f : d) {
    if (f["name"] == "seq") {
      EXPECT_EQ(f["default"], 0);
    } else if (f["name"] == "framework") {
      EXPECT_EQ(f["type"], "choice");
    } else if (f["name"] == "how_sure") {
      EXPECT_EQ(f["default"], false);
    }
  }
}

// A sweep request from a binding's JSON: "15T" tokens as --train-tokens 15T reads them (powers of
// ten: a budget), "4k" as --seq 4k (powers of two), the fix list as repeated --fix.
TEST(ApiFields, SweepFieldsReadTheCommandLinesCounts) {
  SweepRequest r;
  const std::vector<Field> fields = sweep_fields(r);
  ASSERT_TRUE(read_fields(Json{{"seq", "4k"},
                               {"train_tokens", "15T"},
                               {"max_simulations", "2k"},
                               {"fix", {"tp=1|2", "pp=1"}},
                               {"gbs_per_gpu", 0.5}},
                          fields)
                  .is_ok());
  EXPECT_EQ(r.seq, 4096);
  EXPECT_EQ(r.train_tokens, 15e12);
  EXPECT_EQ(r.max_simulations, 2000);
  EXPECT_EQ(r.fixes, (std::vector<std::string>{"tp=1|2", "pp=1"}));
  EXPECT_EQ(r.gbs_per_gpu, 0.5);
  const Result<Json> described = command_fields("sweep");
  ASSERT_TRUE(described.is_ok());
  SweepRequest fresh;  // the description's defaults are a default request's
  EXPECT_EQ(*described, fields_json(sweep_fields(fresh)));
  const auto help = run_scaleplan("sweep --help");
  for (const Field& f : fields)
    EXPECT_NE(help.out.find(f.option()), std::string::npos) << f.option();
  EXPECT_FALSE(command_fields("swep").is_ok());
}

TEST(ApiCluster, ListAndShowAreTheCommandsJson) {
  Result<ClusterList> list = cluster_list();
  ASSERT_TRUE(list.is_ok());
  EXPECT_EQ(list->to_json(), cli_json("cluster list --json"));
  Result<ClusterShow> shown = cluster_show("dgx-h100");
  ASSERT_TRUE(shown.is_ok());
  Result<Json> j = shown->to_json();
  ASSERT_TRUE(j.is_ok());
  EXPECT_EQ(*j, cli_json("cluster show dgx-h100 --json"));
}

TEST(ApiMemory, ValidateIsTheCommandsJson) {
  Result<MemoryValidateOutcome> out = memory_validate({"dev_runs", "nanotron"});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(out->to_json(),
            cli_json("memory --validate dev_runs --validate-framework nanotron --json"));
  EXPECT_FALSE(out->validation.rows.empty());
}

TEST(ApiCompare, OutcomeIsTheCommandsJsonAndWritesNothingUnasked) {
  const std::string trace = unique_temp_path("api_compare_predicted.json");
  ASSERT_EQ(run_scaleplan("simulate --model llama-tiny --cluster dgx-h100 --seq 1024 "
                          "--layout tp=2,pp=2,dp=2,gbs=16 -q --trace " +
                          trace)
                .exit_code,
            0);
  const std::string kineto = std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/kineto/hta_sampled";
  Result<CompareOutcome> out = compare({trace, {kineto}, "", ""});
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_TRUE(out->trace_content.empty());
  EXPECT_EQ(out->to_json(),
            cli_json("compare --predicted " + trace + " --measured " + kineto + " --json"));
  Result<CompareOutcome> bad = compare({kineto + "/nope.json", {kineto}, "", ""});
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message().rfind("--predicted: ", 0), 0u) << bad.status().message();
  std::remove(trace.c_str());
}

TEST(FrontDoor, ImportScalingRebuildsHfH100) {
  // The bundled hf-h100 is `cluster import-scaling dgx-h100` of the playbook's measured points
  // (docs/hw_profiles.md), with the list-form copies timed by the kernel model, to the four
  // decimals the profile keeps.
  ClusterFitRequest r;
  r.cluster = "dgx-h100";
  r.source =
      std::string(SCALEPLAN_SOURCE_DIR) + "/examples/ultrascale-playbook/bandwidth_by_nodes.json";
  r.out = unique_temp_path("hf-h100-refit.json");
  r.name = "hf-h100";
  auto fit = cluster_import_scaling(r);
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  std::remove(r.out.c_str());
  const hw::Cluster hf = *hw::load_cluster("hf-h100");
  const auto& got = fit->fit.cluster.cost.network_scaling;
  ASSERT_EQ(hf.cost.network_scaling.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(hf.cost.network_scaling[i].op, got[i].op);
    EXPECT_EQ(hf.cost.network_scaling[i].nodes, got[i].nodes);
    EXPECT_NEAR(hf.cost.network_scaling[i].fraction, got[i].fraction, 6e-5)
        << got[i].op << " " << got[i].nodes;
  }
}

}  // namespace
}  // namespace scaleplan::api
