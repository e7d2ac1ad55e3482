// The op-for-op match of a prediction against a PyTorch profiler trace; contract in op_match.h.
#include "sim/op_match.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <utility>

#include "core/kernel_shapes.h"

namespace scaleplan::sim {
namespace {

struct Unit {
  size_t index = 0;  // slice index (predicted) or op index (measured)
  OpClass cls = OpClass::kOtherCompute;
  int8_t mem_op = -1;
  StepPass pass = StepPass::kOther;
  int microbatch = -1;
  int layer = -1;
  Time start;
  Duration time;
  std::array<int64_t, 4> gemm{};
  std::string_view name;
  bool used = false;
};

bool by_start(const Unit& a, const Unit& b) { return a.start < b.start; }

// A slice's kind key for the buckets of step 5: its class, and its MemOp where it has one.
std::pair<int, int> bucket_of(const Unit& u) {
  const bool kinded = u.cls == OpClass::kMemoryBound || u.cls == OpClass::kOptimizer;
  return {static_cast<int>(u.cls), kinded ? u.mem_op : -1};
}

std::string kind_name(OpClass cls, int8_t mem_op) {
  std::string s(to_string(cls));
  if (mem_op >= 0 && mem_op < kNumMemOps)
    s += " " + std::string(to_string(static_cast<MemOp>(mem_op)));
  return s;
}

std::vector<Unit> predicted_units(const RecordedTimeline& t, const RecordedRank& r) {
  std::vector<Unit> out;
  for (size_t i = 0; i < r.slices.size(); ++i) {
    const RecordedSlice& s = r.slices[i];
    if (s.cls == OpClass::kHost || s.unit < 0) continue;
    const RecordedOp& o = r.ops[static_cast<size_t>(s.unit)];
    Unit u;
    u.index = i;
    u.cls = s.cls;
    u.mem_op = s.mem_op;
    u.pass = o.pass;
    u.microbatch =
        o.pass == StepPass::kForward || o.pass == StepPass::kBackward ? o.microbatch : -1;
    u.start = s.start;
    u.time = s.end - s.start;
    u.gemm = o.gemm;
    u.name = t.names[s.name];
    out.push_back(u);
  }
  std::stable_sort(out.begin(), out.end(), by_start);
  return out;
}

// The measured ops of the rank's first iteration with GPU work: each launching op with its
// kernels' summed time, the class with most of it, and the micro-batch from the pass sequence.
std::vector<Unit> measured_units(const RecordedTimeline& t, const RecordedRank& r) {
  int32_t first = -1;
  for (const RecordedSlice& s : r.slices)
    if (s.iteration >= 0 && s.cls != OpClass::kHost && (first < 0 || s.iteration < first))
      first = s.iteration;
  struct Acc {
    std::array<Duration, kNumOpClasses> time{};
    int8_t mem_op = -1;
    Time start = Time::at(Duration::infinite());
    bool seen = false;
  };
  std::vector<Acc> acc(r.ops.size());
  for (const RecordedSlice& s : r.slices) {
    if (s.iteration != first || s.unit < 0 || s.cls == OpClass::kHost) continue;
    Acc& a = acc[static_cast<size_t>(s.unit)];
    a.seen = true;
    a.time[static_cast<size_t>(s.cls)] += s.end - s.start;
    if (s.mem_op >= 0 && a.mem_op < 0) a.mem_op = s.mem_op;
    a.start = std::min(a.start, s.start);
  }
  std::vector<Unit> out;
  for (size_t i = 0; i < acc.size(); ++i) {
    const Acc& a = acc[i];
    if (!a.seen) continue;
    Unit u;
    u.index = i;
    size_t best = 0;
    for (size_t c = 0; c < a.time.size(); ++c) {
      u.time += a.time[c];
      if (a.time[c] > a.time[best]) best = c;
    }
    u.cls = static_cast<OpClass>(best);
    u.mem_op = u.cls == OpClass::kMemoryBound || u.cls == OpClass::kOptimizer ? a.mem_op : -1;
    u.pass = r.ops[i].pass;
    u.start = a.start;
    u.gemm = r.ops[i].gemm;
    u.name = t.names[r.ops[i].name];
    out.push_back(u);
  }
  std::stable_sort(out.begin(), out.end(), by_start);
  // Gradient accumulation runs forward, backward, forward, ...: a forward op after a backward op
  // starts the next micro-batch.
  int mb = 0;
  bool backward_seen = false;
  for (Unit& u : out) {
    if (u.pass == StepPass::kForward) {
      if (backward_seen) ++mb;
      backward_seen = false;
      u.microbatch = mb;
    } else if (u.pass == StepPass::kBackward) {
      backward_seen = true;
      u.microbatch = mb;
    }
  }
  return out;
}

bool is_norm(const Unit& u) {
  return u.mem_op == static_cast<int8_t>(MemOp::kRmsNorm) ||
         u.mem_op == static_cast<int8_t>(MemOp::kLayerNorm);
}
bool is_gemm(const Unit& u) { return u.cls == OpClass::kGemm; }

// Step 4 of op_match.h on the ops of one (micro-batch, pass) in time order; returns the number of
// layers found.
int assign_layers(std::vector<Unit*> seq, bool backward) {
  if (backward) std::reverse(seq.begin(), seq.end());
  const OpClass anchor = backward ? OpClass::kAttentionBwd : OpClass::kAttentionFwd;
  std::vector<size_t> a;
  for (size_t k = 0; k < seq.size(); ++k)
    if (seq[k]->cls == anchor) a.push_back(k);
  const size_t layers = a.size();
  for (Unit* u : seq) u->layer = -1;
  if (layers == 0) return 0;
  // The last norm in [from, to), or `to` where there is none.
  const auto last_norm = [&](size_t from, size_t to) {
    for (size_t k = to; k-- > from;)
      if (is_norm(*seq[k])) return k;
    return to;
  };
  std::vector<size_t> start(layers);
  for (size_t i = 1; i < layers; ++i) {
    const size_t n = last_norm(a[i - 1] + 1, a[i]);
    start[i] = a[i - 1] + 1;
    for (size_t k = a[i - 1] + 1; k < n; ++k)
      if (is_gemm(*seq[k])) start[i] = k + 1;
  }
  std::set<std::pair<int, int>> opening;  // the kinds layer 1 opens with, before its last norm
  if (layers >= 2)
    for (size_t k = start[1]; k < last_norm(a[0] + 1, a[1]); ++k)
      opening.insert(bucket_of(*seq[k]));
  start[0] = last_norm(0, a[0]);
  while (start[0] > 0 && !is_gemm(*seq[start[0] - 1]) && seq[start[0] - 1]->cls != anchor &&
         opening.count(bucket_of(*seq[start[0] - 1])) > 0)
    --start[0];
  size_t after = seq.size();  // first op after the layers
  if (layers >= 2) {
    size_t gemms = 0;
    for (size_t k = a[0] + 1; k < start[1]; ++k) gemms += is_gemm(*seq[k]) ? 1 : 0;
    for (size_t k = a[layers - 1] + 1, seen = 0; k < seq.size() && gemms > 0; ++k)
      if (is_gemm(*seq[k]) && ++seen == gemms) {
        after = k + 1;
        break;
      }
  }
  for (size_t k = 0; k < seq.size(); ++k) {
    if (k < start[0]) continue;
    if (k >= after) {
      seq[k]->layer = static_cast<int>(layers);
      continue;
    }
    const size_t i =
        static_cast<size_t>(std::upper_bound(start.begin(), start.end(), k) - start.begin()) - 1;
    seq[k]->layer = static_cast<int>(i);
  }
  return static_cast<int>(layers);
}

using SegKey = std::tuple<int, int, int>;  // pass, micro-batch, layer

SegKey key_of(const Unit& u) { return {static_cast<int>(u.pass), u.microbatch, u.layer}; }
StepSegment segment_of(const SegKey& k) {
  return {static_cast<StepPass>(std::get<0>(k)), std::get<1>(k), std::get<2>(k)};
}

std::array<int64_t, 3> sorted_dims(const std::array<int64_t, 4>& g) {
  std::array<int64_t, 3> d{g[0], g[1], g[2]};
  std::sort(d.begin(), d.end());
  return d;
}

// `u`'s dim that is left when the two dims `others` are taken out of it (in position when
// `ordered`: `fused` is the position); 0 when it does not hold them.
int64_t remaining_dim(const Unit& u, const std::array<int64_t, 4>& p, int fused, bool ordered) {
  if (u.gemm[3] != p[3]) return 0;
  if (ordered) {
    for (int d = 0; d < 3; ++d)
      if (d != fused && u.gemm[static_cast<size_t>(d)] != p[static_cast<size_t>(d)]) return 0;
    return u.gemm[static_cast<size_t>(fused)];
  }
  std::vector<int64_t> rest{u.gemm[0], u.gemm[1], u.gemm[2]};
  for (int d = 0; d < 3; ++d) {
    if (d == fused) continue;
    const auto it = std::find(rest.begin(), rest.end(), p[static_cast<size_t>(d)]);
    if (it == rest.end()) return 0;
    rest.erase(it);
  }
  return rest.front();
}

struct Matcher {
  int64_t rank = 0;
  StructuredMatch& out;

