#include "sim/builder.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "sim/emit.h"

namespace scaleplan::sim {
namespace build {

Result<Program> ProgramBuilder::build() {
  if (in_.storage != nullptr) {
    prog_ = std::move(*in_.storage);
    prog_.clear();
  }
  // The plan this program follows (sim/pass_plan.h), the one the planner's bound sums.
  SP_ASSIGN_OR_RETURN(
      plan_, pass_plan(m_, l_, in_.seq_len, o_.timing,
                       std::make_shared<const ParamShards>(param_shards(m_, l_.tp, l_.ep, l_.etp)),
                       o_.chunk_layers));
  dualpipe_ = plan_.dualpipe;
  split_weight_ = plan_.split_weight;
  if (models::runs_autocast(o_.ops, l_)) autocast_ = models::autocast_cast_params(m_, l_);
  const int pp = l_.pp;
  SP_RETURN_IF_ERROR(time_layers());
  chunks_.resize(plan_.chunks.size());
  for (size_t g = 0; g < plan_.chunks.size(); ++g) {
    SP_RETURN_IF_ERROR(
        build_chunk(static_cast<int>(g), plan_.chunks[g].first_layer, plan_.chunks[g].layers));
  }
  SP_RETURN_IF_ERROR(time_boundaries());
  apply_step_clock();

  // Simulated ranks.
  const int64_t per_stage = static_cast<int64_t>(l_.tp) * l_.cp * l_.dp_degree();
  std::vector<std::pair<int64_t, int>> ranks;  // (global rank, stage)
  if (o_.all_ranks) {
    if (l_.gpus() > 16384) {
      return Status::invalid("simulate --all-ranks: " + std::to_string(l_.gpus()) +
                             " GPUs is more than the 16384 the all-ranks mode supports");
    }
    SP_ASSIGN_OR_RETURN(auto pp_groups, hw::group_members(l_, GroupKind::kPp));
    std::vector<int> stage_of(l_.gpus(), 0);
    for (const auto& g : pp_groups) {
      for (size_t s = 0; s < g.size(); ++s) stage_of[g[s]] = static_cast<int>(s);
    }
    for (int64_t r = 0; r < l_.gpus(); ++r) ranks.push_back({r, stage_of[r]});
    for (int k = 0; k < kNumGroupKinds; ++k) {
      SP_ASSIGN_OR_RETURN(auto groups, hw::group_members(l_, static_cast<GroupKind>(k)));
      auto& of = group_of_[k];
      of.assign(l_.gpus(), 0);
      group_size_[k] = groups.empty() ? 1 : static_cast<int>(groups.front().size());
      for (size_t i = 0; i < groups.size(); ++i) {
        for (int r : groups[i]) of[r] = static_cast<int>(i);
      }
    }
  } else {
    for (int s = 0; s < pp; ++s) ranks.push_back({s * per_stage, s});
  }
  for (const auto& [global, stage] : ranks) {
    RankInfo info{
        .global_rank = global, .stage = stage, .represents = o_.all_ranks ? 1 : per_stage};
    if (static_cast<size_t>(stage) < o_.stage_static_memory.size())
      info.static_memory = o_.stage_static_memory[stage];
    prog_.add_rank(info);
  }
  for (int r = 0; r < prog_.num_ranks(); ++r) {
    SP_RETURN_IF_ERROR(emit_rank(r, ranks[r].first, ranks[r].second));
    if (r == 0 && prog_.num_ranks() > 1) {
      // Room for every rank at twice the first one's size, so that the op array is not copied
      // as it grows. Ranks differ at the pipeline ends (embedding, head) and where stages hold
      // unequal layer counts: the first stage can be the smallest by far (the 405B plan's
      // tp=2,pp=64,cp=8 ZB-H1 layout: 4,874 ops on rank 0, 8,073 on its largest rank, so a margin
      // of a quarter made the array double, copied into fresh pages, at 0.6 of the program).
      // Reserved memory that is never written costs no page.
      const size_t nr = static_cast<size_t>(prog_.num_ranks());
      prog_.reserve(2 * prog_.num_ops() * nr, 2 * prog_.all_deps().size() * nr);
    }
  }
  prog_.set_layout(l_);
  prog_.set_merged_compute(o_.merge_compute);
  SP_RETURN_IF_ERROR(prog_.validate());
  return std::move(prog_);
}

uint32_t ProgramBuilder::match_for(RankState& rs, GroupKind g, bool world) {
  if (world) {
    // One instance per call site across every simulated rank: keyed by the rank's call count.
    return matches_.instance({.site = MatchKey::Site::kWorld, .seq = rs.world_seq++},
                             prog_.num_ranks(), prog_);
  }
  if (!o_.all_ranks || group_size_[static_cast<int>(g)] <= 1) return prog_.add_match(1);
  const int k = static_cast<int>(g);
  return matches_.instance({.site = MatchKey::Site::kGroup,
                            .kind = g,
                            .group = group_of_[k][rs.global],
                            .seq = rs.coll_seq[k]++},
                           group_size_[k], prog_);
}

// The send/receive pair carrying micro-batch `mb` into global chunk `g` (dir 0: the activation
// forward, 1: its gradient backward) in this rank's pipeline.
uint32_t ProgramBuilder::p2p_match(RankState& rs, int dir, int g, int mb) {
  const int64_t pipeline =
      o_.all_ranks ? group_of_[static_cast<int>(GroupKind::kPp)][rs.global] : 0;
  return matches_.instance({.site = MatchKey::Site::kTransfer,
                            .backward = dir != 0,
                            .group = pipeline,
                            .chunk = g,
                            .seq = mb},
                           2, prog_);
}

// Places `t` after `a` and `b` (kNoOp: none). Its host issue op, if any, is a third dependency:
// three at most, the size of the array they are gathered in.
OpId ProgramBuilder::add(RankState& rs, const Timed& t, int mb, int chunk, OpId a, OpId b) {
  OpSpec s{.kind = t.kind,
           .stream = t.stream,
           .phase = t.phase,
           .duration = t.duration,
           .bytes = t.bytes,
           .label = t.label,
           .collective = t.collective,
           .link = t.link,
           .spares_compute = t.spares_compute,
           .microbatch = mb,
           .chunk = chunk};
  if (t.kind == OpKind::kCollective) s.match = match_for(rs, t.group);
  std::array<OpId, 3> d{};
  size_t n = 0;
  for (OpId x : {a, b}) {
    if (x != kNoOp) d[n++] = x;
  }
  if (t.host > Duration::zero()) d[n++] = issue(rs, t.host, t.phase, mb, chunk);
  return prog_.add_op(rs.rank, s, std::span<const OpId>(d.data(), n));
}

// The CPU issuing an op (HostIssue): `cost` of host time on the rank's host stream, after the
// ops issued before it (stream order) and after the synchronizing point it must wait for.
OpId ProgramBuilder::issue(RankState& rs, Duration cost, Phase phase, int mb, int chunk) {
  if (host_label_ == kNoMatch) host_label_ = prog_.add_label("host.issue", HostPayload{});
  const OpId wait = rs.host_wait;
  rs.host_wait = kNoOp;
  return prog_.add_op(rs.rank,
                      {.kind = OpKind::kHost,
                       .stream = StreamKind::kHost,
                       .phase = phase,
                       .duration = cost,
                       .label = host_label_,
                       .microbatch = mb,
                       .chunk = chunk},
                      std::span<const OpId>(&wait, wait != kNoOp ? 1 : 0));
}

Status ProgramBuilder::emit_rank(int rank, int64_t global, int stage) {
  RankState rs;
  rs.rank = rank;
  rs.global = global;
  rs.stage = stage;
  start_label_ = prog_.add_label("pass.start", SyncPayload{});
  act_label_ = prog_.add_label("activations", ActivationsPayload{});
  const size_t passes = chunks_.size() * static_cast<size_t>(l_.num_microbatches());
  rs.fwd_end.assign(passes, kNoOp);
  rs.bwd_end.assign(passes, kNoOp);
  rs.w_end.assign(passes, kNoOp);
  OpId prev = kNoOp;
  const std::vector<Pass>& order = plan_.order[stage];
  for (size_t i = 0; i < order.size(); ++i) {
    const Pass& p = order[i];
    // Sends held back by the previous pass (Pass::defer_send) go out after this one.
    const std::vector<RankState::DeferredSend> due = std::exchange(rs.deferred_sends, {});
    if (p.with_next && o_.overlap_pairs && i + 1 < order.size()) {
      prev = emit_pair(rs, p, order[++i], prev);
    } else {
      prev = emit_pass(rs, p, prev);
    }
    for (const RankState::DeferredSend& d : due) emit_send(rs, d.fwd, d.to, d.pass, prev);
  }
  for (const RankState::DeferredSend& d : rs.deferred_sends)
    emit_send(rs, d.fwd, d.to, d.pass, prev);
  if (dualpipe_) emit_mirror_sync(rs);  // DualPipeV keeps one copy: nothing to sync
  if (!o_.timing.dp_overlap && l_.zero < 3) {
    // FrameworkTiming::dp_overlap off: each chunk's whole gradient buffer after the last
    // backward.
    for (int v = 0; v < local_chunks(); ++v) {
      const ChunkOps& c = chunks_[global_chunk(v, stage)];
      reduce_buckets(rs, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                     c.extra_expert_params, std::vector<OpId>(c.layer_dense_params.size(), prev),
                     prev, v,
                     /*one_bucket=*/true);
    }
  }
  if (l_.zero < 3) tied_embedding_reduce(rs, prev);
  return emit_step(rs, prev);
}

}  // namespace build

BuildOptions build_options(const Framework& f, const Layout& l, const hw::GpuSpec& gpu) {
  BuildOptions o;
  o.timing = f.timing;
  o.ops = on_gpu(f, gpu).ops;
  o.memory = f.memory;
  o.host = f.host;
  o.attention = framework_attention(f.timing, gpu);
  o.param_gather = param_gather_for(f.timing, l);
  o.dp_bucket_params = dp_bucket_params(f.timing, l);
  o.blocking_p2p = blocks_p2p(f.timing, l.schedule);
  o.overlap_pairs = pairs_overlap(f.timing, l);
  return o;
}

Result<Program> build_program(const BuildInputs& in, const BuildOptions& options) {
  if (!in.model || !in.layout || !in.cluster || !in.kernels || !in.collectives || in.seq_len <= 0) {
    return Status::internal("build_program: missing input");
  }
  if (in.placement != nullptr) return build::ProgramBuilder(in, options, *in.placement).build();
  SP_ASSIGN_OR_RETURN(hw::LayoutPlacement placement, hw::place_layout(*in.layout, *in.cluster));
  return build::ProgramBuilder(in, options, std::move(placement)).build();
}

}  // namespace scaleplan::sim
