#include "planner/iteration_bound.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "models/operators.h"
#include "models/tensors.h"
#include "sim/comm_points.h"
#include "sim/pass_plan.h"
#include "sim/schedule.h"

namespace scaleplan::planner {
namespace {

// Tick sums and products through Duration, which saturates at the clock's end instead of
// wrapping: on a slow enough network, collective times reach int64's end (UBSan;
// docs/reliability.md).
int64_t sat_add(int64_t a, int64_t b) { return (Duration(a) + Duration(b)).count(); }
int64_t sat_mul(int64_t a, int64_t n) { return (Duration(a) * n).count(); }

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

PassTimes scaled(const PassTimes& t, int64_t n) {
  return {sat_mul(t.f, n), sat_mul(t.b, n), sat_mul(t.w, n)};
}

int64_t op_ticks(const models::Op& op, const calibrate::KernelCostModel& k) {
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

PassTimes time_ops(const std::vector<models::Op>& ops, const calibrate::KernelCostModel& k);

// An operator list timed once: compute per pass, and the communication the program builder puts on
// the critical path (TP/SP, EP and ETP collectives: the next op waits for them), to be timed on
// each layout's placement. CP ring transfers overlap the attention kernel and count for nothing.
struct TimedList {
  PassTimes compute;
  std::vector<models::CommShape> serial[3];  // [forward, backward, weight]
};

// The slot of PassTimes an op counts in: the chunk pass it runs in with the weight gradients split
// off (sim::chunk_pass; lower_bound folds W into B where the schedule does not split them).
// -1: the optimizer's, which the step counts.
int pass_slot(models::Pass p) {
  const std::optional<sim::PassKind> k = sim::chunk_pass(p, /*split_weight=*/true);
  if (!k) return -1;
  return *k == sim::PassKind::kForward ? 0 : *k == sim::PassKind::kBackwardWeight ? 2 : 1;
}

TimedList time_list(const std::vector<models::Op>& ops, const calibrate::KernelCostModel& k) {
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
  t.compute = time_ops(ops, k);
  return t;
}

PassTimes time_ops(const std::vector<models::Op>& ops, const calibrate::KernelCostModel& k) {
  PassTimes t;
  for (const models::Op& op : ops) {
    const int slot = pass_slot(op.pass);
    if (slot < 0) continue;
    int64_t& sum = slot == 0 ? t.f : slot == 2 ? t.w : t.b;
    sum = sat_add(sum, op_ticks(op, k));
  }
  return t;
}

// Timed operator lists under one (tp, cp, ep, etp, sp, mbs, recompute, dtype).
struct OpTimes {
  // Per ModelSpec::layer_kind (dense or MoE, full or sliding-window attention); only the kinds
  // the model has.
  TimedList layer[models::ModelSpec::kLayerKinds];
  TimedList embed, head;
};

// A list's time on one placement: compute plus its serial collectives, each one tick short.
PassTimes on_placement(const TimedList& t, const hw::CollectiveModel& cm,
                       const hw::LayoutPlacement& pl) {
  PassTimes r = t.compute;
  int64_t* slot[3] = {&r.f, &r.b, &r.w};
  for (int k = 0; k < 3; ++k) {
    for (const models::CommShape& c : t.serial[k]) {
      const Duration d = sim::comm_time(cm, c, pl[c.group]);
      *slot[k] = sat_add(*slot[k], std::max<int64_t>(d.count() - 1, 0));
    }
  }
  return r;
}

// The pass-level schedule with fixed per-stage orders (sim/schedule.h, as the builder emits it):
// each pass starts when the stage's previous pass and its data dependencies are done, and takes
// its duration; a transfer between chunks takes `p2p` ticks. With the orders fixed, every start
// time is a longest path in a DAG, monotone in the durations, so with durations at most the
// simulator's, each stage ends no later than in the simulation. Returns each stage's end, or an
// empty vector if the orders cannot be replayed (a schedule this code does not understand).
std::vector<int64_t> replay_schedule(const sim::PassPlan& plan, const std::vector<PassTimes>& chunk,
                                     int64_t p2p) {
  const std::vector<std::vector<sim::Pass>>& order = plan.order;
  const int pp = plan.pp;
  const int64_t mb = plan.microbatches;
  const size_t chunks = chunk.size();
  const auto idx = [mb](size_t g, int m) { return g * static_cast<size_t>(mb) + m; };
  std::vector<int64_t> f_end(chunks * mb, -1), b_end(chunks * mb, -1);
  std::vector<int64_t> now(static_cast<size_t>(pp), 0);
  std::vector<size_t> next(static_cast<size_t>(pp), 0);
  size_t left = 0;
  for (const auto& o : order) left += o.size();
  auto advance = [&](int s) {
    bool moved = false;
    const auto& o = order[static_cast<size_t>(s)];
    size_t& i = next[static_cast<size_t>(s)];
    while (i < o.size()) {
      const sim::Pass& p = o[i];
      const size_t g = static_cast<size_t>(plan.global_chunk(s, p.chunk));
      const int gi = static_cast<int>(g);
      int64_t ready = now[static_cast<size_t>(s)];
      int64_t dur = 0;
      if (p.kind == sim::PassKind::kForward) {
        if (plan.connected(gi, gi - 1)) {
          const int64_t dep = f_end[idx(g - 1, p.microbatch)];
          if (dep < 0) break;
          ready = std::max(ready, sat_add(dep, p2p));
        }
        dur = chunk[g].f;
        f_end[idx(g, p.microbatch)] = sat_add(ready, dur);
      } else if (p.kind == sim::PassKind::kBackwardWeight) {
        dur = chunk[g].w;
      } else {
        if (plan.connected(gi, gi + 1)) {
          const int64_t dep = b_end[idx(g + 1, p.microbatch)];
          if (dep < 0) break;
          ready = std::max(ready, sat_add(dep, p2p));
        }
        dur = chunk[g].b;
        b_end[idx(g, p.microbatch)] = sat_add(ready, dur);
      }
      now[static_cast<size_t>(s)] = sat_add(ready, dur);
      ++i;
      --left;
      moved = true;
    }
    return moved;
  };
  // Sweeps down and up the pipeline until every pass is placed (forward data flows down, backward
  // data up); a sweep that places nothing means the order is not one this replay understands.
  while (left > 0) {
    bool moved = false;
    for (int s = 0; s < pp; ++s) moved |= advance(s);
    for (int s = pp - 1; s >= 0; --s) moved |= advance(s);
    if (!moved) return {};
  }
  return now;
}

using OpKey = models::OperatorListKey;

}  // namespace

struct IterationBound::Cache {
  std::mutex mu;  // guards the maps; entries are never erased, so pointers stay valid
  std::map<OpKey, std::unique_ptr<const OpTimes>> ops;
  std::map<std::tuple<int, int, int>, std::shared_ptr<const sim::ParamShards>> params;
  std::map<std::tuple<int, int, int, int, int, int>, std::unique_ptr<const hw::LayoutPlacement>>
      placements;
};

IterationBound::IterationBound(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                               const calibrate::KernelCostModel* kernels, sim::Framework framework)
    : framework_(std::move(framework)),
      attention_(sim::framework_attention(framework_.timing, cluster.gpu)),
      model_(std::move(model)),
      cluster_(std::move(cluster)),
      seq_len_(seq_len),
      kernels_(kernels),
      collectives_(std::make_unique<const hw::CollectiveModel>(cluster_)),
      cache_(std::make_unique<Cache>()) {}

IterationBound::~IterationBound() = default;

Result<const hw::LayoutPlacement*> IterationBound::placement(const Layout& l) const {
  const std::tuple<int, int, int, int, int, int> gkey{l.tp, l.cp, l.pp, l.dp_degree(), l.ep, l.etp};
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->placements.find(gkey); it != cache_->placements.end())
      return it->second.get();
  }
  // Computed outside the lock; equal results, the first stored wins.
  SP_ASSIGN_OR_RETURN(hw::LayoutPlacement pl, hw::place_layout(l, cluster_));
  auto fresh = std::make_unique<const hw::LayoutPlacement>(std::move(pl));
  std::lock_guard<std::mutex> lock(cache_->mu);
  return cache_->placements.try_emplace(gkey, std::move(fresh)).first->second.get();
}

