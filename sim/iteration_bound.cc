#include "sim/iteration_bound.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
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
#include "sim/bound_times.h"
#include "sim/comm_points.h"
#include "sim/pass_plan.h"
#include "sim/schedule.h"
#include "sim/stage_clock.h"

namespace scaleplan::sim {
namespace {

using namespace bound;  // NOLINT: the bound's own list timings (sim/bound_times.h)

// Timed operator lists under one (tp, cp, ep, etp, sp, mbs, recompute, dtype).
struct OpTimes {
  // Per ModelSpec::layer_kind (dense or MoE, full or sliding-window attention); only the kinds
  // the model has.
  TimedList layer[models::ModelSpec::kLayerKinds];
  TimedList embed, head;
  // Their clock-solve sums (sim/stage_clock.h) by the kernel model given, where it has an SM clock.
  ClockSums layer_clock[models::ModelSpec::kLayerKinds];
  ClockSums embed_clock, head_clock;
};

// The pass-level schedule with fixed per-stage orders (sim/schedule.h, as the builder emits it):
// each pass starts when the stage's previous pass and its data dependencies are done, and takes
// its duration; a transfer between chunks takes `p2p` ticks. With the orders fixed, every start
// time is a longest path in a DAG, monotone in the durations, so with durations at most the
// simulator's, each stage ends no later than in the simulation, and each pass starts and ends no
// later. `end` is empty if the orders cannot be replayed (a schedule this code does not
// understand).
struct Replay {
  std::vector<int64_t> end;     // per stage: its last pass's end
  std::vector<int64_t> dp_end;  // per stage: ZeRO-3's DP stream's last transfer's end (else 0)
  // Per global chunk and micro-batch ([g · microbatches + m]), the pass after whose layers the
  // builder issues the DP buckets (the backward, or the weight pass where the schedule splits it
  // off): start and end.
  std::vector<int64_t> bucket_pass_start, bucket_pass_end;
};

// ZeRO-3's DP stream per chunk, for the replay (sim/emit_data_parallel.cc, emit_zero3): a forward
// or backward pass gathers its blocks' parameters one after another on the rank's DP stream, the
// first once the pass starts and the stream is free, and each block's compute waits for its
// gather; a backward's reduce-scatters follow on the stream (after the weight pass where the
// schedule splits it off). Only the layers' dense parameters over DP x CP are counted.
struct Zero3Chunk {
  int64_t first_f = 0, first_b = 0;      // the first block's gathers (0 where it is not a layer)
  int64_t gathers_f = 0, gathers_b = 0;  // every layer's gathers in a forward / backward pass
  int64_t reduces = 0;                   // every layer's reduce-scatter, once per backward
  int64_t last_reduce = 0;  // the last layer's, issued when the pass ends (0 with the embedding)
  // From the first block's compute start, how long before a backward's reduce-scatters can start
  // (0: not counted). The builder adds them to the stream after all the pass's gathers, and the
  // last layer's gather is issued when the layer block before it starts (one ahead), so they wait
  // for the chain up to that block and that gather.
  int64_t reduces_after = 0;
  // What the compute slowdown beside the pass's own gathers adds to a forward / backward pass at
  // least (lower_bound: the stretch of compute under the DP stream, inside one pass's window).
  int64_t stretch_f = 0, stretch_b = 0;
};

Replay replay_schedule(const sim::PassPlan& plan, const std::vector<PassTimes>& chunk, int64_t p2p,
                       const std::vector<Zero3Chunk>& zero3 = {}) {
  const std::vector<std::vector<sim::Pass>>& order = plan.order;
  const int pp = plan.pp;
  const int64_t mb = plan.microbatches;
  const size_t chunks = chunk.size();
  const auto idx = [mb](size_t g, int m) { return g * static_cast<size_t>(mb) + m; };
  std::vector<int64_t> f_end(chunks * mb, -1), b_end(chunks * mb, -1);
  Replay r;
  r.bucket_pass_start.assign(chunks * mb, 0);
  r.bucket_pass_end.assign(chunks * mb, 0);
  std::vector<int64_t> now(static_cast<size_t>(pp), 0);
  std::vector<int64_t> dp_free(static_cast<size_t>(pp), 0);  // ZeRO-3's DP stream
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
      } else if (p.kind == sim::PassKind::kBackwardWeight) {
        dur = chunk[g].w;
      } else {
        if (plan.connected(gi, gi + 1)) {
          const int64_t dep = b_end[idx(g + 1, p.microbatch)];
          if (dep < 0) break;
          ready = std::max(ready, sat_add(dep, p2p));
        }
        dur = chunk[g].b;
      }
      int64_t end = sat_add(ready, dur);
      if (!zero3.empty()) {
        const Zero3Chunk& z = zero3[g];
        int64_t& dp = dp_free[static_cast<size_t>(s)];
        if (p.kind == sim::PassKind::kBackwardWeight) {
          dp = sat_add(std::max(dp, end), z.reduces);
        } else {
          const bool fwd = p.kind == sim::PassKind::kForward;
          const int64_t issued = std::max(ready, dp);
          const int64_t first = sat_add(issued, fwd ? z.first_f : z.first_b);
          dp = sat_add(issued, fwd ? z.gathers_f : z.gathers_b);
          end = std::max(
              sat_add(std::max(ready, first), sat_add(dur, fwd ? z.stretch_f : z.stretch_b)), dp);
          if (!fwd && !plan.split_weight) {
            dp = std::max(sat_add(dp, z.reduces), sat_add(end, z.last_reduce));
            if (z.reduces_after > 0)
              dp = std::max(dp,
                            sat_add(sat_add(std::max(ready, first), z.reduces_after), z.reduces));
          }
        }
      }
      if (p.kind == sim::PassKind::kForward) f_end[idx(g, p.microbatch)] = end;
      if (p.kind != sim::PassKind::kForward && p.kind != sim::PassKind::kBackwardWeight)
        b_end[idx(g, p.microbatch)] = end;
      now[static_cast<size_t>(s)] = end;
      const bool carries = plan.split_weight ? p.kind == sim::PassKind::kBackwardWeight
                                             : p.kind != sim::PassKind::kForward;
      if (carries) {
        r.bucket_pass_start[idx(g, p.microbatch)] = ready;
        r.bucket_pass_end[idx(g, p.microbatch)] = end;
      }
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
  r.end = std::move(now);
  r.dp_end = std::move(dp_free);
  return r;
}

using OpKey = models::OperatorListKey;

// Timed lists on one placement (on_placement): per layer kind with and without the overlapped
// pairs' excess (`serial`: the serial collectives alone, all passes together), embedding, head.
struct PlacedTimes {
  PassTimes layer[models::ModelSpec::kLayerKinds];
  int64_t serial[models::ModelSpec::kLayerKinds] = {};
  PassTimes embed, head;
  // The pairs whose partner follows the clock (on_placement's `clocked`), per list: the layer
  // kinds, then the embedding and the head; per slot [forward, backward, weight].
  std::vector<ClockedPair> pairs[models::ModelSpec::kLayerKinds + 2][3];
  bool any_pairs = false;
  // F + B + W of one micro-batch through the whole model: every layer, the embedding, the head.
  int64_t model = 0;
};
// The placement by its PlacementCache entry: one per parallel grid and rank placement (place).
using PlacedKey = std::tuple<OpKey, const hw::LayoutPlacement*, bool>;

// One DP gradient bucket of a chunk (sim::dp_buckets) on a placement: its reduction's ticks, and
// whether it is issued when the pass that completes it ends (the chunk's last) or when it starts.
struct BucketTicks {
  int64_t ticks = 0;
  bool at_end = false;
};
// A plan's buckets per chunk, by the placement, the shards (tp, ep, etp), the bucket size, the
// reduction (reduce-scatter from ZeRO-1) and the chunks' (first layer, layers, embedding, head).
using BucketKey = std::tuple<const hw::LayoutPlacement*, std::tuple<int, int, int>, int64_t, bool,
                             std::vector<int>>;
using ChunkBuckets = std::vector<std::vector<BucketTicks>>;

}  // namespace

