// Planner throughput: the whole `plan` search (enumerate, memory filter, bound, simulate, rank) for
// the benchmark case and the README's quick start, with the counts as counters:
//   candidates, fit, simulated, bounded (out by the lower bound), and simulated/s (simulations per
//   wall second of the search, on all cores of this machine);
// and the memory model per call, uncached (models::estimate_memory) and as the planner calls it
// (models::MemoryEstimator), over the 405B job's whole space.
// Run: build-plan/bench/plan_bench --benchmark_filter=Llama405B (one iteration; minutes on 2 cores)
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/model_evaluator.h"
#include "planner/planner.h"
#include "planner/search_space.h"
#include "planner/sweep.h"

namespace scaleplan::planner {
namespace {

void run_plan(benchmark::State& state, const char* model_name, int64_t gpus, int64_t seq,
              int64_t gbs, int64_t max_simulations) {
  auto model = models::load_model(model_name);
  auto cluster = hw::load_cluster("dgx-h100");
  const sim::Framework fw = sim::framework(FrameworkId::kMegatron);
  if (!model || !cluster) {
    state.SkipWithError("cannot load the model or the cluster");
    return;
  }
  const ModelEvaluator ev(*model, *cluster, seq, fw,
                          calibrate::kernel_cost_model_for(*cluster).value());
  PlanRequest req;
  req.search.model = models::layout_constraints(*model, seq);
  req.search.gpus = gpus;
  req.search.gbs = gbs;
  req.search.nvlink_domain_gpus = cluster->gpus_per_domain();
  req.max_simulations = max_simulations;
  PlanResult last;
  for (auto _ : state) {
    auto r = plan(req, ev);
    if (!r) {
      state.SkipWithError(r.status().message().c_str());
      return;
    }
    last = std::move(r).value();
  }
  state.counters["candidates"] = static_cast<double>(last.candidates);
  state.counters["fit"] = static_cast<double>(last.fit);
  state.counters["simulated"] = static_cast<double>(last.simulated);
  state.counters["bounded"] = static_cast<double>(last.bounded);
  state.counters["search_s"] = last.search_s;
  state.counters["simulated_per_s"] =
      last.search_s > 0 ? static_cast<double>(last.simulated) / last.search_s : 0;
  state.counters["threads"] = last.threads;
}

// The case: Llama-3.1-405B on 16,384 H100s, seq 8192, gbs 2048, full space, exact search.
void BM_PlanLlama405B(benchmark::State& state) {
  run_plan(state, "llama3.1-405b", 16384, 8192, 2048, 0);
}
BENCHMARK(BM_PlanLlama405B)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// The README's quick start (`plan --model llama3-8b --gpus 64 --seq 4096 --gbs 256`).
void BM_PlanLlama8B_64(benchmark::State& state) { run_plan(state, "llama3-8b", 64, 4096, 256, 0); }
BENCHMARK(BM_PlanLlama8B_64)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// The sweep of issue 32's target: Llama-3-70B at seq 8192, gbs 512, over 256..4096 H100s (5
// points), best layout per point, one evaluator for all; arg 0: one plan at 1024 GPUs with plan's
// default top 5 (no "how sure": the CLI adds it), arg 1: the 5-point sweep. Counters: search_s.
void BM_SweepLlama70B(benchmark::State& state) {
  auto model = models::load_model("llama3-70b");
  auto cluster = hw::load_cluster("dgx-h100");
  if (!model || !cluster) {
    state.SkipWithError("cannot load the model or the cluster");
    return;
  }
  const ModelEvaluator ev(*model, *cluster, 8192, sim::framework(FrameworkId::kMegatron),
                          calibrate::kernel_cost_model_for(*cluster).value());
  PlanRequest base;
  base.search.model = models::layout_constraints(*model, 8192);
  base.search.nvlink_domain_gpus = cluster->gpus_per_domain();
  int64_t points = 0;
  for (auto _ : state) {
    if (state.range(0) == 0) {
      PlanRequest req = base;
      req.search.gpus = 1024;
      req.search.gbs = 512;
      auto r = plan(req, ev);
      if (!r) return state.SkipWithError(r.status().message().c_str());
      points = 1;
    } else {
      SweepRequest req{.plan = base, .gpus = {256, 512, 1024, 2048, 4096}, .gbs = 512};
      req.plan.top_k = 1;
      auto r = sweep(req, ev);
      if (!r) return state.SkipWithError(r.status().message().c_str());
      points = static_cast<int64_t>(r->points.size());
    }
  }
  state.counters["points"] = static_cast<double>(points);
}
BENCHMARK(BM_SweepLlama70B)->Arg(0)->Arg(1)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// The memory model on every layout of the 405B job's space; arg 0: estimate_memory (rebuilds the
// tensor table and the operator lists per call), arg 1: the planner's MemoryEstimator (caches).
void BM_MemoryModel405B(benchmark::State& state) {
  auto model = models::load_model("llama3.1-405b");
  if (!model) {
    state.SkipWithError("cannot load the model");
    return;
  }
  SearchOptions so;
  so.model = models::layout_constraints(*model, 8192);
  so.gpus = 16384;
  so.gbs = 2048;
  auto space = enumerate_layouts(so);
  if (!space) {
    state.SkipWithError(space.status().message().c_str());
    return;
  }
  std::vector<Layout> layouts = space->candidates;
  if (state.range(0) == 0) layouts.resize(std::min<size_t>(layouts.size(), 2000));
  models::MemoryOptions opt;
  opt.framework = models::framework_memory(FrameworkId::kMegatron);
  opt.gpu_memory = 80_GiB;
  int64_t calls = 0;
  for (auto _ : state) {
    const models::MemoryEstimator est(*model, 8192, opt);  // caches start cold every iteration
    for (const Layout& l : layouts) {
      auto r =
          state.range(0) == 0 ? models::estimate_memory(*model, l, 8192, opt) : est.estimate(l);
      benchmark::DoNotOptimize(r);
    }
    calls += static_cast<int64_t>(layouts.size());
  }
  state.counters["us_per_call"] = benchmark::Counter(
      static_cast<double>(calls) / 1e6, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_MemoryModel405B)
    ->Arg(0)
    ->Arg(1)
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
}  // namespace scaleplan::planner
