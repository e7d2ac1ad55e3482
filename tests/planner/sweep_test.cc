// Sweeps over GPU counts and the deadline search, with a fake evaluator whose throughput is a
// closed form of the GPU count, so that every expected answer is derived by hand (or by brute
// force over the same closed form), and the time and cost arithmetic of planner/training_cost.h.
#include "planner/sweep.h"

#include <gtest/gtest.h>

#include <cmath>

#include "planner/search_space.h"
#include "planner/training_cost.h"

namespace scaleplan::planner {
namespace {

// Every layout fits; the iteration of a job of G GPUs is that of perfect scaling at 1000
// tokens/s/GPU slowed by 1 + G/256 (a communication share that grows with the job), whatever
// the layout, so the best tokens/s/GPU at G GPUs is R(G) = 1000 / (1 + G/256). The total,
// G·R(G), still grows with G, so the time to train falls as GPUs are added.
class ScalingFake : public Evaluator {
 public:
  explicit ScalingFake(int64_t seq) : seq_(seq) {}
  static double rate(int64_t gpus) { return 1000.0 / (1 + static_cast<double>(gpus) / 256); }
  Result<MemoryVerdict> memory(const Layout&) const override {
    return MemoryVerdict{Bytes(1), 80_GiB};
  }
  Result<Prediction> simulate(const Layout& l) const override {
    const double tokens = static_cast<double>(l.global_batch()) * static_cast<double>(seq_);
    const int64_t g = l.gpus();
    Prediction p;
    p.iteration = Duration::seconds(tokens / (rate(g) * static_cast<double>(g)));
    p.tokens_per_s_per_gpu = tokens / (p.iteration.to_seconds() * static_cast<double>(g));
    p.breakdown.compute = p.iteration;
    return p;
  }

