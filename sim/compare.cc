#include "sim/compare.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>
#include <utility>
#include <vector>

#include "core/json_util.h"

namespace scaleplan::sim {
namespace {

// Where a rank's shown timeline starts: its first iteration with GPU work.
Time origin_of(const RecordedRank& r) {
  Time first = Time::at(Duration::infinite());
  for (const RecordedSlice& s : r.slices)
    if (s.iteration >= 0)
      first = std::min(first, r.iterations[static_cast<size_t>(s.iteration)].start);
  return first == Time::at(Duration::infinite()) ? Time::zero() : first;
}

// (global rank, lane name, op name, occurrence) -> slice, for one scaleplan timeline.
using OpKey = std::tuple<int64_t, std::string, uint32_t, int>;

std::map<OpKey, std::pair<size_t, size_t>> op_keys(const RecordedTimeline& t,
                                                   const std::vector<uint32_t>& name_map) {
  std::map<OpKey, std::pair<size_t, size_t>> keys;
  for (size_t r = 0; r < t.ranks.size(); ++r) {
    const RecordedRank& rank = t.ranks[r];
    std::map<std::pair<uint16_t, uint32_t>, int> seen;
    for (size_t i = 0; i < rank.slices.size(); ++i) {  // slices are in (lane, start) order
      const RecordedSlice& s = rank.slices[i];
      // Host-issue slices are the CPU thread's time, not ops of the Program: a run trace and a
      // prediction record them differently (with or without --host-launch), so they are not
      // matched, and not counted as unmatched either.
      if (s.cls == OpClass::kHost) continue;
      const uint32_t name = name_map.empty() ? s.name : name_map[s.name];
      const int n = seen[{s.lane, name}]++;
      keys.emplace(OpKey{rank.rank, rank.lanes[s.lane].name, name, n}, std::pair{r, i});
    }
  }
  return keys;
}

OpMatching match_ops(const RecordedTimeline& p, const RecordedTimeline& m) {
  OpMatching out;
  if (p.format != TraceFormat::kScaleplan) {
    out.note = "no op-for-op match: the predicted side is not a scaleplan trace";
    return out;
  }
  if (m.format == TraceFormat::kKineto) {
    out.possible = true;
    out.by_structure = true;
    out.structured = match_by_structure(p, m);
    out.matched = out.structured.matched_predicted;
    out.predicted_only = out.structured.predicted_only;
    out.measured_only = out.structured.measured_only;
    out.note =
        "ops matched by structure (per micro-batch, pass and layer; GEMMs by shape, other ops "
        "by kind) to the PyTorch ops that launched the measured kernels";
    return out;
  }
  out.possible = true;
  // The measured names in the predicted timeline's numbering (kNone where absent).
  constexpr uint32_t kNone = 0xFFFFFFFFu;
  std::map<std::string, uint32_t> p_names;
  for (uint32_t i = 0; i < p.names.size(); ++i) p_names.emplace(p.names[i], i);
  std::vector<uint32_t> m_to_p(m.names.size(), kNone);
  for (uint32_t i = 0; i < m.names.size(); ++i)
    if (auto it = p_names.find(m.names[i]); it != p_names.end()) m_to_p[i] = it->second;
  const auto pk = op_keys(p, {});
  const auto mk = op_keys(m, m_to_p);
  for (const auto& [key, where] : pk) {
    const auto it = mk.find(key);
    if (it == mk.end() || std::get<2>(key) == kNone) {
      ++out.predicted_only;
      continue;
    }
    const RecordedSlice& ps = p.ranks[where.first].slices[where.second];
    const RecordedSlice& ms = m.ranks[it->second.first].slices[it->second.second];
    out.pairs.push_back({std::get<0>(key), std::get<1>(key), p.names[std::get<2>(key)],
                         std::get<3>(key), ps.end - ps.start, ms.end - ms.start, where.first,
                         where.second, it->second.first, it->second.second});
  }
  out.matched = static_cast<int64_t>(out.pairs.size());
  out.measured_only = static_cast<int64_t>(mk.size()) - out.matched;
  std::sort(out.pairs.begin(), out.pairs.end(), [](const OpPair& a, const OpPair& b) {
    return std::tie(a.p_rank, a.p_slice) < std::tie(b.p_rank, b.p_slice);
  });
  std::vector<size_t> order(out.pairs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto err = [&](size_t i) {
    return std::llabs((out.pairs[i].measured - out.pairs[i].predicted).count());
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return err(a) > err(b); });
  order.resize(std::min<size_t>(order.size(), 10));
  out.largest = order;
  out.note = "ops matched one to one by (rank, stream, name, occurrence)";
  return out;
}

}  // namespace

SideSummary summarize_side(const RecordedTimeline& t) {
  SideSummary s;
  s.format = t.format;
  s.title = t.title;
  s.model = t.model;
  s.cluster = t.cluster;
  s.ranks = static_cast<int>(t.ranks.size());
  for (const RecordedRank& r : t.ranks)
    if (r.peak_allocated >= 0) s.memory.push_back({r.rank, r.peak_allocated, r.peak_reserved});
  // Sums in 128 bits: each time fits the clock (int64 ticks), but a sum over the ranks and
  // iterations of a trace with day-long events does not (UBSan, found by the trace fuzzer:
  // tests/data/fuzz/trace/overflow-summed-spans); their means fit again.
  using Wide = __int128;
  Wide wall = 0, span = 0, idle = 0;
  std::array<Wide, kNumOpClasses> time{}, exposed{};
  std::array<int64_t, kNumOpClasses> count{};
  std::map<std::string, Wide> lanes;
  std::vector<std::string> lane_order;
  std::array<Wide, kNumMemOps> mem_time{};
  std::array<int64_t, kNumMemOps> mem_count{};
  std::array<std::map<int32_t, std::pair<Wide, int64_t>>, kNumOpClasses> by_op;
  for (const RecordedRank& r : t.ranks) {
    const std::vector<IterationSummary> sums = summarize(r);
    for (const RecordedSlice& sl : r.slices) {
      if (sl.iteration < 0 || static_cast<size_t>(sl.iteration) >= sums.size() ||
          sums[static_cast<size_t>(sl.iteration)].gpu_span <= Duration::zero())
        continue;
      const Wide d = (sl.end - sl.start).count();
      if (sl.mem_op >= 0 && sl.mem_op < kNumMemOps) {
        mem_time[static_cast<size_t>(sl.mem_op)] += d;
        mem_count[static_cast<size_t>(sl.mem_op)] += 1;
      }
      const int32_t op = sl.op >= 0 ? sl.op : static_cast<int32_t>(sl.name);
      auto& e = by_op[static_cast<size_t>(sl.cls)][op];
      e.first += d;
      e.second += 1;
    }
    for (const IterationSummary& it : sums) {
      if (it.gpu_span <= Duration::zero()) continue;  // no GPU work in this iteration
      ++s.samples;
      wall += it.wall.count();
      span += it.gpu_span.count();
      idle += it.idle().count();
      for (int c = 0; c < kNumOpClasses; ++c) {
        time[static_cast<size_t>(c)] += it.time[static_cast<size_t>(c)].count();
        exposed[static_cast<size_t>(c)] += it.exposed[static_cast<size_t>(c)].count();
        count[static_cast<size_t>(c)] += it.count[static_cast<size_t>(c)];
      }
      for (size_t l = 0; l < r.lanes.size(); ++l) {
        auto [pos, inserted] = lanes.try_emplace(r.lanes[l].name, 0);
        if (inserted) lane_order.push_back(r.lanes[l].name);
        pos->second += it.lane_time[l].count();
      }
    }
  }
  if (s.samples == 0) return s;
  const auto mean = [&](Wide v) { return Duration::ticks(static_cast<int64_t>(v / s.samples)); };
  s.iteration = mean(wall);
  s.gpu_span = mean(span);
  s.idle = mean(idle);
  for (int c = 0; c < kNumOpClasses; ++c) {
    s.time[static_cast<size_t>(c)] = mean(time[static_cast<size_t>(c)]);
    s.exposed[static_cast<size_t>(c)] = mean(exposed[static_cast<size_t>(c)]);
    s.count[static_cast<size_t>(c)] =
        static_cast<double>(count[static_cast<size_t>(c)]) / static_cast<double>(s.samples);
  }
  for (const std::string& l : lane_order) s.lanes.push_back({l, mean(lanes[l])});
  const auto per_sample = [&](int64_t n) {
    return static_cast<double>(n) / static_cast<double>(s.samples);
  };
  for (size_t k = 0; k < static_cast<size_t>(kNumMemOps); ++k) {
    s.mem_time[k] = mean(mem_time[k]);
    s.mem_count[k] = per_sample(mem_count[k]);
  }
  for (size_t c = 0; c < static_cast<size_t>(kNumOpClasses); ++c) {
    std::vector<SideSummary::Named>& top = s.top[c];
    for (const auto& [name, e] : by_op[c])
      top.push_back({t.names[static_cast<size_t>(name)], mean(e.first), per_sample(e.second)});
    std::stable_sort(top.begin(), top.end(),
                     [](const auto& a, const auto& b) { return a.time > b.time; });
    if (top.size() > SideSummary::kTopOps) top.resize(SideSummary::kTopOps);
  }
  return s;
}

std::vector<CompareRow> mem_op_rows(const Comparison& c) {
  std::vector<CompareRow> rows;
  for (int k = 0; k < kNumMemOps; ++k) {
    const auto i = static_cast<size_t>(k);
    if (c.predicted.mem_count[i] == 0 && c.measured.mem_count[i] == 0) continue;
    CompareRow r;
    r.name = std::string(to_string(static_cast<MemOp>(k)));
    r.predicted = c.predicted.mem_time[i];
    r.measured = c.measured.mem_time[i];
    r.predicted_count = c.predicted.mem_count[i];
    r.measured_count = c.measured.mem_count[i];
    rows.push_back(r);
  }
  return rows;
}

Comparison compare(const RecordedTimeline& predicted, const RecordedTimeline& measured) {
  return {summarize_side(predicted), summarize_side(measured), match_ops(predicted, measured)};
}

double relative_error(Duration predicted, Duration measured) {
  if (measured <= Duration::zero()) return std::nan("");
  return (predicted - measured) / measured;
}

double CompareRow::error() const {
  return both ? relative_error(predicted, measured) : std::nan("");
}

std::vector<CompareRow> class_rows(const Comparison& c) {
  std::vector<CompareRow> rows;
  for (int k = 0; k < kNumOpClasses; ++k) {
    const auto i = static_cast<size_t>(k);
    const auto cls = static_cast<OpClass>(k);
    if (cls == OpClass::kHost || (c.predicted.count[i] == 0 && c.measured.count[i] == 0)) continue;
    rows.push_back({std::string(to_string(cls)), c.predicted.time[i], c.measured.time[i],
                    c.predicted.count[i], c.measured.count[i]});
  }
  return rows;
}

std::vector<CompareRow> exposed_rows(const Comparison& c) {
  std::vector<CompareRow> rows;
  for (int k = 0; k < kNumOpClasses; ++k) {
    const auto i = static_cast<size_t>(k);
    const auto cls = static_cast<OpClass>(k);
    if (!is_comm(cls) || (c.predicted.count[i] == 0 && c.measured.count[i] == 0)) continue;
    rows.push_back({std::string(to_string(cls)), c.predicted.exposed[i], c.measured.exposed[i]});
  }
  return rows;
}

std::vector<CompareRow> stream_rows(const Comparison& c) {
  std::vector<CompareRow> rows;
  for (const auto& [name, t] : c.predicted.lanes)
    rows.push_back({name, t, Duration::zero(), 0, 0, false});
  for (const auto& lane : c.measured.lanes) {
    const std::string& name = lane.first;
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&name](const CompareRow& r) { return r.name == name; });
    if (it != rows.end()) {
      it->measured = lane.second;
      it->both = true;
    } else {
      rows.push_back({name, Duration::zero(), lane.second, 0, 0, false});
    }
  }
  return rows;
}

