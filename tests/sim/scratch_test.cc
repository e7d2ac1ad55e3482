// Reused storage (SimulationScratch, Engine::Storage, Program::clear and BuildInputs::storage)
// changes no result: whatever a previous, larger or smaller program left in the arrays, the
// next program, its timeline and its simulation equal those built on fresh memory.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "models/model_spec.h"
#include "sim/builder.h"
#include "sim/engine.h"
#include "sim/simulate.h"

namespace scaleplan::sim {
namespace {

struct Inputs {
  models::ModelSpec model;
  hw::Cluster cluster;
};

Inputs load(const std::string& m, const std::string& c) {
  auto model = models::load_model(m);
  auto cluster = hw::load_cluster(c);
  EXPECT_TRUE(model.is_ok() && cluster.is_ok());
  return {*model, *cluster};
}

// Llama-3-8B on 64 H100 at seq 4096: a program of 16 micro-batches on 8 stages (large), one of 4
// on one stage (small), then pipelined ones again; every schedule family the planner meets.
const std::vector<std::string> kLayouts = {
    "tp=1,pp=8,dp=8,gbs=128",
    "tp=8,pp=1,dp=8,gbs=32",
    "tp=2,pp=4,dp=8,gbs=128,schedule=zb-h1,zero=1",
    "tp=8,pp=1,dp=8,gbs=32,zero=3",
    "tp=2,pp=4,dp=8,gbs=64,schedule=interleaved,vpp=2,zero=1",
    "tp=1,pp=8,dp=8,gbs=128",
};

Program build(const Inputs& in, const std::string& text, Program* storage) {
  auto l = resolve_layout(*parse_layout(text), models::layout_constraints(in.model, 4096), 64);
  EXPECT_TRUE(l.is_ok()) << text;
  auto kernels = calibrate::kernel_cost_model_for(in.cluster);
  const hw::CollectiveModel collectives(in.cluster);
  BuildOptions o = build_options(framework(FrameworkId::kMegatron), *l, in.cluster.gpu);
  o.merge_compute = true;
  BuildInputs bi{&in.model, &*l, 4096, &in.cluster, kernels->get(), &collectives, nullptr};
  bi.storage = storage;
  auto p = build_program(bi, o);
  EXPECT_TRUE(p.is_ok()) << text << ": " << p.status().message();
  return std::move(p).value();
}

void expect_same_program(const Program& a, const Program& b, const std::string& what) {
  ASSERT_EQ(a.num_ops(), b.num_ops()) << what;
  for (OpId i = 0; i < a.num_ops(); ++i) {
    const Op& x = a.op(i);
    const Op& y = b.op(i);
    ASSERT_TRUE(x.duration == y.duration && x.bytes == y.bytes && x.first_dep == y.first_dep &&
                x.num_deps == y.num_deps && x.match == y.match && x.label == y.label &&
                x.rank == y.rank && x.microbatch == y.microbatch && x.kind == y.kind &&
                x.stream == y.stream && x.phase == y.phase && x.collective == y.collective &&
                x.link == y.link && x.chunk == y.chunk)
        << what << ": op " << i;
  }
  EXPECT_EQ(a.all_deps(), b.all_deps()) << what;
  EXPECT_EQ(a.match_members(), b.match_members()) << what;
  ASSERT_EQ(a.labels().size(), b.labels().size()) << what;
  for (size_t k = 0; k < a.labels().size(); ++k) {
    EXPECT_EQ(a.labels()[k].name, b.labels()[k].name) << what;
    EXPECT_EQ(a.labels()[k].shape, b.labels()[k].shape) << what;
    EXPECT_EQ(a.labels()[k].flops, b.labels()[k].flops) << what;
  }
  ASSERT_EQ(a.num_ranks(), b.num_ranks()) << what;
  for (int r = 0; r < a.num_ranks(); ++r) {
    EXPECT_EQ(a.ranks()[r].global_rank, b.ranks()[r].global_rank) << what;
    EXPECT_EQ(a.ranks()[r].stage, b.ranks()[r].stage) << what;
    EXPECT_EQ(a.ranks()[r].static_memory, b.ranks()[r].static_memory) << what;
  }
  ASSERT_TRUE(a.layout() && b.layout());
  EXPECT_EQ(format_layout(*a.layout()), format_layout(*b.layout())) << what;
  EXPECT_EQ(a.merged_compute(), b.merged_compute()) << what;
}

void expect_same_timeline(const Timeline& a, const Timeline& b, const std::string& what) {
  EXPECT_EQ(a.ready, b.ready) << what;
  EXPECT_EQ(a.start, b.start) << what;
  EXPECT_EQ(a.end, b.end) << what;
  EXPECT_EQ(a.peak_memory, b.peak_memory) << what;
  EXPECT_EQ(a.makespan, b.makespan) << what;
  EXPECT_EQ(a.events, b.events) << what;
}

TEST(Scratch, AProgramBuiltOnAnotherProgramsStorageEqualsAFreshOneOpForOp) {
  Inputs in = load("llama3-8b", "dgx-h100");
  Program storage;  // holds each program in turn, larger and smaller than the next
  for (const std::string& l : kLayouts) {
    Program fresh = build(in, l, nullptr);
    Program reused = build(in, l, &storage);
    expect_same_program(fresh, reused, l);
    EXPECT_TRUE(reused.validate().is_ok()) << l;
    storage = std::move(reused);
  }
}

TEST(Scratch, ClearEmptiesEverythingAFreshProgramLacks) {
  // An overflowing value (rank 70,000 does not fit the record) is validate()'s error until the
  // program is cleared; a cleared program has no ops, ranks, labels, matches or layout.
  Program p;
  p.add_rank({});
  p.add_label({"x", "", Flops(0)});
  p.add_op(70000, {.kind = OpKind::kCompute});
  p.add_match(2);
  p.set_layout(*parse_layout("tp=1,pp=1,dp=1,gbs=1"));
  p.set_merged_compute(true);
  EXPECT_FALSE(p.validate().is_ok());
  p.clear();
  EXPECT_TRUE(p.validate().is_ok()) << p.validate().message();
  EXPECT_EQ(p.num_ops(), 0u);
  EXPECT_EQ(p.num_ranks(), 0);
  EXPECT_TRUE(p.labels().empty());
  EXPECT_TRUE(p.match_members().empty());
  EXPECT_TRUE(p.all_deps().empty());
  EXPECT_FALSE(p.layout().has_value());
  EXPECT_FALSE(p.merged_compute());
  // Interning starts over: the first label is index 0 again.
  EXPECT_EQ(p.add_label({"y", "", Flops(0)}), 0u);
}

TEST(Scratch, AddOpStoresEveryFieldOfItsSpecAndItsDependenciesInOrder) {
  // add_op writes the record in place (no copy of a stack record): each field as given, the
  // dependencies appended after the previous op's, in the order given, on a storage reused.
  Program p;
  for (int round = 0; round < 2; ++round) {
    p.clear();
    p.add_rank({});
    p.add_rank({.global_rank = 7, .stage = 1});
    p.add_label({"a", "", Flops(0)});
    p.add_label({"b", "", Flops(0)});
    const uint32_t m = p.add_match(2);
    const OpId x = p.add_op(1, {.duration = Duration::ticks(5)});
    const OpId y = p.add_op(1, {.duration = Duration::ticks(9)});
    const OpSpec spec{.kind = OpKind::kSend,
                      .stream = StreamKind::kPpSend,
                      .phase = Phase::kBackwardWeight,
                      .duration = Duration::ticks(1234567),
                      .bytes = 987654321,
                      .match = m,
                      .label = 1,
                      .collective = CollectiveOp::kSendRecv,
                      .link = 3,
                      .microbatch = 4321,
                      .chunk = 200};
    const OpId z = p.add_op(1, spec, {y, x});
    const Op& op = p.op(z);
    EXPECT_EQ(op.kind, OpKind::kSend);
    EXPECT_EQ(op.stream, StreamKind::kPpSend);
    EXPECT_EQ(op.phase, Phase::kBackwardWeight);
    EXPECT_EQ(op.duration, Duration::ticks(1234567));
    EXPECT_EQ(op.bytes, 987654321);
    EXPECT_EQ(op.match, m);
    EXPECT_EQ(op.label, 1u);
    EXPECT_EQ(op.collective, CollectiveOp::kSendRecv);
    EXPECT_EQ(op.link, 3);
    EXPECT_EQ(op.microbatch, 4321);
    EXPECT_EQ(op.chunk, 200);
    EXPECT_EQ(op.rank, 1);
    EXPECT_EQ(op.first_dep, 0u);  // x and y have none
    ASSERT_EQ(p.deps(z).size(), 2u);
    EXPECT_EQ(p.deps(z)[0], y);
    EXPECT_EQ(p.deps(z)[1], x);
    EXPECT_EQ(p.op(x).duration, Duration::ticks(5));
    EXPECT_EQ(p.op(x).microbatch, -1);  // the spec's defaults
    EXPECT_EQ(p.op(x).kind, OpKind::kCompute);
  }
}

TEST(Scratch, AnEngineOnReusedStorageGivesTheFreshTimeline) {
  // Each program run by an engine on one Storage, in an order where the arrays shrink and grow
  // (and twice in a row on one engine), against an engine on fresh memory; with and without a
  // compute slowdown (the fluid path keeps per-stream state).
  Inputs in = load("llama3-8b", "dgx-h100");
  std::vector<Program> programs;
  for (const std::string& l : kLayouts) programs.push_back(build(in, l, nullptr));
  for (double slowdown : {1.0, 1.25}) {
    Engine::Storage storage;
    for (size_t i = 0; i < programs.size(); ++i) {
      const std::string what = kLayouts[i] + " slowdown " + std::to_string(slowdown);
      const Timeline fresh = Engine(programs[i], {slowdown}).run().value();
      const Engine reused(programs[i], {slowdown}, &storage);
      for (int twice = 0; twice < 2; ++twice) {
        Result<Timeline> t = reused.run();
        ASSERT_TRUE(t.is_ok()) << what << ": " << t.status().message();
        expect_same_timeline(fresh, *t, what);
        storage.recycle(std::move(*t));
      }
    }
  }
}

TEST(Scratch, SimulationsOnOneScratchEqualSimulationsWithout) {
  // simulate() with a scratch shared by every call, one after another, equals simulate() without:
  // the iteration, the op and event counts, and each stage's breakdown and engine memory peak.
  // Every rank simulated (all-ranks: collectives of several members) is among them.
  Inputs in = load("llama3-8b", "dgx-h100");
  SimulationScratch scratch;
  for (bool all_ranks : {false, true}) {
    for (const std::string& text : kLayouts) {
      SimulateOptions o{.gpus = 64, .all_ranks = all_ranks};
      const Layout l = *parse_layout(text);
      auto fresh = simulate(in.model, in.cluster, 4096, l, o);
      o.scratch = &scratch;
      auto reused = simulate(in.model, in.cluster, 4096, l, o);
      ASSERT_TRUE(fresh.is_ok() && reused.is_ok()) << text;
      EXPECT_EQ(fresh->iteration, reused->iteration) << text;
      EXPECT_EQ(fresh->ops, reused->ops) << text;
      EXPECT_EQ(fresh->events, reused->events) << text;
      ASSERT_EQ(fresh->stages.size(), reused->stages.size()) << text;
      for (size_t s = 0; s < fresh->stages.size(); ++s) {
        const RankBreakdown& a = fresh->stages[s].breakdown;
        const RankBreakdown& b = reused->stages[s].breakdown;
        EXPECT_EQ(a.compute, b.compute) << text;
        EXPECT_EQ(a.recompute, b.recompute) << text;
        EXPECT_EQ(a.bubble, b.bubble) << text;
        EXPECT_EQ(a.idle, b.idle) << text;
        EXPECT_EQ(a.exposed_comm, b.exposed_comm) << text;
        EXPECT_EQ(a.overlapped_comm, b.overlapped_comm) << text;
        EXPECT_EQ(a.total, b.total) << text;
        EXPECT_EQ(fresh->stages[s].engine_peak_memory, reused->stages[s].engine_peak_memory)
            << text;
      }
    }
  }
}

}  // namespace
}  // namespace scaleplan::sim
