// Search driver tests with a deterministic fake evaluator: a closed-form memory and time model of
// a dense transformer, simple enough that each expectation can be derived by hand.
#include "planner/planner.h"

#include "planner/chunked.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <set>
#include <thread>

namespace scaleplan::planner {
namespace {

// Llama-3-8B-like: 32 layers, 32 heads, 8 KV heads.
LayoutConstraints llama8b(int64_t seq = 4096) {
  return {.num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .num_experts = 0, .seq_len = seq};
}

// Closed-form fake. Memory per GPU: 16 bytes/param of model state (DESIGN: 2+2+4+8) for P = 8e9
// params split over tp·pp, ZeRO-1 shards the 12 optimizer bytes over dp, ZeRO-2 the gradients
// too, ZeRO-3 everything; activations 34·s·b·h bytes per layer (Korthikanti, /tp with SP,
// selective: unchanged here, full: 2·s·b·h) times layers/pp times pp micro-batches in flight.
// Time: 6·P·tokens / (gpus · 400 TFLOP/s) compute, ×4/3 for full recompute; bubble
// (pp−1)/(m·vpp) of it; TP comm 2% of compute per doubling of tp (×5 across nodes).
class FakeEvaluator : public Evaluator {
 public:
  explicit FakeEvaluator(int64_t gpus, int64_t seq) : gpus_(gpus), seq_(seq) {}
  Bytes capacity = 80_GiB;
  bool flat_time = false;     // every layout takes the same time (tests the tie-break)
  bool fail_zb = false;       // simulate() fails for zb-h1 layouts
  bool with_bound = false;    // iteration_lower_bound() is the compute time (else zero)
  double memory_scale = 1.0;  // multiplies the peak
  mutable std::atomic<int64_t> simulate_calls{0};
  // simulate_within() leaves the breakdown of a result slower than asked zero, as the model
  // evaluator does, and counts those results.
  bool honour_within = false;
  mutable std::atomic<int64_t> breakdowns_left_out{0};

  Result<MemoryVerdict> memory(const Layout& l) const override {
    const double p = 8e9 / (l.tp * l.pp);
    const double dp = l.dp_degree() * l.cp;
    double states = 2 * p + 2 * p + 12 * p;
    if (l.zero >= 1) states -= 12 * p * (1 - 1 / dp);
    if (l.zero >= 2) states -= 2 * p * (1 - 1 / dp);
    if (l.zero >= 3) states -= 2 * p * (1 - 1 / dp);
    const double sbh = static_cast<double>(seq_) / l.cp * l.mbs * 4096;
    double per_layer = l.recompute == Recompute::kFull ? 2 * sbh : 34 * sbh;
    if (l.sequence_parallel() || l.recompute == Recompute::kFull) per_layer /= l.tp;
    const double in_flight = l.schedule == Schedule::kAfab
                                 ? static_cast<double>(l.num_microbatches())
                                 : std::min<double>(l.pp, l.num_microbatches());
    const double act = per_layer * 32.0 / l.pp * in_flight;
    return MemoryVerdict{Bytes(static_cast<int64_t>((states + act) * memory_scale)), capacity};
  }

  // The compute part of simulate()'s time: the iteration adds bubble and TP time to it, so it is a
  // lower bound (both are the same Duration::seconds of the same double).
  Result<Duration> iteration_lower_bound(const Layout& l) const override {
    if (!with_bound || flat_time) return Duration::zero();
    const double tokens = static_cast<double>(l.global_batch()) * seq_;
    const double compute = 6 * 8e9 * tokens / (gpus_ * 400e12);
    double recompute = 0;
    if (l.recompute == Recompute::kFull) recompute = compute / 3;
    if (l.recompute == Recompute::kSelective) recompute = compute * 0.02;
    return Duration::seconds(compute + recompute);
  }

  Result<Prediction> simulate(const Layout& l) const override {
    simulate_calls.fetch_add(1);
    if (fail_zb && l.schedule == Schedule::kZbH1) {
      return Status::internal("fake: zb-h1 not supported");
    }
    auto mem = memory(l);
    const double tokens = static_cast<double>(l.global_batch()) * seq_;
    double compute = flat_time ? 1.0 : 6 * 8e9 * tokens / (gpus_ * 400e12);
    double recompute = 0;
    if (!flat_time && l.recompute == Recompute::kFull) recompute = compute / 3;
    if (!flat_time && l.recompute == Recompute::kSelective) recompute = compute * 0.02;
    const double m = static_cast<double>(l.num_microbatches());
    double bubble = 0, tp_comm = 0;
    if (!flat_time) {
      bubble = (compute + recompute) * (l.pp - 1) / (m * l.vpp_degree());
      if (l.schedule == Schedule::kZbH1) bubble /= 3;
      tp_comm = compute * 0.02 * std::log2(l.tp) * (l.tp > 8 ? 5 : 1);
    }
    Prediction p;
    p.breakdown.compute = Duration::seconds(compute + recompute);
    p.breakdown.recompute = Duration::seconds(recompute);
    p.breakdown.bubble = Duration::seconds(bubble);
    p.breakdown.exposed[static_cast<int>(CommClass::kTp)] = Duration::seconds(tp_comm);
    p.iteration = p.breakdown.compute + p.breakdown.bubble + p.breakdown.exposed_total();
    p.tokens_per_s_per_gpu = tokens / (p.iteration.to_seconds() * gpus_);
    p.mfu = 6 * 8e9 * tokens / (p.iteration.to_seconds() * gpus_ * 989e12);
    p.memory = *mem;
    return p;
  }

