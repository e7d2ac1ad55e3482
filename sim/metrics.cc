#include "sim/metrics.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <unordered_map>

#include "sim/op_class.h"

namespace scaleplan::sim {
namespace {

// Class of an op in the breakdown: 0 compute, 1 + CommClass for a transfer, -1 not counted.
int class_of(const Op& op) {
  if (op.kind == OpKind::kCompute) return 0;
  if (op.is_comm()) return 1 + static_cast<int>(comm_class_of(op.stream));
  return -1;
}

}  // namespace

// Each rank's time is swept once in time order over the starts and ends of its counted ops. The
// ops of one stream never overlap and run in program order, so each (rank, stream) lane yields
// its edges already sorted; the sweep merges the lanes (at most kNumStreams) instead of sorting
// every edge. The order of edges at equal times does not matter: a span is attributed only
// between distinct times, with the classes active after every edge before it.
// The op array (48 bytes an op) is read once: the first pass keeps each counted op's lane and
// class, which the second reads instead of the ops (the planner's 405B layouts have ~500k ops).
std::vector<RankBreakdown> breakdown(const Program& program, const Timeline& timeline) {
  const int nr = program.num_ranks();
  std::vector<RankBreakdown> out(nr);
  int64_t pipeline_end = 0;
  bool pipelined = false;
  const auto& ops = program.ops();
  const size_t lanes = static_cast<size_t>(nr) * kNumStreams;
  // Counted ops per lane, in program order (CSR); lane_plus1[i]: op i's lane + 1, 0 if not
  // counted; cls[i]: its class_of.
  std::vector<uint32_t> lane_begin(lanes + 1, 0);
  std::vector<uint32_t> lane_plus1(ops.size(), 0);
  std::vector<int8_t> cls(ops.size());
  for (OpId i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) pipelined = true;
    cls[i] = static_cast<int8_t>(class_of(op));
    if (cls[i] < 0) continue;
    const int64_t s = timeline.start[i].since_start().count();
    const int64_t e = timeline.end[i].since_start().count();
    if (e <= s) continue;
    const size_t lane = static_cast<size_t>(op.rank) * kNumStreams + static_cast<size_t>(op.stream);
    lane_plus1[i] = static_cast<uint32_t>(lane + 1);
    ++lane_begin[lane + 1];
    if (op.kind == OpKind::kCompute) {
      if (op.phase == Phase::kRecompute) out[op.rank].recompute += Duration::ticks(e - s);
      if (op.phase != Phase::kOptimizer && op.phase != Phase::kOther)
        pipeline_end = std::max(pipeline_end, e);
    }
  }
  for (size_t l = 0; l < lanes; ++l) lane_begin[l + 1] += lane_begin[l];
  struct Entry {
    OpId op;
    int32_t what;  // class_of
  };
  std::vector<Entry> lane_ops(lane_begin[lanes]);
  {
    std::vector<uint32_t> fill(lane_begin.begin(), lane_begin.end() - 1);
    for (OpId i = 0; i < ops.size(); ++i) {
      if (lane_plus1[i] != 0) lane_ops[fill[lane_plus1[i] - 1]++] = {i, cls[i]};
    }
  }
  const int64_t makespan = timeline.makespan.since_start().count();
  constexpr int64_t kNever = INT64_MAX;
  for (int r = 0; r < nr; ++r) {
    RankBreakdown& b = out[r];
    b.total = Duration::ticks(makespan);
    // The rank's non-empty lanes; per lane the next entry, whether its start (false) or its end
    // (true) is the next edge, and that edge's time (kNever once the lane is exhausted).
    int used = 0;
    std::array<uint32_t, kNumStreams> pos{}, end{};
    std::array<bool, kNumStreams> at_end{};
    std::array<int64_t, kNumStreams> next{};
    auto edge_time = [&](int k) {
      if (pos[k] == end[k]) return kNever;
      const OpId i = lane_ops[pos[k]].op;
      return (at_end[k] ? timeline.end[i] : timeline.start[i]).since_start().count();
    };
    for (int s = 0; s < kNumStreams; ++s) {
      const size_t lane = static_cast<size_t>(r) * kNumStreams + s;
      if (lane_begin[lane] == lane_begin[lane + 1]) continue;
      pos[used] = lane_begin[lane];
      end[used] = lane_begin[lane + 1];
      next[used] = edge_time(used);
      ++used;
    }
    std::array<int, 1 + kNumCommClasses> active{};
    int comm_kinds = 0;  // communication kinds with a transfer running
    int64_t t = 0;
    for (;;) {
      int lane = 0;
      for (int k = 1; k < used; ++k) {
        if (next[k] < next[lane]) lane = k;
      }
      const bool closing = used == 0 || next[lane] == kNever;  // the makespan edge
      const int64_t time = closing ? makespan : next[lane];
      const int64_t span = time - t;
      if (span > 0) {
        if (active[0] > 0) {
          b.compute += Duration::ticks(span);
          for (int k = 0; comm_kinds > 0 && k < kNumCommClasses; ++k) {
            if (active[1 + k] > 0) b.overlapped_comm[k] += Duration::ticks(span);
          }
        } else if (comm_kinds > 0) {
          // Split equally; the remainder tick(s) go to the first kinds, so the sum stays exact.
          int64_t share = span / comm_kinds, rest = span - share * comm_kinds;
          for (int k = 0; k < kNumCommClasses; ++k) {
            if (active[1 + k] == 0) continue;
            b.exposed_comm[k] += Duration::ticks(share + (rest > 0 ? 1 : 0));
            if (rest > 0) --rest;
          }
        } else if (pipelined && t < pipeline_end) {
          const int64_t in_pipe = std::min(time, pipeline_end) - t;
          b.bubble += Duration::ticks(in_pipe);
          b.idle += Duration::ticks(span - in_pipe);
        } else {
          b.idle += Duration::ticks(span);
        }
      }
      t = std::max(t, time);
      if (closing) break;
      const int what = lane_ops[pos[lane]].what;
      if (at_end[lane]) {
        if (--active[what] == 0 && what > 0) --comm_kinds;
        ++pos[lane];
      } else {
        if (active[what]++ == 0 && what > 0) ++comm_kinds;
      }
      at_end[lane] = !at_end[lane];
      next[lane] = edge_time(lane);
    }
  }
  return out;
}