struct IterationBound::Cache {
  std::mutex mu;  // guards the maps; entries are never erased, so pointers stay valid
  std::map<OpKey, std::unique_ptr<const OpTimes>> ops;
  std::map<std::tuple<int, int, int>, std::shared_ptr<const sim::ParamShards>> params;
  std::map<PlacedKey, std::unique_ptr<const PlacedTimes>> placed;
  // The optimizer step's ticks and clock-solve sums by the parameters it steps.
  std::map<int64_t, std::pair<int64_t, ClockSums>> step;
  std::map<BucketKey, std::unique_ptr<const ChunkBuckets>> buckets;

  // The operator lists the builder runs (sim::operator_lists) under `okey`, l's, timed once per
  // list key. Misses are computed outside the lock; equal results, the first stored wins.
  Result<const OpTimes*> times(const IterationBound& b, const Layout& l, const OpKey& okey);
  // `times` on `placement`, cached per (list key, placement, weight split): layouts that differ
  // only in schedule, vpp, ZeRO or the batch share them.
  const PlacedTimes* placed_times(const IterationBound& b, const OpTimes& times, const OpKey& okey,
                                  const hw::LayoutPlacement& placement, bool split_weight);
};

Result<const OpTimes*> IterationBound::Cache::times(const IterationBound& b, const Layout& l,
                                                    const OpKey& okey) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = ops.find(okey); it != ops.end()) return it->second.get();
  }
  SP_ASSIGN_OR_RETURN(sim::OperatorLists lists,
                      sim::operator_lists(b.model_, l, b.seq_len_, b.framework_.ops, b.attention_));
  auto t = std::make_unique<OpTimes>();
  const calibrate::KernelCostModel& kernels = *b.kernels_;
  const hw::SmClock* clock = kernels.sm_clock();
  const auto slow = clock != nullptr ? kernels.at_sm_clock(clock->tensor_bound_hz) : nullptr;
  for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k) {
    if (lists.first_layer[k] >= 0) t->layer[k] = time_list(lists.layer[k], kernels, slow.get());
  }
  t->embed = time_list(lists.embedding, kernels, slow.get());
  t->head = time_list(lists.head, kernels, slow.get());
  if (clock != nullptr) {
    for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k)
      t->layer_clock[k] = clock_sums(lists.layer[k], *b.given_);
    t->embed_clock = clock_sums(lists.embedding, *b.given_);
    t->head_clock = clock_sums(lists.head, *b.given_);
  }
  std::lock_guard<std::mutex> lock(mu);
  return ops.try_emplace(okey, std::move(t)).first->second.get();
}

