#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "sim/engine.h"
#include "sim/metrics.h"
#include "sim/trace.h"
#include "tests/sim/pipeline_programs.h"

namespace scaleplan::sim {
namespace {

constexpr Duration ms(double x) { return Duration::ticks(static_cast<int64_t>(x * 1e9)); }

// L layers of backward, each `tb`; after each layer a DP bucket of `c` on the DP stream.
Program dp_backward(int layers, Duration tb, Duration c) {
  Program p;
  p.add_rank({});
  p.add_label({"op", "", Flops(0)});
  OpId prev = 0xFFFFFFFFu;
  for (int l = 0; l < layers; ++l) {
    prev = l == 0 ? p.add_op(0, {.phase = Phase::kBackward, .duration = tb})
                  : p.add_op(0, {.phase = Phase::kBackward, .duration = tb}, {prev});
    p.add_op(0,
             {.kind = OpKind::kCollective,
              .stream = StreamKind::kDp,
              .duration = c,
              .match = p.add_match(1)},
             {prev});
  }
  return p;
}

TEST(Overlap, DpReductionHiddenWhenTheBackwardIsLongEnough) {
  // Buckets of 1 ms after 2 ms layers: each bucket ends before the next layer does, so only the
  // last bucket, issued after the last layer, is exposed: 1 ms of 8 layers · 2 ms + 1 ms.
  Program p = dp_backward(8, ms(2), ms(1));
  Timeline t = Engine(p).run().value();
  EXPECT_EQ(t.makespan.since_start(), ms(17));
  EXPECT_EQ(breakdown(p, t)[0].exposed_comm[static_cast<int>(CommClass::kDp)], ms(1));
}

TEST(Overlap, DpReductionExposedWhenTheBackwardIsShort) {
  // Buckets of 3 ms after 1 ms layers: the DP stream is the bottleneck. The first starts at 1 ms,
  // then they run back to back: the last ends at 1 + 8·3 = 25 ms; compute ends at 8 ms, so 17 ms
  // are exposed.
  Program p = dp_backward(8, ms(1), ms(3));
  Timeline t = Engine(p).run().value();
  EXPECT_EQ(t.makespan.since_start(), ms(25));
  EXPECT_EQ(breakdown(p, t)[0].exposed_comm[static_cast<int>(CommClass::kDp)], ms(17));
}

// ZeRO-3 forward: all-gather layer l (g) before its compute (tf); with prefetch the gather of l+1
// is issued when layer l starts, without it when layer l ends.
Program zero3_forward(int layers, Duration tf, Duration g, bool prefetch) {
  Program p;
  p.add_rank({});
  p.add_label({"op", "", Flops(0)});
  auto gather = [&](std::initializer_list<OpId> deps) {
    return p.add_op(0,
                    {.kind = OpKind::kCollective,
                     .stream = StreamKind::kDp,
                     .duration = g,
                     .match = p.add_match(1)},
                    deps);
  };
  OpId ag = gather({});
  OpId prev = 0xFFFFFFFFu;
  for (int l = 0; l < layers; ++l) {
    const OpId begin = l == 0 ? p.add_op(0, {.phase = Phase::kForward}, {ag})
                              : p.add_op(0, {.phase = Phase::kForward}, {prev, ag});
    if (prefetch && l + 1 < layers) ag = gather({begin});
    prev = p.add_op(0, {.phase = Phase::kForward, .duration = tf}, {begin});
    if (!prefetch && l + 1 < layers) ag = gather({prev});
  }
  return p;
}

TEST(Overlap, ZeroThreePrefetchHidesAllGathers) {
  // 8 layers of 3 ms, gathers of 2 ms. With prefetch only the first gather is exposed:
  // 2 + 8·3 = 26 ms. Without, every gather is: 8·(2 + 3) = 40 ms.
  Program with = zero3_forward(8, ms(3), ms(2), true);
  Program without = zero3_forward(8, ms(3), ms(2), false);
  Timeline a = Engine(with).run().value();
  Timeline b = Engine(without).run().value();
  EXPECT_EQ(a.makespan.since_start(), ms(26));
  EXPECT_EQ(b.makespan.since_start(), ms(40));
  EXPECT_EQ(breakdown(with, a)[0].exposed_comm[static_cast<int>(CommClass::kDp)], ms(2));
}

TEST(Trace, FollowsThePerfettoRules) {
  // Every X slice on a (pid, tid) lane nests (no partial overlap), every pid and tid used has a
  // process_name / thread_name metadata event, and times are non-negative. Every send has a flow
  // arrow to where it is received: an "s" and an "f" event with one id, each inside a slice of
  // its lane (Perfetto binds a flow event to the slice enclosing it).
  Program p = testing::pipeline_program(
      Schedule::kInterleaved, 4, 2, 8,
      {.forward = ms(1), .backward = ms(2), .p2p = ms(0.25), .p2p_link = 1});
  Timeline t = Engine(p, {.compute_slowdown_under_comm = 1.2}).run().value();
  const auto j = nlohmann::json::parse(chrome_trace(p, t, {.title = "test"}));
  std::set<int> named_pids;
  std::set<std::pair<int, int>> named_tids;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> lanes;
  std::map<int64_t, std::vector<nlohmann::json>> flows;  // id -> its events
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s" || e["ph"] == "f") flows[e["id"].get<int64_t>()].push_back(e);
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") named_pids.insert(e["pid"].get<int>());
    if (ph == "M" && e["name"] == "thread_name")
      named_tids.insert({e["pid"].get<int>(), e["tid"].get<int>()});
    if (ph == "X") {
      EXPECT_GE(e["ts"].get<double>(), 0);
      EXPECT_GT(e["dur"].get<double>(), 0);
      lanes[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {e["ts"].get<double>(), e["dur"].get<double>()});
      EXPECT_TRUE(e["args"].contains("phase"));
    }
  }
  ASSERT_FALSE(lanes.empty());
  for (auto& [lane, slices] : lanes) {
    EXPECT_TRUE(named_pids.count(lane.first)) << "pid " << lane.first;
    EXPECT_TRUE(named_tids.count(lane)) << "tid " << lane.second;
    std::sort(slices.begin(), slices.end());
    std::vector<double> open_ends;  // stack of enclosing slice ends
    for (const auto& [ts, dur] : slices) {
      const double end = ts + dur;
      while (!open_ends.empty() && open_ends.back() <= ts + 1e-9) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(end, open_ends.back() + 1e-9) << "partial overlap on lane";
      }
      open_ends.push_back(end);
    }
  }
  int sends = 0;
  for (OpId i = 0; i < p.num_ops(); ++i) sends += p.ops()[i].kind == OpKind::kSend ? 1 : 0;
  ASSERT_GT(sends, 0);
  EXPECT_EQ(static_cast<int>(flows.size()), sends);
  for (const auto& [id, events] : flows) {
    ASSERT_EQ(events.size(), 2u) << "flow " << id;
    EXPECT_EQ(events[0]["ph"], "s");
    EXPECT_EQ(events[1]["ph"], "f");
    EXPECT_EQ(events[0]["tid"].get<int>(), static_cast<int>(StreamKind::kPpSend));
    for (const auto& e : events) {
      const double ts = e["ts"].get<double>();
      const auto& lane = lanes[{e["pid"].get<int>(), e["tid"].get<int>()}];
      const bool inside = std::any_of(lane.begin(), lane.end(), [&](const auto& x) {
        return x.first <= ts && ts < x.first + x.second;
      });
      EXPECT_TRUE(inside) << "flow " << id << " " << e.dump();
    }
    EXPECT_LE(events[0]["ts"].get<double>(), events[1]["ts"].get<double>()) << "flow " << id;
  }
}

}  // namespace
}  // namespace scaleplan::sim