  Result<Prediction> simulate_within(const Layout& l, Duration breakdown_within) const override {
    auto p = simulate(l);
    if (honour_within && p && p->iteration > breakdown_within) {
      p->breakdown = Breakdown{};
      breakdowns_left_out.fetch_add(1);
    }
    return p;
  }

 private:
  int64_t gpus_, seq_;
};

PlanRequest request(int64_t gpus, int64_t gbs, int threads) {
  PlanRequest r;
  r.search.model = llama8b();
  r.search.gpus = gpus;
  r.search.gbs = gbs;
  r.threads = threads;
  r.top_k = 10;
  r.max_simulations = 0;  // exhaustive unless a test sets a budget
  return r;
}

PlanResult run(const PlanRequest& req, const Evaluator& ev) {
  auto r = plan(req, ev);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? std::move(r).value() : PlanResult{};
}

TEST(Planner, DeterministicAcrossThreadCounts) {
  FakeEvaluator ev(32, 4096);
  const PlanResult base = run(request(32, 128, 1), ev);
  ASSERT_EQ(base.plans.size(), 10u);
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE(threads);
    const PlanResult r = run(request(32, 128, threads), ev);
    EXPECT_EQ(r.threads, threads);
    EXPECT_EQ(r.candidates, base.candidates);
    EXPECT_EQ(r.fit, base.fit);
    EXPECT_EQ(r.simulated, base.simulated);
    ASSERT_EQ(r.plans.size(), base.plans.size());
    for (size_t i = 0; i < r.plans.size(); ++i) {
      EXPECT_EQ(format_layout(r.plans[i].layout), format_layout(base.plans[i].layout));
      EXPECT_EQ(r.plans[i].prediction.iteration, base.plans[i].prediction.iteration);
      EXPECT_EQ(r.plans[i].reason, base.plans[i].reason);
    }
  }
}

TEST(Planner, NeverReturnsAPlanThatDoesNotFit) {
  FakeEvaluator ev(32, 4096);
  ev.capacity = 40_GiB;  // tight: many layouts do not fit
  auto req = request(32, 128, 2);
  req.memory_margin = 4_GiB;
  req.top_k = 1000000;  // every simulated plan
  const PlanResult r = run(req, ev);
  ASSERT_FALSE(r.plans.empty());
  EXPECT_LT(r.fit, r.candidates);  // the filter removed some
  EXPECT_EQ(static_cast<int64_t>(r.plans.size()), r.simulated);
  for (const auto& p : r.plans) {
    // Recomputed independently: peak + margin within capacity.
    auto m = ev.memory(p.layout);
    ASSERT_TRUE(m.is_ok());
    EXPECT_LE(m->peak + 4_GiB, 40_GiB) << format_layout(p.layout);
  }
  // Only fitting candidates were simulated: one simulate call per fitting candidate.
  EXPECT_EQ(ev.simulate_calls.load(), r.fit);
}

TEST(Planner, RanksByThroughputThenHeadroom) {
  FakeEvaluator ev(16, 4096);
  auto req = request(16, 64, 2);
  req.top_k = 1000000;
  const PlanResult r = run(req, ev);
  for (size_t i = 1; i < r.plans.size(); ++i) {
    const auto &a = r.plans[i - 1], &b = r.plans[i];
    EXPECT_GE(a.prediction.tokens_per_s_per_gpu, b.prediction.tokens_per_s_per_gpu);
    if (a.prediction.tokens_per_s_per_gpu == b.prediction.tokens_per_s_per_gpu) {
      EXPECT_GE(a.memory.headroom(), b.memory.headroom());
    }
  }
  // With every layout equally fast, the first plan is the one with the most headroom.
  ev.flat_time = true;
  const PlanResult flat = run(req, ev);
  ASSERT_GT(flat.plans.size(), 1u);
  Bytes most(0);
  for (const auto& p : flat.plans) most = std::max(most, p.memory.headroom());
  EXPECT_EQ(flat.plans.front().memory.headroom(), most);
  // Its reason is about memory: more headroom, or the same memory and the layout string.
  const std::string& why = flat.plans.front().reason;
  EXPECT_TRUE(why.find("headroom") != std::string::npos ||
              why.find("same memory") != std::string::npos)
      << why;
}

TEST(Planner, BestLayoutFollowsTheFakeModel) {
  // 8 GPUs, gbs 64, 80 GiB: the fake's time is compute (the same for all layouts without
  // recompute) + bubble + TP comm, so the optimum has no pipeline, tp=1 and no recompute. Those
  // tie on time and break by headroom: ZeRO-3 shards the most, mbs=1 stores the fewest
  // activations, and cp divides them (the fake charges nothing for CP communication): cp=4 is the
  // largest the default policy searches at seq 4096 (cp=8 would leave 512-token shards).
  FakeEvaluator ev(8, 4096);
  auto req = request(8, 64, 2);
  const PlanResult r = run(req, ev);
  ASSERT_FALSE(r.plans.empty());
  const Layout& best = r.plans.front().layout;
  EXPECT_EQ(best.tp, 1);
  EXPECT_EQ(best.pp, 1);
  EXPECT_EQ(best.recompute, Recompute::kNone);
  EXPECT_EQ(best.zero, 3);
  EXPECT_EQ(best.mbs, 1);
  EXPECT_EQ(best.cp, 4);
}

TEST(Planner, ExplainsRankNoFitAndInvalid) {
  FakeEvaluator ev(16, 4096);
  auto req = request(16, 64, 2);
  req.top_k = 3;
  const PlanResult top = run(req, ev);
  ASSERT_FALSE(top.plans.empty());

  req.explain = format_layout(top.plans.front().layout);
  auto r = run(req, ev);
  ASSERT_TRUE(r.explanation);
  EXPECT_TRUE(r.explanation->fits);
  EXPECT_TRUE(r.explanation->in_space);
  EXPECT_EQ(r.explanation->rank, 1);

  // A 4-stage 1F1B pipeline with 64 / (1·4) = 16 micro-batches: a bubble of 3/16 of the compute
  // that the best (no pipeline) does not pay.
  req.explain = "tp=1,pp=4,schedule=1f1b,mbs=1,zero=1";
  r = run(req, ev);
  ASSERT_TRUE(r.explanation);
  EXPECT_GT(r.explanation->rank, 1);
  EXPECT_NE(r.explanation->why.find("bubble"), std::string::npos) << r.explanation->why;

  // ZeRO-0 with tp=pp=1 holds 16 B/param of 8e9 params = 119 GiB: does not fit in 80 GiB.
  req.explain = "tp=1,pp=1,mbs=4,zero=0";
  r = run(req, ev);
  ASSERT_TRUE(r.explanation);
  EXPECT_FALSE(r.explanation->fits);
  EXPECT_NE(r.explanation->why.find("does not fit"), std::string::npos) << r.explanation->why;

  req.explain = "tp=3";  // 3 does not divide the 16 GPUs
  r = run(req, ev);
  ASSERT_TRUE(r.explanation);
  EXPECT_FALSE(r.explanation->valid);
  EXPECT_NE(r.explanation->why.find("tp·pp·cp = 3·1·1"), std::string::npos) << r.explanation->why;

  req.explain = "tp=2,pp=8,mbs=3";  // dp = 1; gbs 64 is not divisible by mbs·dp = 3
  r = run(req, ev);
  ASSERT_TRUE(r.explanation);
  EXPECT_FALSE(r.explanation->valid);
  EXPECT_NE(r.explanation->why.find("gbs=64"), std::string::npos) << r.explanation->why;
}

TEST(Planner, FallsBackToCrossNodeTpWhenNothingElseFits) {
  // Peak ×6 on 80 GiB = 85.9 GB, with ZeRO-0, pp=1 and full recompute fixed: model states are
  // 16 B/param · 8e9 / tp · 6 = 768 GB / tp, which needs tp ≥ 9, so only tp = 16 or 32 (across
  // 8-GPU nodes) fits; activations (2·s·b·h per layer / tp) add under 1 GB·mbs / tp ·6.
  FakeEvaluator ev(32, 4096);
  ev.memory_scale = 6;
  auto req = request(32, 64, 2);
  ASSERT_TRUE(req.search.fixes.add("zero=0").is_ok());
  ASSERT_TRUE(req.search.fixes.add("pp=1").is_ok());
  ASSERT_TRUE(req.search.fixes.add("recompute=full").is_ok());
  const PlanResult r = run(req, ev);
  EXPECT_TRUE(r.cross_node_tp_fallback);
  ASSERT_FALSE(r.plans.empty());
  for (const auto& p : r.plans) EXPECT_GT(p.layout.tp, 8);
}

TEST(Planner, NothingFitsIsAResultNotAnError) {
  FakeEvaluator ev(8, 4096);
  ev.capacity = 1_GiB;
  const PlanResult r = run(request(8, 64, 2), ev);
  EXPECT_TRUE(r.plans.empty());
  EXPECT_EQ(r.fit, 0);
  EXPECT_NE(r.no_fit.find("no layout fits"), std::string::npos) << r.no_fit;
}

TEST(Planner, SimulationErrorsAreCountedNotDropped) {
  FakeEvaluator ev(16, 4096);
  ev.fail_zb = true;
  auto req = request(16, 64, 2);
  const PlanResult r = run(req, ev);
  EXPECT_GT(r.failed, 0);
  EXPECT_EQ(r.simulated + r.failed, r.fit);  // every fitting candidate accounted for
  ASSERT_FALSE(r.errors.empty());
  EXPECT_NE(r.errors.front().find("zb-h1"), std::string::npos);
}

TEST(Planner, ProgressIsReported) {
  FakeEvaluator ev(16, 4096);
  auto req = request(16, 64, 2);
  std::vector<Progress> seen;
  req.progress = [&](const Progress& p) { seen.push_back(p); };
  req.progress_interval = std::chrono::milliseconds(1);
  const PlanResult r = run(req, ev);
  ASSERT_FALSE(seen.empty());
  const Progress& last = seen.back();
  EXPECT_STREQ(last.phase, "done");
  EXPECT_EQ(last.candidates, r.candidates);
  EXPECT_EQ(last.seen, r.candidates);
  EXPECT_EQ(last.fitting, r.fit);
  EXPECT_EQ(last.simulated, r.simulated);
  EXPECT_DOUBLE_EQ(last.best_tokens_per_s_per_gpu, r.plans.front().prediction.tokens_per_s_per_gpu);
  for (size_t i = 1; i < seen.size(); ++i) EXPECT_GE(seen[i].seen, seen[i - 1].seen);
}

TEST(Planner, ReasonNamesTheCostAvoided) {
  // a: 1 s compute + 0.1 s bubble; b: 1 s compute + 0.4 s bubble + 0.1 s TP. a saves 0.3 s of
  // bubble and 0.1 s of TP: the bubble is named.
  Layout a = *parse_layout("tp=1,pp=2,mbs=1");
  Layout b = *parse_layout("tp=2,pp=2,mbs=2");
  Prediction pa, pb;
  pa.breakdown.compute = pb.breakdown.compute = Duration::seconds(1);
  pa.breakdown.bubble = Duration::seconds(0.1);
  pb.breakdown.bubble = Duration::seconds(0.4);
  pb.breakdown.exposed[static_cast<int>(CommClass::kTp)] = Duration::seconds(0.1);
  pa.iteration = Duration::seconds(1.1);
  pb.iteration = Duration::seconds(1.5);
  pa.tokens_per_s_per_gpu = 1.5;  // 1.5 / 1.1 - 1 = 36.4% faster
  pb.tokens_per_s_per_gpu = 1.1;
  const MemoryVerdict m{10_GiB, 80_GiB};
  const std::string s = compare_reason(a, pa, m, b, pb, m);
  // It reads as a sentence after "Ranks above #N: ": faster than the next, then how it differs.
  EXPECT_EQ(s.rfind("36.4% faster than the next (", 0), 0u) << s;
  EXPECT_NE(s.find("pipeline bubble"), std::string::npos) << s;
  EXPECT_NE(s.find("tp 1→2"), std::string::npos) << s;
  EXPECT_NE(s.find("mbs 1→2"), std::string::npos) << s;
  EXPECT_EQ(s.find(" more "), std::string::npos) << "nothing is traded: " << s;

  // A saving mostly spent elsewhere is named as a trade: a avoids 0.3 s of bubble but computes
  // 0.29 s more, 0.7% faster in all.
  pa.breakdown.compute = Duration::seconds(1.29);
  pb.breakdown.exposed[static_cast<int>(CommClass::kTp)] = Duration::zero();
  pa.iteration = Duration::seconds(1.39);
  pb.iteration = Duration::seconds(1.4);
  pa.tokens_per_s_per_gpu = 1.4 / 1.39;
  pb.tokens_per_s_per_gpu = 1.0;
  const std::string t = compare_reason(a, pa, m, b, pb, m);
  EXPECT_NE(t.find("pipeline bubble for 290"), std::string::npos) << t;
  EXPECT_NE(t.find("more compute"), std::string::npos) << t;

  // Two savings of a size against one cost (a plan of qwen3-30b-a3b: 5.1 ms less compute and
  // 5.0 ms less exposed PP time for 5.1 ms more bubble, 4 ms faster in all): both are named, or
  // the reason would read as a wash.
  pa.breakdown = pb.breakdown = Breakdown{};
  pb.breakdown.compute = Duration::seconds(1.7841);
  pa.breakdown.compute = Duration::seconds(1.7790);
  pa.breakdown.bubble = Duration::seconds(0.3091);
  pb.breakdown.bubble = Duration::seconds(0.3040);
  pa.breakdown.exposed[static_cast<int>(CommClass::kPp)] = Duration::seconds(0.0300);
  pb.breakdown.exposed[static_cast<int>(CommClass::kPp)] = Duration::seconds(0.0350);
  pa.iteration = Duration::seconds(2.224);
  pb.iteration = Duration::seconds(2.228);
  pa.tokens_per_s_per_gpu = 2.228 / 2.224;
  pb.tokens_per_s_per_gpu = 1.0;
  const std::string u = compare_reason(a, pa, m, b, pb, m);
  EXPECT_NE(u.find("of compute and 5.000 ms of exposed PP communication for 5.100 ms more "
                   "pipeline bubble"),
            std::string::npos)
      << u;
}

TEST(Planner, BoundingFindsTheExhaustiveTopK) {
  // With a valid lower bound the planner simulates only until the bound of the next candidate
  // exceeds the (K+1)-th best time; the top K, their numbers and their reasons (which compare #K
  // with #K+1) are those of simulating every fitting layout.
  FakeEvaluator exhaustive(32, 4096);
  FakeEvaluator bounded(32, 4096);
  bounded.with_bound = true;
  auto req = request(32, 128, 1);
  req.top_k = 5;
  const PlanResult all = run(req, exhaustive);
  const PlanResult some = run(req, bounded);
  EXPECT_EQ(all.bounded, 0);
  EXPECT_EQ(all.simulated, all.fit);
  EXPECT_GT(some.bounded, 0);
  EXPECT_LT(some.simulated, all.simulated);
  EXPECT_EQ(some.simulated + some.bounded + some.failed, some.fit);  // nothing dropped silently
  EXPECT_EQ(bounded.simulate_calls.load(), some.simulated);          // one thread: no speculation
  ASSERT_EQ(some.plans.size(), all.plans.size());
  for (size_t i = 0; i < all.plans.size(); ++i) {
    EXPECT_EQ(format_layout(some.plans[i].layout), format_layout(all.plans[i].layout));
    EXPECT_EQ(some.plans[i].prediction.iteration, all.plans[i].prediction.iteration);
    EXPECT_EQ(some.plans[i].reason, all.plans[i].reason);
    EXPECT_LE(some.plans[i].lower_bound, some.plans[i].prediction.iteration);
  }
}

// Four candidates (mbs 1, 2, 4, 8 at dp 8), their bounds in that order; top 1 keeps the two best
// times. Sequentially: mbs=1 (10 s), mbs=2 (refined bound 9 s, below no threshold yet: simulated,
// 9.5 s), mbs=4 (3 s), mbs=8 (bound 4 s under the threshold 9.5 s: simulated). On two threads
// mbs=2's refined bound is slow (300 ms), so the other worker simulates mbs=4 and mbs=8 first;
// their times (3 s, 4 s) must not bound mbs=2 out, which the sequential walk simulates (the
// replay failed with "should have been simulated" when they did).
class SlowRefinedEvaluator : public Evaluator {
 public:
  struct Case {
    double bound, refined, time, refine_delay_s, simulate_delay_s;
  };
  static Case of(const Layout& l) {
    switch (l.mbs) {
      case 1:
        return {1, 1, 10, 0, 0.05};
      case 2:
        return {2, 9, 9.5, 0.3, 0};
      case 4:
        return {3, 3, 3, 0, 0};
      default:
        return {4, 4, 4, 0, 0};
    }
  }
  Result<MemoryVerdict> memory(const Layout&) const override {
    return MemoryVerdict{Bytes(1), 80_GiB};
  }
  Result<Duration> iteration_lower_bound(const Layout& l) const override {
    return Duration::seconds(of(l).bound);
  }
  Result<Duration> refined_lower_bound(const Layout& l) const override {
    std::this_thread::sleep_for(std::chrono::duration<double>(of(l).refine_delay_s));
    return Duration::seconds(of(l).refined);
  }
  Result<Prediction> simulate(const Layout& l) const override {
    std::this_thread::sleep_for(std::chrono::duration<double>(of(l).simulate_delay_s));
    Prediction p;
    p.iteration = Duration::seconds(of(l).time);
    p.tokens_per_s_per_gpu = 64.0 * 4096 / (of(l).time * 8);
    p.breakdown.compute = p.iteration;
    return p;
  }
};

TEST(Planner, ALaterResultDoesNotBoundOutAnEarlierCandidate) {
  const SlowRefinedEvaluator ev;
  auto req = request(8, 64, 2);
  for (const char* f : {"tp=1", "pp=1", "cp=1", "zero=0", "recompute=none"})
    ASSERT_TRUE(req.search.fixes.add(f).is_ok());
  req.top_k = 1;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    req.threads = threads;
    const PlanResult r = run(req, ev);
    EXPECT_EQ(r.candidates, 4);
    EXPECT_EQ(r.simulated, 4);
    ASSERT_EQ(r.plans.size(), 1u);
    EXPECT_EQ(r.plans[0].layout.mbs, 4);
  }
}