const PlacedTimes* IterationBound::Cache::placed_times(const IterationBound& b,
                                                       const OpTimes& times, const OpKey& okey,
                                                       const hw::LayoutPlacement& placement,
                                                       bool split_weight) {
  const PlacedKey pk{okey, &placement, split_weight};
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = placed.find(pk); it != placed.end()) return it->second.get();
  }
  const hw::CollectiveModel& cm = *b.collectives_;
  auto p = std::make_unique<PlacedTimes>();
  for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k) {
    p->layer[k] =
        on_placement(times.layer[k], cm, placement, split_weight, /*pairs=*/true, &p->pairs[k]);
    const PassTimes serial =
        on_placement(times.layer[k], cm, placement, split_weight, /*pairs=*/false);
    const PassTimes& c = times.layer[k].compute;
    p->serial[k] = sat_add(serial.f - c.f, sat_add(serial.b - c.b, serial.w - c.w));
  }
  constexpr int kEmbed = models::ModelSpec::kLayerKinds, kHead = kEmbed + 1;
  p->embed = on_placement(times.embed, cm, placement, split_weight, true, &p->pairs[kEmbed]);
  p->head = on_placement(times.head, cm, placement, split_weight, true, &p->pairs[kHead]);
  for (const auto& list : p->pairs)
    for (const auto& slot : list) p->any_pairs |= !slot.empty();
  // One micro-batch through every chunk: each layer of the model once, the embedding and the head.
  auto whole = [](const PassTimes& t) { return sat_add(t.f, sat_add(t.b, t.w)); };
  p->model = sat_add(whole(p->embed), whole(p->head));
  for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k)
    p->model = sat_add(p->model, sat_mul(whole(p->layer[k]), b.layers_of_kind_[k]));
  std::lock_guard<std::mutex> lock(mu);
  return placed.try_emplace(pk, std::move(p)).first->second.get();
}

IterationBound::IterationBound(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                               const calibrate::KernelCostModel* kernels, sim::Framework framework)
    : framework_(sim::on_gpu(std::move(framework), cluster.gpu)),
      attention_(sim::framework_attention(framework_.timing, cluster.gpu)),
      model_(std::move(model)),
      cluster_(std::move(cluster)),
      seq_len_(seq_len),
      fastest_(kernels != nullptr && kernels->sm_clock() != nullptr
                   ? kernels->at_sm_clock(kernels->sm_clock()->max_hz)
                   : nullptr),
      kernels_(fastest_ ? fastest_.get() : kernels),
      given_(kernels),
      collectives_(std::make_unique<const hw::CollectiveModel>(cluster_)),
      cache_(std::make_unique<Cache>()) {
  for (int64_t i = 0; i < model_.num_layers; ++i) ++layers_of_kind_[model_.layer_kind(i)];
}

IterationBound::~IterationBound() = default;

Result<const hw::LayoutPlacement*> IterationBound::placement(const Layout& l) const {
  return placements_.get(l);
}

Result<Duration> IterationBound::work_bound(const Layout& l) const {
  // The two-chunk schedules' closed form counts an overlapped pair's passes by their compute
  // alone, which the placed times below do not bound.
  if (two_chunks_per_rank(l.schedule)) return Duration::zero();
  const OpKey okey = models::operator_list_key(l);
  SP_ASSIGN_OR_RETURN(const OpTimes* times, cache_->times(*this, l, okey));
  SP_ASSIGN_OR_RETURN(const hw::LayoutPlacement* placement, this->placement(l));
  // PassPlan::split_weight for the schedules left.
  const bool split_weight = l.schedule == Schedule::kZbH1;
  const PlacedTimes* placed = cache_->placed_times(*this, *times, okey, *placement, split_weight);
  // The closed form is at least max_s busy(s) >= m·Σ_{g of s} (F_g + B_g + W_g), each chunk's
  // times no lower than these (the stage's clock only adds), and the largest of the pp stages'
  // sums is at least their mean, m · placed->model / pp.
  return Duration::ticks(sat_mul(placed->model, l.num_microbatches()) / l.pp);
}