  void group(const SegKey& seg, std::vector<Unit*> p, std::vector<Unit*> m, const char* how) {
    OpGroup g;
    g.rank = rank;
    g.segment = segment_of(seg);
    g.cls = p.front()->cls;
    g.mem_op = p.front()->mem_op;
    g.how = how;
    const auto longest = [](const std::vector<Unit*>& v) {
      return std::string((*std::max_element(v.begin(), v.end(), [](const Unit* a, const Unit* b) {
                           return a->time < b->time;
                         }))->name);
    };
    g.predicted_name = longest(p);
    g.measured_name = longest(m);
    for (Unit* u : p) {
      u->used = true;
      g.predicted.push_back(u->index);
      g.predicted_time += u->time;
    }
    for (Unit* u : m) {
      u->used = true;
      g.measured.push_back(u->index);
      g.measured_time += u->time;
    }
    out.matched_predicted += static_cast<int64_t>(p.size());
    out.matched_measured += static_cast<int64_t>(m.size());
    out.groups.push_back(std::move(g));
  }

  // The parts of a fused GEMM `x` among the unused measured GEMMs, in time order: GEMMs that
  // share two of x's dims and whose third dims add up to x's; empty when there are none.
  static std::vector<Unit*> fused_parts(const Unit& x, const std::vector<Unit*>& m) {
    for (const bool ordered : {true, false}) {
      for (int fused = 0; fused < 3; ++fused) {
        const int64_t target = x.gemm[static_cast<size_t>(fused)];
        std::vector<Unit*> parts;
        int64_t sum = 0;
        for (Unit* y : m) {
          if (y->used || y->gemm[0] == 0) continue;
          const int64_t d = remaining_dim(*y, x.gemm, fused, ordered);
          if (d <= 0 || d > target - sum) continue;
          parts.push_back(y);
          sum += d;
          if (sum == target) break;
        }
        if (sum == target && parts.size() >= 2) return parts;
      }
    }
    return {};
  }

