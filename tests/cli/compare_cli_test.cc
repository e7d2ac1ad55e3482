// `scaleplan compare` and `plan --html`: exit codes, the JSON a user scripts against, the op-for-op
// match between two scaleplan traces, and self-contained HTML. Expectations come from the inputs:
// the Kineto files' own ProfilerStep durations, simulate's own --json, the trace's own events.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/cli/cli_runner.h"

namespace {

using nlohmann::json;
using scaleplan::testing::run_scaleplan;
using scaleplan::testing::unique_temp_path;

const std::string kKineto = std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/kineto/";
const std::string kJob =
    "--model llama-tiny --cluster dgx-h100 --seq 1024 --layout tp=2,pp=2,dp=2,gbs=16";

std::string slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A simulate trace of kJob, written once per test process.
const std::string& predicted_trace() {
  static const std::string path = [] {
    const std::string p = unique_temp_path("compare_predicted.json");
    const auto r = run_scaleplan("simulate " + kJob + " --trace " + p);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }();
  return path;
}

// The ProfilerStep durations of a gzipped Kineto trace, read with gzip(1), not the importer.
std::vector<double> step_durations_us(const std::string& gz) {
  FILE* p = popen(("gzip -dc " + gz).c_str(), "r");
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) text.append(buf, n);
  pclose(p);
  std::vector<double> out;
  const json trace = json::parse(text);
  for (const json& e : trace["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("name", "").rfind("ProfilerStep#", 0) == 0)
      out.push_back(e["dur"].get<double>());
  return out;
}

TEST(CompareCli, KinetoTracesAreComparedByClassAndMatchedByStructure) {
  const auto r = run_scaleplan("compare --predicted " + predicted_trace() + " --measured " +
                               kKineto + "hta_sampled --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["op_for_op"]["possible"].get<bool>());
  EXPECT_TRUE(j["op_for_op"]["by_structure"].get<bool>());
  EXPECT_TRUE(j["op_for_op"].contains("structured"));
  EXPECT_EQ(j["measured"]["format"], "kineto");
  EXPECT_EQ(j["measured"]["ranks"], 2);
  // Two ranks, two ProfilerSteps each: the measured iteration is the mean of the four
  // annotations' durations.
  double sum = 0;
  int steps = 0;
  for (const char* f : {"hta_sampled/rank-0.json.gz", "hta_sampled/rank-1.json.gz"}) {
    for (double d : step_durations_us(kKineto + f)) {
      sum += d;
      ++steps;
    }
  }
  ASSERT_EQ(steps, 4);
  EXPECT_EQ(j["measured"]["samples"], 4);
  EXPECT_NEAR(j["iteration"]["measured_s"].get<double>(), sum / steps * 1e-6, 1e-9);
  // The per-iteration figures are the ones the averages come from.
  const json& per = j["measured"]["per_iteration"];
  ASSERT_EQ(per.size(), 4u);
  double per_sum = 0;
  for (const json& it : per) {
    per_sum += it["iteration_s"].get<double>();
    EXPECT_NEAR(it["gpu_span_s"].get<double>(),
                it["compute_busy_s"].get<double>() + it["exposed_comm_s"].get<double>() +
                    it["gpu_idle_s"].get<double>(),
                1e-9);
  }
  EXPECT_NEAR(per_sum / 4, j["iteration"]["measured_s"].get<double>(), 1e-9);
  // The predicted iteration is simulate's own.
  const auto sim = run_scaleplan("simulate " + kJob + " --json");
  ASSERT_EQ(sim.exit_code, 0);
  EXPECT_NEAR(j["iteration"]["predicted_s"].get<double>(),
              json::parse(sim.out)["iteration_s"].get<double>(), 1e-9);
  // The NCCL SendRecv kernels are the measured communication; they are exposed in part.
  EXPECT_GT(j["measured"]["classes"]["send_recv"]["time_s"].get<double>(), 0);
  EXPECT_GT(j["measured"]["exposed_comm_s"].get<double>(), 0);
  // Foreign streams are listed, never given an error against scaleplan's.
  for (const json& s : j["streams"]) {
    if (s["name"].get<std::string>().rfind("stream ", 0) == 0) {
      EXPECT_TRUE(s["error"].is_null()) << s.dump();
    }
  }

  const auto text = run_scaleplan("compare --predicted " + predicted_trace() + " --measured " +
                                  kKineto + "hta_sampled");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("ops matched by structure"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("by op class"), std::string::npos);
}

// The H200 step (tests/data/kineto/README.md) against its prediction, op for op: the structure
// the model and the script imply (4 micro-batches of 4 layers), every attention op matched one to
// one, every GEMM matched by its shape or as the parts of a fused one.
TEST(CompareCli, H200StepMatchesOpForOp) {
  const std::string dir = kKineto + "h200_llama3_4l/";
  const std::string p = unique_temp_path("compare_h200.json");
  const auto sim = run_scaleplan("simulate --model " + dir +
                                 "llama3-8b-4l.json --cluster hgx-h200 --seq 4096 --framework "
                                 "torchtitan --layout tp=1,pp=1,dp=1,mbs=1,gbs=4 --trace " +
                                 p);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const std::string both = unique_temp_path("compare_h200_both.json");
  const auto r = run_scaleplan("compare --predicted " + p + " --measured " + dir +
                               "rank-0.json.gz --json --trace " + both);
  std::remove(p.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json s = json::parse(r.out)["op_for_op"]["structured"];
  // The side-by-side trace joins each matched group with one flow arrow.
  int arrows = 0;
  const json side_by_side = json::parse(slurp(both));
  for (const json& e : side_by_side["traceEvents"])
    if (e.value("ph", "") == "s" && e.value("cat", "") == "match") ++arrows;
  std::remove(both.c_str());
  EXPECT_EQ(arrows, static_cast<int>(s["groups"].size()));
  EXPECT_EQ(s["microbatches_predicted"], 4);
  EXPECT_EQ(s["microbatches_measured"], 4);
  EXPECT_EQ(s["layers_predicted"], 4);
  EXPECT_EQ(s["layers_measured"], 4);
  // Attention: 16 forward and 16 backward ops, each to one measured SDPA op, in its own layer.
  std::map<std::string, int> attention;
  int measured_gemms = 0;
  for (const json& g : s["groups"]) {
    const std::string cls = g["class"];
    if (cls == "attention_fwd" || cls == "attention_bwd") {
      EXPECT_EQ(g["predicted_ops"], 1);
      EXPECT_EQ(g["measured_ops"], 1);
      EXPECT_GE(g["segment"]["layer"].get<int>(), 0);
      EXPECT_LT(g["segment"]["layer"].get<int>(), 4);
      ++attention[cls];
    }
    if (cls == "gemm") {
      EXPECT_TRUE(g["how"] == "shape" || g["how"] == "fused shape") << g.dump();
      measured_gemms += g["measured_ops"].get<int>();
    }
  }
  EXPECT_EQ(attention["attention_fwd"], 16);
  EXPECT_EQ(attention["attention_bwd"], 16);
  // PyTorch runs each of a layer's 7 linears (q, k, v, o, gate, up, down) as one aten::mm
  // forward and two backward (input and weight gradient), and the LM head likewise, in each
  // micro-batch: 4 * (4 * 21 + 3) GEMMs, every one matched by shape.
  EXPECT_EQ(measured_gemms, 4 * (4 * 21 + 3));
  for (const json& u : s["unmatched"]) {
    EXPECT_NE(u["class"], "gemm") << u.dump();
    EXPECT_NE(u["class"], "attention_fwd") << u.dump();
    EXPECT_NE(u["class"], "attention_bwd") << u.dump();
  }
}

// Issue 43's aims on the H200 step taken on 2026-11-30 (tests/data/kineto/README.md): the step
// within 3% of the profiled one, every op class within 10%, the peak within 2% of PyTorch's
// peak allocated memory. Measured figures, not expected outputs: a change to the model that moves
// the step off the measurement fails here.
TEST(CompareCli, H200StepOf2026_11_30WithinIssue43Aims) {
  const std::string p = unique_temp_path("compare_h200_1130.json");
  const auto sim = run_scaleplan("simulate --model " + kKineto +
                                 "h200_llama3_4l/llama3-8b-4l.json --cluster hgx-h200 --seq 4096 "
                                 "--framework torchtitan --layout tp=1,pp=1,dp=1,mbs=1,gbs=4 "
                                 "--trace " +
                                 p);
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto r = run_scaleplan("compare --predicted " + p + " --measured " + kKineto +
                               "h200_llama3_4l_2026-11-30/rank-0.json.gz --json");
  std::remove(p.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_LE(std::abs(j["iteration"]["error"].get<double>()), 0.03) << j["iteration"].dump();
  std::map<std::string, double> errors;
  for (const json& c : j["classes"]) {
    if (c["error"].is_number()) errors[c["name"].get<std::string>()] = c["error"].get<double>();
  }
  for (const char* cls : {"gemm", "attention_fwd", "attention_bwd", "memory_bound", "optimizer"}) {
    ASSERT_TRUE(errors.count(cls)) << cls;
    EXPECT_LE(std::abs(errors[cls]), 0.10) << cls;
  }
  const double predicted = j["predicted"]["peak_memory"][0]["peak_allocated_bytes"].get<double>();
  const double measured = j["measured"]["peak_memory"][0]["peak_allocated_bytes"].get<double>();
  EXPECT_EQ(measured, 43665826304.0);  // torch.cuda.max_memory_allocated of the same run
  EXPECT_LE(std::abs(predicted / measured - 1), 0.02) << predicted << " vs " << measured;
}

// A trace compared with itself: every op matched exactly once, nothing left over, no error.
TEST(CompareCli, ScaleplanTraceMatchesEveryOpOnce) {
  const json trace = json::parse(slurp(predicted_trace()));
  int64_t slices = 0;
  for (const json& e : trace["traceEvents"])
    if (e["ph"] == "X") ++slices;
  ASSERT_GT(slices, 0);
  const auto r = run_scaleplan("compare --predicted " + predicted_trace() + " --measured " +
                               predicted_trace() + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_TRUE(j["op_for_op"]["possible"].get<bool>());
  EXPECT_EQ(j["op_for_op"]["matched"].get<int64_t>(), slices);
  EXPECT_EQ(j["op_for_op"]["predicted_only"], 0);
  EXPECT_EQ(j["op_for_op"]["measured_only"], 0);
  EXPECT_EQ(j["iteration"]["error"].get<double>(), 0.0);
  for (const json& e : j["op_for_op"]["largest_errors"]) EXPECT_EQ(e["error_s"], 0.0);
  // Each simulated rank's peak memory is the memory model's, as simulate --json reports it.
  const auto sim = run_scaleplan("simulate " + kJob + " --json");
  ASSERT_EQ(sim.exit_code, 0);
  const json stages = json::parse(sim.out)["breakdown"];
  const json& peaks = j["predicted"]["peak_memory"];
  ASSERT_EQ(peaks.size(), stages.size());
  for (size_t i = 0; i < stages.size(); ++i) {
    EXPECT_EQ(peaks[i]["rank"], stages[i]["global_rank"]);
    EXPECT_EQ(peaks[i]["peak_allocated_bytes"], stages[i]["peak_memory_bytes"]);
  }
  EXPECT_EQ(j["predicted"]["model"], "llama-tiny");
  EXPECT_EQ(j["predicted"]["cluster"], "dgx-h100");
}

// A prediction beside what `run` measured of the same Program, on the host backend: every op the
// simulation times is matched to one measured op and none twice, for every layout of issue 28's
// executor tests (each parallelism, each schedule, each ZeRO stage, a MoE model, 3D on 8 ranks).
TEST(CompareCli, SimulateAgainstRunMatchesEveryOpOnce) {
  for (const auto& [model, layout] : std::vector<std::pair<std::string, std::string>>{
           {"llama-tiny", "tp=2,gbs=2"},
           {"llama-tiny", "tp=2,sp=off,gbs=2"},
           {"llama-tiny", "pp=2,gbs=4,schedule=1f1b"},
           {"llama-tiny", "pp=2,vpp=2,gbs=4,schedule=interleaved"},
           {"llama-tiny", "pp=2,gbs=4,schedule=zb-h1"},
           {"llama-tiny", "dp=2,gbs=4,zero=1"},
           {"llama-tiny", "dp=2,gbs=4,zero=2"},
           {"llama-tiny", "dp=2,gbs=4,zero=3"},
           {"llama-tiny", "cp=2,gbs=2"},
           {"mixtral-tiny", "dp=2,ep=2,gbs=4"},
           {"llama-tiny", "tp=2,pp=2,dp=2,gbs=8"}}) {
    const std::string job = "--model " + model + " --cluster dgx-h100 --seq 128 --layout " + layout;
    const std::string p = unique_temp_path("compare_sim.json");
    const std::string m = unique_temp_path("compare_run.json");
    // --all-ranks: one process per rank in the prediction too, as run records them.
    const auto s = run_scaleplan("simulate " + job + " --all-ranks -q --trace " + p);
    ASSERT_EQ(s.exit_code, 0) << layout << ": " << s.err;
    const auto r =
        run_scaleplan("run " + job + " --backend host --warmup 0 --steps 1 --trace " + m);
    ASSERT_EQ(r.exit_code, 0) << layout << ": " << r.err;
    int64_t slices = 0;
    const json predicted = json::parse(slurp(p));
    for (const json& e : predicted["traceEvents"])
      if (e["ph"] == "X") ++slices;
    ASSERT_GT(slices, 0) << layout;
    const auto c = run_scaleplan("compare --predicted " + p + " --measured " + m + " --json");
    ASSERT_EQ(c.exit_code, 0) << layout << ": " << c.err;
    const json j = json::parse(c.out);
    EXPECT_TRUE(j["op_for_op"]["possible"].get<bool>()) << layout;
    EXPECT_EQ(j["op_for_op"]["matched"].get<int64_t>(), slices) << layout;
    EXPECT_EQ(j["op_for_op"]["predicted_only"], 0) << layout;
    EXPECT_EQ(j["op_for_op"]["measured_only"], 0) << layout;
    // The text says the same, in the line a user reads.
    const auto t = run_scaleplan("compare --predicted " + p + " --measured " + m);
    ASSERT_EQ(t.exit_code, 0) << t.err;
    EXPECT_NE(t.out.find("ops: " + std::to_string(slices) +
                         " matched, 0 only predicted, 0 only measured"),
              std::string::npos)
        << layout << ": " << t.out;
    std::remove(p.c_str());
    std::remove(m.c_str());
  }
}

// issue 44: host-issue slices (CPU time, not ops of the Program) are neither matched nor counted
// as unmatched: a prediction with --host-launch has them, a run's trace records its own; every
// GPU op is still matched once. And a run trace without memory gets no PyTorch advice.
TEST(CompareCli, HostIssueOpsAreNotUnmatched) {
  const std::string job = "--model llama-tiny --cluster dgx-h100 --seq 128 --layout tp=2,gbs=2";
  const std::string p = unique_temp_path("compare_host_sim.json");
  const std::string m = unique_temp_path("compare_host_run.json");
  ASSERT_EQ(
      run_scaleplan("simulate " + job + " --all-ranks -q --host-launch 5us --trace " + p).exit_code,
      0);
  const auto r = run_scaleplan("run " + job + " --backend host --warmup 0 --steps 1 --trace " + m);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int64_t gpu_slices = 0, host_slices = 0;
  const json predicted = json::parse(slurp(p));
  for (const json& e : predicted["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e.contains("cat") && e["cat"] == "host")
      ++host_slices;
    else
      ++gpu_slices;
  }
  ASSERT_GT(host_slices, 0);  // --host-launch put the CPU's issue time in the prediction
  const auto c = run_scaleplan("compare --predicted " + p + " --measured " + m + " --json");
  ASSERT_EQ(c.exit_code, 0) << c.err;
  const json j = json::parse(c.out);
  EXPECT_EQ(j["op_for_op"]["matched"].get<int64_t>(), gpu_slices);
  EXPECT_EQ(j["op_for_op"]["predicted_only"], 0);
  EXPECT_EQ(j["op_for_op"]["measured_only"], 0);
  const auto t = run_scaleplan("compare --predicted " + p + " --measured " + m);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(t.out.find("profile_memory"), std::string::npos) << t.out;
  std::remove(p.c_str());
  std::remove(m.c_str());
}

// One op made 1 ms slower in the "measured" copy is the first of the largest errors, and the
// combined trace joins every matched pair with one flow arrow.
TEST(CompareCli, OpForOpFindsTheSlowedOp) {
  json trace = json::parse(slurp(predicted_trace()));
  std::string slowed;
  for (json& e : trace["traceEvents"]) {
    if (e["ph"] == "X" && e["pid"] == 1 && e["cat"] == "compute") {
      e["dur"] = e["dur"].get<double>() + 1000.0;
      slowed = e["name"];
      break;
    }
  }
  ASSERT_FALSE(slowed.empty());
  const std::string measured = unique_temp_path("compare_measured.json");
  std::ofstream(measured) << trace.dump();
  const std::string out_trace = unique_temp_path("compare_out_trace.json");
  const auto r = run_scaleplan("compare --predicted " + predicted_trace() + " --measured " +
                               measured + " --json --trace " + out_trace);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& top = j["op_for_op"]["largest_errors"][0];
  EXPECT_EQ(top["name"], slowed);
  EXPECT_NEAR(top["error_s"].get<double>(), -1e-3, 1e-9);
  EXPECT_EQ(j["op_for_op"]["predicted_only"], 0);

  const json combined = json::parse(slurp(out_trace));
  int64_t starts = 0, finishes = 0, predicted = 0, measured_procs = 0;
  for (const json& e : combined["traceEvents"]) {
    if (e["ph"] == "s") ++starts;
    if (e["ph"] == "f") ++finishes;
    if (e["ph"] == "M" && e["name"] == "process_name") {
      const std::string n = e["args"]["name"];
      if (n.rfind("predicted", 0) == 0) ++predicted;
      if (n.rfind("measured", 0) == 0) ++measured_procs;
    }
  }
  EXPECT_EQ(starts, j["op_for_op"]["matched"].get<int64_t>());
  EXPECT_EQ(finishes, starts);
  EXPECT_EQ(predicted, j["predicted"]["ranks"].get<int64_t>());
  EXPECT_EQ(measured_procs, predicted);
  std::remove(measured.c_str());
  std::remove(out_trace.c_str());
}

TEST(CompareCli, BadInputExitsTwoAndWritesNothing) {
  const std::string html = unique_temp_path("compare_bad.html");
  std::remove(html.c_str());
  auto r = run_scaleplan("compare --predicted " + predicted_trace() +
                         " --measured /nonexistent/trace.json --html " + html);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--measured: /nonexistent/trace.json"), std::string::npos) << r.err;
  EXPECT_EQ(std::fopen(html.c_str(), "r"), nullptr);
  r = run_scaleplan("compare --predicted " + kKineto + "hta_resnet_ddp/rank-0.json.gz --measured " +
                    kKineto + "hta_sampled --html " + html);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a scaleplan trace"), std::string::npos) << r.err;
  EXPECT_EQ(std::fopen(html.c_str(), "r"), nullptr);
}

// The pages are one file each: nothing is fetched from anywhere.
void expect_self_contained(const std::string& html) {
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* bad : {"http://", "https://", " src=", "<link", "@import", "url(http"})
    EXPECT_EQ(html.find(bad), std::string::npos) << bad;
}

TEST(CompareCli, HtmlReportsAreSelfContained) {
  const std::string html = unique_temp_path("compare.html");
  auto r = run_scaleplan("compare --predicted " + predicted_trace() + " --measured " + kKineto +
                         "hta_sampled --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_self_contained(slurp(html));
  std::remove(html.c_str());
  const std::string plan = unique_temp_path("plan.html");
  r = run_scaleplan(
      "plan --model llama-tiny --cluster dgx-h100 --gpus 8 --seq 1024 --gbs 32 --top 3 --html " +
      plan);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  expect_self_contained(slurp(plan));
  std::remove(plan.c_str());
}

}  // namespace
