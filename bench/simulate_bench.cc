// Wall time of one `simulate` (build the program, run the engine, summarize) for Llama 3.1 405B on
// 16,384 H100 GPUs, seq 8192, gbs 2048 (the scale of Meta's Llama 3 pre-training, Dubey et al. 2024
// Table 4). Model, cluster and the placement (when given) are prepared once outside the loop.
//   BM_Simulate405BOn16kGpus        tp=8, pp=16, interleaved 1F1B: the simulate case;
//   BM_Simulate405BPlanBest/given   tp=2, pp=64, cp=8, ZB-H1, ZeRO-2: the best plan of the 405B
//                                   search, the kind of layout the planner simulates most; arg 1
//                                   gives simulate() the placement, as the planner can from its
//                                   per-grid cache (SimulateOptions::placement), arg 0 does not.
#include <benchmark/benchmark.h>

#include "core/layout.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/placement.h"
#include "models/model_spec.h"
#include "sim/simulate.h"

namespace scaleplan::sim {
namespace {

void run_simulate(benchmark::State& state, const char* layout_text, bool give_placement) {
  auto model = models::load_model("llama3.1-405b");
  auto cluster = hw::load_cluster("dgx-h100");
  auto layout = parse_layout(layout_text);
  if (!model || !cluster || !layout) {
    state.SkipWithError("cannot load the 405B model, the dgx-h100 profile or the layout");
    return;
  }
  SimulateOptions o{.gpus = 16384};
  Result<hw::LayoutPlacement> placement = hw::LayoutPlacement{};
  if (give_placement) {
    auto resolved = resolve_layout(*layout, models::layout_constraints(*model, 8192), o.gpus);
    if (resolved) placement = hw::place_layout(*resolved, *cluster);
    if (!resolved || !placement) {
      state.SkipWithError("cannot resolve or place the layout");
      return;
    }
    o.placement = &*placement;
  }
  double iteration = 0;
  size_t ops = 0;
  for (auto _ : state) {
    auto r = simulate(*model, *cluster, 8192, *layout, o);
    if (!r) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    iteration = r->iteration.to_seconds();
    ops = r->ops;
    benchmark::DoNotOptimize(r->mfu);
  }
  state.counters["simulated_iteration_s"] = iteration;
  state.counters["ops"] = static_cast<double>(ops);
}

void BM_Simulate405BOn16kGpus(benchmark::State& state) {
  run_simulate(state, "tp=8,pp=16,schedule=interleaved,gbs=2048,mbs=1", false);
}
BENCHMARK(BM_Simulate405BOn16kGpus)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

void BM_Simulate405BPlanBest(benchmark::State& state) {
  run_simulate(state, "tp=2,pp=64,dp=16,cp=8,schedule=zb-h1,zero=2,gbs=2048,mbs=1",
               state.range(0) != 0);
}
BENCHMARK(BM_Simulate405BPlanBest)
    ->ArgName("given")
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(2.0)
    ->UseRealTime();

}  // namespace
}  // namespace scaleplan::sim
