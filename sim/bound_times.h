// The planner's lower bound's per-list timings (sim/iteration_bound.cc, the only includer): an
// operator list's compute per pass, its critical-path collectives and overlapped pairs, timed once
// by the kernel model and then on each layout's placement, and the stage clock's terms
// (sim/stage_clock.h). Internal to the bound; plain functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "calibrate/cost_model.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "hw_profiles/sm_clock.h"
#include "models/operators.h"
#include "sim/comm_points.h"
#include "sim/pass_plan.h"

namespace scaleplan::sim::bound {

// Tick sums and products through Duration, which saturates at the clock's end instead of
// wrapping: on a slow enough network, collective times reach int64's end (UBSan;
// docs/reliability.md).
inline int64_t sat_add(int64_t a, int64_t b) { return (Duration(a) + Duration(b)).count(); }
inline int64_t sat_mul(int64_t a, int64_t n) { return (Duration(a) * n).count(); }

// What the compute slowdown σ (KernelCostModel::overlap_slowdown) adds at least when `beside`
// ticks of transfers may run beside compute that never runs beside `serial` ticks of comm-only
// time: max(0, beside - serial)(1 - 1/σ), rounded down (lower_bound derives it).
inline int64_t slowdown_ticks(int64_t beside, int64_t serial, double sigma) {
  if (!(sigma > 1)) return 0;
  const double t = static_cast<double>(std::max<int64_t>(beside - serial, 0)) * (1.0 - 1.0 / sigma);
  return Duration::from_double(std::floor(t));
}

// Compute time of one micro-batch of a block of ops, by pass, each op one tick short (see the
// header: robust to the engine's rounding).
struct PassTimes {
  int64_t f = 0;  // forward
  int64_t b = 0;  // recompute + input gradients
  int64_t w = 0;  // weight gradients
  PassTimes& operator+=(const PassTimes& o) {
    f = sat_add(f, o.f);
    b = sat_add(b, o.b);
    w = sat_add(w, o.w);
    return *this;
  }
};

inline PassTimes scaled(const PassTimes& t, int64_t n) {
  return {sat_mul(t.f, n), sat_mul(t.b, n), sat_mul(t.w, n)};
}

inline int64_t op_ticks(const models::Op& op, const calibrate::KernelCostModel& k) {
  Duration d;
  switch (op.kind) {
    case models::OpKind::kGemm:
      d = k.gemm(*op.gemm());
      break;
    case models::OpKind::kAttentionFwd:
      d = k.attention(*op.attention(), /*backward=*/false);
      break;
    case models::OpKind::kAttentionBwd:
      d = k.attention(*op.attention(), /*backward=*/true);
      break;
    case models::OpKind::kMemoryBound:
      d = k.memory_bound(std::get<MemoryBoundShape>(op.shape));
      break;
    case models::OpKind::kComm:
      return 0;  // communication: not counted
  }
  return std::max<int64_t>(d.count() - 1, 0);
}

// A transfer the builder runs beside the compute op after it (CommShape::overlap_next: TP
// collectives under Transformer Engine's overlap, the CP ring), and the ticks the compute sum
// counts for that partner op.
struct OverlapPair {
  models::CommShape comm;
  int64_t partner = 0;
  // The partner is a tensor-core kernel whose time follows the clock exactly (TimedList::tensor's
  // test): at a stage's clock f it lasts at least partner·max/f (clock_ticks).
  bool clocked = false;
};

// An operator list timed once: compute per pass, the communication the program builder puts on
// the critical path (TP/SP, EP and ETP collectives: the next op waits for them), and the overlapped
// pairs, both to be timed on each layout's placement. The pairs depend on how the builder splits
// the list into chains: by pass with the weight gradients split off (ZB-H1, DualPipe) or with them
// in the backward ([1] of `pairs`, whose weight slot stays empty).
struct TimedList {
  PassTimes compute;
  PassTimes tensor;  // of `compute`, the tensor-core kernels whose time is exactly 1/clock
  // Of `compute`, the overlapped pairs' partners that would count in `tensor` (OverlapPair::
  // clocked): at the stage's clock they last longer too, but their pair may not (pair_clock_ticks).
  PassTimes partner;
  std::vector<models::CommShape> serial[3];  // [forward, backward, weight]
  std::vector<OverlapPair> pairs[2][3];      // [joined, split weight][forward, backward, weight]
};

// The slot of PassTimes an op counts in: the chunk pass it runs in with the weight gradients split
// off (sim::chunk_pass; lower_bound folds W into B where the schedule does not split them).
// -1: the optimizer's, which the step counts.
inline int pass_slot(models::Pass p) {
  const std::optional<sim::PassKind> k = sim::chunk_pass(p, /*split_weight=*/true);
  if (!k) return -1;
  return *k == sim::PassKind::kForward ? 0 : *k == sim::PassKind::kBackwardWeight ? 2 : 1;
}

// `slow`: the kernels at the tensor-bound clock (the lowest a step runs at), or nullptr without a
// clock model.
inline TimedList time_list(const std::vector<models::Op>& ops, const calibrate::KernelCostModel& k,
                           const calibrate::KernelCostModel* slow = nullptr) {
  TimedList t;
  for (const models::Op& op : ops) {
    if (pass_slot(op.pass) < 0) continue;
    const models::CommShape* c = op.comm();
    if (c == nullptr) continue;
    // On the critical path: TP and expert collectives, and context parallelism's K/V all-gathers
    // and all-to-alls; what runs beside the op after it (the K/V ring beside the attention, TP
    // collectives under Transformer Engine's overlap) counts for nothing.
    const bool serial =
        !c->overlap_next && (c->group == GroupKind::kTp || c->group == GroupKind::kEp ||
                             c->group == GroupKind::kEtp || c->group == GroupKind::kCp);
    if (serial && c->group_size > 1) t.serial[pass_slot(op.pass)].push_back(*c);
  }
  // The tensor-core kernels whose whole time follows the clock from the maximum down to the
  // tensor-bound clock (compute-bound there, not held by the memory roof or the kernel floor):
  // their time at any step's clock f is exactly their ticks here times max / f.
  const hw::SmClock* clock = k.sm_clock();
  // Each op's ticks, asked of the kernel model once (the loops below read them up to four times;
  // lists are timed once per operator-list key, thousands in a large MoE search: issue 45).
  std::vector<int64_t> ticks(ops.size(), 0);
  for (size_t i = 0; i < ops.size(); ++i)
    if (pass_slot(ops[i].pass) >= 0) ticks[i] = op_ticks(ops[i], k);
  std::vector<bool> exact(ops.size(), false);
  for (size_t i = 0; i < ops.size(); ++i) {
    const models::Op& op = ops[i];
    if (slow == nullptr || clock == nullptr || pass_slot(op.pass) < 0 ||
        op.kind == models::OpKind::kMemoryBound || op.kind == models::OpKind::kComm)
      continue;
    const double fast = static_cast<double>(ticks[i]);
    const double scaled = fast * clock->max_hz / clock->tensor_bound_hz;
    exact[i] = std::abs(static_cast<double>(op_ticks(op, *slow)) - scaled) <= 1e-6 * scaled + 2;
  }
  // Overlapped pairs, as the builder's chain places a list (sim/emit_chunks.cc, chain): a transfer
  // marked overlap_next and the compute op right after it in the same pass list both start after
  // the op before them, and the op after the pair waits for both, so the pair lasts at least the
  // longer of the two. Only a transfer whose very next op in the list is a compute op counts; the
  // builder starts a new chain at each layer's list, so pairs are never formed across lists.
  std::vector<bool> partner(ops.size(), false);  // the compute op of a pair (in either split)
  for (int split = 0; split < 2; ++split) {
    const models::CommShape* pending[3] = {nullptr, nullptr, nullptr};
    for (size_t i = 0; i < ops.size(); ++i) {
      const models::Op& op = ops[i];
      int slot = pass_slot(op.pass);
      if (slot < 0) continue;
      if (slot == 2 && split == 0) slot = 1;  // the weight gradients in the backward's chain
      const models::CommShape* c = op.comm();
      if (c == nullptr && pending[slot] != nullptr) {
        t.pairs[split][slot].push_back({*pending[slot], ticks[i], exact[i]});
        partner[i] = true;
      }
      pending[slot] = c != nullptr && c->overlap_next && c->group_size > 1 ? c : nullptr;
    }
  }
  // time_ops(ops, k), from the ticks above: the same sums in the same order.
  for (size_t i = 0; i < ops.size(); ++i) {
    const int slot = pass_slot(ops[i].pass);
    if (slot < 0) continue;
    int64_t& sum = slot == 0 ? t.compute.f : slot == 2 ? t.compute.w : t.compute.b;
    sum = sat_add(sum, ticks[i]);
  }
  // `tensor` leaves out a pair's compute op: the pair lasts the longer of it and its transfer,
  // which a slower clock need not lengthen as much (pair_clock_ticks); `partner` has those.
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!exact[i]) continue;
    const int slot = pass_slot(ops[i].pass);
    PassTimes& into = partner[i] ? t.partner : t.tensor;
    int64_t& sum = slot == 0 ? into.f : slot == 2 ? into.w : into.b;
    sum = sat_add(sum, ticks[i]);
  }
  return t;
}