// Without compare_with_next (a sweep's points) the search prunes against the K-th best instead of
// the (K+1)-th: the same top K as the exhaustive search, fewer simulations, and no reason for #K
// (its comparison would be with a layout the search no longer establishes).
TEST(Planner, WithoutTheNextPlanTheTopKIsTheSameWithFewerSimulations) {
  FakeEvaluator exhaustive(32, 4096);
  FakeEvaluator bounded(32, 4096);
  bounded.with_bound = true;
  auto req = request(32, 128, 1);
  for (int top : {1, 3}) {
    SCOPED_TRACE(top);
    req.top_k = top;
    req.compare_with_next = true;
    const PlanResult all = run(req, exhaustive);
    const PlanResult with_next = run(req, bounded);
    req.compare_with_next = false;
    const PlanResult without = run(req, bounded);
    EXPECT_LE(without.simulated, with_next.simulated);
    EXPECT_EQ(without.simulated + without.bounded + without.failed, without.fit);
    ASSERT_EQ(without.plans.size(), static_cast<size_t>(top));
    for (size_t i = 0; i < without.plans.size(); ++i) {
      EXPECT_EQ(format_layout(without.plans[i].layout), format_layout(all.plans[i].layout));
      EXPECT_EQ(without.plans[i].prediction.iteration, all.plans[i].prediction.iteration);
      if (i + 1 < without.plans.size()) EXPECT_EQ(without.plans[i].reason, all.plans[i].reason);
    }
    EXPECT_EQ(without.plans.back().reason, "");
    EXPECT_NE(with_next.plans.back().reason, "");
  }
  // Strictly fewer where the (K+1)-th time is what keeps a candidate in: the four layouts of
  // SlowRefinedEvaluator on one thread. With the next plan the threshold is the second best time
  // (9.5 s) when mbs=8 (bound 4 s) comes up, and it is simulated; without, it is the best (3 s).
  const SlowRefinedEvaluator slow;
  auto four = request(8, 64, 1);
  for (const char* f : {"tp=1", "pp=1", "cp=1", "zero=0", "recompute=none"})
    ASSERT_TRUE(four.search.fixes.add(f).is_ok());
  four.top_k = 1;
  EXPECT_EQ(run(four, slow).simulated, 4);
  four.compare_with_next = false;
  const PlanResult r = run(four, slow);
  EXPECT_EQ(r.simulated, 3);
  ASSERT_EQ(r.plans.size(), 1u);
  EXPECT_EQ(r.plans[0].layout.mbs, 4);
}

