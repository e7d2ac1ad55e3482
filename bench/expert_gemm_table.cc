// Expert GEMMs measured on one H200 against the simulator's time for the same GEMMs (issue 43).
//
//   expert_gemm_table [DATA_DIR]     DATA_DIR: a scaleplan checkout (default: this source tree)
//
// Reads docs/measured/h200-2026-11-30/call1_moe_gemm.json (examples/torch_reference/moe_gemm.py:
// forward fc1 and fc2, torch._grouped_mm, one torch.mm per expert on one stream, one dense GEMM
// of the same FLOPs) and callS_moe_gemm_streams.json (callS_moe_gemm_streams_compact.py: forward,
// input and weight gradient, and the 4-stream launch pattern of Transformer Engine's
// multi_stream_cublas_gemm, eager and captured in a CUDA graph). For each case it times the rank's
// expert GEMMs as the simulator builds them (expert_gemm_table.h) with the bundled hgx-h200
// kernel model. Each is printed against its measurement (simulated / measured time: < 1 is the
// simulation faster), at the kernel model's own clocks and at the median SM clock of the
// measurement's busy samples (power > 200 W) from the same call's nvidia-smi trace.
// docs/simulator.md
// ("Expert GEMMs measured on an H200") records the output.
#include "bench/expert_gemm_table.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"