std::string comparison_trace(const RecordedTimeline& predicted, const RecordedTimeline& measured,
                             const Comparison& comparison) {
  Json events = Json::array();
  // Processes: for each global rank, predicted then measured (pid 2k, 2k+1).
  std::map<int64_t, int> order;
  for (const auto* t : {&predicted, &measured})
    for (const RecordedRank& r : t->ranks) order.emplace(r.rank, 0);
  int k = 0;
  for (auto& [rank, index] : order) index = k++;
  const auto pid_of = [&](int side, const RecordedRank& r) { return 2 * order[r.rank] + side; };
  const auto to_us = [](Duration d) { return static_cast<double>(d.count()) * 1e-6; };
  for (int side = 0; side < 2; ++side) {
    const RecordedTimeline& t = side == 0 ? predicted : measured;
    for (const RecordedRank& r : t.ranks) {
      const int pid = pid_of(side, r);
      const std::string who = side == 0 ? "predicted" : "measured";
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", pid},
                        {"args", {{"name", who + " \xC2\xB7 " + r.label}}}});
      events.push_back({{"ph", "M"},
                        {"name", "process_sort_index"},
                        {"pid", pid},
                        {"args", {{"sort_index", pid}}}});
      for (size_t l = 0; l < r.lanes.size(); ++l) {
        events.push_back({{"ph", "M"},
                          {"name", "thread_name"},
                          {"pid", pid},
                          {"tid", l},
                          {"args", {{"name", r.lanes[l].name}}}});
        events.push_back({{"ph", "M"},
                          {"name", "thread_sort_index"},
                          {"pid", pid},
                          {"tid", l},
                          {"args", {{"sort_index", l}}}});
      }
      const Time origin = origin_of(r);
      for (const RecordedSlice& s : r.slices) {
        events.push_back({{"ph", "X"},
                          {"name", t.names[s.name]},
                          {"cat", std::string(to_string(s.cls))},
                          {"pid", pid},
                          {"tid", s.lane},
                          {"ts", to_us(s.start - origin)},
                          {"dur", to_us(s.end - s.start)},
                          {"args", {{"class", std::string(to_string(s.cls))}}}});
      }
    }
  }
  // Each match's two ends: (predicted rank, slice, measured rank, slice); a group of the match by
  // structure joins its first predicted op to the first kernel of its first measured op.
  std::vector<std::array<size_t, 4>> ends;
  for (const OpPair& pair : comparison.ops.pairs)
    ends.push_back({pair.p_rank, pair.p_slice, pair.m_rank, pair.m_slice});
  const auto rank_index = [](const RecordedTimeline& t, int64_t rank) {
    for (size_t i = 0; i < t.ranks.size(); ++i)
      if (t.ranks[i].rank == rank) return i;
    return t.ranks.size();
  };
  std::map<size_t, std::map<int32_t, size_t>> first_kernel;  // measured rank -> op -> slice
  for (const OpGroup& g : comparison.ops.structured.groups) {
    const size_t pr = rank_index(predicted, g.rank), mr = rank_index(measured, g.rank);
    if (pr >= predicted.ranks.size() || mr >= measured.ranks.size()) continue;
    auto [it, fresh] = first_kernel.try_emplace(mr);
    if (fresh) {
      const std::vector<RecordedSlice>& sl = measured.ranks[mr].slices;
      for (size_t i = 0; i < sl.size(); ++i) {
        auto [k, added] = it->second.try_emplace(sl[i].unit, i);
        if (!added && sl[i].start < sl[k->second].start) k->second = i;
      }
    }
    const auto k = it->second.find(static_cast<int32_t>(g.measured.front()));
    if (k != it->second.end()) ends.push_back({pr, g.predicted.front(), mr, k->second});
  }
  uint64_t id = 0;
  for (const auto& [p_rank, p_slice, m_rank, m_slice] : ends) {
    const RecordedRank& pr = predicted.ranks[p_rank];
    const RecordedRank& mr = measured.ranks[m_rank];
    const RecordedSlice& ps = pr.slices[p_slice];
    const RecordedSlice& ms = mr.slices[m_slice];
    // The match's flow arrow: it starts ("s") at the predicted slice and ends ("f", bound to the
    // slice it lands in: "bp": "e") at the measured one.
    auto flow = [&](const char* ph, int side, const RecordedRank& r, const RecordedSlice& slice) {
      return Json{{"ph", ph},
                  {"id", id},
                  {"name", "match"},
                  {"cat", "match"},
                  {"pid", pid_of(side, r)},
                  {"tid", slice.lane},
                  {"ts", to_us(slice.start - origin_of(r))}};
    };
    events.push_back(flow("s", 0, pr, ps));
    Json end = flow("f", 1, mr, ms);
    end["bp"] = "e";
    events.push_back(std::move(end));
    ++id;
  }
  Json j = {{"displayTimeUnit", "ns"},
            {"otherData",
             {{"generator", "scaleplan compare"},
              {"predicted", predicted.title},
              {"measured", measured.title}}},
            {"traceEvents", events}};
  return j.dump() + "\n";
}

}  // namespace scaleplan::sim