// The search asks for the breakdown only within the K'-th best time of its sequential walk so far;
// the top K, their breakdowns and their reasons (#K compared with #K+1) are those of a search that
// computes every breakdown, on any number of threads, and some breakdowns are left out.
TEST(Planner, BreakdownsLeftOutOfSlowerResultsChangeNoPlan) {
  FakeEvaluator every(32, 4096), within(32, 4096);
  every.with_bound = within.with_bound = true;
  within.honour_within = true;
  auto req = request(32, 128, 1);
  req.top_k = 3;
  const PlanResult base = run(req, every);
  ASSERT_GT(base.simulated, 4);
  auto same_plans = [&base](const PlanResult& r) {
    EXPECT_EQ(r.simulated, base.simulated);
    ASSERT_EQ(r.plans.size(), base.plans.size());
    for (size_t i = 0; i < r.plans.size(); ++i) {
      const RankedPlan &a = r.plans[i], &b = base.plans[i];
      EXPECT_EQ(format_layout(a.layout), format_layout(b.layout));
      EXPECT_GT(b.prediction.breakdown.compute, Duration::zero());
      EXPECT_EQ(a.prediction.breakdown.compute, b.prediction.breakdown.compute);
      EXPECT_EQ(a.prediction.breakdown.bubble, b.prediction.breakdown.bubble);
      EXPECT_EQ(a.prediction.breakdown.exposed_total(), b.prediction.breakdown.exposed_total());
      EXPECT_EQ(a.reason, b.reason);
    }
  };
  same_plans(run(req, within));
  EXPECT_GT(within.breakdowns_left_out.load(), 0);  // one thread: the walk's own threshold
  req.threads = 2;
  same_plans(run(req, within));
  req.threads = 8;
  same_plans(run(req, within));
}