namespace {

using namespace scaleplan;
using namespace scaleplan::expert_gemms;
using nlohmann::json;

struct Models {
  std::shared_ptr<const calibrate::KernelCostModel> own;  // the figures at their own clocks
  std::shared_ptr<const calibrate::KernelCostModel> at;   // at the measurement's median clock
};

struct Ratios {
  std::map<std::string, std::vector<double>> by_key;
  void add(const std::string& key, double sim, double meas) {
    if (sim > 0 && meas > 0) by_key[key].push_back(sim / meas);
  }
  void print(const char* title) const {
    std::printf("%s\n  %-38s %4s %7s %7s %7s\n", title, "simulated / measured", "n", "median",
                "min", "max");
    for (const auto& [k, v] : by_key)
      std::printf("  %-38s %4zu %7.3f %7.3f %7.3f\n", k.c_str(), v.size(), median(v),
                  *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  }
};

int run(const std::string& dir) {
  const std::string meas = dir + "/docs/measured/h200-2026-11-30/";
  auto cluster = hw::load_cluster("hgx-h200");
  if (!cluster.is_ok()) {
    std::fprintf(stderr, "%s\n", cluster.status().message().c_str());
    return 1;
  }
  auto base = calibrate::kernel_cost_model_for(*cluster);
  if (!base.is_ok()) return 1;
  std::shared_ptr<const calibrate::KernelCostModel> own(std::move(*base));
  // The moe_gemm.py step of call 1 ran from 00:25:03 to 00:25:25 (call1_log.txt's headers).
  const double clock1 = busy_clock_hz(meas + "call1_log.txt", "00:25:03", "00:25:25");
  const double clock4 = busy_clock_hz(meas + "callS_clocks.csv", "", "");
  const Models m1{own, own->at_sm_clock(clock1)}, m4{own, own->at_sm_clock(clock4)};
  if (!m1.at || !m4.at) {
    std::fprintf(stderr, "hgx-h200: no SM clock model or no busy clock sample\n");
    return 1;
  }
  std::printf("hgx-h200 kernel model: %s\nmedian busy SM clock: call 1 %.0f MHz, call S %.0f MHz\n",
              own->describe().c_str(), clock1 / 1e6, clock4 / 1e6);

  // Call 1: forward only, balanced and routed (the simulator sees every expert at the nominal
  // rows per expert; a routed case's busiest expert holds more).
  std::ifstream f1(meas + "call1_moe_gemm.json");
  const json c1 = json::parse(f1);
  Ratios r1, r1c;
  std::printf(
      "\ncall 1 (forward; us; sim/meas at the model's clocks)\n%-14s %3s %5s %-8s %-3s "
      "%8s %8s %8s | %6s %6s %6s\n",
      "model", "E", "rows", "routing", "gem", "grouped", "loop", "dense", "tt/gr", "loop", "dense");
  for (const json& c : c1["cases"]) {
    const std::string model = c["model"];
    const int64_t e = c["local_experts"], rows = c["tokens_per_expert"];
    const std::string routing = c["routing"];
    for (const char* g : {"fc1", "fc2"}) {
      const json& x = c[g];
      auto s = simulated(model, e, rows, g, "fwd", *m1.own);
      auto sc = simulated(model, e, rows, g, "fwd", *m1.at);
      if (!s.is_ok() || !sc.is_ok()) {
        std::fprintf(stderr, "%s\n", s.status().message().c_str());
        return 1;
      }
      const double gr = x.value("grouped_s", 0.0), lo = x["loop_s"], de = x["dense_s"];
      const std::string regime = rows < 1024 ? "rows<1024" : "rows>=1024";
      for (auto* r : {&r1, &r1c}) {
        const Simulated& t = r == &r1 ? *s : *sc;
        r->add(routing + " grouped/torchtitan " + regime, t.torchtitan, gr);
        r->add(routing + " loop(1 stream) " + regime, t.loop, lo);
        r->add(routing + " dense " + regime, t.dense, de);
      }
      std::printf("%-14s %3lld %5lld %-8s %-3s %8.1f %8.1f %8.1f | %6.2f %6.2f %6.2f\n",
                  model.c_str(), static_cast<long long>(e), static_cast<long long>(rows),
                  routing.c_str(), g, gr * 1e6, lo * 1e6, de * 1e6, s->torchtitan / gr,
                  s->loop / lo, s->dense / de);
    }
  }
  r1.print("\ncall 1 summary, the model at its own clocks");
  r1c.print("call 1 summary, the model at the call's median busy clock");

  // Call S: forward, input and weight gradient; the 4-stream pattern Megatron-core's
  // TEGroupedMLP runs (graph: the GPU's time without the host's launches).
  std::ifstream f4(meas + "callS_moe_gemm_streams.json");
  const json c4 = json::parse(f4);
  Ratios r4, r4c;
  std::printf(
      "\ncall S (us; sim/meas at the model's clocks; mcore = Megatron-core's 4-stream "
      "rounds vs the graph-captured 4 streams)\n%-15s %3s %5s %-9s %8s %8s %8s %8s | "
      "%6s %6s %6s\n",
      "model", "E", "rows", "gemm", "graph4", "loop4", "grouped", "dense", "mcore", "tt/gr",
      "dense");
  for (const json& c : c4) {
    const std::string model = streams_presets().at(c["m"]), g = c["g"], p = c["p"];
    const int64_t e = c["E"], rows = c["r"];
    auto s = simulated(model, e, rows, g, p, *m4.own);
    auto sc = simulated(model, e, rows, g, p, *m4.at);
    if (!s.is_ok() || !sc.is_ok()) {
      std::fprintf(stderr, "%s\n", s.status().message().c_str());
      return 1;
    }
    const double g4 = c.value("graph4", 0.0), l4 = c["loop4"], gr = c.value("grouped", 0.0),
                 de = c["dense"], l1 = c["loop1"];
    const std::string regime = rows < 1024 ? "rows<1024" : "rows>=1024";
    for (auto* r : {&r4, &r4c}) {
      const Simulated& t = r == &r4 ? *s : *sc;
      r->add("mcore/graph4 " + regime, t.megatron, g4);
      r->add("mcore/loop4 (eager) " + regime, t.megatron, l4);
      r->add("one grouped kernel/graph4 " + regime, t.torchtitan, g4);
      r->add("loop(1 stream) " + regime, t.loop, l1);
      r->add("grouped/torchtitan " + regime, t.torchtitan, gr);
      r->add("dense " + regime, t.dense, de);
    }
    char grouped[2][16] = {"       -", "     -"};  // torch._grouped_mm: forward only
    if (gr > 0) {
      std::snprintf(grouped[0], sizeof grouped[0], "%8.1f", gr * 1e6);
      std::snprintf(grouped[1], sizeof grouped[1], "%6.2f", s->torchtitan / gr);
    }
    std::printf("%-15s %3lld %5lld %-9s %8.1f %8.1f %s %8.1f | %6.2f %s %6.2f\n", model.c_str(),
                static_cast<long long>(e), static_cast<long long>(rows), (g + "." + p).c_str(),
                g4 * 1e6, l4 * 1e6, grouped[0], de * 1e6, s->megatron / g4, grouped[1],
                s->dense / de);
  }
  r4.print("\ncall S summary, the model at its own clocks");
  r4c.print("call S summary, the model at the call's median busy clock");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc > 1 ? argv[1] : SCALEPLAN_SOURCE_DIR); }