Result<Duration> IterationBound::lower_bound(const Layout& l, Effort effort,
                                             std::vector<double>* stage_hz) const {
  if (stage_hz != nullptr) stage_hz->clear();
  const models::ModelSpec& m = model_;
  std::shared_ptr<const sim::ParamShards> shards;
  const OpKey okey = models::operator_list_key(l);
  const std::tuple<int, int, int> pkey{l.tp, l.ep, l.etp};
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->params.find(pkey); it != cache_->params.end()) shards = it->second;
  }
  SP_ASSIGN_OR_RETURN(const OpTimes* times, cache_->times(*this, l, okey));
  if (shards == nullptr) {
    auto p = std::make_shared<const sim::ParamShards>(sim::param_shards(m, l.tp, l.ep, l.etp));
    std::lock_guard<std::mutex> lock(cache_->mu);
    shards = cache_->params.try_emplace(pkey, std::move(p)).first->second;
  }
  // The plan the builder follows (sim/pass_plan.h): its chunks, their stages and layers, the ends,
  // each stage's parameters, the pipeline transfer and, where replayed, the pass order.
  const bool dual = two_chunks_per_rank(l.schedule);
  const bool replay = effort == Effort::kReplay && !dual;
  SP_ASSIGN_OR_RETURN(const sim::PassPlan plan, sim::pass_plan(m, l, seq_len_, framework_.timing,
                                                               shards, {}, replay || dual));

  SP_ASSIGN_OR_RETURN(const hw::LayoutPlacement* placement, this->placement(l));
  const hw::CollectiveModel& cm = *collectives_;
  const PlacedTimes* placed =
      cache_->placed_times(*this, *times, okey, *placement, plan.split_weight);
  const PassTimes* layer_t = placed->layer;
  const int64_t* layer_serial = placed->serial;  // serial collectives only, all passes
  const PassTimes& embed_t = placed->embed;
  const PassTimes& head_t = placed->head;

  const int pp = l.pp;
  const size_t num_chunks = plan.chunks.size();
  // DualPipe and DualPipeV: two chunks per rank, overlapped pairs (sim/schedule.h).
  const bool split_weight = plan.split_weight;
  auto stage_of = [&](size_t g) { return static_cast<size_t>(plan.chunks[g].stage); };
  const int64_t mb = plan.microbatches;

  // One micro-batch of each chunk; `chunk_compute` without the critical-path collectives (what the
  // two-chunk schedules' overlapped pairs can hide), and `chunk_serial` the layers' serial
  // collectives alone.
  std::vector<PassTimes> chunk(num_chunks), chunk_compute(num_chunks);
  std::vector<int64_t> chunk_serial(num_chunks, 0);
  std::vector<PassTimes> chunk_tensor(num_chunks);   // of chunk_compute, TimedList::tensor
  std::vector<PassTimes> chunk_partner(num_chunks);  // of chunk_compute, TimedList::partner
  constexpr int kKinds = models::ModelSpec::kLayerKinds;
  std::vector<std::array<int64_t, kKinds>> of_kind(num_chunks);  // each chunk's layers by kind
  // Σ over chunk g's layers of `layer(k)` per layer of kind k, plus `embed` and `head` where the
  // chunk holds them.
  auto over_chunk = [&](size_t g, auto&& layer, const PassTimes& embed, const PassTimes& head) {
    PassTimes sum;
    for (int k = 0; k < kKinds; ++k)
      if (of_kind[g][k] > 0) sum += scaled(layer(k), of_kind[g][k]);
    if (plan.chunks[g].embedding) sum += embed;
    if (plan.chunks[g].head) sum += head;
    return sum;
  };
  for (size_t g = 0; g < num_chunks; ++g) {
    const sim::ChunkPlan& cp = plan.chunks[g];
    of_kind[g].fill(0);
    for (int i = 0; i < cp.layers; ++i) ++of_kind[g][m.layer_kind(cp.first_layer + i)];
    PassTimes& c = chunk[g];
    c = over_chunk(
        g, [&](int k) { return layer_t[k]; }, embed_t, head_t);
    if (!split_weight) {
      c.b = sat_add(c.b, c.w);
      c.w = 0;
    }
    chunk_compute[g] = over_chunk(
        g, [&](int k) { return times->layer[k].compute; }, times->embed.compute,
        times->head.compute);
    for (int k = 0; k < kKinds; ++k)
      chunk_serial[g] = sat_add(chunk_serial[g], sat_mul(layer_serial[k], of_kind[g][k]));
    chunk_tensor[g] = over_chunk(
        g, [&](int k) { return times->layer[k].tensor; }, times->embed.tensor, times->head.tensor);
    chunk_partner[g] = over_chunk(
        g, [&](int k) { return times->layer[k].partner; }, times->embed.partner,
        times->head.partner);
  }
  // The optimizer step of a stage over the parameters it steps (PassPlan::stage_dense_params),
  // ZeRO-sharded from ZeRO-1 as the builder shards them (zero_shard), with the builder's kernels.
  auto optimizer = [&](int s) -> std::pair<int64_t, ClockSums> {
    const int64_t dense = plan.stage_dense_params(s), expert = plan.stage_expert_params(s);
    const int64_t shard = l.zero >= 1 ? zero_shard(dense, expert, l) : dense + expert;
    // Keyed by the shard and the moments' dtype (they change Adam's bytes).
    const int64_t key = shard * 2 + static_cast<int64_t>(l.moments);
    {
      std::lock_guard<std::mutex> lock(cache_->mu);
      if (auto it = cache_->step.find(key); it != cache_->step.end()) return it->second;
    }
    std::pair<int64_t, ClockSums> t;
    const std::vector<models::Op> ops = models::optimizer_operators(
        shard, framework_.timing.fp16_loss_scale, framework_.timing.dp_grad_bytes,
        framework_.memory.fp32_params, l.moments);
    for (const auto& op : ops) t.first = sat_add(t.first, op_ticks(op, *kernels_));
    if (kernels_->sm_clock() != nullptr) t.second = optimizer_clock_sums(ops, *given_);
    std::lock_guard<std::mutex> lock(cache_->mu);
    cache_->step.emplace(key, t);
    return t;
  };
  // Pipeline transfers between chunks: the send the builder times (PassPlan::p2p_bytes), and where
  // the sender scattered the activation over TP (PassPlan::p2p_gather_bytes) the TP all-gather the
  // receiving pass waits for after it (sim/emit_pipeline.cc, begin_pass).
  int64_t p2p = 0;
  if (pp > 1) {
    const Duration d =
        cm.estimate(CollectiveOp::kSendRecv, Bytes(plan.p2p_bytes), (*placement)[GroupKind::kPp])
            .time;
    p2p = std::max<int64_t>(d.count() - 1, 0);
    const hw::GroupPlacement& tp_group = (*placement)[GroupKind::kTp];
    if (plan.p2p_gather_bytes > 0 && tp_group.size > 1) {
      const Duration g =
          cm.estimate(CollectiveOp::kAllGather, Bytes(plan.p2p_gather_bytes), tp_group).time;
      p2p = sat_add(p2p, std::max<int64_t>(g.count() - 1, 0));
    }
  }
  std::vector<int64_t> opt(static_cast<size_t>(pp));
  std::vector<ClockSums> opt_clock(static_cast<size_t>(pp));
  for (int s = 0; s < pp; ++s)
    std::tie(opt[static_cast<size_t>(s)], opt_clock[static_cast<size_t>(s)]) = optimizer(s);
  // Under a power limit, each stage's passes at a clock no lower than the one the simulation
  // runs them at (sim/stage_clock.h): the same solve on sums whose non-tensor parts are the
  // builder's and whose tensor part is at most its (TP-overlap GEMMs timed whole), which the
  // tensor kernels' time follows exactly. Only where the builder adds no kernel of its own to the
  // operator lists (gradient accumulation, autocast's casts); elsewhere each stage's busy time is
  // bounded through the power balance (power_limited_busy) below.
  const hw::SmClock* clock = kernels_->sm_clock();
  const bool power_limited = clock != nullptr && clock->power_limited();
  const bool same_sums =
      framework_.timing.grad_accum_bytes <= 0 && !models::runs_autocast(framework_.ops, l);
  if (power_limited && same_sums) {
    const std::vector<double> hz = stage_clocks(*clock, plan, m, times->layer_clock,
                                                times->embed_clock, times->head_clock, opt_clock);
    if (stage_hz != nullptr) *stage_hz = hz;
    auto at = [&](const PassTimes& t, double f) {
      return PassTimes{clock_ticks(t.f, clock->max_hz, f), clock_ticks(t.b, clock->max_hz, f),
                       clock_ticks(t.w, clock->max_hz, f)};
    };
    // What the clock adds to one list's clocked pairs, per distinct stage clock (a few per layout).
    std::vector<std::pair<double, std::vector<PassTimes>>> pair_adds;
    auto pairs_at = [&](double f) -> const std::vector<PassTimes>& {
      for (const auto& [hz_seen, adds] : pair_adds)
        if (hz_seen == f) return adds;
      std::vector<PassTimes> adds(std::size(placed->pairs));
      for (size_t i = 0; i < adds.size(); ++i) {
        const auto& p = placed->pairs[i];
        adds[i] = {pair_clock_ticks(p[0], clock->max_hz, f),
                   pair_clock_ticks(p[1], clock->max_hz, f),
                   pair_clock_ticks(p[2], clock->max_hz, f)};
      }
      return pair_adds.emplace_back(f, std::move(adds)).second;
    };
    for (size_t g = 0; g < num_chunks; ++g) {
      const double f = hz[stage_of(g)];
      PassTimes add = at(chunk_tensor[g], f);
      // A pair's partner at the stage's clock: as compute alone it lasts partner·max/f at least;
      // on the chain its pair lasts the longer of that and its transfer (pair_clock_ticks).
      chunk_compute[g] += add;
      chunk_compute[g] += at(chunk_partner[g], f);
      if (placed->any_pairs) {
        const std::vector<PassTimes>& adds = pairs_at(f);
        add += over_chunk(
            g, [&](int k) { return adds[static_cast<size_t>(k)]; }, adds[kKinds], adds[kKinds + 1]);
      }
      chunk[g] += split_weight ? add : PassTimes{add.f, sat_add(add.b, add.w), 0};
    }
  }

  // Closed form (the header's one-machine bound), valid for any pass order.
  int64_t best = 0;
  // Otherwise, each stage's busy time at its own clock (power_limited_busy), which it runs after
  // head(s) like its other work.
  std::vector<int64_t> power_busy(static_cast<size_t>(pp), 0);
  if (power_limited && !same_sums && !dual) {
    for (int s = 0; s < pp; ++s) {
      Duration tensor, other(opt[static_cast<size_t>(s)]);
      for (int v = 0; v < plan.local_chunks; ++v) {  // the chunks stage s runs
        const size_t g = static_cast<size_t>(plan.global_chunk(s, v));
        const PassTimes& cc = chunk_compute[g];
        const PassTimes& t = chunk_tensor[g];
        const Duration w = Duration(t.f) + Duration(t.b) + Duration(t.w);
        tensor += w * mb;
        other += (Duration(cc.f) + Duration(cc.b) + Duration(cc.w) - w) * mb;
      }
      power_busy[static_cast<size_t>(s)] =
          power_limited_busy(*clock, tensor.count(), other.count());
    }
  }
  // The DP gradient buckets of each chunk (sim::dp_buckets, the builder's bucketing) timed on
  // this placement, cached per plan shape: the closed form's DP stream below and the replay's.
  const sim::FrameworkTiming& ft = framework_.timing;
  const CollectiveOp reduce = l.zero >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  const int64_t cap = sim::dp_bucket_params(ft, l);
  const ChunkBuckets* buckets = nullptr;
  if (l.zero < 3 && !dual) {
    BucketKey key{placement, pkey, cap, l.zero >= 1, {}};
    std::vector<int>& sig = std::get<4>(key);
    sig.reserve(num_chunks * 4);
    for (const sim::ChunkPlan& cp : plan.chunks)
      sig.insert(sig.end(), {cp.first_layer, cp.layers, cp.embedding ? 1 : 0, cp.head ? 1 : 0});
    {
      std::lock_guard<std::mutex> lock(cache_->mu);
      if (auto it = cache_->buckets.find(key); it != cache_->buckets.end())
        buckets = it->second.get();
    }
    if (buckets == nullptr) {
      auto bucket_ticks = [&](int64_t params, GroupKind g) -> int64_t {
        const hw::GroupPlacement& gp = (*placement)[g];
        if (gp.size <= 1 || params <= 0) return 0;
        const Duration d = cm.estimate(reduce, Bytes(params * ft.dp_grad_bytes), gp).time;
        return std::max<int64_t>(d.count() - 1, 0);
      };
      const sim::Bucketing how = ft.dp_overlap ? sim::Bucketing::kBySize : sim::Bucketing::kOne;
      auto b = std::make_unique<ChunkBuckets>(num_chunks);
      for (size_t g = 0; g < num_chunks; ++g) {
        const sim::ChunkPlan& cp = plan.chunks[g];
        std::vector<int64_t> dense, expert;  // backward order, as the builder lists them
        for (int i = cp.layers - 1; i >= 0; --i) {
          dense.push_back(plan.params().layer_dense[static_cast<size_t>(cp.first_layer + i)]);
          expert.push_back(plan.params().layer_expert[static_cast<size_t>(cp.first_layer + i)]);
        }
        const int gi = static_cast<int>(g);
        for (const sim::DpBucket& d : sim::dp_buckets(dense, expert, plan.extra_dense_params(gi),
                                                      plan.extra_expert_params(gi), how, cap)) {
          const int64_t ticks = sat_add(bucket_ticks(d.dense, GroupKind::kDpCp),
                                        bucket_ticks(d.expert, GroupKind::kEdp));
          if (ticks > 0) (*b)[g].push_back({ticks, d.after >= dense.size()});
        }
      }
      std::lock_guard<std::mutex> lock(cache_->mu);
      buckets = cache_->buckets.try_emplace(std::move(key), std::move(b)).first->second.get();
    }
  }
  // Where the framework reduces every micro-batch's gradients, the buckets of every micro-batch
  // (DualPipe, whose chunks run half of them each, is not replayed).
  const bool every = ft.dp_overlap && sim::reduces_every_microbatch(ft, l);
  // Per stage, a lower bound on the time the rank's DP stream transfers (one collective at a time):
  // the gradient buckets, or ZeRO-3's gathers and reduce-scatters (below).
  std::vector<int64_t> dp_work(static_cast<size_t>(pp), 0);
  for (int s = 0; buckets != nullptr && s < pp; ++s) {
    for (int v = 0; v < plan.local_chunks; ++v) {
      const auto g = static_cast<size_t>(plan.global_chunk(s, v));
      const int last = plan.last_microbatch(v);
      const int64_t times = every ? last + 1 : 1;
      for (const BucketTicks& b : (*buckets)[g])
        dp_work[static_cast<size_t>(s)] =
            sat_add(dp_work[static_cast<size_t>(s)], sat_mul(b.ticks, times));
    }
  }
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
    for (int v = 0; v < plan.local_chunks; ++v) {  // the chunks stage s runs
      const size_t g = static_cast<size_t>(plan.global_chunk(s, v));
      fb = (Duration(fb) + Duration(chunk[g].f) + Duration(chunk[g].b)).count();
      w = (Duration(w) + Duration(chunk[g].w)).count();
    }
    // Saturating (Duration) arithmetic: chunk times at the clock's end must not wrap (UBSan).
    fb = (Duration(fb) * static_cast<int64_t>(mb)).count();
    w = (Duration(w) * static_cast<int64_t>(mb)).count();
    const Duration sf(fb), sw(w), so(opt[static_cast<size_t>(s)]), s0(opt[0]);
    // The DP stream: its buckets are issued no earlier than a pass of stage s starts, so after
    // head(s) (the one-machine bound with every release at head(s)), and the step waits for them.
    const Duration dp(dp_work[static_cast<size_t>(s)]);
    const int64_t lb =
        (Duration(head) + std::max({sf + sw + so, Duration(power_busy[static_cast<size_t>(s)]),
                                    sf + Duration(tail) + s0, dp + so}))
            .count();
    best = std::max(best, lb);
    head = (Duration(head) + Duration(chunk[static_cast<size_t>(s)].f) + Duration(p2p)).count();
    tail = (Duration(tail) + Duration(chunk[static_cast<size_t>(s)].b) + Duration(p2p)).count();
  }

  // The schedule's own pass order, replayed with these durations; then the DP gradient
  // reduction. The builder issues each chunk's buckets (sim::dp_buckets) on the rank's DP stream,
  // which runs one collective at a time, during the pass that completes the chunk's gradients (or
  // after the rank's last pass without FrameworkTiming::dp_overlap), and the step waits for all of
  // them (sim/emit_step.cc, emit_step). A bucket is issued no earlier than that pass starts, the
  // last one no earlier than it ends, so by the one-machine bound the stream is not done before
  // r + the time of every bucket issued at r or later, for each such r. Left out: the earlier
  // micro-batches' buckets where a framework reduces every one, ZeRO-3's (counted below), the
  // tied embedding's reduction, the gradient norm.
  const double sigma = kernels_->overlap_slowdown();  // compute slowdown beside communication
  if (replay) {
    // ZeRO-3's gathers and reduce-scatters on the DP stream (Zero3Chunk), dense layers only; the
    // backward gathers each layer twice under full recompute (emit_zero3).
    std::vector<Zero3Chunk> zero3;
    const hw::GroupPlacement& dpcp = (*placement)[GroupKind::kDpCp];
    if (l.zero >= 3 && dpcp.size > 1) {
      zero3.resize(num_chunks);
      auto ticks = [&](CollectiveOp op, int64_t dense) -> int64_t {
        if (dense <= 0) return 0;
        return std::max<int64_t>(cm.estimate(op, Bytes(2 * dense), dpcp).time.count() - 1, 0);
      };
      const int64_t twice = l.recompute == Recompute::kFull ? 2 : 1;
      for (size_t g = 0; g < num_chunks; ++g) {
        const sim::ChunkPlan& cp = plan.chunks[g];
        Zero3Chunk& z = zero3[g];
        auto dense = [&](int i) {
          return plan.params().layer_dense[static_cast<size_t>(cp.first_layer + i)];
        };
        for (int i = 0; i < cp.layers; ++i) {
          z.gathers_f = sat_add(z.gathers_f, ticks(CollectiveOp::kAllGather, dense(i)));
          z.reduces = sat_add(z.reduces, ticks(CollectiveOp::kReduceScatter, dense(i)));
        }
        z.gathers_b = sat_mul(z.gathers_f, twice);
        // The first block holding parameters: the embedding's (forward) and the head's
        // (backward) where the chunk has them (PassPlan: first_extra, head_params), else a layer.
        const int64_t embed = cp.embedding ? plan.params().first_extra : 0;
        const int64_t head = cp.head ? plan.head_params() : 0;
        if (cp.layers > 0) {
          z.first_f = ticks(CollectiveOp::kAllGather, cp.embedding ? embed : dense(0));
          z.first_b = cp.head
                          ? ticks(CollectiveOp::kAllGather, head)
                          : sat_mul(ticks(CollectiveOp::kAllGather, dense(cp.layers - 1)), twice);
        }
        if (cp.layers > 0 && !cp.embedding)
          z.last_reduce = ticks(CollectiveOp::kReduceScatter, dense(0));
        // Backward blocks: [head] layer n-1 .. layer 0 [embedding]; the last block's gather (the
        // embedding's, else layer 0's) is issued when the block before it starts, after the
        // chains of the head and the layers before that block.
        const int stop = cp.embedding ? 1 : 2;  // the layers whose chains come first: n-1..stop
        if (!ft.zero3_per_tensor_sync && cp.layers >= stop && (!cp.embedding || embed > 0)) {
          int64_t before = cp.head ? head_t.b : 0;
          for (int i = cp.layers - 1; i >= stop; --i) {
            const PassTimes& t = layer_t[m.layer_kind(cp.first_layer + i)];
            before = sat_add(before, split_weight ? t.b : sat_add(t.b, t.w));
          }
          z.reduces_after =
              sat_add(before, ticks(CollectiveOp::kAllGather, cp.embedding ? embed : dense(0)));
        }
        // Inside a pass's window the chain's compute C (at full speed) never runs beside its
        // serial collectives and comm-only stretches S = chain - C, nor beside its first gather;
        // its other gathers D run on the DP stream within the window, and compute beside them runs
        // at 1/σ: as for the stage below, the window lasts at least
        // first + C + S + max(0, D - S)(1 - 1/σ).
        const PassTimes& cc = chunk_compute[g];
        const int64_t cb = split_weight ? cc.b : sat_add(cc.b, cc.w);
        // The gathers beside compute: the layers' (their first one too where the first block is
        // the embedding or the head, which are not among them) but the first block's.
        auto stretch = [&](int64_t gathers, int64_t first, int64_t chain, int64_t compute) {
          return slowdown_ticks(gathers - first, std::max<int64_t>(chain - compute, 0), sigma);
        };
        z.stretch_f = stretch(z.gathers_f, cp.embedding ? 0 : z.first_f, chunk[g].f, cc.f);
        z.stretch_b = stretch(z.gathers_b, cp.head ? 0 : z.first_b, chunk[g].b, cb);
      }
    }
    const Replay r = replay_schedule(plan, chunk, p2p, zero3);
    for (size_t s = 0; s < r.end.size(); ++s) {
      int64_t ready = std::max(r.end[s], r.dp_end[s]);
      if (buckets != nullptr) {
        std::vector<std::pair<int64_t, int64_t>> jobs;  // (issued no earlier than, ticks)
        for (int v = 0; v < plan.local_chunks; ++v) {
          const int g = plan.global_chunk(static_cast<int>(s), v);
          // The micro-batches whose backward reduces: the last, or every one.
          const int last = plan.last_microbatch(v);
          const int from = every ? 0 : last;
          for (const BucketTicks& b : (*buckets)[static_cast<size_t>(g)]) {
            for (int mi = from; mi <= last; ++mi) {
              const size_t k = static_cast<size_t>(g) * static_cast<size_t>(mb) + mi;
              const int64_t issued = !ft.dp_overlap ? r.end[s]
                                     : !b.at_end    ? r.bucket_pass_start[k]
                                                    : r.bucket_pass_end[k];
              jobs.emplace_back(issued, b.ticks);
            }
          }
        }
        std::sort(jobs.begin(), jobs.end());
        int64_t after = 0;  // the ticks of the jobs issued at jobs[j] or later
        for (size_t j = jobs.size(); j-- > 0;) {
          after = sat_add(after, jobs[j].second);
          ready = std::max(ready, sat_add(jobs[j].first, after));
        }
      }
      best = std::max(best, sat_add(ready, opt[s]));
    }
  }

  // ZeRO-3: every micro-batch gathers each layer's parameters before its forward and again before
  // its backward, and reduce-scatters its gradients, one after another on the rank's DP stream.
  if (l.zero >= 3) {
    // Layers of a kind have equal parameters: each distinct collective is estimated once.
    std::map<std::tuple<CollectiveOp, int64_t, GroupKind>, int64_t> seen;
    auto coll = [&](CollectiveOp op, int64_t bytes, GroupKind g) -> int64_t {
      const hw::GroupPlacement& gp = (*placement)[g];
      if (gp.size <= 1 || bytes <= 0) return 0;
      auto [it, fresh] = seen.try_emplace({op, bytes, g}, 0);
      if (fresh)
        it->second = std::max<int64_t>(cm.estimate(op, Bytes(bytes), gp).time.count() - 1, 0);
      return it->second;
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
    for (size_t s = 0; s < dp_stream.size(); ++s) {
      best = std::max(best, dp_stream[s]);
      dp_work[s] = dp_stream[s];
    }
  }

  // The compute slowdown under communication (KernelCostModel::overlap_slowdown σ, the engine's
  // compute_slowdown_under_comm): a stage's compute C (at full speed, the step's included) and its
  // serial collectives S never run at once (the chain waits for each), and compute beside a
  // transfer of the DP stream (D = dp_work) runs at 1/σ. With O the time both run, the rank is busy
  // for at least max(C + O(1-1/σ) + S, C + O(1-1/σ) + D - O), whose least over O is
  // C + S + max(0, D - S)(1 - 1/σ). Not for the two-chunk schedules, whose overlapped pairs run
  // one pass's collectives beside the other's compute.
  for (int s = 0; sigma > 1 && !dual && s < pp; ++s) {
    int64_t c = opt[static_cast<size_t>(s)], serial = 0;
    for (int v = 0; v < plan.local_chunks; ++v) {  // the chunks stage s runs
      const size_t g = static_cast<size_t>(plan.global_chunk(s, v));
      const PassTimes& cc = chunk_compute[g];
      c = sat_add(c, sat_mul(sat_add(cc.f, sat_add(cc.b, cc.w)), mb));
      serial = sat_add(serial, sat_mul(chunk_serial[g], mb));
    }
    best = std::max(best, sat_add(sat_add(c, serial),
                                  slowdown_ticks(dp_work[static_cast<size_t>(s)], serial, sigma)));
  }
  return Duration::ticks(best);
}

}  // namespace scaleplan::sim