TEST(Planner, BoundingIsDeterministicAcrossThreadCounts) {
  // Workers run ahead of the sequential order; what they simulate beyond it is discarded, so the
  // counts and the plans do not depend on the thread count.
  FakeEvaluator ev(32, 4096);
  ev.with_bound = true;
  auto req = request(32, 128, 1);
  req.top_k = 3;
  const PlanResult base = run(req, ev);
  ASSERT_GT(base.bounded, 0);
  for (int threads : {2, 3, 8}) {
    SCOPED_TRACE(threads);
    req.threads = threads;
    const PlanResult r = run(req, ev);
    EXPECT_EQ(r.simulated, base.simulated);
    EXPECT_EQ(r.bounded, base.bounded);
    ASSERT_EQ(r.plans.size(), base.plans.size());
    for (size_t i = 0; i < r.plans.size(); ++i) {
      EXPECT_EQ(format_layout(r.plans[i].layout), format_layout(base.plans[i].layout));
      EXPECT_EQ(r.plans[i].reason, base.plans[i].reason);
    }
  }
}

TEST(Planner, ExplainsABoundedOutLayoutBySimulatingIt) {
  // A 4-stage AFAB pipeline with full recompute: its bound (compute × 4/3) is far above the best
  // (no recompute, no bubble), so the search never simulates it; --explain does, on demand.
  FakeEvaluator ev(16, 4096);
  ev.with_bound = true;
  auto req = request(16, 64, 2);
  req.top_k = 3;
  req.explain = "tp=1,pp=4,schedule=afab,mbs=1,zero=1,recompute=full";
  const PlanResult r = run(req, ev);
  ASSERT_GT(r.bounded, 0);
  ASSERT_TRUE(r.explanation);
  const Explanation& e = *r.explanation;
  EXPECT_TRUE(e.in_space);
  EXPECT_TRUE(e.fits);
  ASSERT_TRUE(e.prediction);
  EXPECT_GT(e.rank, req.top_k + 1);
  EXPECT_GE(e.rank_max, e.rank);
  EXPECT_NE(e.why.find("simulated on demand"), std::string::npos) << e.why;
}