Result<Duration> IterationBound::lower_bound(const Layout& l, Effort effort) const {
  const models::ModelSpec& m = model_;
  const OpTimes* times = nullptr;
  std::shared_ptr<const sim::ParamShards> shards;
  const OpKey okey = models::operator_list_key(l);
  const std::tuple<int, int, int> pkey{l.tp, l.ep, l.etp};
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->ops.find(okey); it != cache_->ops.end()) times = it->second.get();
    if (auto it = cache_->params.find(pkey); it != cache_->params.end()) shards = it->second;
  }
  // Misses are computed outside the lock; equal results, the first stored wins.
  if (times == nullptr) {
    // The operator lists the builder runs (sim::operator_lists), timed once per list key.
    SP_ASSIGN_OR_RETURN(sim::OperatorLists lists,
                        sim::operator_lists(m, l, seq_len_, framework_.ops, attention_));
    auto t = std::make_unique<OpTimes>();
    for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k) {
      if (lists.first_layer[k] >= 0) t->layer[k] = time_list(lists.layer[k], *kernels_);
    }
    t->embed = time_list(lists.embedding, *kernels_);
    t->head = time_list(lists.head, *kernels_);
    std::lock_guard<std::mutex> lock(cache_->mu);
    times = cache_->ops.try_emplace(okey, std::move(t)).first->second.get();
  }
  if (shards == nullptr) {
    auto p = std::make_shared<const sim::ParamShards>(sim::param_shards(m, l.tp, l.ep, l.etp));
    std::lock_guard<std::mutex> lock(cache_->mu);
    shards = cache_->params.try_emplace(pkey, std::move(p)).first->second;
  }
  // The plan the builder follows (sim/pass_plan.h): its chunks, their stages and layers, the ends,
  // each stage's parameters, the pipeline transfer and, where replayed, the pass order.
  const bool dual = two_chunks_per_rank(l.schedule);
  const bool replay = effort == Effort::kReplay && l.pp > 1 && !dual;
  SP_ASSIGN_OR_RETURN(const sim::PassPlan plan, sim::pass_plan(m, l, seq_len_, framework_.timing,
                                                               shards, {}, replay || dual));

  SP_ASSIGN_OR_RETURN(const hw::LayoutPlacement* placement, this->placement(l));
  const hw::CollectiveModel& cm = *collectives_;
  PassTimes layer_t[models::ModelSpec::kLayerKinds];
  for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k)
    layer_t[k] = on_placement(times->layer[k], cm, *placement);
  const PassTimes embed_t = on_placement(times->embed, cm, *placement);
  const PassTimes head_t = on_placement(times->head, cm, *placement);

  const int pp = l.pp;
  const size_t num_chunks = plan.chunks.size();
  // DualPipe and DualPipeV: two chunks per rank, overlapped pairs (sim/schedule.h).
  const bool split_weight = plan.split_weight;
  auto stage_of = [&](size_t g) { return static_cast<size_t>(plan.chunks[g].stage); };
  const int64_t mb = plan.microbatches;

  // One micro-batch of each chunk; for the two-chunk schedules `chunk_compute` without the
  // critical-path collectives (what their overlapped pairs can hide).
  std::vector<PassTimes> chunk(num_chunks), chunk_compute(dual ? num_chunks : 0);
  for (size_t g = 0; g < num_chunks; ++g) {
    const sim::ChunkPlan& cp = plan.chunks[g];
    PassTimes& c = chunk[g];
    int64_t of_kind[models::ModelSpec::kLayerKinds] = {};
    for (int i = 0; i < cp.layers; ++i) ++of_kind[m.layer_kind(cp.first_layer + i)];
    for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k) {
      if (of_kind[k] > 0) c += scaled(layer_t[k], of_kind[k]);
    }
    if (cp.embedding) c += embed_t;
    if (cp.head) c += head_t;
    if (!split_weight) {
      c.b = sat_add(c.b, c.w);
      c.w = 0;
    }
    if (dual) {  // the two-chunk schedules split their weight passes (split_weight)
      PassTimes& cc = chunk_compute[g];
      for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k) {
        if (of_kind[k] > 0) cc += scaled(times->layer[k].compute, of_kind[k]);
      }
      if (cp.embedding) cc += times->embed.compute;
      if (cp.head) cc += times->head.compute;
    }
  }
  // The optimizer step of a stage over the parameters it steps (PassPlan::stage_dense_params),
  // ZeRO-sharded from ZeRO-1 as the builder shards them (zero_shard), with the builder's kernels.
  auto optimizer = [&](int s) {
    const int64_t dense = plan.stage_dense_params(s), expert = plan.stage_expert_params(s);
    const int64_t shard = l.zero >= 1 ? zero_shard(dense, expert, l) : dense + expert;
    int64_t t = 0;
    for (const auto& op : models::optimizer_operators(shard, framework_.timing.fp16_loss_scale,
                                                      framework_.timing.dp_grad_bytes))
      t = sat_add(t, op_ticks(op, *kernels_));
    return t;
  };
  // Pipeline transfers between chunks: the send the builder times (PassPlan::p2p_bytes).
  int64_t p2p = 0;
  if (pp > 1) {
    const Duration d =
        cm.estimate(CollectiveOp::kSendRecv, Bytes(plan.p2p_bytes), (*placement)[GroupKind::kPp])
            .time;
    p2p = std::max<int64_t>(d.count() - 1, 0);
  }
  std::vector<int64_t> opt(static_cast<size_t>(pp));
  for (int s = 0; s < pp; ++s) opt[static_cast<size_t>(s)] = optimizer(s);

  // Closed form (the header's one-machine bound), valid for any pass order.
  int64_t best = 0;
  int64_t head = 0, tail = 0;  // Σ_{j<s} (F_j + p2p) and Σ_{j<s} (B_j + p2p) over chunks 0..s-1
  // DualPipe: rank s runs its passes one after another (sim/schedule.h: half the micro-batches
  // through stage s, half through stage pp-1-s), then its step. A pass of an overlapped pair
  // (Pass::with_next) is counted by its compute alone, since the pair can hide its collectives;
  // any other pass also waits for its critical-path collectives.
  if (dual) {
    for (int s = 0; s < pp; ++s) {
      int64_t work = 0;
      bool paired = false;
      for (const sim::Pass& p : plan.order[static_cast<size_t>(s)]) {
        const auto g = static_cast<size_t>(plan.global_chunk(s, p.chunk));
        const bool in_pair = paired || p.with_next;
        paired = p.with_next;
        const PassTimes& t = in_pair ? chunk_compute[g] : chunk[g];
        switch (p.kind) {
          case sim::PassKind::kForward:
            work = sat_add(work, t.f);
            break;
          case sim::PassKind::kBackward:
            work = sat_add(work, sat_add(t.b, t.w));
            break;
          case sim::PassKind::kBackwardInput:
            work = sat_add(work, t.b);
            break;
          case sim::PassKind::kBackwardWeight:
            work = sat_add(work, t.w);
            break;
        }
      }
      best = std::max(best, sat_add(work, opt[static_cast<size_t>(s)]));
    }
  }
  for (int s = 0; !dual && s < pp; ++s) {
    int64_t fb = 0, w = 0;
    for (size_t g = 0; g < num_chunks; ++g) {
      if (stage_of(g) != static_cast<size_t>(s)) continue;
      fb = (Duration(fb) + Duration(chunk[g].f) + Duration(chunk[g].b)).count();
      w = (Duration(w) + Duration(chunk[g].w)).count();
    }
    // Saturating (Duration) arithmetic: chunk times at the clock's end must not wrap (UBSan).
    fb = (Duration(fb) * static_cast<int64_t>(mb)).count();
    w = (Duration(w) * static_cast<int64_t>(mb)).count();
    const Duration sf(fb), sw(w), so(opt[static_cast<size_t>(s)]), s0(opt[0]);
    const int64_t lb = (Duration(head) + std::max(sf + sw + so, sf + Duration(tail) + s0)).count();
    best = std::max(best, lb);
    head = (Duration(head) + Duration(chunk[static_cast<size_t>(s)].f) + Duration(p2p)).count();
    tail = (Duration(tail) + Duration(chunk[static_cast<size_t>(s)].b) + Duration(p2p)).count();
  }

  // The schedule's own pass order, replayed with these durations.
  if (replay) {
    const std::vector<int64_t> end = replay_schedule(plan, chunk, p2p);
    for (size_t s = 0; s < end.size(); ++s) best = std::max(best, sat_add(end[s], opt[s]));
  }

  // ZeRO-3: every micro-batch gathers each layer's parameters before its forward and again before
  // its backward, and reduce-scatters its gradients, one after another on the rank's DP stream.
  if (l.zero >= 3) {
    auto coll = [&](CollectiveOp op, int64_t bytes, GroupKind g) -> int64_t {
      const hw::GroupPlacement& gp = (*placement)[g];
      if (gp.size <= 1 || bytes <= 0) return 0;
      return std::max<int64_t>(cm.estimate(op, Bytes(bytes), gp).time.count() - 1, 0);
    };
    std::vector<int64_t> dp_stream(static_cast<size_t>(pp), 0);
    for (size_t g = 0; g < num_chunks; ++g) {
      int64_t t = 0;
      const sim::ChunkPlan& cp = plan.chunks[g];
      for (int i = 0; i < cp.layers; ++i) {
        const auto li = static_cast<size_t>(cp.first_layer + i);
        const int64_t dense = plan.params().layer_dense[li];
        const int64_t expert = plan.params().layer_expert[li];
        // Saturating sums: collective times at the clock's end (units.h) must not wrap (UBSan).
        const Duration gather(
            coll(CollectiveOp::kAllGather, 2 * (dense + expert), GroupKind::kDpCp));
        t = (Duration(t) + gather * 2 +
             Duration(coll(CollectiveOp::kReduceScatter, 2 * dense, GroupKind::kDpCp)) +
             Duration(coll(CollectiveOp::kReduceScatter, 2 * expert, GroupKind::kEdp)))
                .count();
      }
      dp_stream[stage_of(g)] =
          (Duration(dp_stream[stage_of(g)]) + Duration(t) * static_cast<int64_t>(mb)).count();
    }
    for (int64_t t : dp_stream) best = std::max(best, t);
  }
  return Duration::ticks(best);
}

}  // namespace scaleplan::planner
