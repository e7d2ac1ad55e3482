#include "sim/engine.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "sim/metrics.h"
#include "sim/schedule.h"
#include "sim/trace.h"
#include "tests/sim/pipeline_programs.h"

namespace scaleplan::sim {
namespace {

using testing::PassTimes;
using testing::pipeline_program;

constexpr Duration ms(double x) { return Duration::ticks(static_cast<int64_t>(x * 1e9)); }

Timeline run(const Program& p, EngineOptions o = {}) {
  EXPECT_TRUE(p.validate().is_ok()) << p.validate().message();
  auto t = Engine(p, o).run();
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

OpSpec compute(Duration d, uint32_t label = 0) {
  return {.kind = OpKind::kCompute, .duration = d, .label = label};
}

Program one_rank() {
  Program p;
  p.add_rank({});
  p.add_label({"op", "", Flops(0)});
  return p;
}

TEST(Engine, StreamRunsOpsInOrderAndDepsAcrossStreams) {
  // Compute: A (2 ms) then B (3 ms). TP stream: C (1 ms) depends on A. So A [0,2], B [2,5], C
  // [2,3].
  Program p = one_rank();
  OpId a = p.add_op(0, compute(ms(2)));
  OpId b = p.add_op(0, compute(ms(3)));
  OpId c = p.add_op(0,
                    {.kind = OpKind::kCollective,
                     .stream = StreamKind::kTp,
                     .duration = ms(1),
                     .match = p.add_match(1)},
                    {a});
  Timeline t = run(p);
  EXPECT_EQ(t.end[a].since_start(), ms(2));
  EXPECT_EQ(t.start[b].since_start(), ms(2));
  EXPECT_EQ(t.end[b].since_start(), ms(5));
  EXPECT_EQ(t.start[c].since_start(), ms(2));
  EXPECT_EQ(t.end[c].since_start(), ms(3));
  EXPECT_EQ(t.makespan.since_start(), ms(5));
}

TEST(Engine, CollectiveStartsWhenAllMembersArrive) {
  // Rank 0 reaches the all-reduce at 1 ms, rank 1 at 3 ms; it takes 2 ms once both are there, so
  // both members run [3, 5] and rank 0 waited 2 ms.
  Program p;
  p.add_rank({.global_rank = 0});
  p.add_rank({.global_rank = 1});
  p.add_label({"x", "", Flops(0)});
  const uint32_t m = p.add_match(2);
  OpId a0 = p.add_op(0, compute(ms(1)));
  OpId c0 = p.add_op(
      0, {.kind = OpKind::kCollective, .stream = StreamKind::kTp, .duration = ms(2), .match = m},
      {a0});
  OpId a1 = p.add_op(1, compute(ms(3)));
  OpId c1 = p.add_op(
      1, {.kind = OpKind::kCollective, .stream = StreamKind::kTp, .duration = ms(2), .match = m},
      {a1});
  Timeline t = run(p);
  EXPECT_EQ(t.ready[c0].since_start(), ms(1));
  EXPECT_EQ(t.start[c0].since_start(), ms(3));
  EXPECT_EQ(t.end[c0].since_start(), ms(5));
  EXPECT_EQ(t.end[c1].since_start(), ms(5));
}

TEST(Engine, ReceiveEndsWhenSendEndsOrWhenReached) {
  // Rank 0 computes 1 ms then sends for 2 ms: the send runs [1, 3]. Rank 1 posts its receive at 0,
  // so it ends at 3 and its consumer runs [3, 4].
  Program p;
  p.add_rank({.global_rank = 0});
  p.add_rank({.global_rank = 1, .stage = 1});
  p.add_label({"x", "", Flops(0)});
  const uint32_t m = p.add_match(2);
  OpId a = p.add_op(0, compute(ms(1)));
  OpId s = p.add_op(
      0, {.kind = OpKind::kSend, .stream = StreamKind::kPpSend, .duration = ms(2), .match = m},
      {a});
  OpId r = p.add_op(1, {.kind = OpKind::kRecv, .stream = StreamKind::kPpRecv, .match = m});
  OpId b = p.add_op(1, compute(ms(1)), {r});
  Timeline t = run(p);
  EXPECT_EQ(t.start[s].since_start(), ms(1));
  EXPECT_EQ(t.start[r].since_start(), ms(1));  // the transfer began with the send
  EXPECT_EQ(t.end[r].since_start(), ms(3));
  EXPECT_EQ(t.start[b].since_start(), ms(3));
  EXPECT_EQ(t.makespan.since_start(), ms(4));
}

TEST(Engine, ConcurrentTransfersShareALink) {
  // Two 10 ms transfers on one link start together: each gets half the bandwidth, both end at 20.
  // A third on another link is unaffected: 10 ms.
  Program p = one_rank();
  OpId a = p.add_op(0, {.kind = OpKind::kCollective,
                        .stream = StreamKind::kDp,
                        .duration = ms(10),
                        .match = p.add_match(1),
                        .link = 1});
  OpId b = p.add_op(0, {.kind = OpKind::kCollective,
                        .stream = StreamKind::kCp,
                        .duration = ms(10),
                        .match = p.add_match(1),
                        .link = 1});
  OpId c = p.add_op(0, {.kind = OpKind::kCollective,
                        .stream = StreamKind::kTp,
                        .duration = ms(10),
                        .match = p.add_match(1),
                        .link = 2});
  Timeline t = run(p);
  EXPECT_EQ(t.end[a].since_start(), ms(20));
  EXPECT_EQ(t.end[b].since_start(), ms(20));
  EXPECT_EQ(t.end[c].since_start(), ms(10));
}

TEST(Engine, LinkShareChangesWhenATransferEnds) {
  // 4 ms and 10 ms transfers share a link. Both at half speed until the short one has done 4 ms of
  // work at 8 ms; the long one has 6 ms of work left, alone at full speed: ends at 14 ms.
  Program p = one_rank();
  OpId a = p.add_op(0, {.kind = OpKind::kCollective,
                        .stream = StreamKind::kDp,
                        .duration = ms(4),
                        .match = p.add_match(1),
                        .link = 1});
  OpId b = p.add_op(0, {.kind = OpKind::kCollective,
                        .stream = StreamKind::kCp,
                        .duration = ms(10),
                        .match = p.add_match(1),
                        .link = 1});
  Timeline t = run(p);
  EXPECT_EQ(t.end[a].since_start(), ms(8));
  EXPECT_EQ(t.end[b].since_start(), ms(14));
}

TEST(Engine, ComputeSlowsWhileCommunicationRuns) {
  // A 10 ms kernel beside a 6 ms all-reduce with slowdown 1.5: for 6 ms the kernel progresses at
  // 1/1.5, doing 4 ms of work; the remaining 6 ms run at full speed: it ends at 12 ms.
  Program p = one_rank();
  OpId k = p.add_op(0, compute(ms(10)));
  p.add_op(0, {.kind = OpKind::kCollective,
               .stream = StreamKind::kTp,
               .duration = ms(6),
               .match = p.add_match(1)});
  Timeline t = run(p, {.compute_slowdown_under_comm = 1.5});
  EXPECT_EQ(t.end[k].since_start(), ms(12));
  Timeline plain = run(p);
  EXPECT_EQ(plain.end[k].since_start(), ms(10));
}

TEST(Engine, ATransferThatSparesComputeDoesNotSlowIt) {
  // Transformer Engine's userbuffers ring exchange moves its chunks on the copy engine
  // (Op::spares_compute): a 10 ms GEMM beside a 6 ms transfer so marked ends at 10 ms under
  // slowdown 1.5, at its time alone. An NCCL collective beside the next 10 ms kernel still slows
  // it: 6 ms at 1/1.5 do 4 ms of work, 6 ms more alone, it ends 12 ms after it began, at 22.
  Program p = one_rank();
  const OpId k1 = p.add_op(0, compute(ms(10)));
  const OpId ub = p.add_op(0, {.kind = OpKind::kCollective,
                               .stream = StreamKind::kTp,
                               .duration = ms(6),
                               .match = p.add_match(1),
                               .spares_compute = true});
  const OpId k2 = p.add_op(0, compute(ms(10)));
  const OpId nccl = p.add_op(0,
                             {.kind = OpKind::kCollective,
                              .stream = StreamKind::kTp,
                              .duration = ms(6),
                              .match = p.add_match(1)},
                             {k1});
  const Timeline t = run(p, {.compute_slowdown_under_comm = 1.5});
  EXPECT_EQ(t.end[ub].since_start(), ms(6));
  EXPECT_EQ(t.end[k1].since_start(), ms(10));
  EXPECT_EQ(t.start[nccl].since_start(), ms(10));
  EXPECT_EQ(t.end[k2].since_start(), ms(22));
  // On a shared link (the fluid path) it still does not slow compute.
  Program q = one_rank();
  const OpId k = q.add_op(0, compute(ms(10)));
  q.add_op(0, {.kind = OpKind::kCollective,
               .stream = StreamKind::kTp,
               .duration = ms(6),
               .match = q.add_match(1),
               .link = 1,
               .spares_compute = true});
  EXPECT_EQ(run(q, {.compute_slowdown_under_comm = 1.5}).end[k].since_start(), ms(10));
}

TEST(Engine, StaleEventsOfARescheduledKernelEndNothing) {
  // Slowdown 1.5. K1 (10 ms) runs beside a 6 ms all-reduce A1: 4 ms of work by 6 ms, then 6 ms
  // alone: it ends at 12 (its first end, at 15, is stale). K2 (10 ms) follows on the same stream
  // at 12, beside A2 (3 ms, after K1): 2 ms of work by 15, 8 ms alone: it ends at 23 (its ends
  // at 22 and at 27, scheduled before A2 began and before it ended, are stale). The stale K1 event
  // at 15 pops while K2 runs on K1's stream, K2's own stale one at 22 before its real end: neither
  // may end anything.
  Program p = one_rank();
  const OpId k1 = p.add_op(0, compute(ms(10)));
  const OpSpec tp{.kind = OpKind::kCollective, .stream = StreamKind::kTp, .duration = ms(6)};
  OpSpec a1 = tp;
  a1.match = p.add_match(1);
  p.add_op(0, a1);
  const OpId k2 = p.add_op(0, compute(ms(10)));
  OpSpec a2 = tp;
  a2.duration = ms(3);
  a2.match = p.add_match(1);
  const OpId x2 = p.add_op(0, a2, {k1});
  const Timeline t = run(p, {.compute_slowdown_under_comm = 1.5});
  EXPECT_EQ(t.end[k1].since_start(), ms(12));
  EXPECT_EQ(t.start[k2].since_start(), ms(12));
  EXPECT_EQ(t.end[x2].since_start(), ms(15));
  EXPECT_EQ(t.end[k2].since_start(), ms(23));
  EXPECT_EQ(t.makespan.since_start(), ms(23));
}

TEST(Engine, AReceiveReachedAfterItsSendEndedEndsAtOnce) {
  // The send runs [0, 2]; rank 1 computes 5 ms before posting the receive, which finds the
  // transfer done: it starts and ends at 5, and its consumer runs [5, 6].
  Program p;
  p.add_rank({.global_rank = 0});
  p.add_rank({.global_rank = 1, .stage = 1});
  p.add_label({"x", "", Flops(0)});
  const uint32_t m = p.add_match(2);
  const OpId s = p.add_op(
      0, {.kind = OpKind::kSend, .stream = StreamKind::kPpSend, .duration = ms(2), .match = m});
  const OpId a = p.add_op(1, compute(ms(5)));
  const OpId r =
      p.add_op(1, {.kind = OpKind::kRecv, .stream = StreamKind::kPpRecv, .match = m}, {a});
  const OpId b = p.add_op(1, compute(ms(1)), {r});
  const Timeline t = run(p);
  EXPECT_EQ(t.end[s].since_start(), ms(2));
  EXPECT_EQ(t.ready[r].since_start(), ms(5));
  EXPECT_EQ(t.start[r].since_start(), ms(5));
  EXPECT_EQ(t.end[r].since_start(), ms(5));
  EXPECT_EQ(t.end[b].since_start(), ms(6));
}

TEST(Engine, EqualTimeEventsRunInSchedulingOrder) {
  // 10 bytes are allocated at t=0. A compute op (scheduled first, at t=0) and a TP op both end at
  // 5 ms; the compute op's successor allocates 5 bytes, the TP op's successor frees the 10. Events
  // of equal time run in the order they were scheduled, so the allocation comes first: peak 15.
  // Swapping the predecessors (the free after the compute op) makes the free come first: peak 10.
  for (bool alloc_first : {true, false}) {
    Program p = one_rank();
    p.add_op(0, {.kind = OpKind::kAlloc, .stream = StreamKind::kDp, .bytes = 10});
    OpId c = p.add_op(0, compute(ms(5)));
    OpId x = p.add_op(0, {.kind = OpKind::kCollective,
                          .stream = StreamKind::kTp,
                          .duration = ms(5),
                          .match = p.add_match(1)});
    // The allocation and the free sit on otherwise idle streams, so only event order decides.
    const OpSpec alloc{.kind = OpKind::kAlloc, .stream = StreamKind::kEp, .bytes = 5};
    const OpSpec free{.kind = OpKind::kFree, .stream = StreamKind::kCp, .bytes = 10};
    p.add_op(0, alloc, {alloc_first ? c : x});
    p.add_op(0, free, {alloc_first ? x : c});
    Timeline t = run(p);
    // Scheduling order at t=0 follows the streams' order (compute before TP), so c ends first.
    EXPECT_EQ(t.peak_memory[0].value(), alloc_first ? 15 : 10) << alloc_first;
  }
}

TEST(Engine, DeadlockIsAnErrorNamingTheOp) {
  // A collective whose second member sits behind a receive that nobody sends: never completes.
  Program p;
  p.add_rank({});
  p.add_rank({.global_rank = 1});
  p.add_label({"stuck", "", Flops(0)});
  const uint32_t m = p.add_match(2);
  const uint32_t pair = p.add_match(2);
  p.add_op(0, {.kind = OpKind::kCollective, .stream = StreamKind::kTp, .match = m});
  OpId r = p.add_op(1, {.kind = OpKind::kRecv, .stream = StreamKind::kPpRecv, .match = pair});
  p.add_op(1, {.kind = OpKind::kCollective, .stream = StreamKind::kTp, .match = m}, {r});
  p.add_op(0, {.kind = OpKind::kSend, .stream = StreamKind::kPpSend, .match = pair}, {0});
  auto t = Engine(p).run();
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("deadlocked"), std::string::npos);
}

// --- Pipeline schedules with uniform stages and free communication -------------------------------

double bubble_fraction(const Program& p, const Timeline& t, int rank) {
  return breakdown(p, t)[rank].bubble / t.makespan.since_start();
}

TEST(Pipeline, OneFOneBBubbleIsPMinusOneOverMPlusPMinusOne) {
  // p stages, m micro-batches, forward tf and backward tb per stage, free sends. The first stage
  // finishes its last backward after (m + p - 1)(tf + tb): m rounds of its own work plus p - 1
  // rounds spent waiting while the first micro-batch's forward goes down the pipeline and its
  // backward comes back (Narayanan et al. 2021 §2.2.1). It is idle for (p-1)(tf+tb) of that:
  // bubble fraction (p-1)/(m+p-1).
  const int pp = 4, m = 8;
  const Duration tf = ms(1), tb = ms(2);
  Program p = pipeline_program(Schedule::k1F1B, pp, 1, m, {.forward = tf, .backward = tb});
  Timeline t = run(p);
  EXPECT_EQ(t.makespan.since_start(), (tf + tb) * (m + pp - 1));
  EXPECT_DOUBLE_EQ(bubble_fraction(p, t, 0), double(pp - 1) / (m + pp - 1));
  // Every stage has the same bubble: compute m(tf+tb), the rest waiting.
  for (const auto& b : breakdown(p, t)) {
    EXPECT_EQ(b.compute, (tf + tb) * m);
    EXPECT_EQ(b.bubble + b.idle, (tf + tb) * (pp - 1));
  }
}

TEST(Pipeline, AfabHasTheSameBubbleAsOneFOneB) {
  // GPipe's bubble is also (p-1)(tf+tb); it differs from 1F1B in memory, not time.
  const int pp = 4, m = 8;
  Program p = pipeline_program(Schedule::kAfab, pp, 1, m, {.forward = ms(1), .backward = ms(2)});
  EXPECT_EQ(run(p).makespan.since_start(), ms(3) * (m + pp - 1));
}

TEST(Pipeline, InterleavingShrinksTheBubbleByAboutV) {
  // Same model split into v chunks per stage: each chunk pass takes tf/v and tb/v. Megatron's
  // interleaved schedule has bubble (p-1)(tf+tb)/v (Narayanan et al. 2021 §2.2.2).
  const int pp = 4, m = 16;
  const Duration tf = ms(2), tb = ms(4);
  Program base = pipeline_program(Schedule::k1F1B, pp, 1, m, {.forward = tf, .backward = tb});
  const Duration ideal = (tf + tb) * m;
  const Duration bubble1 = run(base).makespan.since_start() - ideal;
  EXPECT_EQ(bubble1, (tf + tb) * (pp - 1));
  for (int v : {2, 4}) {
    Program inter =
        pipeline_program(Schedule::kInterleaved, pp, v, m, {.forward = tf / v, .backward = tb / v});
    const Duration bubble_v = run(inter).makespan.since_start() - ideal;
    const Duration expected = (tf + tb) * (pp - 1) / v;
    EXPECT_EQ(bubble_v, expected) << "v=" << v;
    EXPECT_NEAR(bubble1 / bubble_v, v, 0.01 * v);
  }
}

// Megatron-core runs the interleaved schedule on any micro-batch count m >= pp, growing the
// micro-batch group past pp where a last group of 1..pp-1 would stall it (schedules.py; core/
// layout.h interleave_group_size). Every such count must simulate without a deadlock, every pass
// once: pp = 8, vpp = 2 with m mod 8 in 2..5 deadlocked before the group size was modelled.
TEST(Pipeline, InterleavedRunsEveryMicrobatchCountMegatronAccepts) {
  for (int pp : {2, 3, 4, 8}) {
    for (int v : {2, 3}) {
      for (int m = pp; m <= 3 * pp + 1; ++m) {
        Program p = pipeline_program(Schedule::kInterleaved, pp, v, m,
                                     {.forward = ms(1), .backward = ms(2), .p2p = ms(0.1)});
        auto t = Engine(p).run();
        ASSERT_TRUE(t.is_ok()) << "pp=" << pp << " v=" << v << " m=" << m << ": "
                               << t.status().message();
        // Every stage runs m·v forwards and m·v backwards of 1 and 2 ms: at least 3·m·v ms.
        EXPECT_GE(t->makespan.since_start(), ms(3) * (m * v)) << "pp=" << pp << " m=" << m;
      }
    }
  }
}

TEST(Pipeline, ZeroBubbleH1IsBelowOneFOneB) {
  // F, B (input gradient) and W (weight gradient) each take 1 ms, so 1F1B's backward is 2 ms and
  // its bubble (p-1)(F+B+W) = 3(p-1) ms. ZB-H1 sends the gradient on after B alone and fills the
  // drain with deferred W passes: Qi et al. (2023, §3) give (p-1)(F+B-W) = (p-1) ms: the first
  // stage waits (p-1)·B for its first gradient and is never idle afterwards.
  const int pp = 4, m = 12;
  const Duration t1 = ms(1);
  const Duration ideal = t1 * 3 * m;
  Program one = pipeline_program(Schedule::k1F1B, pp, 1, m, {.forward = t1, .backward = t1 * 2});
  Program zb = pipeline_program(Schedule::kZbH1, pp, 1, m,
                                {.forward = t1, .backward_input = t1, .backward_weight = t1});
  const Duration b1 = run(one).makespan.since_start() - ideal;
  const Duration bz = run(zb).makespan.since_start() - ideal;
  EXPECT_EQ(b1, t1 * 3 * (pp - 1));
  EXPECT_LT(bz, b1);
  EXPECT_EQ(bz, t1 * (pp - 1)) << "ZB-H1 bubble " << bz.to_seconds() * 1e3 << " ms";
}

// The passes of one rank of a two-chunk schedule (DualPipe, DualPipeV, ZB-V), checked: chunk c
// runs micro-batches first[c]..end[c]-1, each forward once and in order, each backward once and in
// order after its forward (whole, or input part then weight part); with `v_tip` (the last rank of
// a V) a micro-batch's forward through chunk 1 comes after its forward through chunk 0 and its
// backward through chunk 0 after its backward through chunk 1. Returns the input-gradient passes
// (those with a deferred weight pass).
int check_two_chunk_order(const std::vector<Pass>& order, const int first[2], const int end[2],
                          bool v_tip) {
  std::map<std::pair<int, int>, int> f, b, bi, w;  // (chunk, mb) -> count
  int next_f[2] = {first[0], first[1]}, next_b[2] = {first[0], first[1]};
  for (const Pass& p : order) {
    EXPECT_TRUE(p.chunk == 0 || p.chunk == 1);
    if (p.chunk != 0 && p.chunk != 1) return 0;
    const auto key = std::make_pair(p.chunk, p.microbatch);
    EXPECT_GE(p.microbatch, first[p.chunk]);
    EXPECT_LT(p.microbatch, end[p.chunk]);
    switch (p.kind) {
      case PassKind::kForward:
        EXPECT_EQ(p.microbatch, next_f[p.chunk]++);
        if (v_tip && p.chunk == 1) {
          EXPECT_EQ(f.count(std::make_pair(0, p.microbatch)), 1u) << "V tip";
        }
        ++f[key];
        break;
      case PassKind::kBackward:
      case PassKind::kBackwardInput:
        EXPECT_EQ(f.count(key), 1u) << "backward before forward";
        EXPECT_EQ(p.microbatch, next_b[p.chunk]++);
        if (v_tip && p.chunk == 0) {
          const auto up = std::make_pair(1, p.microbatch);
          EXPECT_EQ(b.count(up) + bi.count(up), 1u) << "V tip";
        }
        ++(p.kind == PassKind::kBackward ? b : bi)[key];
        break;
      case PassKind::kBackwardWeight:
        EXPECT_EQ(bi.count(key), 1u) << "weight pass before its input-gradient pass";
        ++w[key];
        break;
    }
  }
  for (int c : {0, 1}) {
    EXPECT_EQ(next_f[c], end[c]);
    EXPECT_EQ(next_b[c], end[c]);
  }
  EXPECT_EQ(w, bi) << "every deferred weight pass runs once";
  return static_cast<int>(bi.size());
}

// DualPipe's order (deepseek-ai/DualPipe): every rank runs each micro-batch of each direction
// forward once and backward once through the chunk of that direction (chunk 0: micro-batches
// 0..m/2-1, chunk 1: m/2..m-1), in order within a direction; a zero-bubble backward's weight pass
// comes after it, and every deferred weight pass is run.
TEST(Pipeline, DualPipeRunsEveryPassOnceInOrder) {
  for (int pp : {2, 4, 6, 8}) {
    for (int m : {2 * pp, 2 * pp + 2, 5 * pp + (pp % 2 == 0 ? 0 : 1)}) {
      if (m % 2 != 0) ++m;
      auto order = pipeline_schedule(Schedule::kDualPipe, pp, 1, m);
      ASSERT_TRUE(order.is_ok()) << order.status().message();
      const int first[2] = {0, m / 2}, end[2] = {m / 2, m};
      for (int s = 0; s < pp; ++s) {
        SCOPED_TRACE("pp=" + std::to_string(pp) + " m=" + std::to_string(m) +
                     " s=" + std::to_string(s));
        const int deferred = check_two_chunk_order((*order)[static_cast<size_t>(s)], first, end,
                                                   /*v_tip=*/false);
        EXPECT_FALSE(deferred == 0 && pp > 2) << "zero-bubble passes fill the drain";
      }
    }
  }
  EXPECT_FALSE(pipeline_schedule(Schedule::kDualPipe, 3, 1, 12).is_ok());  // odd pp
  EXPECT_FALSE(pipeline_schedule(Schedule::kDualPipe, 4, 1, 6).is_ok());   // m < 2·pp
  EXPECT_FALSE(pipeline_schedule(Schedule::kDualPipe, 4, 1, 9).is_ok());   // odd m
}

TEST(Pipeline, DualPipeBubbleIsBelowZeroBubbleAndTheDualPipeBound) {
  // F, B (input gradient) and W each 1 ms, communication free. Micro-batches enter from both
  // ends, so each direction's fill and drain is half as deep: the DualPipe report (DeepSeek-V3
  // technical report, Table 2; deepseek-ai/DualPipe README) gives its bubble as
  // (PP/2 - 1)(F&B + B - 3W), with F&B the time of a forward and a backward run as one pair and B
  // the whole backward: here F&B = F + B = 3 ms (this model does not overlap the pair), B = 2 ms,
  // so at most (PP/2 - 1)·2 ms, against ZB-H1's (PP - 1)(F + B - 2W) = (PP - 1)·1 ms and 1F1B's
  // (PP - 1)·3 ms. A pipeline's bubble is fill and drain: it does not grow with m.
  const Duration t1 = ms(1);
  for (int pp : {4, 8}) {
    Duration first{};
    for (int m : {2 * pp, 4 * pp, 6 * pp}) {
      const Duration ideal = t1 * 3 * m;
      Program dual = pipeline_program(
          Schedule::kDualPipe, pp, 1, m,
          {.forward = t1, .backward = t1 * 2, .backward_input = t1, .backward_weight = t1});
      Program zb = pipeline_program(Schedule::kZbH1, pp, 1, m,
                                    {.forward = t1, .backward_input = t1, .backward_weight = t1});
      const Duration bd = run(dual).makespan.since_start() - ideal;
      const Duration bz = run(zb).makespan.since_start() - ideal;
      EXPECT_LT(bd, bz) << "pp=" << pp << " m=" << m;
      EXPECT_LE(bd, t1 * 2 * (pp / 2 - 1)) << "pp=" << pp << " m=" << m;
      EXPECT_GT(bd, Duration::zero());
      if (m == 2 * pp) first = bd;
      EXPECT_EQ(bd, first) << "pp=" << pp << " m=" << m;
    }
  }
}

// DualPipeV's order (deepseek-ai/DualPipe, dualpipev.py): every rank runs every micro-batch forward
// once through its down-arm chunk (0) and its up-arm chunk (1), and backward once through each, in
// micro-batch order per chunk; a backward of a micro-batch through chunk 0 comes after the one
// through chunk 1 on the last rank, where the arms meet; every deferred weight pass runs once.
TEST(Pipeline, DualPipeVRunsEveryPassOnceInOrder) {
  for (int pp : {2, 3, 4, 8}) {
    for (int m : {2 * pp, 2 * pp + 1, 5 * pp}) {
      auto order = pipeline_schedule(Schedule::kDualPipeV, pp, 1, m);
      ASSERT_TRUE(order.is_ok()) << order.status().message();
      const int first[2] = {0, 0}, end[2] = {m, m};
      for (int s = 0; s < pp; ++s) {
        SCOPED_TRACE("pp=" + std::to_string(pp) + " m=" + std::to_string(m) +
                     " s=" + std::to_string(s));
        check_two_chunk_order((*order)[static_cast<size_t>(s)], first, end, s == pp - 1);
      }
    }
  }
  EXPECT_FALSE(pipeline_schedule(Schedule::kDualPipeV, 1, 1, 8).is_ok());  // pp < 2
  EXPECT_FALSE(pipeline_schedule(Schedule::kDualPipeV, 4, 1, 7).is_ok());  // m < 2·pp
}

TEST(Pipeline, DualPipeVBubbleIsTheDownArmsFill) {
  // F, B (input gradient) and W each 1 ms per chunk, communication free. Each rank holds two
  // chunks, so its work is 6m ms. The last rank cannot start before micro-batch 0 has gone
  // forward through chunks 0..pp-2, (pp-1)·F; from then on the V keeps it busy (every later pass
  // of a rank waits only on passes that the schedule put earlier on the critical path), so the
  // step is 6m + (pp-1) ms for every m: half of ZB-H1's bubble for the same per-rank work
  // (one stage = both chunks, F = B = W = 2 ms: (pp-1)(F+B-W) = 2(pp-1) ms), and within the
  // DualPipe README's bound (PP/2 - 1)(F&B + B - 3W) with PP = 2pp chunk stages, F&B = 3 ms and
  // B = 2 ms: 2(pp-1) ms.
  const Duration t1 = ms(1);
  for (int pp : {2, 4, 8}) {
    for (int m : {2 * pp, 4 * pp, 6 * pp + 1}) {
      const Duration ideal = t1 * 6 * m;
      Program v = pipeline_program(
          Schedule::kDualPipeV, pp, 1, m,
          {.forward = t1, .backward = t1 * 2, .backward_input = t1, .backward_weight = t1});
      Program zb = pipeline_program(
          Schedule::kZbH1, pp, 1, m,
          {.forward = t1 * 2, .backward_input = t1 * 2, .backward_weight = t1 * 2});
      const Timeline tv = run(v);
      const Duration bv = tv.makespan.since_start() - ideal;
      const Duration bz = run(zb).makespan.since_start() - ideal;
      EXPECT_EQ(bz, t1 * 2 * (pp - 1)) << "pp=" << pp << " m=" << m;
      EXPECT_EQ(bv, t1 * (pp - 1)) << "pp=" << pp << " m=" << m;
      const auto last = breakdown(v, tv)[static_cast<size_t>(pp - 1)];
      EXPECT_EQ(last.compute, ideal) << "pp=" << pp << " m=" << m;
    }
  }
}

// ZB-V's order (PyTorch ScheduleZBVZeroBubble): every rank runs every micro-batch forward once
// through each chunk of its V and backward once, in micro-batch order per chunk, with every
// backward's weight pass after it; the V's tip is crossed inside the last rank; any m.
TEST(Pipeline, ZeroBubbleVRunsEveryPassOnceInOrder) {
  for (int pp : {2, 3, 4, 8}) {
    for (int m : {1, pp, 2 * pp - 1, 2 * pp, 3 * pp + 1}) {
      auto order = pipeline_schedule(Schedule::kZbV, pp, 1, m);
      ASSERT_TRUE(order.is_ok()) << order.status().message();
      const int first[2] = {0, 0}, end[2] = {m, m};
      for (int s = 0; s < pp; ++s) {
        SCOPED_TRACE("pp=" + std::to_string(pp) + " m=" + std::to_string(m) +
                     " s=" + std::to_string(s));
        const auto& passes = (*order)[static_cast<size_t>(s)];
        EXPECT_EQ(check_two_chunk_order(passes, first, end, s == pp - 1), 2 * m)
            << "ZB-V splits every backward";
      }
    }
  }
  EXPECT_FALSE(pipeline_schedule(Schedule::kZbV, 1, 1, 8).is_ok());
}

TEST(Pipeline, ZeroBubbleVBubbleIsTheDownArmsFill) {
  // F, B (input gradient) and W each 1 ms per chunk, communication free: Qi et al. (2023, §6)
  // built ZB-V to have no bubble beyond the fill when F = B = W. The last rank waits (pp-1)·F
  // for micro-batch 0 to come down the V; with m >= 2pp-1 micro-batches it is busy from then on,
  // so the step is 6m + (pp-1) ms, as DualPipeV's without its pairs' overlap.
  const Duration t1 = ms(1);
  for (int pp : {2, 4, 8}) {
    for (int m : {2 * pp - 1, 2 * pp, 5 * pp}) {
      Program v = pipeline_program(Schedule::kZbV, pp, 1, m,
                                   {.forward = t1, .backward_input = t1, .backward_weight = t1});
      const Timeline tv = run(v);
      EXPECT_EQ(tv.makespan.since_start(), t1 * (6 * m + pp - 1)) << "pp=" << pp << " m=" << m;
    }
  }
}

// --- Determinism --------------------------------------------------------------------------------

Program busy_program() {
  // Interleaved pipeline with shared-link sends and interference: exercises the fluid path.
  return pipeline_program(Schedule::kInterleaved, 8, 2, 32,
                          {.forward = Duration::ticks(1'234'567),
                           .backward = Duration::ticks(2'345'671),
                           .p2p = Duration::ticks(345'677),
                           .p2p_link = 1});
}

TEST(Determinism, SameTraceBytesTwice) {
  Program p = busy_program();
  EngineOptions o{.compute_slowdown_under_comm = 1.13};
  const std::string a = chrome_trace(p, run(p, o));
  const std::string b = chrome_trace(p, run(p, o));
  EXPECT_EQ(a, b);
  EXPECT_GT(a.size(), 1000u);
}

TEST(Determinism, SameTraceBytesWhateverTheThreadCount) {
  Program p = busy_program();
  EngineOptions o{.compute_slowdown_under_comm = 1.13};
  const std::string reference = chrome_trace(p, run(p, o));
  for (int threads : {2, 4, 8}) {
    std::vector<std::string> out(threads);
    std::vector<std::thread> pool;
    for (int i = 0; i < threads; ++i) {
      pool.emplace_back([&, i] { out[i] = chrome_trace(p, Engine(p, o).run().value()); });
    }
    for (auto& th : pool) th.join();
    for (const auto& s : out) EXPECT_EQ(s, reference) << threads << " threads";
  }
}

TEST(Engine, HostIssueBoundsShortKernelsAndRunsAheadOfLongOnes) {
  // The CPU issues three kernels, 10 us each (host stream, in order); each kernel depends on its
  // issue. Short kernels (1 us): kernel i starts when issued, at 10·(i+1) us, so the last ends at
  // 31 us: host-bound. Long kernels (50 us): the CPU runs ahead; the GPU starts at 10 us and runs
  // back to back, 10 + 3·50 = 160 us.
  for (const auto& [kernel, expected] :
       {std::pair{ms(0.001), ms(0.031)}, std::pair{ms(0.050), ms(0.160)}}) {
    Program p = one_rank();
    for (int i = 0; i < 3; ++i) {
      const OpId h =
          p.add_op(0, {.kind = OpKind::kHost, .stream = StreamKind::kHost, .duration = ms(0.010)});
      p.add_op(0, compute(kernel), {h});
    }
    EXPECT_EQ(run(p).makespan.since_start(), expected);
  }
}

TEST(Engine, HostOpsAreNotSlowedByCommunicationNorCountedAsCompute) {
  // A 10 us host op beside a 20 us collective on a shared link with compute slowdown 2: the host
  // op still ends at 10 us, and the breakdown has no compute time (it is CPU time).
  Program p = one_rank();
  const OpId h =
      p.add_op(0, {.kind = OpKind::kHost, .stream = StreamKind::kHost, .duration = ms(0.010)});
  p.add_op(0, {.kind = OpKind::kCollective,
               .stream = StreamKind::kDp,
               .duration = ms(0.020),
               .match = p.add_match(1),
               .link = 1});
  Timeline t = run(p, {.compute_slowdown_under_comm = 2.0});
  EXPECT_EQ(t.end[h].since_start(), ms(0.010));
  EXPECT_EQ(breakdown(p, t)[0].compute, Duration::zero());
}

}  // namespace
}  // namespace scaleplan::sim