  // The first unused measured GEMM of x's dims (in order, else as a set); nullptr if none.
  static Unit* same_shape(const Unit& x, const std::vector<Unit*>& m) {
    for (const bool ordered : {true, false})
      for (Unit* y : m) {
        if (y->used || y->gemm[3] != x.gemm[3]) continue;
        if (ordered ? y->gemm == x.gemm : sorted_dims(y->gemm) == sorted_dims(x.gemm)) return y;
      }
    return nullptr;
  }

  // GEMMs by shape, the predicted ones in time order, each to whichever comes first among the
  // measured: the first GEMM of its dims, or the first of the parts that add up to it.
  void gemms(const SegKey& seg, const std::vector<Unit*>& p, const std::vector<Unit*>& m) {
    for (Unit* x : p) {
      if (x->gemm[0] == 0) continue;
      Unit* same = same_shape(*x, m);
      const std::vector<Unit*> parts = fused_parts(*x, m);
      if (same != nullptr && (parts.empty() || same->start <= parts.front()->start)) {
        group(seg, {x}, {same}, "shape");
      } else if (!parts.empty()) {
        group(seg, {x}, parts, "fused shape");
      }
    }
    // Where a side has no dims (a trace without record_shapes), the rest pair by count.
    std::vector<Unit*> pu, mu;
    bool dimless = false;
    for (Unit* x : p)
      if (!x->used) {
        pu.push_back(x);
        dimless = dimless || x->gemm[0] == 0;
      }
    for (Unit* y : m)
      if (!y->used) {
        mu.push_back(y);
        dimless = dimless || y->gemm[0] == 0;
      }
    if (dimless) by_count(seg, pu, mu);
  }

