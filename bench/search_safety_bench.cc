// The search-safety check at a larger size than CI's (tests/planner/search_safety_test.cc): seeded
// problems (tests/planner/search_safety.h, its `large` distribution: up to 18 layers and 512 GPUs
// more often), each searched pruned and exhaustively; a difference fails the benchmark with the
// problem and the first differing plan. Counters: problems, compared (where a layout fits),
// differences, simulated by the pruned and by the exhaustive searches, and their wall seconds;
// one line per problem on stderr as it completes (the set takes hours on 2 cores).
// Run: build/bench/search_safety_bench --benchmark_filter=SearchSafety (arg: number of seeds, 40).
#include <benchmark/benchmark.h>

#include <cstdio>

#include "tests/planner/search_safety.h"

namespace scaleplan::planner::safety {
namespace {

void BM_SearchSafety(benchmark::State& state) {
  const uint64_t seeds = static_cast<uint64_t>(state.range(0));
  int64_t compared = 0, differences = 0, sim_pruned = 0, sim_all = 0;
  double s_pruned = 0, s_all = 0;
  for (auto _ : state) {
    for (uint64_t seed = 1000; seed < 1000 + seeds; ++seed) {
      const Problem p = make_problem(seed, /*large=*/true);
      auto o = check(p, /*threads=*/0);
      if (!o) {
        state.SkipWithError((p.describe() + ": " + o.status().message()).c_str());
        return;
      }
      if (!o->same) {
        ++differences;
        std::fprintf(stderr, "DIFFERENCE %s: %s\n", p.describe().c_str(), o->difference.c_str());
      }
      std::fprintf(stderr, "%s: %lld fit, simulated %lld pruned and %lld all%s\n",
                   p.describe().c_str(), static_cast<long long>(o->fit),
                   static_cast<long long>(o->simulated_pruned),
                   static_cast<long long>(o->simulated_exhaustive), o->same ? "" : ": DIFFERENT");
      if (o->fit > 0) ++compared;
      sim_pruned += o->simulated_pruned;
      sim_all += o->simulated_exhaustive;
      s_pruned += o->pruned_s;
      s_all += o->exhaustive_s;
    }
  }
  state.counters["problems"] = static_cast<double>(seeds);
  state.counters["compared"] = static_cast<double>(compared);
  state.counters["differences"] = static_cast<double>(differences);
  state.counters["simulated_pruned"] = static_cast<double>(sim_pruned);
  state.counters["simulated_exhaustive"] = static_cast<double>(sim_all);
  state.counters["pruned_s"] = s_pruned;
  state.counters["exhaustive_s"] = s_all;
  if (differences > 0) state.SkipWithError("the pruned search differs from the exhaustive one");
}
BENCHMARK(BM_SearchSafety)->Arg(40)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
}  // namespace scaleplan::planner::safety