TEST(Planner, SimulationCapIsReported) {
  // A cap below what bounding needs stops the search in bound order and says what it left: the
  // layouts neither simulated nor bounded out, and how much faster the best of them could be.
  FakeEvaluator ev(8, 4096);
  ev.with_bound = true;
  auto req = request(8, 64, 2);
  req.top_k = 3;
  const PlanResult exact = run(req, ev);
  ASSERT_FALSE(exact.plans.empty());
  EXPECT_TRUE(exact.budget_note.empty());
  EXPECT_EQ(exact.not_simulated, 0);
  req.max_simulations = 5;
  const PlanResult capped = run(req, ev);
  EXPECT_EQ(capped.simulated, 5);
  EXPECT_GT(capped.not_simulated, 0);
  EXPECT_EQ(capped.simulated + capped.bounded + capped.not_simulated + capped.failed, capped.fit);
  EXPECT_NE(capped.budget_note.find("--max-simulations cap of 5"), std::string::npos)
      << capped.budget_note;
  // Deterministic under the cap too.
  req.threads = 1;
  const PlanResult one = run(req, ev);
  EXPECT_EQ(one.simulated, capped.simulated);
  EXPECT_EQ(format_layout(one.plans.front().layout), format_layout(capped.plans.front().layout));
}

// A search's candidates and slots stay in the parts they were produced in: element i is the i-th
// over the parts, empty parts adding nothing.
TEST(Chunked, IndexesAcrossPartsInOrder) {
  Chunked<int> c;
  EXPECT_TRUE(c.empty());
  c.append({0, 1, 2});
  c.append({});
  c.append({3});
  c.append({4, 5});
  ASSERT_EQ(c.size(), 6u);
  for (size_t i = 0; i < c.size(); ++i) EXPECT_EQ(c[i], static_cast<int>(i));
  c[4] = 40;
  std::vector<int> seen;
  c.for_each([&](size_t i, int& v) {
    EXPECT_EQ(i, seen.size());
    seen.push_back(v);
  });
  EXPECT_EQ(seen, (std::vector<int>{0, 1, 2, 3, 40, 5}));
  EXPECT_EQ(c.to_vector(), seen);
}

// Bounds far below every time, in the reverse of the enumeration order, with later layouts
// faster: the search takes the fitting layouts last to first and bounds none out, so a cap of C
// simulates exactly the last C, and the best plan is the last layout. The bound order is sorted
// only as far as the walk reaches (its first 4,096 positions, then more): a cap of 5,000 reaches
// past that prefix.
class ReverseOrderEvaluator : public Evaluator {
 public:
  explicit ReverseOrderEvaluator(const std::vector<Layout>& fitting) {
    for (size_t i = 0; i < fitting.size(); ++i) index_[format_layout(fitting[i])] = i;
  }
  Result<MemoryVerdict> memory(const Layout& l) const override {
    return MemoryVerdict{index_.count(format_layout(l)) ? Bytes(1) : 100_GiB, 80_GiB};
  }
  Result<Duration> iteration_lower_bound(const Layout& l) const override {
    return Duration::seconds(1 + 1e-6 * static_cast<double>(index_.size() - at(l)));
  }
  Result<Prediction> simulate(const Layout& l) const override {
    Prediction p;
    p.iteration = Duration::seconds(10 - 1e-6 * static_cast<double>(at(l)));
    p.tokens_per_s_per_gpu = 1 / p.iteration.to_seconds();
    p.breakdown.compute = p.iteration;
    return p;
  }

