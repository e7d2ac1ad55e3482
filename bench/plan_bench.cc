// Planner throughput: the whole `plan` search (enumerate, memory filter, simulate, rank) for the
// issue's benchmark case and a small one, with the counts as counters:
//   candidates, fit, simulated, and simulated/s (simulations per wall second of the search, on all
//   cores of this machine).
// Run: build-plan/bench/plan_bench --benchmark_filter=Llama405B (one iteration; minutes on 2 cores)
#include <benchmark/benchmark.h>

#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/model_evaluator.h"
#include "planner/planner.h"

namespace scaleplan::planner {
namespace {

void run_plan(benchmark::State& state, const char* model_name, int64_t gpus, int64_t seq,
              int64_t gbs, int64_t max_simulations) {
  auto model = models::load_model(model_name);
  auto cluster = hw::load_cluster("dgx-h100");
  auto fw = models::framework_memory("megatron");
  if (!model || !cluster || !fw) {
    state.SkipWithError("cannot load the model or the cluster");
    return;
  }
  const ModelEvaluator ev(*model, *cluster, seq, *fw);
  PlanRequest req;
  req.search.model = models::layout_constraints(*model, seq);
  req.search.gpus = gpus;
  req.search.gbs = gbs;
  req.search.gpus_per_node = cluster->gpus_per_node;
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
  state.counters["search_s"] = last.search_s;
  state.counters["simulated_per_s"] =
      last.search_s > 0 ? static_cast<double>(last.simulated) / last.search_s : 0;
  state.counters["threads"] = last.threads;
}

// The case: Llama-3.1-405B on 16,384 H100s, seq 8192, gbs 2048, full space, default budget.
void BM_PlanLlama405B(benchmark::State& state) {
  run_plan(state, "llama3.1-405b", 16384, 8192, 2048, 2000);
}
BENCHMARK(BM_PlanLlama405B)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

// A small case that simulates every fitting layout.
void BM_PlanLlama8B_64(benchmark::State& state) {
  run_plan(state, "llama3-8b", 64, 4096, 256, 0);
}
BENCHMARK(BM_PlanLlama8B_64)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace scaleplan::planner
