#include "planner/search_space.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace scaleplan::planner {
namespace {

// Llama-3-8B: 32 layers, 32 heads, 8 KV heads, dense (ecosystem.md §1.2).
LayoutConstraints llama8b(int64_t seq = 8192) {
  return {.num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .num_experts = 0, .seq_len = seq};
}

SearchOptions options(LayoutConstraints m, int64_t gpus, int64_t gbs) {
  SearchOptions o;
  o.model = m;
  o.gpus = gpus;
  o.gbs = gbs;
  return o;
}

SearchSpace enumerate(const SearchOptions& o) {
  auto s = enumerate_layouts(o);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? std::move(s).value() : SearchSpace{};
}

TEST(Fixes, ParsesCanonicalisesAndRejects) {
  Fixes f;
  ASSERT_TRUE(f.add("zero=0|1").is_ok());
  ASSERT_TRUE(f.add("schedule=gpipe|1f1b").is_ok());  // gpipe is afab's other name
  ASSERT_TRUE(f.add("sp=true").is_ok());
  EXPECT_TRUE(f.allows("zero", 1));
  EXPECT_FALSE(f.allows("zero", 2));
  EXPECT_TRUE(f.allows("schedule", "afab"));
  EXPECT_TRUE(f.allows("sp", "on"));
  EXPECT_TRUE(f.allows("cp", 4));  // not fixed: anything goes
  EXPECT_EQ(f.to_string(), "schedule=afab|1f1b sp=on zero=0|1");

  auto bad_value = f.add("recompute=some");
  ASSERT_FALSE(bad_value.is_ok());
  EXPECT_NE(bad_value.message().find("recompute"), std::string::npos) << bad_value.message();
  EXPECT_NE(bad_value.message().find("some"), std::string::npos);
  auto bad_key = f.add("tensor=2");
  ASSERT_FALSE(bad_key.is_ok());
  EXPECT_NE(bad_key.message().find("tensor"), std::string::npos);
  EXPECT_FALSE(f.add("gbs=8").is_ok());
  EXPECT_FALSE(f.add("zero=2").is_ok());  // twice
  EXPECT_FALSE(f.add("mbs=1|").is_ok());  // empty value
  EXPECT_FALSE(f.add("zero4").is_ok());
  EXPECT_FALSE(f.add("zero=").is_ok());
  EXPECT_FALSE(f.add("tp=0").is_ok());
}

// Every candidate satisfies every DESIGN.md constraint, re-checked here from first principles
// rather than through resolve_layout.
void expect_all_valid(const SearchSpace& s, const SearchOptions& o) {
  const auto& m = o.model;
  for (const Layout& l : s.candidates) {
    SCOPED_TRACE(format_layout(l));
    EXPECT_EQ(m.num_heads % l.tp, 0);
    const bool kv_ok = m.num_kv_heads % l.tp == 0 || l.tp % m.num_kv_heads == 0;
    EXPECT_TRUE(kv_ok);
    EXPECT_EQ(static_cast<int64_t>(l.tp) * l.pp * l.cp * l.dp_degree(), o.gpus);
    EXPECT_LE(static_cast<int64_t>(l.pp) * l.vpp_degree(), m.num_layers);
    EXPECT_EQ(o.gbs % (static_cast<int64_t>(l.mbs) * l.dp_degree()), 0);
    EXPECT_EQ(l.global_batch(), o.gbs);
    if (l.schedule == Schedule::kInterleaved) {
      EXPECT_GE(l.num_microbatches(), l.pp);
    }
    if (l.cp > 1) {
      EXPECT_EQ(m.seq_len % (2 * l.cp), 0);
    }
    if (m.num_experts > 0) {
      EXPECT_EQ(m.num_experts % l.ep, 0);
      EXPECT_EQ((static_cast<int64_t>(l.tp) * l.cp * l.dp_degree()) % (l.ep * l.etp), 0);
    } else {
      EXPECT_EQ(l.ep, 1);
      EXPECT_EQ(l.etp, 1);
    }
    auto counts = stage_layer_counts(l, m.num_layers);
    ASSERT_TRUE(counts.is_ok());
    int sum = 0;
    for (int c : *counts) {
      EXPECT_GE(c, 1);
      sum += c;
    }
    EXPECT_EQ(sum, m.num_layers);
  }
  // No rejection by core's resolve_layout: the enumeration follows the same rules.
  for (const auto& p : s.pruned) EXPECT_EQ(p.rule.find("rejected"), std::string::npos) << p.rule;
}

// The K/V exchange of context parallelism is the ring unless --fix names others; the fix shapes
// the layouts with cp > 1 and leaves those without CP alone. a2a only where cp divides the heads
// of each TP rank (8 KV heads: cp 2, 4, 8 at tp 1; cp 2 at tp 4).
TEST(SearchSpace, CpCommIsTheRingUnlessFixed) {
  SearchOptions o = options(llama8b(), 16, 16);
  ASSERT_TRUE(o.fixes.add("recompute=none").is_ok());
  ASSERT_TRUE(o.fixes.add("zero=1").is_ok());
  for (const Layout& l : enumerate(o).candidates) EXPECT_FALSE(l.cp_comm.has_value());
  ASSERT_TRUE(o.fixes.add("cp_comm=a2a|all_gather").is_ok());
  int no_cp = 0, a2a = 0, gathered = 0;
  for (const Layout& l : enumerate(o).candidates) {
    if (l.cp == 1) {
      ++no_cp;
      continue;
    }
    ASSERT_TRUE(l.cp_comm.has_value()) << format_layout(l);
    if (*l.cp_comm == CpComm::kA2a) {
      ++a2a;
      EXPECT_EQ((8 / std::min(l.tp, 8)) % l.cp, 0) << format_layout(l);
    }
    gathered += *l.cp_comm == CpComm::kAllGather ? 1 : 0;
    EXPECT_NE(*l.cp_comm, CpComm::kP2p);
  }
  EXPECT_GT(no_cp, 0);
  EXPECT_GT(a2a, 0);
  EXPECT_GT(gathered, a2a);  // all_gather has no head constraint
}

TEST(SearchSpace, DenseConstraintsHoldAndSpaceIsComplete) {
  // 8B on 16 GPUs, gbs 32. Factorizations tp·cp·pp·dp = 16 with tp | 32 heads (and 8 KV heads:
  // tp ≤ 8 divides them, tp=16 is a multiple), cp | 8192/2, pp ≤ 32, dp | 32.
  auto o = options(llama8b(), 16, 32);
  o.allow_cross_node_tp = true;
  o.max_microbatch_tokens = int64_t{1} << 40;
  o.max_vpp = 1 << 20;
  o.min_cp_tokens = 1;
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  ASSERT_FALSE(s.candidates.empty());
  std::set<std::tuple<int, int, int, int>> grids;
  std::set<std::string> strings;
  for (const auto& l : s.candidates) {
    grids.insert({l.tp, l.cp, l.pp, l.dp_degree()});
    EXPECT_TRUE(strings.insert(format_layout(l)).second) << "duplicate " << format_layout(l);
  }
  // Every ordered factorization of 2^4 into four powers of two: C(4+3, 3) = 35; all are valid
  // here (gbs 32 takes every dp ≤ 16, 32 layers every pp ≤ 16).
  EXPECT_EQ(grids.size(), 35u);
  // With the caps lifted only two rules remain: dualpipe (asked for by name only) and interleaved
  // chunks that do not divide the 32 layers (pp=2, vpp=3 would be 6 chunks).
  for (const auto& p : s.pruned) {
    EXPECT_TRUE(p.rule.find("dualpipe") != std::string::npos ||
                p.rule.find("not divisible") != std::string::npos)
        << p.rule;
  }
}

TEST(SearchSpace, HeadsKvHeadsAndGbsRestrictTheGrid) {
  // 24 heads, 8 KV heads, 12 GPUs: tp ∈ divisors of 12 = {1,2,3,4,6,12}; 24 % tp == 0 for all,
  // but KV heads 8: tp=3, 6, 12 neither divide 8 nor are multiples of it -> only tp ∈ {1,2,4}.
  LayoutConstraints m{.num_layers = 12, .num_heads = 24, .num_kv_heads = 8, .seq_len = 2048};
  auto o = options(m, 12, 8);  // gbs 8: dp must divide 8, so dp ∈ {1,2,4}
  o.allow_cross_node_tp = true;
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  std::set<int> tps, dps;
  for (const auto& l : s.candidates) {
    tps.insert(l.tp);
    dps.insert(l.dp_degree());
  }
  EXPECT_EQ(tps, (std::set<int>{1, 2, 4}));
  EXPECT_EQ(dps, (std::set<int>{1, 2, 4}));  // dp=3, 6, 12 do not divide gbs 8
}

TEST(SearchSpace, PipelineChunksNeverExceedLayers) {
  // 4 layers on 16 GPUs: pp ≤ 4, and interleaving needs pp·vpp ≤ 4, so only pp=2, vpp=2.
  LayoutConstraints m{.num_layers = 4, .num_heads = 16, .num_kv_heads = 16, .seq_len = 1024};
  const auto o = options(m, 16, 16);
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  std::set<int> pps;
  for (const auto& l : s.candidates) {
    pps.insert(l.pp);
    if (l.schedule == Schedule::kInterleaved) {
      EXPECT_EQ(l.pp, 2);
      EXPECT_EQ(l.vpp_degree(), 2);
    }
  }
  EXPECT_EQ(pps, (std::set<int>{1, 2, 4}));
}

TEST(SearchSpace, MoeExpertGridDividesExperts) {
  // Mixtral-like: 8 experts, 32 heads, 8 KV heads, 32 layers on 16 GPUs.
  LayoutConstraints m{
      .num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .num_experts = 8, .seq_len = 4096};
  auto o = options(m, 16, 64);
  ASSERT_TRUE(o.fixes.add("recompute=none").is_ok());
  ASSERT_TRUE(o.fixes.add("zero=1").is_ok());
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  std::set<int> eps;
  for (const auto& l : s.candidates) eps.insert(l.ep);
  // ep | 8 experts and ep·etp | tp·cp·dp ≤ 16: ep ∈ {1,2,4,8}; 16 never divides 8 experts.
  EXPECT_EQ(eps, (std::set<int>{1, 2, 4, 8}));
}

TEST(SearchSpace, UnevenSplitsWhenLayersDoNotDivide) {
  // 126 layers (Llama-3.1-405B) on pp=16: balanced split 126 = 14·8 + 2·7 (the remainder goes to
  // the middle stages, ends lighter); pinned variants: last lighter, 6 + 15·8 = 126, and first
  // lighter. "Both ends 7, middle 8" equals the balanced split and is not repeated.
  auto pins = pinned_splits(126, 16);
  EXPECT_EQ(pins, (std::vector<std::pair<int, int>>{{0, 6}, {6, 0}}));
  EXPECT_TRUE(pinned_splits(32, 4).empty());  // 32 = 4·8: even, nothing to pin

  // 30 layers on pp=4: balanced [7,8,8,7]; both ends lighter with even middle: e with (30-2e)%2==0
  // and e ≤ (30-2e)/2: e=7 -> [7,8,8,7], same as balanced; last lighter: (30-l)%3==0, l ≤ (30-l)/3
  // -> l=6 -> [8,8,8,6]; first lighter [6,8,8,8].
  EXPECT_EQ(pinned_splits(30, 4), (std::vector<std::pair<int, int>>{{0, 6}, {6, 0}}));

  LayoutConstraints m{.num_layers = 30, .num_heads = 16, .num_kv_heads = 16, .seq_len = 2048};
  auto o = options(m, 4, 8);
  ASSERT_TRUE(o.fixes.add("pp=4").is_ok());
  ASSERT_TRUE(o.fixes.add("schedule=1f1b").is_ok());
  ASSERT_TRUE(o.fixes.add("mbs=1").is_ok());
  ASSERT_TRUE(o.fixes.add("recompute=none").is_ok());
  ASSERT_TRUE(o.fixes.add("zero=0").is_ok());
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  // pp=4 on 4 GPUs: tp=cp=dp=1; three splits (balanced, last 6, first 6).
  ASSERT_EQ(s.candidates.size(), 3u);
  std::set<std::vector<int>> splits;
  for (const auto& l : s.candidates) {
    auto c = stage_layer_counts(l, 30);
    ASSERT_TRUE(c.is_ok());
    splits.insert(*c);
    // Balanced: no stage more than one layer off the mean of 7.5.
    if (!l.pp_first && !l.pp_last) {
      EXPECT_EQ(*std::max_element(c->begin(), c->end()) - *std::min_element(c->begin(), c->end()),
                1);
    }
  }
  EXPECT_EQ(splits, (std::set<std::vector<int>>{{7, 8, 8, 7}, {8, 8, 8, 6}, {6, 8, 8, 8}}));
}

TEST(SearchSpace, FixesRestrictEveryKey) {
  auto o = options(llama8b(4096), 64, 256);
  ASSERT_TRUE(o.fixes.add("zero=0|1").is_ok());
  ASSERT_TRUE(o.fixes.add("cp=1").is_ok());
  ASSERT_TRUE(o.fixes.add("recompute=none").is_ok());
  ASSERT_TRUE(o.fixes.add("mbs=1|2|32").is_ok());
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  ASSERT_FALSE(s.candidates.empty());
  std::set<int> mbs;
  for (const auto& l : s.candidates) {
    EXPECT_LE(l.zero, 1);
    EXPECT_EQ(l.cp, 1);
    EXPECT_EQ(l.recompute, Recompute::kNone);
    mbs.insert(l.mbs);
  }
  // mbs=32 at seq 4096 is 131072 tokens, above the 65536-token cap, but a --fix names it.
  EXPECT_EQ(mbs, (std::set<int>{1, 2, 32}));
}

// DualPipe, asked for by name: two copies of a pp-stage pipeline, so every even pp up to the
// layer count (a 4-layer model at pp = 4), an even number of micro-batches >= 2·pp, ZeRO 0-2.
TEST(SearchSpace, DualPipeWhenAskedForWithItsConstraints) {
  LayoutConstraints tiny{
      .num_layers = 4, .num_heads = 8, .num_kv_heads = 4, .num_experts = 0, .seq_len = 1024};
  auto o = options(tiny, 8, 16);
  ASSERT_TRUE(o.fixes.add("schedule=dualpipe").is_ok());
  const SearchSpace s = enumerate(o);
  std::set<int> pps;
  for (const auto& l : s.candidates) {
    EXPECT_EQ(l.schedule, Schedule::kDualPipe);
    EXPECT_EQ(l.pp % 2, 0);
    EXPECT_EQ(l.num_microbatches() % 2, 0);
    EXPECT_GE(l.num_microbatches(), 2 * l.pp);
    EXPECT_LE(l.zero, 2);
    pps.insert(l.pp);
  }
  EXPECT_EQ(pps, (std::set<int>{2, 4}));
}

// DualPipeV, asked for by name: one copy of the model in 2·pp chunks, so any pp >= 2 with
// 2·pp <= layers (a 6-layer model: pp 2 and 3), micro-batches >= 2·pp, every ZeRO stage.
TEST(SearchSpace, DualPipeVWhenAskedForWithItsConstraints) {
  LayoutConstraints tiny{
      .num_layers = 6, .num_heads = 8, .num_kv_heads = 4, .num_experts = 0, .seq_len = 1024};
  auto o = options(tiny, 6, 24);
  ASSERT_TRUE(o.fixes.add("schedule=dualpipev").is_ok());
  const SearchSpace s = enumerate(o);
  std::set<int> pps, zeros;
  for (const auto& l : s.candidates) {
    EXPECT_EQ(l.schedule, Schedule::kDualPipeV);
    EXPECT_GE(l.num_microbatches(), 2 * l.pp);
    EXPECT_LE(2 * l.pp, 6);
    pps.insert(l.pp);
    zeros.insert(l.zero);
  }
  EXPECT_EQ(pps, (std::set<int>{2, 3}));
  EXPECT_EQ(zeros, (std::set<int>{0, 1, 2, 3}));
  // Rank 0 runs both ends of the V (embedding, LM head): with 12 layers on pp = 2 (chunks of 3)
  // its two chunks may also hold 1 or 2 layers each, or the head's chunk none and the
  // embedding's 1 to 3.
  const std::vector<std::pair<int, int>> ends12{{1, 1}, {2, 2}, {1, 0}, {2, 0}, {3, 0}};
  EXPECT_EQ(two_chunk_end_splits(12, 2, true), ends12);
  EXPECT_EQ(two_chunk_end_splits(6, 3, true), (std::vector<std::pair<int, int>>{{1, 0}}));
  // DualPipe: ranks 0 and pp-1 hold both ends; at pp = 2 every rank holds everything.
  EXPECT_EQ(two_chunk_end_splits(12, 4, false), ends12);
  EXPECT_TRUE(two_chunk_end_splits(12, 2, false).empty());
  tiny.num_layers = 12;
  auto o12 = options(tiny, 2, 8);
  ASSERT_TRUE(o12.fixes.add("schedule=dualpipev").is_ok());
  std::set<std::pair<int, int>> ends;
  for (const auto& l : enumerate(o12).candidates)
    ends.insert({l.pp_first.value_or(-1), l.pp_last.value_or(-1)});
  std::set<std::pair<int, int>> expected(ends12.begin(), ends12.end());
  expected.insert({-1, -1});  // balanced
  EXPECT_EQ(ends, expected);
}

// ZB-V, asked for by name: the V of DualPipeV (2·pp <= layers, lighter ends for rank 0) with
// any number of micro-batches.
TEST(SearchSpace, ZeroBubbleVWhenAskedFor) {
  LayoutConstraints tiny{
      .num_layers = 12, .num_heads = 8, .num_kv_heads = 4, .num_experts = 0, .seq_len = 1024};
  auto o = options(tiny, 4, 4);
  ASSERT_TRUE(o.fixes.add("schedule=zb-v").is_ok());
  const SearchSpace s = enumerate(o);
  std::set<int> pps;
  std::set<int64_t> microbatches;
  for (const auto& l : s.candidates) {
    EXPECT_EQ(l.schedule, Schedule::kZbV);
    EXPECT_LE(2 * l.pp, 12);
    pps.insert(l.pp);
    microbatches.insert(l.num_microbatches());
  }
  EXPECT_EQ(pps, (std::set<int>{2, 4}));
  EXPECT_TRUE(microbatches.count(1)) << "fewer micro-batches than stages are allowed";
}

TEST(SearchSpace, PruningIsCountedNeverSilent) {
  // 8B on 32 GPUs of 8-GPU nodes: tp=16 and 32 cross nodes. Allowing them adds exactly the layouts
  // the rule reports.
  auto o = options(llama8b(), 32, 64);
  ASSERT_TRUE(o.fixes.add("recompute=none").is_ok());
  ASSERT_TRUE(o.fixes.add("zero=1").is_ok());
  const SearchSpace pruned = enumerate(o);
  expect_all_valid(pruned, o);
  for (const auto& l : pruned.candidates) EXPECT_LE(l.tp, 8);
  o.allow_cross_node_tp = true;
  o.max_microbatch_tokens = int64_t{1} << 40;
  o.max_vpp = 1 << 20;
  o.min_cp_tokens = 1;
  const SearchSpace full = enumerate(o);
  // Every rule but dualpipe and uneven vpp is lifted; those two remain, and the totals agree.
  int64_t remaining = 0;
  for (const auto& p : full.pruned) remaining += p.candidates;
  EXPECT_EQ(static_cast<int64_t>(full.candidates.size()) + remaining,
            static_cast<int64_t>(pruned.candidates.size()) + pruned.pruned_total());
  bool saw_tp_rule = false;
  for (const auto& p : pruned.pruned) saw_tp_rule |= p.rule.find("tp or etp") != std::string::npos;
  EXPECT_TRUE(saw_tp_rule);
}

// Layouts a rule sets aside are counted without being walked, except while --explain's layout
// (SearchOptions::probe) is looked for among them, when each is visited. A probe that is a
// candidate is never found among the set-aside ones, so with it the walk visits every layout: the
// counts of both ways must agree, rule by rule, as must the candidates.
TEST(SearchSpace, SetAsideLayoutsAreCountedAsTheWalkWouldCountThem) {
  // A MoE model on 64 GPUs of 8-GPU domains: tp, etp above 8, short cp shards, dualpipe, vpp and
  // micro-batch caps all set layouts aside.
  LayoutConstraints m{
      .num_layers = 24, .num_heads = 32, .num_kv_heads = 8, .num_experts = 16, .seq_len = 4096};
  auto o = options(m, 64, 256);
  o.max_microbatch_tokens = 16384;
  o.max_vpp = 2;
  const SearchSpace counted = enumerate(o);
  ASSERT_FALSE(counted.candidates.empty());
  ASSERT_GE(counted.pruned.size(), 4u);
  o.probe = counted.candidates.back();
  const SearchSpace walked = enumerate(o);
  EXPECT_TRUE(walked.probe_rule.empty());
  ASSERT_EQ(walked.pruned.size(), counted.pruned.size());
  for (size_t i = 0; i < counted.pruned.size(); ++i) {
    EXPECT_EQ(walked.pruned[i].rule, counted.pruned[i].rule);
    EXPECT_EQ(walked.pruned[i].candidates, counted.pruned[i].candidates) << counted.pruned[i].rule;
  }
  EXPECT_EQ(walked.candidates, counted.candidates);
}

// The parts of a walk (SpaceWalk) are what a search walks on several threads, finishing in any
// order: walked last to first and put back in their order, they give the enumeration's candidates,
// counts and probe rule, and each part is one parallel grid (tp, cp, pp, dp, ep, etp).
TEST(SearchSpace, PartsWalkedInAnyOrderJoinToTheEnumeration) {
  LayoutConstraints m{
      .num_layers = 24, .num_heads = 32, .num_kv_heads = 8, .num_experts = 16, .seq_len = 4096};
  auto o = options(m, 64, 256);
  o.max_vpp = 2;
  // tp=16 leaves the 8-GPU NVLink domain: set aside by a rule, in a part after others.
  Layout probe;
  probe.tp = 16;
  probe.pp = 2;
  probe.mbs = 1;
  probe.gbs = 256;
  o.probe = resolve_layout(probe, m, 64).value();
  const SearchSpace whole = enumerate(o);
  ASSERT_FALSE(whole.probe_rule.empty());
  auto walk = SpaceWalk::make(o);
  ASSERT_TRUE(walk.is_ok()) << walk.status().message();
  ASSERT_GT(walk->parts(), 10u);
  std::vector<SpacePart> parts(walk->parts());
  for (size_t i = parts.size(); i-- > 0;) parts[i] = walk->walk(i);
  std::vector<Layout> joined;
  for (const SpacePart& p : parts) {
    for (const Layout& l : p.candidates) {
      const Layout& a = p.candidates.front();
      EXPECT_TRUE(l.tp == a.tp && l.cp == a.cp && l.pp == a.pp && l.dp == a.dp && l.ep == a.ep &&
                  l.etp == a.etp)
          << format_layout(l) << " and " << format_layout(a) << " in one part";
    }
    joined.insert(joined.end(), p.candidates.begin(), p.candidates.end());
  }
  EXPECT_EQ(joined, whole.candidates);
  const SearchSpace set_aside = walk->set_aside(parts);
  EXPECT_TRUE(set_aside.candidates.empty());
  EXPECT_EQ(set_aside.probe_rule, whole.probe_rule);
  ASSERT_EQ(set_aside.pruned.size(), whole.pruned.size());
  for (size_t i = 0; i < whole.pruned.size(); ++i) {
    EXPECT_EQ(set_aside.pruned[i].rule, whole.pruned[i].rule);
    EXPECT_EQ(set_aside.pruned[i].candidates, whole.pruned[i].candidates);
  }
}

// An export target's limits (SearchOptions::runnable, from plan --emit): layouts with a value it
// does not run are counted under one rule, not enumerated; the rest of the space is untouched,
// and a value named in --fix is ranked anyway.
TEST(SearchSpace, ExportTargetLimitsAreCountedAndLiftedByFixes) {
  SearchOptions o = options(llama8b(4096), 16, 64);
  const SearchSpace all = enumerate(o);
  o.runnable = {{"schedule", {"afab", "1f1b"}}, {"zero", {"0", "1"}}};
  o.runnable_by = "nanotron";
  const SearchSpace limited = enumerate(o);
  int64_t kept = 0;
  for (const Layout& l : all.candidates) {
    kept += (l.schedule == Schedule::kAfab || l.schedule == Schedule::k1F1B) && l.zero <= 1;
  }
  EXPECT_EQ(static_cast<int64_t>(limited.candidates.size()), kept);
  EXPECT_LT(kept, static_cast<int64_t>(all.candidates.size()));
  int64_t counted = -1;
  for (const PruneRule& r : limited.pruned) {
    if (r.rule.find("layouts nanotron cannot run as predicted") != std::string::npos)
      counted = r.candidates;
  }
  EXPECT_EQ(counted, static_cast<int64_t>(all.candidates.size()) - kept);
  EXPECT_EQ(limited.pruned_total() - all.pruned_total(), counted);
  // Named in a fix, ZeRO-3 is ranked though the target lacks it.
  ASSERT_TRUE(o.fixes.add("zero=3").is_ok());
  const SearchSpace named = enumerate(o);
  EXPECT_FALSE(named.candidates.empty());
  for (const Layout& l : named.candidates) EXPECT_EQ(l.zero, 3);
}

// Megatron-core refuses EP with TP unless SP is on (TransformerConfig raises): for that target
// the sp=off layouts with ep > 1 and tp > 1 are counted under the export rule and the rest stay;
// --fix sp=off ranks them anyway.
TEST(SearchSpace, MegatronNeedsSpWithExpertAndTensorParallelism) {
  LayoutConstraints moe{
      .num_layers = 16, .num_heads = 32, .num_kv_heads = 8, .num_experts = 8, .seq_len = 4096};
  SearchOptions o = options(moe, 16, 64);
  ASSERT_TRUE(o.fixes.add("zero=1").is_ok());
  const SearchSpace all = enumerate(o);
  auto refused = [](const Layout& l) { return l.ep > 1 && l.tp > 1 && !l.sequence_parallel(); };
  const auto n_refused = std::count_if(all.candidates.begin(), all.candidates.end(), refused);
  ASSERT_GT(n_refused, 0);
  o.runnable_by = "Megatron-LM";
  o.refused = {{"sp=on with ep and tp > 1",
                [](const Layout& l) { return l.ep > 1 && l.tp > 1 && !l.sequence_parallel(); },
                "sp"}};
  const SearchSpace limited = enumerate(o);
  EXPECT_EQ(std::count_if(limited.candidates.begin(), limited.candidates.end(), refused), 0);
  EXPECT_EQ(static_cast<int64_t>(limited.candidates.size()),
            static_cast<int64_t>(all.candidates.size()) - n_refused);
  bool said = false;
  for (const PruneRule& r : limited.pruned)
    said |=
        r.rule.find("sp=on with ep and tp > 1") != std::string::npos && r.candidates == n_refused;
  EXPECT_TRUE(said);
  ASSERT_TRUE(o.fixes.add("sp=off").is_ok());
  const SearchSpace named = enumerate(o);
  EXPECT_GT(std::count_if(named.candidates.begin(), named.candidates.end(), refused), 0);
}

// Selective recompute comes in Megatron-core's default (the attention core) for every model and,
// for MoE and MLA models, also with the output-discarding modules (norms, expert activation, MLA
// up projections); --fix recompute_modules searches exactly what it names; a target that cannot
// run modules (torchtitan) sets the lean variant aside under its counted rule.
TEST(SearchSpace, RecomputeModulesForMoeAndMlaModels) {
  auto modules = [](const SearchSpace& s) {
    std::set<std::string> out;
    for (const Layout& l : s.candidates) {
      if (l.recompute == Recompute::kSelective)
        out.insert(format_recompute_modules(l.recompute_module_set()));
    }
    return out;
  };
  auto dense = options(llama8b(4096), 16, 64);
  ASSERT_TRUE(dense.fixes.add("zero=1").is_ok());
  EXPECT_EQ(modules(enumerate(dense)), (std::set<std::string>{"core_attn"}));

  LayoutConstraints moe{
      .num_layers = 32, .num_heads = 32, .num_kv_heads = 8, .num_experts = 8, .seq_len = 4096};
  auto o = options(moe, 16, 64);
  ASSERT_TRUE(o.fixes.add("zero=1").is_ok());
  EXPECT_EQ(modules(enumerate(o)),
            (std::set<std::string>{"core_attn", "core_attn+layernorm+moe_act"}));
  LayoutConstraints mla = moe;
  mla.mla = true;
  auto om = options(mla, 16, 64);
  ASSERT_TRUE(om.fixes.add("zero=1").is_ok());
  EXPECT_EQ(modules(enumerate(om)),
            (std::set<std::string>{"core_attn", "core_attn+layernorm+moe_act+mla_up_proj"}));

  auto fixed = o;
  ASSERT_TRUE(fixed.fixes.add("recompute_modules=mlp+core_attn").is_ok());
  const SearchSpace f = enumerate(fixed);
  EXPECT_EQ(modules(f), (std::set<std::string>{"core_attn+mlp"}));
  for (const Layout& l : f.candidates) EXPECT_EQ(l.recompute, Recompute::kSelective);

  auto titan = o;
  titan.runnable = {{"recompute_modules", {"none", "core_attn"}}};
  titan.runnable_by = "torchtitan";
  EXPECT_EQ(modules(enumerate(titan)), (std::set<std::string>{"core_attn"}));
}

TEST(SearchSpace, DeterministicOrderAndNoDuplicates) {
  auto o = options(llama8b(), 64, 128);
  const SearchSpace a = enumerate(o);
  const SearchSpace b = enumerate(o);
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  std::set<std::string> seen;
  for (size_t i = 0; i < a.candidates.size(); ++i) {
    EXPECT_EQ(a.candidates[i], b.candidates[i]);
    EXPECT_TRUE(seen.insert(format_layout(a.candidates[i])).second);
  }
}

TEST(SearchSpace, EquivalentValuesAppearOnce) {
  // One GPU: dp·cp = 1, so ZeRO 1-3 would shard over a group of one: only zero=0 appears; tp=1,
  // so sp is off; pp=1, so one schedule.
  auto o = options(llama8b(), 1, 4);
  const SearchSpace s = enumerate(o);
  expect_all_valid(s, o);
  for (const auto& l : s.candidates) {
    EXPECT_EQ(l.zero, 0);
    EXPECT_FALSE(l.sequence_parallel());
    EXPECT_EQ(l.schedule, Schedule::k1F1B);
  }
  // mbs ∈ {1,2,4} × recompute 3 = 9 layouts.
  EXPECT_EQ(s.candidates.size(), 9u);
}

TEST(SearchSpace, BadOptionsAreErrors) {
  EXPECT_FALSE(enumerate_layouts(options(llama8b(), 0, 8)).is_ok());
  EXPECT_FALSE(enumerate_layouts(options(llama8b(), 8, 0)).is_ok());
  EXPECT_FALSE(enumerate_layouts(options(LayoutConstraints{}, 8, 8)).is_ok());
}

}  // namespace
}  // namespace scaleplan::planner