 private:
  size_t at(const Layout& l) const { return index_.at(format_layout(l)); }
  std::map<std::string, size_t> index_;
};

TEST(Planner, TheWalkFollowsTheBoundOrderPastItsSortedPrefix) {
  auto req = request(64, 512, 1);
  req.top_k = 1;
  auto space = enumerate_layouts(req.search);
  ASSERT_TRUE(space.is_ok());
  // Every other layout fits: the fitting ones are not contiguous in the space.
  std::vector<Layout> fitting;
  for (size_t i = 0; i < space->candidates.size(); i += 2) fitting.push_back(space->candidates[i]);
  ASSERT_GT(fitting.size(), 6000u);
  const ReverseOrderEvaluator ev(fitting);
  req.max_simulations = 5000;
  for (int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    req.threads = threads;
    const PlanResult r = run(req, ev);
    EXPECT_EQ(r.fit, static_cast<int64_t>(fitting.size()));
    EXPECT_EQ(r.simulated, 5000);
    EXPECT_EQ(r.not_simulated, r.fit - 5000);
    ASSERT_EQ(r.plans.size(), 1u);
    EXPECT_EQ(format_layout(r.plans[0].layout), format_layout(fitting.back()));
    // The cut layout with the lowest bound: the last one the cap left out.
    const std::string next = format_layout(fitting[fitting.size() - 5001]);
    EXPECT_NE(r.budget_note.find("(the lowest bound: " + next + ","), std::string::npos)
        << r.budget_note;
  }
}

// The fake with a bound that orders its layouts (compute plus half the bubble, both part of
// simulate()'s time, so still a lower bound) and, where `coarse`, a coarse bound below it by a
// share of 1/4 to 1 that varies from layout to layout (a hash of its name), so that the coarse
// order is not the bound order and the walk needs bounds beyond the first ones computed. `above`:
// the coarse bound is one tick above the bound (a broken evaluator).
class CoarseEvaluator : public Evaluator {
 public:
  CoarseEvaluator(const FakeEvaluator& inner, bool coarse, bool above = false)
      : inner_(inner), coarse_(coarse), above_(above) {}
  mutable std::atomic<int64_t> bounds{0};  // iteration_lower_bound calls
  Result<MemoryVerdict> memory(const Layout& l) const override { return inner_.memory(l); }
  Result<Prediction> simulate(const Layout& l) const override { return inner_.simulate(l); }
  Result<Duration> iteration_lower_bound(const Layout& l) const override {
    bounds.fetch_add(1);
    return bound(l);
  }
  Result<Duration> coarse_lower_bound(const Layout& l) const override {
    if (!coarse_) return Duration::zero();
    SP_ASSIGN_OR_RETURN(Duration b, bound(l));
    if (above_) return b + Duration::ticks(1);
    const double share =
        0.25 +
        0.75 * static_cast<double>(std::hash<std::string>{}(format_layout(l)) % 1000) / 999.0;
    return Duration::ticks(static_cast<int64_t>(static_cast<double>(b.count()) * share));
  }

 private:
  Result<Duration> bound(const Layout& l) const {
    SP_ASSIGN_OR_RETURN(Prediction p, inner_.simulate(l));
    return p.breakdown.compute + Duration::ticks(p.breakdown.bubble.count() / 2);
  }
  const FakeEvaluator& inner_;
  bool coarse_, above_;
};

TEST(Planner, CoarseBoundsGiveTheSearchOfTheBounds) {
  // The same search with every bound computed (no coarse bound) and with the bounds computed in
  // coarse order as far as the walk needs them: the same plans, reasons, bounds and counts, on 1, 2
  // and 8 threads, with and without a cap on the simulations, and the same place for an explained
  // layout that the bounds put out of the search (its rank range counts the bounded-out layouts
  // whose bound is under its time, most of them with only a coarse bound).
  FakeEvaluator inner(64, 4096);
  const CoarseEvaluator all(inner, false), lazy(inner, true);
  for (int64_t cap : {0, 40}) {
    for (int threads : {1, 2, 8}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, cap " + std::to_string(cap));
      auto req = request(64, 512, threads);
      req.top_k = 3;
      req.max_simulations = cap;
      req.explain = "tp=8,pp=8,dp=1,cp=1,vpp=1,schedule=1f1b,mbs=1,zero=0,recompute=full";
      const PlanResult a = run(req, all), b = run(req, lazy);
      ASSERT_GT(a.fit, 4096);  // beyond the first bounds the walk asks for
      EXPECT_EQ(a.candidates, b.candidates);
      EXPECT_EQ(a.fit, b.fit);
      EXPECT_EQ(a.simulated, b.simulated);
      EXPECT_EQ(a.bounded, b.bounded);
      EXPECT_EQ(a.not_simulated, b.not_simulated);
      EXPECT_EQ(a.budget_note, b.budget_note);
      ASSERT_EQ(a.plans.size(), b.plans.size());
      for (size_t i = 0; i < a.plans.size(); ++i) {
        EXPECT_EQ(format_layout(a.plans[i].layout), format_layout(b.plans[i].layout));
        EXPECT_EQ(a.plans[i].prediction.iteration, b.plans[i].prediction.iteration);
        EXPECT_EQ(a.plans[i].lower_bound, b.plans[i].lower_bound);
        EXPECT_EQ(a.plans[i].reason, b.plans[i].reason);
      }
      ASSERT_TRUE(a.explanation && b.explanation);
      EXPECT_EQ(a.explanation->rank, b.explanation->rank);
      EXPECT_EQ(a.explanation->rank_max, b.explanation->rank_max);
      EXPECT_GT(a.explanation->rank_max, a.explanation->rank);
      EXPECT_EQ(a.explanation->why, b.explanation->why);
    }
  }
  // Without the cap the lazy search computed the bounds of a part of the fitting layouts only, and
  // of more than the first 4,096 it asks for (so it resumed the walk with more).
  lazy.bounds = 0;
  auto req = request(64, 512, 2);
  req.top_k = 3;
  const PlanResult r = run(req, lazy);
  EXPECT_GT(lazy.bounds.load(), 4096);
  EXPECT_LT(lazy.bounds.load(), r.fit);
}

