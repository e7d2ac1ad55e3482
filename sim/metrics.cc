#include "sim/metrics.h"

#include <algorithm>
#include <cstdint>

namespace scaleplan::sim {
namespace {

// A change of what runs on a rank: at `time`, class `what` (0 compute, 1 + CommKind) goes up or
// down.
struct Edge {
  int64_t time;
  int8_t what;
  int8_t delta;
};

}  // namespace

std::vector<RankBreakdown> breakdown(const Program& program, const Timeline& timeline) {
  const int nr = program.num_ranks();
  std::vector<RankBreakdown> out(nr);
  std::vector<std::vector<Edge>> edges(nr);
  int64_t pipeline_end = 0;
  bool pipelined = false;
  const auto& ops = program.ops();
  for (OpId i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int64_t s = timeline.start[i].since_start().count();
    const int64_t e = timeline.end[i].since_start().count();
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) pipelined = true;
    if (e <= s) continue;
    if (op.kind == OpKind::kCompute) {
      edges[op.rank].push_back({s, 0, 1});
      edges[op.rank].push_back({e, 0, -1});
      if (op.phase == Phase::kRecompute) out[op.rank].recompute += Duration::ticks(e - s);
      if (op.phase != Phase::kOptimizer && op.phase != Phase::kOther)
        pipeline_end = std::max(pipeline_end, e);
    } else if (op.is_comm()) {
      const int8_t k = static_cast<int8_t>(1 + static_cast<int>(comm_kind_of(op.stream)));
      edges[op.rank].push_back({s, k, 1});
      edges[op.rank].push_back({e, k, -1});
    }
  }
  const int64_t makespan = timeline.makespan.since_start().count();
  for (int r = 0; r < nr; ++r) {
    auto& ev = edges[r];
    std::sort(ev.begin(), ev.end(), [](const Edge& a, const Edge& b) { return a.time < b.time; });
    ev.push_back({makespan, 0, 0});
    RankBreakdown& b = out[r];
    b.total = Duration::ticks(makespan);
    std::array<int, 1 + kNumCommKinds> active{};
    int64_t t = 0;
    for (const Edge& x : ev) {
      const int64_t span = x.time - t;
      if (span > 0) {
        int kinds = 0;
        for (int k = 0; k < kNumCommKinds; ++k) kinds += active[1 + k] > 0;
        if (active[0] > 0) {
          b.compute += Duration::ticks(span);
          for (int k = 0; k < kNumCommKinds; ++k) {
            if (active[1 + k] > 0) b.overlapped_comm[k] += Duration::ticks(span);
          }
        } else if (kinds > 0) {
          // Split equally; the remainder tick(s) go to the first kinds, so the sum stays exact.
          int64_t share = span / kinds, rest = span - share * kinds;
          for (int k = 0; k < kNumCommKinds; ++k) {
            if (active[1 + k] == 0) continue;
            b.exposed_comm[k] += Duration::ticks(share + (rest > 0 ? 1 : 0));
            if (rest > 0) --rest;
          }
        } else if (pipelined && t < pipeline_end) {
          const int64_t in_pipe = std::min(x.time, pipeline_end) - t;
          b.bubble += Duration::ticks(in_pipe);
          b.idle += Duration::ticks(span - in_pipe);
        } else {
          b.idle += Duration::ticks(span);
        }
      }
      t = std::max(t, x.time);
      active[x.what] += x.delta;
    }
  }
  return out;
}

}  // namespace scaleplan::sim