std::string op_class(const Program& program, OpId id) {
  const Op& op = program.op(id);
  // The kind is sim::classify_op's (sim/op_class.h), the one classification `compare` uses too;
  // collectives add their group, pipeline transfers their direction.
  const std::string kind(to_string(classify_op(program, id)));
  switch (op.kind) {
    case OpKind::kCompute:
      return kind;
    case OpKind::kCollective:
      if (const auto* c = std::get_if<CollectivePayload>(&program.payload(id))) {
        if (c->size <= 1) return "";
        return kind + " " + std::string(to_string(c->group));
      }
      return kind;
    case OpKind::kSend:
      return "pp send";
    case OpKind::kRecv:
      return "pp recv";
    default:
      return "";
  }
}

std::vector<ClassTimes> times_by_class(const Program& program, std::span<const Duration> predicted,
                                       std::span<const Duration> measured) {
  std::vector<ClassTimes> out;
  std::unordered_map<std::string, size_t> index;
  for (OpId i = 0; i < program.num_ops(); ++i) {
    std::string name = op_class(program, i);
    if (name.empty()) continue;
    auto [it, fresh] = index.try_emplace(name, out.size());
    if (fresh) {
      ClassTimes c;
      c.name = std::move(name);
      out.push_back(std::move(c));
    }
    ClassTimes& c = out[it->second];
    ++c.ops;
    if (i < predicted.size()) c.predicted += predicted[i];
    if (i < measured.size()) c.measured += measured[i];
  }
  return out;
}

}  // namespace scaleplan::sim
