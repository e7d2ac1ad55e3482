// `scaleplan refit` end to end on the host: a quick host profile, `run --trace` of two tiny
// layouts, the refit, and the refitted profile simulating. Expectations are properties, not
// numbers: refitting with the machine's own measurements does not make the held-out error worse,
// and refitting with the profile's own predictions (a simulate trace under that profile) finds
// them exact under the old model and changes the model by no more than its own fitting noise.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/cli/cli_runner.h"

namespace {

using nlohmann::json;
using scaleplan::testing::run_scaleplan;
using scaleplan::testing::RunResult;
using scaleplan::testing::unique_temp_path;

// A quick host profile of this machine (about 4 s), once per test process.
const std::string& host_profile() {
  static const std::string path = [] {
    const std::string p = unique_temp_path("refit_host_profile.json");
    const RunResult r = run_scaleplan("profile --backend host --quick --out " + p);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return p;
  }();
  return path;
}

json median_errors(const json& refit) {
  json by_kind = json::object();
  for (const json& e : refit["errors"]) by_kind[e["kind"].get<std::string>()] = e;
  return by_kind;
}

// Its profile and its runs time this machine's kernels, so it is a Timed suite (ctest label
// `timed`, run alone): under `ctest -j2` another test's load between the profile and the runs made
// the held-out error of the refit worse than the old one once in a few runs.
TEST(RefitTimed, HostMeasurementsDoNotWorsenTheHeldOutErrorAndTheProfileLoads) {
  const std::string m1 = unique_temp_path("refit_m1.json"), m2 = unique_temp_path("refit_m2.json");
  const std::string out = unique_temp_path("refit_p2.json");
  const std::string common = " --cluster dgx-h100 --warmup 1 --steps 1 --timeout 60 -q --trace ";
  ASSERT_EQ(run_scaleplan("run --model llama-tiny --layout tp=2,pp=2,gbs=4 --seq 64" + common + m1)
                .exit_code,
            0);
  ASSERT_EQ(
      run_scaleplan("run --model llama-tiny --layout dp=2,gbs=4 --seq 128" + common + m2).exit_code,
      0);
  const RunResult r = run_scaleplan("refit --profile " + host_profile() + " --measured " + m1 +
                                    " " + m2 + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["generator"], "scaleplan run");
  EXPECT_GT(j["fitted_shapes"].get<int>(), 0);
  ASSERT_GT(j["held_out_shapes"].get<int>(), 0);
  const json errors = median_errors(j);
  ASSERT_TRUE(errors.contains("all")) << j.dump();
  EXPECT_EQ(errors["all"]["shapes"], j["held_out_shapes"]);
  // Within the measurement's own spread: the held-out shapes' timings scatter by their median
  // IQR / median (`noise_median`), and on this 2-core machine the refit's median error came out
  // 0.005-0.01 above the old one in about 1 run of 8 with the noise at that size or above it.
  EXPECT_LE(errors["all"]["new_median"].get<double>(),
            errors["all"]["old_median"].get<double>() + errors["all"]["noise_median"].get<double>())
      << j["errors"].dump();
  // The refitted profile is a profile: simulate runs with it, on its fitted kernel model.
  const RunResult s = run_scaleplan("simulate --model llama-tiny --cluster " + out +
                                    " --seq 64 --layout tp=2,pp=2,gbs=4 --json");
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(json::parse(s.out)["kernel_model"].get<std::string>().rfind("fitted", 0), 0u);
  // The text output names the old and the new error.
  const RunResult text =
      run_scaleplan("refit --profile " + host_profile() + " --measured " + m1 + " --out " + out);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("held-out error"), std::string::npos) << text.out;
  for (const std::string& p : {m1, m2, out}) std::remove(p.c_str());
}