 private:
  int64_t seq_;
};

constexpr int64_t kSeq = 4096;

// One layout per GPU count: pure data parallelism at one sequence per micro-batch.
PlanRequest dp_only() {
  PlanRequest r;
  r.search.model = {.num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .seq_len = kSeq};
  for (const char* f : {"tp=1", "pp=1", "cp=1", "mbs=1", "zero=0", "recompute=none"})
    EXPECT_TRUE(r.search.fixes.add(f).is_ok()) << f;
  r.top_k = 1;
  r.threads = 2;
  return r;
}

TEST(GpuCounts, RangesDoubleByDefault) {
  EXPECT_EQ(*parse_gpu_counts("256:4096", "--gpus"),
            (std::vector<int64_t>{256, 512, 1024, 2048, 4096}));
  EXPECT_EQ(*parse_gpu_counts("1k:16k:x4", "--gpus"), (std::vector<int64_t>{1024, 4096, 16384}));
  EXPECT_EQ(*parse_gpu_counts("256:1024:+256", "--gpus"),
            (std::vector<int64_t>{256, 512, 768, 1024}));
  // The end is included only when the doubling reaches it.
  EXPECT_EQ(*parse_gpu_counts("24:100", "--gpus"), (std::vector<int64_t>{24, 48, 96}));
  EXPECT_EQ(*parse_gpu_counts("512,256,1024,256", "--gpus"),
            (std::vector<int64_t>{256, 512, 1024}));
  EXPECT_EQ(*parse_gpu_counts("64", "--gpus"), (std::vector<int64_t>{64}));
}

// Found by the sweep_args fuzz target's review: a factor or step near the count limit (2^62) used
// to be applied before the loop compared with the end, so 2 · 2^62 overflowed int64.
TEST(GpuCounts, AHugeFactorOrStepEndsTheRangeWithoutOverflow) {
  EXPECT_EQ(*parse_gpu_counts("2:4:x4611686018427387904", "--gpus"), (std::vector<int64_t>{2}));
  EXPECT_EQ(*parse_gpu_counts("3:1048576:+4611686018427387904", "--gpus"),
            (std::vector<int64_t>{3}));
  EXPECT_EQ(*parse_gpu_counts("1k:1M:x1024", "--gpus"), (std::vector<int64_t>{1024, 1048576}));
}

TEST(GpuCounts, BadRangesNameTheOptionAndTheText) {
  for (const char* bad : {"4096:256", "0:64", "256:4096:x1", "256:4096:3", "a:b", "8:1:2:3",
                          "256,,512", "1:2000000", "1:1024:+1"}) {
    auto r = parse_gpu_counts(bad, "--gpus");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--gpus"), std::string::npos) << r.status().message();
  }
  // 1:1024:+1 is 1024 points, beyond the bound.
  EXPECT_NE(parse_gpu_counts("1:1024:+1", "--gpus").status().message().find("64"),
            std::string::npos);
}

TEST(TrainingCost, FromThroughputGpusAndTokens) {
  // 15T tokens at 1000 tokens/s/GPU on 1024 GPUs: 15e12 / 1.024e6 = 14,648,437.5 s = 169.54 days;
  // GPU-hours = 15e12 / (1000 · 3600) = 4,166,666.7 whatever the GPU count; at 2.5 per GPU-hour,
  // 10,416,666.7.
  auto c = training_cost(1000, 1024, 15e12, 2.5);
  ASSERT_TRUE(c);
  EXPECT_DOUBLE_EQ(c->seconds, 15e12 / 1.024e6);
  EXPECT_DOUBLE_EQ(c->days, 15e12 / 1.024e6 / 86400);
  EXPECT_NEAR(c->gpu_hours, 15e12 / 3.6e6, 1e-6);
  EXPECT_NEAR(*c->cost, 2.5 * 15e12 / 3.6e6, 1e-5);
  EXPECT_FALSE(training_cost(1000, 1024, 15e12, std::nullopt)->cost);
  EXPECT_FALSE(training_cost(0, 1024, 15e12, 2.5));  // nothing fits: no throughput
  EXPECT_FALSE(training_cost(1000, 1024, 0, 2.5));   // no budget
}

TEST(TrainingCost, BudgetOptionsAreChecked) {
  EXPECT_EQ(*check_budget_options(15e12, "2.5"), 2.5);
  EXPECT_FALSE(check_budget_options(15e12, "").value());
  for (const char* bad : {"-1", "nan", "inf", "2.5$", "cheap"}) {
    auto r = check_budget_options(15e12, bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--gpu-hour-cost"), std::string::npos);
    EXPECT_NE(r.status().message().find(bad), std::string::npos) << r.status().message();
  }
  auto no_tokens = check_budget_options(0, "2.5");
  ASSERT_FALSE(no_tokens.is_ok());
  EXPECT_NE(no_tokens.status().message().find("--train-tokens"), std::string::npos);
}

TEST(TrainingCost, WallTimes) {
  EXPECT_EQ(*parse_wall_time("60d", "--deadline"), 60 * 86400.0);
  EXPECT_EQ(*parse_wall_time("1440h", "--deadline"), 60 * 86400.0);
  EXPECT_EQ(*parse_wall_time("2w", "--deadline"), 14 * 86400.0);
  EXPECT_EQ(*parse_wall_time("90m", "--deadline"), 5400.0);
  EXPECT_EQ(*parse_wall_time("1.5d", "--deadline"), 1.5 * 86400);
  for (const char* bad : {"60", "60y", "-1d", "0d", "d", "nand"}) {
    auto r = parse_wall_time(bad, "--deadline");
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--deadline: '" + std::string(bad) + "'"),
              std::string::npos)
        << r.status().message();
  }
  EXPECT_EQ(format_wall_time(60 * 86400.0), "60.0 days");
  EXPECT_EQ(format_wall_time(5 * 3600.0), "5.0 hours");
}

TEST(Sweep, EachPointIsTheBestPlanAtItsCount) {
  const ScalingFake fake(kSeq);
  SweepRequest req;
  req.plan = dp_only();
  req.gpus = {8, 16, 32};
  req.gbs = 64;
  req.budget.train_tokens = 1e12;
  req.budget.gpu_hour_cost = 2;
  size_t calls = 0;
  req.on_point = [&](const SweepPoint& p, size_t i, size_t n) {
    EXPECT_EQ(p.gpus, req.gpus[i]);
    EXPECT_EQ(n, 3u);
    ++calls;
  };
  auto r = sweep(req, fake);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->points.size(), 3u);
  EXPECT_EQ(calls, 3u);
  for (const SweepPoint& p : r->points) {
    ASSERT_EQ(p.result.plans.size(), 1u);
    EXPECT_EQ(p.gbs, 64);
    EXPECT_EQ(p.result.plans.front().layout.dp_degree(), p.gpus);
    EXPECT_NEAR(p.best_tokens_per_s_per_gpu(), ScalingFake::rate(p.gpus), 1e-6);
    // 1e12 tokens / (R(G)·G) seconds; GPU-hours G·seconds/3600; cost 2 per GPU-hour.
    const double s = 1e12 / (ScalingFake::rate(p.gpus) * static_cast<double>(p.gpus));
    ASSERT_TRUE(p.cost);
    EXPECT_NEAR(p.cost->seconds / s, 1, 1e-9);
    EXPECT_NEAR(*p.cost->cost / (2 * s * static_cast<double>(p.gpus) / 3600), 1, 1e-9);
    // Only dp changes: the shape stays.
    EXPECT_EQ(p.layout_change, "");
  }
}

TEST(Sweep, PointsSearchedSideBySideOnThreadsGiveTheSameAnswersInOrder) {
  // Points run concurrently on the threads (planner/sweep.cc); each point's answer does not depend
  // on its thread count, so one thread and eight give the same points, reported in order.
  const ScalingFake fake(kSeq);
  auto run = [&](int threads) {
    SweepRequest req;
    req.plan = dp_only();
    req.plan.threads = threads;
    req.gpus = {8, 16, 32, 64, 128};
    req.gbs = 128;
    std::vector<size_t> seen;
    req.on_point = [&](const SweepPoint&, size_t i, size_t) { seen.push_back(i); };
    auto r = sweep(req, fake);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3, 4}));
    std::vector<std::string> out;
    if (r)
      for (const SweepPoint& p : r->points)
        out.push_back(std::to_string(p.gpus) + " " + format_layout(p.result.plans.at(0).layout) +
                      " " + std::to_string(p.best_tokens_per_s_per_gpu()));
    return out;
  };
  const auto one = run(1);
  EXPECT_EQ(one.size(), 5u);
  EXPECT_EQ(run(8), one);
  EXPECT_EQ(run(3), one);
}

