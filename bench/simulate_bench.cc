// Wall time of one `simulate` (build the program, run the engine, summarize) for Llama 3.1 405B on
// 16,384 H100 GPUs: tp=8, pp=16, interleaved 1F1B, seq 8192, gbs 2048 (the scale of Meta's Llama 3
// pre-training, Dubey et al. 2024 Table 4). Model and cluster are loaded once outside the loop.
#include <benchmark/benchmark.h>

#include "core/layout.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "sim/simulate.h"

namespace scaleplan::sim {
namespace {

void BM_Simulate405BOn16kGpus(benchmark::State& state) {
  auto model = models::load_model("llama3.1-405b");
  auto cluster = hw::load_cluster("dgx-h100");
  auto layout = parse_layout("tp=8,pp=16,schedule=interleaved,gbs=2048,mbs=1");
  if (!model || !cluster || !layout) {
    state.SkipWithError("cannot load the 405B model, the dgx-h100 profile or the layout");
    return;
  }
  SimulateOptions o{.gpus = 16384};
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
BENCHMARK(BM_Simulate405BOn16kGpus)->Unit(benchmark::kMillisecond)->MinTime(2.0)->UseRealTime();

}  // namespace
}  // namespace scaleplan::sim