// What running `tensor` (ticks at the maximum clock of kernels whose time is exactly 1/clock,
// each one tick short: TimedList::tensor) at the stage's clock hz adds: tensor·(max/hz − 1), less
// a part in 1e5 of their time at hz for time_list's tolerance of 1e-6 and the rounding, rounded
// down. The simulation's time of each such kernel at hz is (its ticks at max)·max/hz up to
// rounding, so this stays below what the stage's clock adds to it.
inline int64_t clock_ticks(int64_t tensor, double max_hz, double hz) {
  if (!(hz > 0) || hz >= max_hz || tensor <= 0) return 0;
  const double t = static_cast<double>(tensor);
  return Duration::from_double(
      std::max(0.0, std::floor(t * (max_hz / hz - 1) - 1e-5 * t * max_hz / hz)));
}

// An overlapped pair whose partner follows the clock (OverlapPair::clocked), on one placement:
// what the pair counts at the maximum clock (the longer of its transfer and its partner, each one
// tick short) and its partner.
struct ClockedPair {
  int64_t pair = 0;
  int64_t partner = 0;
};

// What a stage's clock hz adds to such pairs: each lasts at least the longer of its transfer and
// its partner at hz, the partner at least partner + clock_ticks(partner) (as TimedList::tensor's
// kernels), of which `pair` is counted already.
inline int64_t pair_clock_ticks(const std::vector<ClockedPair>& pairs, double max_hz, double hz) {
  int64_t add = 0;
  for (const ClockedPair& p : pairs) {
    const int64_t at_hz = sat_add(p.partner, clock_ticks(p.partner, max_hz, hz));
    add = sat_add(add, std::max<int64_t>(at_hz - p.pair, 0));
  }
  return add;
}

