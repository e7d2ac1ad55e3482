// Hand-built pipeline programs for engine tests: every pass of a schedule is one compute op of a
// fixed duration, and neighbouring stages exchange activations and gradients with sends and
// receives of a fixed duration. Each stage is one simulated rank.
#pragma once

#include <map>
#include <tuple>

#include "sim/program.h"
#include "sim/schedule.h"

namespace scaleplan::sim::testing {

struct PassTimes {
  Duration forward{};          // per chunk
  Duration backward{};         // per chunk, whole backward (afab, 1f1b, interleaved)
  Duration backward_input{};   // zero-bubble: input-gradient part
  Duration backward_weight{};  // zero-bubble: weight-gradient part
  Duration p2p{};              // one send
  uint8_t p2p_link = 0;
};

inline Program pipeline_program(Schedule schedule, int pp, int vpp, int m, const PassTimes& t) {
  Program prog;
  auto order = pipeline_schedule(schedule, pp, vpp, m).value();
  // DualPipe: local chunk 0 of stage s is stage s of the pipeline from rank 0 (global chunk s),
  // local chunk 1 stage pp-1-s of the one from rank pp-1 (global chunk 2pp-1-s); data flows only
  // within one of the two (sim/schedule.h). DualPipeV places chunks the same way, as one V: data
  // flows from chunk pp-1 to chunk pp inside rank pp-1.
  const bool dual = schedule == Schedule::kDualPipe;
  const bool bidir = two_chunks_per_rank(schedule);
  const int chunks = bidir ? 2 * pp : pp * vpp;
  auto global = [&](int c, int s) { return bidir ? (c == 0 ? s : 2 * pp - 1 - s) : c * pp + s; };
  auto stage_of = [&](int g) { return bidir && g >= pp ? 2 * pp - 1 - g : g % pp; };
  auto local = [&](int g) { return bidir ? (g >= pp ? 1 : 0) : g / pp; };
  auto connected = [&](int g, int h) {
    return h >= 0 && h < chunks && (!dual || g / pp == h / pp);
  };
  for (int s = 0; s < pp; ++s) prog.add_rank({.global_rank = s, .stage = s});
  // Send/recv instances, created on first use by either side: (direction, receiving chunk, mb).
  std::map<std::tuple<int, int, int>, uint32_t> matches;
  auto match = [&](int dir, int g, int mb) {
    auto [it, fresh] = matches.try_emplace({dir, g, mb}, 0);
    if (fresh) it->second = prog.add_match(2);
    return it->second;
  };
  const uint32_t lf = prog.add_label({"F", "", Flops(1)});
  const uint32_t lb = prog.add_label({"B", "", Flops(1)});
  const uint32_t lw = prog.add_label({"W", "", Flops(1)});
  const uint32_t lp = prog.add_label({"p2p", "", Flops(0)});
  for (int s = 0; s < pp; ++s) {
    std::map<std::tuple<int, int>, OpId> fwd_op, bwd_op;  // (chunk, mb) -> op
    for (const Pass& p : order[s]) {
      const int g = global(p.chunk, s);
      OpSpec spec{.phase = Phase::kForward, .microbatch = p.microbatch, .chunk = p.chunk};
      std::vector<OpId> deps;
      const bool fwd = p.kind == PassKind::kForward;
      const bool weight = p.kind == PassKind::kBackwardWeight;
      // Input from the neighbouring chunk: forward from g-1, backward from g+1.
      const int from = fwd ? g - 1 : g + 1;
      if (!weight && connected(g, from) && stage_of(from) != s) {
        OpSpec recv{.kind = OpKind::kRecv,
                    .stream = StreamKind::kPpRecv,
                    .phase = spec.phase,
                    .match = match(fwd ? 0 : 1, g, p.microbatch),
                    .label = lp,
                    .collective = CollectiveOp::kSendRecv,
                    .microbatch = p.microbatch,
                    .chunk = p.chunk};
        deps.push_back(prog.add_op(s, recv));
      }
      if (!fwd) deps.push_back(fwd_op.at({p.chunk, p.microbatch}));
      if (weight) deps.push_back(bwd_op.at({p.chunk, p.microbatch}));
      switch (p.kind) {
        case PassKind::kForward:
          spec.duration = t.forward;
          spec.label = lf;
          break;
        case PassKind::kBackward:
          spec.duration = t.backward;
          spec.label = lb;
          spec.phase = Phase::kBackward;
          break;
        case PassKind::kBackwardInput:
          spec.duration = t.backward_input;
          spec.label = lb;
          spec.phase = Phase::kBackwardInput;
          break;
        case PassKind::kBackwardWeight:
          spec.duration = t.backward_weight;
          spec.label = lw;
          spec.phase = Phase::kBackwardWeight;
          break;
      }
      if (!weight && connected(g, from) && stage_of(from) == s) {
        deps.push_back((fwd ? fwd_op : bwd_op).at({local(from), p.microbatch}));
      }
      const OpId op = prog.add_op(s, spec, deps);
      (fwd ? fwd_op : bwd_op)[{p.chunk, p.microbatch}] = op;
      const int to = fwd ? g + 1 : g - 1;
      if (!weight && connected(g, to) && stage_of(to) != s) {
        OpSpec send{.kind = OpKind::kSend,
                    .stream = StreamKind::kPpSend,
                    .phase = spec.phase,
                    .duration = t.p2p,
                    .bytes = 1 << 20,
                    .match = match(fwd ? 0 : 1, to, p.microbatch),
                    .label = lp,
                    .collective = CollectiveOp::kSendRecv,
                    .link = t.p2p_link,
                    .microbatch = p.microbatch,
                    .chunk = p.chunk};
        prog.add_op(s, send, {op});
      }
    }
  }
  return prog;
}

}  // namespace scaleplan::sim::testing
