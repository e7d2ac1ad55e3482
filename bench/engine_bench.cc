// Engine throughput: events per second on one core.
//
// The program is a 1F1B pipeline of 16 stages and 4,096 micro-batches whose passes are each split
// into 8 layer ops with a TP all-reduce after each (the shape of a real Program: long compute
// chains with collectives on a second stream and sends/receives between stages), about 1.6 M ops.
// Timed: Engine::run; the program is built once outside the timed loop. Rates are per CPU second.
#include <benchmark/benchmark.h>

#include <map>
#include <tuple>

#include "sim/engine.h"
#include "sim/schedule.h"

namespace scaleplan::sim {
namespace {

Program layered_pipeline(int pp, int m, int layers) {
  Program prog;
  auto order = pipeline_schedule(Schedule::k1F1B, pp, 1, m).value();
  for (int s = 0; s < pp; ++s) prog.add_rank({.global_rank = s, .stage = s});
  const uint32_t label = prog.add_label({"layer", "", Flops(1)});
  std::map<std::tuple<int, int, int>, uint32_t> matches;
  auto match = [&](int dir, int g, int mb) {
    auto [it, fresh] = matches.try_emplace({dir, g, mb}, 0);
    if (fresh) it->second = prog.add_match(2);
    return it->second;
  };
  for (int s = 0; s < pp; ++s) {
    std::map<int, OpId> fwd_end;
    for (const Pass& p : order[s]) {
      const bool fwd = p.kind == PassKind::kForward;
      const Phase phase = fwd ? Phase::kForward : Phase::kBackward;
      const int from = fwd ? s - 1 : s + 1;
      OpId prev = 0xFFFFFFFFu;
      if (from >= 0 && from < pp) {
        prev = prog.add_op(s, {.kind = OpKind::kRecv,
                               .stream = StreamKind::kPpRecv,
                               .phase = phase,
                               .match = match(fwd, s, p.microbatch),
                               .label = label});
      }
      if (!fwd) prev = prev == 0xFFFFFFFFu ? fwd_end.at(p.microbatch) : prev;
      for (int l = 0; l < layers; ++l) {
        OpSpec k{.phase = phase,
                 .duration = Duration::ticks(fwd ? 1'000'003 : 2'000'011),
                 .label = label,
                 .microbatch = p.microbatch};
        const OpId c = prev == 0xFFFFFFFFu ? prog.add_op(s, k) : prog.add_op(s, k, {prev});
        prev = prog.add_op(s,
                           {.kind = OpKind::kCollective,
                            .stream = StreamKind::kTp,
                            .phase = phase,
                            .duration = Duration::ticks(200'003),
                            .match = prog.add_match(1),
                            .label = label,
                            .microbatch = p.microbatch},
                           {c});
      }
      if (fwd) fwd_end[p.microbatch] = prev;
      const int to = fwd ? s + 1 : s - 1;
      if (to >= 0 && to < pp) {
        prog.add_op(s,
                    {.kind = OpKind::kSend,
                     .stream = StreamKind::kPpSend,
                     .phase = phase,
                     .duration = Duration::ticks(300'007),
                     .match = match(fwd, to, p.microbatch),
                     .label = label},
                    {prev});
      }
    }
  }
  return prog;
}

// Engine::run alone: the event loop and its per-run state, topology precomputed once.
void BM_EngineEventsPerSecond(benchmark::State& state) {
  const Program prog = layered_pipeline(16, static_cast<int>(state.range(0)), 8);
  const Engine engine(prog);
  uint64_t events = 0;
  for (auto _ : state) {
    auto t = engine.run();
    if (!t.is_ok()) {
      state.SkipWithError(t.status().message().c_str());
      return;
    }
    events += t->events;
    benchmark::DoNotOptimize(t->makespan);
  }
  state.counters["ops"] = static_cast<double>(prog.num_ops());
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineEventsPerSecond)
    ->Arg(256)
    ->Arg(4096)
    ->Unit(benchmark::kMillisecond)
    ->MinTime(1.0);

// Engine construction (topology) plus run: what simulate() pays once per layout.
void BM_EngineBuildAndRun(benchmark::State& state) {
  const Program prog = layered_pipeline(16, static_cast<int>(state.range(0)), 8);
  uint64_t events = 0;
  for (auto _ : state) {
    auto t = Engine(prog).run();
    events += t->events;
    benchmark::DoNotOptimize(t->makespan);
  }
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_EngineBuildAndRun)->Arg(256)->Unit(benchmark::kMillisecond)->MinTime(1.0);

}  // namespace
}  // namespace scaleplan::sim