// A simulate trace under the profile holds the profile's own predictions (one rank, no
// communication: no overlap slowdown). The old model's error on them is the trace's rounding
// (durations print to the picosecond); the refit adds points lying on the old model, so its
// error on held-out shapes stays within the old fit's own cross-validated error.
TEST(RefitCli, OwnPredictionsChangeNothingMaterial) {
  const std::string sim = unique_temp_path("refit_sim.json");
  const std::string out = unique_temp_path("refit_self.json");
  ASSERT_EQ(run_scaleplan("simulate --model llama-tiny --cluster " + host_profile() +
                          " --seq 128 --layout dp=1,gbs=2 --trace " + sim)
                .exit_code,
            0);
  const RunResult r = run_scaleplan("refit --profile " + host_profile() + " --measured " + sim +
                                    " --out " + out + " --holdout 0.5 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["generator"], "scaleplan simulate");
  std::ifstream pf(host_profile());
  const json cal = json::parse(pf)["calibration"];
  const std::map<std::string, std::string> model = {{"gemm", "gemm"},
                                                    {"attention_fwd", "attention_forward"},
                                                    {"attention_bwd", "attention_backward"},
                                                    {"memory_bound", "memory_bound"}};
  int kinds = 0;
  for (const json& e : j["errors"]) {
    EXPECT_LT(e["old_median"].get<double>(), 1e-4) << e.dump();
    if (e["kind"] == "all") continue;
    const json& fit = cal[model.at(e["kind"].get<std::string>())];
    if (fit["cv_error"]["n"].get<int>() == 0) continue;  // too few samples to cross-validate
    EXPECT_LE(e["new_median"].get<double>(), fit["cv_error"]["median"].get<double>()) << e.dump();
    ++kinds;
  }
  EXPECT_GT(kinds, 0) << j.dump();
  std::remove(sim.c_str());
  std::remove(out.c_str());
}

TEST(RefitCli, BadInputExitsTwoWithoutAnOutputFile) {
  const std::string out = unique_temp_path("refit_bad.json");
  const std::string sim = unique_temp_path("refit_bad_sim.json");
  ASSERT_EQ(run_scaleplan("simulate --model llama-tiny --cluster " + host_profile() +
                          " --seq 64 --layout dp=1,gbs=1 --trace " + sim)
                .exit_code,
            0);
  struct Case {
    std::string args, message;
  };
  const std::string kineto =
      std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/kineto/hta_sampled/rank-0.json.gz";
  const Case cases[] = {
      {"--profile " + host_profile() + " --measured " + sim + " --holdout 1.5", "--holdout"},
      {"--profile " + host_profile() + " --measured /nonexistent/m.json", "/nonexistent/m.json"},
      {"--profile " + host_profile() + " --measured " + host_profile(), "traceEvents: missing"},
      // A PyTorch profiler trace with shapes whose GEMMs are all fp32 (a recommendation model on
      // A100s, no autocast): nothing refit has a model for.
      {"--profile " + host_profile() + " --measured " + kineto,
       "no compute op with a kernel shape"},
      {"--profile no-such-cluster --measured " + sim, "--profile"},
  };
  for (const Case& c : cases) {
    const RunResult r = run_scaleplan("refit " + c.args + " --out " + out);
    EXPECT_EQ(r.exit_code, 2) << c.args << "\n" << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << c.args << "\n" << r.err;
    std::ifstream f(out);
    EXPECT_FALSE(f.good()) << c.args;
  }
  std::remove(sim.c_str());
}

// A PyTorch profiler trace with shapes, made by arithmetic: GEMMs of 24 shapes, each timed
// 4 µs + FLOPs / 500 TFLOP/s (a constant and the FLOPs are both features of the GEMM model,
// calibrate/features.cc, so the fit can recover it exactly). Refitting the bundled roofline
// profile hgx-h200 with it must take the held-out shapes' error from the roofline's (which times
// these at its own peak and efficiency, not 500 TFLOP/s) to about zero; with GEMMs alone the
// attention and memory-bound models keep the roofline, and the output says so for each.
TEST(RefitCli, KinetoTraceWithShapesRefitsTheRooflineProfile) {
  json events = json::array();
  int64_t ext = 1;
  double ts = 0;
  for (const int64_t m : {1024, 2048, 4096, 8192})
    for (const int64_t n : {1024, 4096, 14336})
      for (const int64_t k : {1024, 4096}) {
        const double us = 4.0 + 2.0 * m * n * k / 500e12 * 1e6;
        events.push_back({{"ph", "X"},
                          {"cat", "cpu_op"},
                          {"name", "aten::mm"},
                          {"pid", 1},
                          {"tid", 1},
                          {"ts", ts},
                          {"dur", 1.0},
                          {"args",
                           {{"External id", ext},
                            {"Input type", {"c10::BFloat16", "c10::BFloat16"}},
                            {"Input Dims", {{m, k}, {k, n}}}}}});
        events.push_back({{"ph", "X"},
                          {"cat", "kernel"},
                          {"name", "sm90_xmma_gemm"},
                          {"pid", 0},
                          {"tid", 7},
                          {"ts", ts + 2},
                          {"dur", us},
                          {"args", {{"External id", ext}, {"stream", 7}}}});
        ++ext;
        ts += 10 + us;
      }
  const std::string trace = unique_temp_path("refit_kineto.json");
  const std::string out = unique_temp_path("refit_kineto_p2.json");
  std::ofstream(trace) << json{{"schemaVersion", 1}, {"traceEvents", events}}.dump();
  const RunResult r = run_scaleplan("refit --profile hgx-h200 --measured " + trace + " --out " +
                                    out + " --holdout 0.3 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["generator"], "pytorch profiler");
  EXPECT_EQ(j["old_model"], "roofline");
  EXPECT_EQ(j["measured_ops"], 24);
  EXPECT_EQ(j["fitted_shapes"].get<int>() + j["held_out_shapes"].get<int>(), 24);
  const json errors = median_errors(j);
  ASSERT_TRUE(errors.contains("gemm")) << j.dump();
  EXPECT_LT(errors["gemm"]["new_median"].get<double>(), 0.01) << j.dump();
  EXPECT_GT(errors["gemm"]["old_median"].get<double>(),
            10 * errors["gemm"]["new_median"].get<double>())
      << j.dump();
  EXPECT_TRUE(j["written"].get<bool>()) << j["not_written"];
  std::map<std::string, std::string> source;
  for (const json& m : j["models"]) source[m["model"]] = m["source"];
  EXPECT_EQ(source["gemm"], "fitted");
  for (const char* kind : {"attention_forward", "attention_backward", "memory_bound"})
    EXPECT_EQ(source[kind], "roofline") << kind;
  EXPECT_TRUE(std::ifstream(out).good());
  std::remove(trace.c_str());
  std::remove(out.c_str());
}

// The check (issue 43): the measured H200 step (tests/data/kineto/README.md), refitted
// into the bundled roofline profile, must time the GEMM shapes it held out closer than the
// roofline did. Its one attention shape per pass is too few for a model of four coefficients, so
// attention stays with the roofline, on both sides of the report and in the profile written.
TEST(RefitCli, MeasuredH200StepLowersTheHeldOutGemmError) {
  const std::string trace =
      std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/kineto/h200_llama3_4l/rank-0.json.gz";
  const std::string out = unique_temp_path("refit_h200_p2.json");
  const RunResult r =
      run_scaleplan("refit --profile hgx-h200 --measured " + trace + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  // At least 4 layers x 7 GEMMs x (forward, dgrad, wgrad) x 4 micro-batches, the LM head's
  // 3 x 4, and SDPA forward and backward per layer and micro-batch; the elementwise ops besides.
  EXPECT_GT(j["measured_ops"].get<int>(), 4 * 7 * 3 * 4 + 3 * 4 + 2 * 4 * 4);
  const json errors = median_errors(j);
  ASSERT_TRUE(errors.contains("gemm")) << j.dump();
  EXPECT_LT(errors["gemm"]["new_median"].get<double>(), errors["gemm"]["old_median"].get<double>())
      << j.dump();
  for (const char* kind : {"attention_fwd", "attention_bwd"}) {
    if (!errors.contains(kind)) continue;
    EXPECT_EQ(errors[kind]["new_median"], errors[kind]["old_median"]) << kind;
  }
  EXPECT_TRUE(j["written"].get<bool>()) << j["not_written"];
  std::remove(out.c_str());
}

// issue 43, Done-when item 2: the second measured H200 step (tests/data/kineto/README.md,
// 2026-11-30) casts both ways, bf16 -> fp32 through PyTorch's dynamic-casting loop and fp32 ->
// bf16 through the vectorized copy (aten/src/ATen/native/cuda/Copy.cu). Read with their paths
// and fitted apart, the refit must time the memory-bound shapes it held out closer than the
// roofline (measured 2026-11-30 at the default --holdout 0.2, docs/validation.md: 8.9% -> 7.7%,
// 7.9% since session 14 keeps the roofline for the `add` curve; before paths were read the refit
// made them worse, 11.6% -> 15.2%), and the casting loop's curve must be the slower of the two
// (fitted and written, though since session 14 it keeps the roofline: docs/calibration.md).
TEST(RefitCli, MeasuredH200StepFitsTheCastPathsApartAndLowersTheMemoryBoundError) {
  const std::string trace = std::string(SCALEPLAN_SOURCE_DIR) +
                            "/tests/data/kineto/h200_llama3_4l_2026-11-30/rank-0.json.gz";
  const std::string out = unique_temp_path("refit_h200_paths.json");
  const RunResult r =
      run_scaleplan("refit --profile hgx-h200 --measured " + trace + " --out " + out + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json errors = median_errors(j);
  ASSERT_TRUE(errors.contains("memory_bound")) << j.dump();
  const json& mb = errors["memory_bound"];
  std::cout << "held-out memory-bound median error: roofline " << mb["old_median"] << ", refit "
            << mb["new_median"] << " (" << mb["shapes"] << " shapes)\n";
  EXPECT_LT(mb["new_median"].get<double>(), mb["old_median"].get<double>()) << j.dump();
  ASSERT_TRUE(errors.contains("gemm")) << j.dump();
  EXPECT_LT(errors["gemm"]["new_median"].get<double>(), errors["gemm"]["old_median"].get<double>());
  double vectorized = 0, cast_loop = 0;  // fitted bandwidths, GB/s
  for (const json& f : j["calibration"]["memory_families"]) {
    if (f["family"] == "cast") vectorized = f["bandwidth_GBps"].get<double>();
    if (f["family"] == "cast/cast_loop") cast_loop = f["bandwidth_GBps"].get<double>();
  }
  ASSERT_GT(cast_loop, 0) << j["calibration"]["memory_families"].dump();
  EXPECT_LT(cast_loop, vectorized) << j["calibration"]["memory_families"].dump();
}

// issue 43: one profiled step of a user's job calibrates a profile they can simulate with. The
// 2026-11-30 H200 step (tests/data/kineto/README.md), refitted into the bundled roofline
// profile, writes a profile
// - that keeps the roofline for attention, saying how many shapes the trace had (its own count
//   of the SDPA shapes, against the model's four coefficients),
// - that loads and simulates the step it came from (compare shows how close: docs/validation.md),
// - whose memory-bound curves time the held-out shapes no worse than the roofline at --holdout
//   0.3 and 0.5, where the refit of session 13 made them worse (11.9% and 12.0% against 8.5%
//   and 8.7%; docs/validation.md): each curve replaces the roofline only where, left one shape
//   out at a time, it predicts its own training shapes better by more than one standard error
//   and the shapes' timing spread (calibrate/refit.h).
TEST(RefitCli, OneH200StepWritesAProfileThatSimulatesAndKeepsTheRooflineWhereItMust) {
  const std::string dir = std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/kineto/";
  const std::string trace = dir + "h200_llama3_4l_2026-11-30/rank-0.json.gz";
  for (const char* holdout : {"0.3", "0.5"}) {
    SCOPED_TRACE(holdout);
    const std::string out = unique_temp_path(std::string("refit_h200_step_") + holdout + ".json");
    const RunResult r = run_scaleplan("refit --profile hgx-h200 --measured " + trace + " --out " +
                                      out + " --holdout " + holdout + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    ASSERT_TRUE(j["written"].get<bool>()) << j["not_written"];
    // The attention shapes in the fit: the written profile's measurements of each pass (the
    // held-out ones are stored too, marked), fewer than the model's four coefficients.
    std::ifstream written(out);
    const json profile = json::parse(written);
    std::map<std::string, int> fitted, held;
    for (const json& m : profile["calibration"]["measurements"]["kernels"])
      (m["holdout"].get<bool>() ? held : fitted)[m["kind"].get<std::string>()] += 1;
    const std::map<std::string, std::string> kinds = {{"attention_forward", "attention_fwd"},
                                                      {"attention_backward", "attention_bwd"}};
    std::map<std::string, json> models;
    for (const json& m : j["models"]) models[m["model"].get<std::string>()] = m;
    for (const auto& [model, kind] : kinds) {
      ASSERT_LT(fitted[kind], 4) << kind;
      EXPECT_EQ(models[model]["source"], "roofline") << models[model].dump();
      EXPECT_EQ(models[model]["shapes"].get<int>(), fitted[kind]) << models[model].dump();
      std::string reason =
          std::to_string(fitted[kind]) + (fitted[kind] == 1 ? " shape" : " shapes") + ", needs 4";
      if (held[kind] > 0) reason += " (" + std::to_string(held[kind]) + " held out)";
      EXPECT_EQ(models[model]["reason"], reason);
    }
    EXPECT_EQ(models["gemm"]["source"], "fitted");
    // Held-out memory-bound shapes: the refit no worse than the roofline.
    const json errors = median_errors(j);
    ASSERT_TRUE(errors.contains("memory_bound")) << j.dump();
    const json& mb = errors["memory_bound"];
    std::cout << "--holdout " << holdout << ": held-out memory-bound median error: roofline "
              << mb["old_median"] << ", refit " << mb["new_median"] << " (" << mb["shapes"]
              << " shapes)\n";
    EXPECT_LE(mb["new_median"].get<double>(), mb["old_median"].get<double>()) << j.dump();
    // The profile loads, and simulates the step it came from with its fitted GEMMs.
    const RunResult sim = run_scaleplan(
        "simulate --model " + dir + "h200_llama3_4l/llama3-8b-4l.json --cluster " + out +
        " --seq 4096 --framework torchtitan --layout tp=1,pp=1,dp=1,mbs=1,gbs=4 --json");
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    const json s = json::parse(sim.out);
    EXPECT_NE(s["kernel_model"].get<std::string>().find("fitted("), std::string::npos)
        << s["kernel_model"];
    EXPECT_GT(s["iteration_s"].get<double>(), 0);
    std::remove(out.c_str());
  }
}

// issue 43: a refit of an already-calibrated profile (its own H200 sweeps plus one profiled step)
// chooses each memory-bound curve and the family-blind model against the profile's own model by
// the rule a roofline profile's refit uses against the roofline (calibrate/refit.h), so it keeps
// the profile's model wherever the fit is not better, and the held-out memory-bound shapes are
// timed no worse than before. Before this rule the refit replaced every curve and, at the default
// --holdout 0.2, timed them 9.7% off against the profile's 5.7% (docs/validation.md): SwiGLU's
// curve refitted on the profile's fused sweeps and the trace's eager `silu` and `mul`. A family
// the trace does not read (RMSNorm) keeps the profile's curve and says so.
TEST(RefitCli, ACalibratedProfileKeepsItsOwnMemoryModelsWhereTheRefitIsNotBetter) {
  const std::string dir = std::string(SCALEPLAN_SOURCE_DIR) + "/";
  const std::string profile = dir + "hw_profiles/measured/h200-2026-11-30-cuda-quick.json";
  const std::string trace = dir + "tests/data/kineto/h200_llama3_4l_2026-11-30/rank-0.json.gz";
  for (const char* holdout : {"0.2", "0.5"}) {
    SCOPED_TRACE(holdout);
    const std::string out = unique_temp_path(std::string("refit_calibrated_") + holdout + ".json");
    const RunResult r = run_scaleplan("refit --profile " + profile + " --measured " + trace +
                                      " --out " + out + " --holdout " + holdout + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json j = json::parse(r.out);
    EXPECT_EQ(j["old_model"], "fitted");
    EXPECT_TRUE(j["written"].get<bool>()) << j["not_written"];
    const json errors = median_errors(j);
    ASSERT_TRUE(errors.contains("memory_bound")) << j.dump();
    const json& mb = errors["memory_bound"];
    std::cout << "--holdout " << holdout << ": held-out memory-bound median error: profile "
              << mb["old_median"] << ", refit " << mb["new_median"] << " (" << mb["shapes"]
              << " shapes)\n";
    EXPECT_LE(mb["new_median"].get<double>(), mb["old_median"].get<double>()) << j.dump();
    std::map<std::string, json> models;
    for (const json& m : j["models"]) models[m["model"].get<std::string>()] = m;
    const json& rmsnorm = models["memory_families: rmsnorm"];
    EXPECT_EQ(rmsnorm["source"], "old") << rmsnorm.dump();
    EXPECT_EQ(rmsnorm["reason"], "no measured shape to fit") << rmsnorm.dump();
    // Every model the refit kept says whose it kept; a calibrated profile marks no roofline.
    int kept_profiles = 0;
    for (const json& k : j["kept"]) {
      const std::string line = k.get<std::string>();
      EXPECT_NE(line.find(": kept the profile's: "), std::string::npos) << line;
      kept_profiles += line.find("memory_families: ") == 0 ? 1 : 0;
    }
    EXPECT_GT(kept_profiles, 0) << j["kept"].dump();
    std::remove(out.c_str());
  }
}

}  // namespace