// The power limit's bound on a stage's busy kernel time (hw_profiles/sm_clock.h), with `tensor`
// and `other` the stage's tensor-core and other kernel ticks at the maximum clock (subsets of the
// builder's): held at the limit a stage whose tensor work is W cycles is busy at least W/f* + M,
// f* the clock the balance gives that mix. At the stage's own clock f the simulation is busy at
// least W/f + M (its ops include these) and at least W/(f·d(f)), d(f) the tensor share the balance
// allows at f; the first falls with f, the second rises, and they cross at f*.
inline int64_t power_limited_busy(const hw::SmClock& c, int64_t tensor, int64_t other) {
  const double w = Duration(tensor).to_seconds() * c.max_hz, m = Duration(other).to_seconds();
  const double f = hw::step_clock(c, w, 0, m);
  // Less a part in 1e3: the simulation solves its clock on its kernels' times taken as all
  // clock-bound (a launch overhead or a kernel floor is not), which its re-timed kernels can
  // undercut by a little; and the rounding of the solve and of the ticks.
  return Duration::seconds((w / f + m) * (1 - 1e-3)).count();
}

// A list's time on one placement: compute plus its serial collectives, and for each overlapped
// pair what its transfer lasts beyond the partner compute op, each one tick short. `split_weight`:
// the builder's lists split the weight gradients off (sim::PassPlan::split_weight). `clocked`, if
// given, receives per slot [forward, backward, weight] the pairs whose partner follows the clock.
inline PassTimes on_placement(const TimedList& t, const hw::CollectiveModel& cm,
                              const hw::LayoutPlacement& pl, bool split_weight, bool pairs = true,
                              std::vector<ClockedPair> (*clocked)[3] = nullptr) {
  PassTimes r = t.compute;
  int64_t* slot[3] = {&r.f, &r.b, &r.w};
  // The simulator charges each stage its own groups (hw::LayoutPlacement::stages): the least of
  // them bounds every stage's.
  auto ticks = [&](const models::CommShape& c) {
    int64_t t = sim::comm_time(cm, c, pl[c.group]).count();
    if (c.group != GroupKind::kPp)
      for (const auto& st : pl.stages)
        t = std::min(t, sim::comm_time(cm, c, st.at(static_cast<int>(c.group))).count());
    return std::max<int64_t>(t - 1, 0);
  };
  for (int k = 0; k < 3; ++k) {
    for (const models::CommShape& c : t.serial[k]) *slot[k] = sat_add(*slot[k], ticks(c));
    if (!pairs) continue;
    for (const OverlapPair& p : t.pairs[split_weight ? 1 : 0][k]) {
      const int64_t comm = ticks(p.comm);
      *slot[k] = sat_add(*slot[k], std::max<int64_t>(comm - p.partner, 0));
      if (clocked != nullptr && p.clocked)
        (*clocked)[k].push_back({std::max(comm, p.partner), p.partner});
    }
  }
  return r;
}

}  // namespace scaleplan::sim::bound