TEST(Sweep, AFailingPointFailsTheSweep) {
  // A point that cannot be planned (here a global batch the data parallelism cannot divide is
  // not an error, so the request's top is made invalid) ends the sweep with its error.
  const ScalingFake fake(kSeq);
  SweepRequest req;
  req.plan = dp_only();
  req.plan.top_k = 0;
  req.plan.threads = 4;
  req.gpus = {8, 16, 32};
  req.gbs = 64;
  auto r = sweep(req, fake);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("--top"), std::string::npos) << r.status().message();
}

TEST(Sweep, GlobalBatchPerGpuScalesWithTheCount) {
  const ScalingFake fake(kSeq);
  SweepRequest req;
  req.plan = dp_only();
  req.gpus = {8, 16};
  req.gbs_per_gpu = 0.5;  // 4 sequences at 8 GPUs, 8 at 16
  auto r = sweep(req, fake);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->points[0].gbs, 4);
  EXPECT_EQ(r->points[1].gbs, 8);
  // gbs 4 on dp 8 at mbs 1 cannot be split: a point with no plan that says why, not an error.
  EXPECT_TRUE(r->points[0].result.plans.empty());
  EXPECT_FALSE(r->points[0].result.no_fit.empty());
  EXPECT_FALSE(r->points[0].cost);

  req.gbs_per_gpu = 0.3;  // 2.4 sequences at 8 GPUs
  auto bad = sweep(req, fake);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("--gbs-per-gpu"), std::string::npos);
  req.gbs = 64;  // both
  EXPECT_FALSE(sweep(req, fake).is_ok());
}