// A refined bound far above the closed form (the schedule replay of a layout whose closed form
// is loose). Under a cap, the layouts past where the cap stopped the walk are cut or bounded out
// by their closed form: a worker that ran ahead and refined some of them must not change the
// count, the note or the plans. Seen on `sweep`/`plan --max-simulations 2` under load: 27 cut
// layouts in one run and 46 in the next (SweepCli.SearchOptionsOfPlanApplyAtEveryPoint).
class RefiningEvaluator : public Evaluator {
 public:
  explicit RefiningEvaluator(const FakeEvaluator& inner) : inner_(inner) {}
  Result<MemoryVerdict> memory(const Layout& l) const override { return inner_.memory(l); }
  Result<Prediction> simulate(const Layout& l) const override { return inner_.simulate(l); }
  Result<Duration> iteration_lower_bound(const Layout& l) const override {
    SP_ASSIGN_OR_RETURN(Prediction p, inner_.simulate(l));
    return Duration::ticks(p.breakdown.compute.count() / 4);
  }
  Result<Duration> refined_lower_bound(const Layout& l) const override {
    SP_ASSIGN_OR_RETURN(Prediction p, inner_.simulate(l));
    return p.breakdown.compute;
  }

 private:
  const FakeEvaluator& inner_;
};

TEST(Planner, TheCapCutsTheSameLayoutsOnAnyThreadCount) {
  FakeEvaluator inner(64, 4096);
  const RefiningEvaluator ev(inner);
  auto req = request(64, 512, 1);
  req.top_k = 3;
  req.max_simulations = 3;
  const PlanResult one = run(req, ev);
  ASSERT_GT(one.not_simulated, 0);
  for (int threads : {2, 8}) {
    for (int rep = 0; rep < 3; ++rep) {
      SCOPED_TRACE(std::to_string(threads) + " threads, run " + std::to_string(rep));
      req.threads = threads;
      const PlanResult r = run(req, ev);
      EXPECT_EQ(r.not_simulated, one.not_simulated);
      EXPECT_EQ(r.bounded, one.bounded);
      EXPECT_EQ(r.simulated, one.simulated);
      EXPECT_EQ(r.budget_note, one.budget_note);
      ASSERT_EQ(r.plans.size(), one.plans.size());
      for (size_t i = 0; i < r.plans.size(); ++i)
        EXPECT_EQ(format_layout(r.plans[i].layout), format_layout(one.plans[i].layout));
    }
  }
}

TEST(Planner, SaturatedBoundsAreWalkedLikeOthers) {
  // Bounds at the clock's end (a network too slow for it: Duration saturates) are all equal to the
  // end: the walk must still take them in order, none below another (it once waited for a bound
  // below the end forever), as it does without coarse bounds.
  FakeEvaluator inner(8, 4096);
  class Saturated : public Evaluator {
   public:
    Saturated(const FakeEvaluator& inner, bool coarse) : inner_(inner), coarse_(coarse) {}
    Result<MemoryVerdict> memory(const Layout& l) const override { return inner_.memory(l); }
    Result<Prediction> simulate(const Layout& l) const override { return inner_.simulate(l); }
    Result<Duration> iteration_lower_bound(const Layout&) const override {
      return Duration::infinite();
    }
    Result<Duration> coarse_lower_bound(const Layout&) const override {
      return coarse_ ? Duration::infinite() : Duration::zero();
    }

   private:
    const FakeEvaluator& inner_;
    bool coarse_;
  };
  const Saturated all(inner, false), lazy(inner, true);
  const PlanRequest req = request(8, 32, 2);
  const PlanResult a = run(req, all), b = run(req, lazy);
  // Nothing bounds the first K + 1 in the order (the enumeration's, on equal bounds); after them
  // every bound is above the threshold.
  ASSERT_GT(a.fit, req.top_k + 1);
  EXPECT_EQ(a.simulated, req.top_k + 1);
  EXPECT_EQ(b.simulated, a.simulated);
  EXPECT_EQ(b.bounded, a.bounded);
  ASSERT_EQ(a.plans.size(), b.plans.size());
  for (size_t i = 0; i < a.plans.size(); ++i)
    EXPECT_EQ(format_layout(a.plans[i].layout), format_layout(b.plans[i].layout));
}

TEST(Planner, ACoarseBoundAboveTheBoundIsAnError) {
  // The walk would not follow the bounds' order: the search says so rather than answer.
  FakeEvaluator inner(64, 4096);
  const CoarseEvaluator broken(inner, true, /*above=*/true);
  auto r = plan(request(64, 512, 2), broken);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("exceeds its bound"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace scaleplan::planner
