// The search-safety test (issue 45, docs/planner.md "Exact pruning"): on seeded problems the pruned
// search returns the same ranked plans, layout and time, as simulating every layout that fits.
// The problems and the check are in search_safety.h; bench/search_safety_bench.cc runs a larger
// set. A difference is a bug in the bound or the driver, to be fixed, never a problem to drop.
#include "search_safety.h"

#include <gtest/gtest.h>

#include <set>

namespace scaleplan::planner::safety {
namespace {

// The CI set: 42 seeds (14 of each model kind), under a minute on 2 cores beside the suite.
constexpr uint64_t kFirstSeed = 1;
constexpr uint64_t kSeeds = 42;

TEST(SearchSafety, PrunedSearchRanksAsSimulatingEveryFittingLayout) {
  int compared = 0, with_emit = 0, two_chunk = 0;
  std::set<std::string> kinds;
  std::set<int64_t> gpus;
  int64_t simulated_pruned = 0, simulated_all = 0;
  for (uint64_t seed = kFirstSeed; seed < kFirstSeed + kSeeds; ++seed) {
    const Problem p = make_problem(seed);
    if (std::getenv("SCALEPLAN_SAFETY_LIST")) {  // the problems only, for a look at the set
      std::printf("%s\n", p.describe().c_str());
      continue;
    }
    auto o = check(p, /*threads=*/2);
    ASSERT_TRUE(o.is_ok()) << p.describe() << ": " << o.status().message();
    EXPECT_TRUE(o->same) << p.describe() << ": " << o->difference;
    std::printf("%s: %lld candidates, %lld fit, simulated %lld pruned (%.2f s) and %lld all "
                "(%.2f s)\n",
                p.describe().c_str(), static_cast<long long>(o->candidates),
                static_cast<long long>(o->fit), static_cast<long long>(o->simulated_pruned),
                o->pruned_s, static_cast<long long>(o->simulated_exhaustive), o->exhaustive_s);
    std::fflush(stdout);
    if (o->fit == 0) continue;  // nothing to rank: counted as a problem only when something fits
    ++compared;
    kinds.insert(p.kind);
    gpus.insert(p.gpus);
    if (p.emit) ++with_emit;
    for (const auto& f : p.fixes)
      if (f.find("dualpipe") != std::string::npos || f.find("zb-v") != std::string::npos)
        ++two_chunk;
    simulated_pruned += o->simulated_pruned;
    simulated_all += o->simulated_exhaustive;
  }
  // The coverage: at least 30 problems where layouts fit, dense and MoE, with and without
  // an export target, the two-chunk schedules as well as the default space, 8 to 512 GPUs.
  EXPECT_GE(compared, 30);
  EXPECT_EQ(kinds.size(), 3u);
  EXPECT_GE(with_emit, 5);
  EXPECT_GE(compared - with_emit, 5);
  EXPECT_GE(two_chunk, 5);
  EXPECT_EQ(*gpus.begin(), 8);
  EXPECT_EQ(*gpus.rbegin(), 512);
  // The pruning does something: far fewer simulations than the exhaustive side.
  EXPECT_LT(simulated_pruned * 2, simulated_all);
  std::printf("search safety: %d problems, %lld simulated pruned, %lld exhaustive\n", compared,
              static_cast<long long>(simulated_pruned), static_cast<long long>(simulated_all));
}

// The driver's own part: a bound above a simulated time must change the answer, so that the test
// above can fail. An evaluator whose bound is the simulated time plus a second on one layout (the
// exhaustive best) makes the pruned search skip it.
class LyingBound : public Evaluator {
 public:
  LyingBound(const Evaluator& inner, std::string liar) : inner_(inner), liar_(std::move(liar)) {}
  Result<MemoryVerdict> memory(const Layout& l) const override { return inner_.memory(l); }
  Result<Prediction> simulate(const Layout& l) const override { return inner_.simulate(l); }
  Result<Duration> iteration_lower_bound(const Layout& l) const override {
    if (format_layout(l) != liar_) return inner_.iteration_lower_bound(l);
    SP_ASSIGN_OR_RETURN(Prediction p, inner_.simulate(l));
    return p.iteration + Duration::seconds(1);
  }

 private:
  const Evaluator& inner_;
  std::string liar_;
};

TEST(SearchSafety, ABoundAboveTheSimulationLosesThePlan) {
  auto model = models::load_model("llama-tiny");
  auto cluster = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(model && cluster);
  const ModelEvaluator ev(*model, *cluster, 1024, sim::framework(FrameworkId::kMegatron),
                          calibrate::kernel_cost_model_for(*cluster).value());
  PlanRequest req;
  req.search.model = models::layout_constraints(*model, 1024);
  req.search.gpus = 8;
  req.search.gbs = 16;
  req.top_k = 1;
  req.threads = 1;
  auto exact = plan(req, ev);
  ASSERT_TRUE(exact.is_ok() && !exact->plans.empty());
  const std::string best = format_layout(exact->plans[0].layout);
  const LyingBound liar(ev, best);
  auto lost = plan(req, liar);
  ASSERT_TRUE(lost.is_ok() && !lost->plans.empty());
  EXPECT_NE(format_layout(lost->plans[0].layout), best);
}

}  // namespace
}  // namespace scaleplan::planner::safety