TEST(Sweep, ShapeChangeLeavesOutDataParallelism) {
  const LayoutConstraints m{.num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .seq_len = kSeq};
  auto at = [&](const char* s, int64_t gpus) { return *resolve_layout(*parse_layout(s), m, gpus); };
  EXPECT_EQ(layout_shape_change(at("tp=8,pp=2,gbs=512", 256), at("tp=8,pp=2,gbs=512", 1024)), "");
  EXPECT_EQ(layout_shape_change(at("tp=8,pp=2,gbs=512", 256), at("tp=8,pp=4,gbs=512", 1024)),
            "pp 2→4");
}

// The deadline search against brute force over the same closed form: the time at n nodes of 8 is
// T(n) = tokens / (R(8n)·8n) = tokens·(1 + 8n/256) / (8000 n), falling in n; the answer is the
// smallest n with T(n) ≤ deadline.
TEST(Deadline, FindsTheSmallestNodeCountThatMeetsIt) {
  const ScalingFake fake(kSeq);
  const double tokens = 1e12;
  auto time_at = [&](int64_t gpus) {
    return tokens / (ScalingFake::rate(gpus) * static_cast<double>(gpus));
  };
  DeadlineRequest req;
  req.plan = dp_only();
  req.gbs = 8 * 720720;  // lcm(1..16)·8: every node count up to 16 divides it
  req.budget.train_tokens = tokens;
  req.gpus_per_node = 8;
  req.max_gpus = 128;
  for (int64_t want_nodes : {1, 3, 5, 11, 16}) {
    // A deadline halfway (geometrically) between the times at want_nodes - 1 and want_nodes.
    const double hi = time_at(8 * want_nodes);
    const double lo = want_nodes > 1 ? time_at(8 * (want_nodes - 1)) : 2 * hi;
    req.deadline_s = std::sqrt(hi * lo);
    int64_t brute = 0;
    for (int64_t n = 1; n <= 16 && brute == 0; ++n)
      if (time_at(8 * n) <= req.deadline_s) brute = n;
    ASSERT_EQ(brute, want_nodes);
    auto r = find_smallest_gpus(req, fake);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_TRUE(r->met);
    EXPECT_EQ(r->gpus, 8 * want_nodes) << "deadline " << req.deadline_s;
    ASSERT_NE(r->chosen(), nullptr);
    EXPECT_LE(r->chosen()->cost->seconds, req.deadline_s);
    // Every tried count below the answer missed.
    for (const SweepPoint& p : r->tried)
      if (p.gpus < r->gpus) {
        EXPECT_GT(p.cost->seconds, req.deadline_s);
      }
  }
}

TEST(Deadline, NeverMetReportsTheFastestTried) {
  const ScalingFake fake(kSeq);
  DeadlineRequest req;
  req.plan = dp_only();
  req.gbs = 8 * 720720;
  req.budget.train_tokens = 1e12;
  req.gpus_per_node = 8;
  req.max_gpus = 128;
  req.deadline_s = 1;  // far below T(16 nodes) = 1e12·1.5/128000 s
  auto r = find_smallest_gpus(req, fake);
  ASSERT_TRUE(r.is_ok());
  EXPECT_FALSE(r->met);
  EXPECT_EQ(r->gpus, 128);  // the time falls with the count: the largest is the fastest
  // Doubling from one node: 1, 2, 4, 8, 16 nodes.
  ASSERT_EQ(r->tried.size(), 5u);
  req.budget.train_tokens = 0;
  EXPECT_FALSE(find_smallest_gpus(req, fake).is_ok());
}

}  // namespace
}  // namespace scaleplan::planner