  void by_count(const SegKey& seg, const std::vector<Unit*>& p, const std::vector<Unit*>& m) {
    if (p.empty() || m.empty()) return;
    if (p.size() == m.size()) {
      for (size_t i = 0; i < p.size(); ++i) group(seg, {p[i]}, {m[i]}, "in order");
    } else {
      group(seg, p, m, "as a group");
    }
  }

  void segment(const SegKey& seg, std::vector<Unit*>& p, std::vector<Unit*>& m) {
    std::map<std::pair<int, int>, std::pair<std::vector<Unit*>, std::vector<Unit*>>> buckets;
    for (Unit* u : p) buckets[bucket_of(*u)].first.push_back(u);
    for (Unit* u : m) buckets[bucket_of(*u)].second.push_back(u);
    for (auto& [kind, sides] : buckets) {
      if (kind.first == static_cast<int>(OpClass::kGemm))
        gemms(seg, sides.first, sides.second);
      else
        by_count(seg, sides.first, sides.second);
    }
  }
};

std::string unmatched_reason(const Unit& u, bool predicted, bool segment_on_other_side,
                             bool kind_on_other_side) {
  const char* other = predicted ? "measured" : "predicted";
  if (!segment_on_other_side) return std::string("no ") + other + " ops in this part of the step";
  if (u.cls == OpClass::kGemm && u.gemm[0] != 0 && kind_on_other_side)
    return predicted ? "no measured GEMM of this shape, or GEMMs adding up to it, here"
                     : "no predicted GEMM of this shape, or fused from it, here";
  return std::string("no ") + other + " " + kind_name(u.cls, u.mem_op) + " op here";
}

Duration sum_time(const std::vector<Unit*>& v) {
  Duration d;
  for (const Unit* u : v) d += u->time;
  return d;
}

}  // namespace

std::string to_string(const StepSegment& s, int layers) {
  std::string out;
  if (s.microbatch >= 0) out = "mb " + std::to_string(s.microbatch) + " ";
  out += std::string(to_string(s.pass));
  if (s.pass != StepPass::kForward && s.pass != StepPass::kBackward) return out;
  if (layers <= 0) return out;
  if (s.layer == StepSegment::kAnyLayer) return out;
  if (s.layer < 0) return out + " below the layers";
  if (s.layer >= layers) return out + " above the layers";
  return out + " layer " + std::to_string(s.layer);
}

StructuredMatch match_by_structure(const RecordedTimeline& predicted,
                                   const RecordedTimeline& measured) {
  StructuredMatch out;
  std::map<std::pair<int, int>, std::array<Duration, 2>> layer_rows,
      mb_rows;  // (pass, layer|mb) -> p, m
  for (const RecordedRank& pr : predicted.ranks) {
    const auto mr_it = std::find_if(measured.ranks.begin(), measured.ranks.end(),
                                    [&](const RecordedRank& r) { return r.rank == pr.rank; });
    if (mr_it == measured.ranks.end()) continue;
    std::vector<Unit> pu = predicted_units(predicted, pr), mu = measured_units(measured, *mr_it);
    // Layers per (pass, micro-batch) on each side; where the sides disagree, none.
    std::map<std::pair<int, int>, std::vector<Unit*>> pseq, mseq;
    for (Unit& u : pu) pseq[{static_cast<int>(u.pass), u.microbatch}].push_back(&u);
    for (Unit& u : mu) mseq[{static_cast<int>(u.pass), u.microbatch}].push_back(&u);
    for (auto* seqs : {&pseq, &mseq})
      for (const auto& [k, v] : *seqs) {
        if (k.second >= 0) {
          int& n = seqs == &pseq ? out.microbatches_predicted : out.microbatches_measured;
          n = std::max(n, k.second + 1);
        }
      }
    std::map<std::pair<int, int>, int> layers_of;
    for (auto& [k, v] : pseq) {
      const bool bwd = k.first == static_cast<int>(StepPass::kBackward);
      const bool layered = k.first == static_cast<int>(StepPass::kForward) || bwd;
      const int lp = layered ? assign_layers(v, bwd) : 0;
      const auto m = mseq.find(k);
      const int lm = layered && m != mseq.end() ? assign_layers(m->second, bwd) : 0;
      out.layers_predicted = std::max(out.layers_predicted, lp);
      out.layers_measured = std::max(out.layers_measured, lm);
      if (lp != lm) {
        for (Unit* u : v) u->layer = -1;
        if (m != mseq.end())
          for (Unit* u : m->second) u->layer = -1;
      }
      layers_of[k] = lp == lm ? lp : 0;
    }
    for (auto& [k, v] : mseq)
      if (pseq.count(k) == 0)
        for (Unit* u : v) u->layer = -1;
    // Step 5 per segment.
    std::map<SegKey, std::pair<std::vector<Unit*>, std::vector<Unit*>>> segments;
    for (Unit& u : pu) segments[key_of(u)].first.push_back(&u);
    for (Unit& u : mu) segments[key_of(u)].second.push_back(&u);
    Matcher matcher{pr.rank, out};
    for (auto& [seg, sides] : segments) {
      matcher.segment(seg, sides.first, sides.second);
      const int pass = std::get<0>(seg);
      const int layers =
          layers_of.count({pass, std::get<1>(seg)}) > 0 ? layers_of[{pass, std::get<1>(seg)}] : 0;
      if (layers > 0 || std::get<1>(seg) < 0) {
        auto& row = layer_rows[{pass, std::get<2>(seg)}];
        row[0] += sum_time(sides.first);
        row[1] += sum_time(sides.second);
      }
      auto& mrow = mb_rows[{pass, std::get<1>(seg)}];
      mrow[0] += sum_time(sides.first);
      mrow[1] += sum_time(sides.second);
    }
    for (int side = 0; side < 2; ++side) {
      const bool is_p = side == 0;
      for (const Unit& u : is_p ? pu : mu) {
        if (u.used) continue;
        const auto& seg = segments[key_of(u)];
        const auto& other = is_p ? seg.second : seg.first;
        const bool kind_there = std::any_of(other.begin(), other.end(), [&](const Unit* o) {
          return bucket_of(*o) == bucket_of(u);
        });
        UnmatchedOp x;
        x.rank = pr.rank;
        x.predicted = is_p;
        x.segment = segment_of(key_of(u));
        x.cls = u.cls;
        x.mem_op = u.mem_op;
        x.name = std::string(u.name);
        x.time = u.time;
        x.reason = unmatched_reason(u, is_p, !other.empty(), kind_there);
        ++(is_p ? out.predicted_only : out.measured_only);
        out.unmatched.push_back(std::move(x));
      }
    }
  }
  for (const auto& [k, t] : layer_rows)
    out.layers.push_back({{static_cast<StepPass>(k.first), -1, k.second}, t[0], t[1]});
  for (const auto& [k, t] : mb_rows)
    out.microbatches.push_back(
        {{static_cast<StepPass>(k.first), k.second, StepSegment::kAnyLayer}, t[0], t[1]});
  // Matched time by class and by kind.
  std::map<std::string, MatchedTime> by_class, by_kind;
  for (const OpGroup& g : out.groups) {
    for (auto* table : {&by_class, &by_kind}) {
      if (table == &by_kind && g.mem_op < 0) continue;
      const std::string name = table == &by_class
                                   ? std::string(to_string(g.cls))
                                   : std::string(to_string(static_cast<MemOp>(g.mem_op)));
      MatchedTime& e = (*table)[name];
      e.name = name;
      e.predicted += g.predicted_time;
      e.measured += g.measured_time;
      ++e.groups;
    }
  }
  for (auto& [n, e] : by_class) out.by_class.push_back(e);
  for (auto& [n, e] : by_kind) out.by_kind.push_back(e);
  std::vector<size_t> order(out.groups.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto err = [&](size_t i) {
    return std::llabs((out.groups[i].measured_time - out.groups[i].predicted_time).count());
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return err(a) > err(b); });
  order.resize(std::min<size_t>(order.size(), 10));
  out.largest = order;
  std::map<std::pair<bool, std::string>, StructuredMatch::Reason> reasons;
  for (const UnmatchedOp& u : out.unmatched) {
    StructuredMatch::Reason& r = reasons[{u.predicted, u.reason}];
    r.reason = u.reason;
    r.predicted = u.predicted;
    ++r.count;
    r.time += u.time;
  }
  for (auto& [k, r] : reasons) out.reasons.push_back(r);
  std::stable_sort(out.reasons.begin(), out.reasons.end(),
                   [](const auto& a, const auto& b) { return a.time > b.time; });
  return out;
}

}  // namespace scaleplan::sim
