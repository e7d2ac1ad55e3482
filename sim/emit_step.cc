// The program builder's step (sim/emit.h): the gradient-norm all-reduce, the optimizer and
// ZeRO-1/2's parameter gather with nanotron's copies.
#include "sim/emit.h"

#include <algorithm>
#include <string>
#include <vector>

namespace scaleplan::sim::build {

namespace {

std::vector<OpId> dedup(std::vector<OpId> v) {
  v.erase(std::remove(v.begin(), v.end(), kNoOp), v.end());
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

// The optimizer's kernels on a rank of `stage`: over the parameters of every chunk the stage runs
// (PassPlan::stage_dense_params); ZeRO shards the dense parameters' optimizer over DP x CP and the
// experts' over the expert-data-parallel group (core/layout.h zero_shard, as the memory model
// counts them).
int64_t ProgramBuilder::optimizer_shard(int stage) const {
  const int64_t dense = plan_.stage_dense_params(stage);
  const int64_t expert = plan_.stage_expert_params(stage);
  return l_.zero >= 1 ? zero_shard(dense, expert, l_) : dense + expert;
}

std::vector<models::Op> ProgramBuilder::optimizer_ops(int stage) const {
  return models::optimizer_operators(optimizer_shard(stage), o_.timing.fp16_loss_scale,
                                     o_.timing.dp_grad_bytes, o_.memory.fp32_params, l_.moments);
}

// The step, after the rank's last pass `prev` and every gradient reduction (dp_ops_): the
// gradient-norm all-reduce over all ranks, the optimizer over the stage's parameters
// (PassPlan::stage_dense_params, ZeRO-sharded) and ZeRO-1/2's parameter all-gather with its
// copies.
Status ProgramBuilder::emit_step(RankState& rs, OpId prev) {
  std::vector<OpId> deps = rs.dp_ops;
  deps.push_back(prev);
  deps.push_back(rs.blocking_send);
  rs.blocking_send = kNoOp;
  const OpId ready = prog_.add_op(
      rs.rank, {.kind = OpKind::kCompute, .phase = Phase::kOptimizer, .label = start_label_},
      dedup(deps));
  const uint32_t norm_label = prog_.add_label(
      "grad_norm.all_reduce",
      CollectivePayload{CollectiveOp::kAllReduce, GroupKind::kWorld,
                        static_cast<int>(std::min<int64_t>(l_.gpus(), 1 << 20)), 1});
  const Duration norm_time =
      in_.collectives
          ->estimate(CollectiveOp::kAllReduce, Bytes(8),
                     hw::GroupPlacement::packed(
                         *in_.cluster, static_cast<int>(std::min<int64_t>(l_.gpus(), 1 << 20))))
          .time;
  const OpId norm = prog_.add_op(rs.rank,
                                 {.kind = OpKind::kCollective,
                                  .stream = StreamKind::kDp,
                                  .phase = Phase::kOptimizer,
                                  .duration = l_.gpus() > 1 ? norm_time : Duration::zero(),
                                  .bytes = 8,
                                  .match = match_for(rs, GroupKind::kDpCp, true),
                                  .label = norm_label,
                                  .collective = CollectiveOp::kAllReduce},
                                 {ready});
  const int64_t dense = plan_.stage_dense_params(rs.stage);
  const int64_t expert = plan_.stage_expert_params(rs.stage);
  const int64_t local = dense + expert;
  const int64_t shard = optimizer_shard(rs.stage);
  OpId last = norm;
  for (const auto& op : optimizer_ops(rs.stage)) {
    SP_ASSIGN_OR_RETURN(Timed t, time_op(op));
    t.phase = Phase::kOptimizer;
    last = add(rs, t, -1, 0, last);
  }
  if ((l_.zero == 1 || l_.zero == 2) && o_.param_gather == ParamGather::kAfterStep) {
    // The updated bf16 parameters are gathered back (Megatron's distributed optimizer).
    Timed t;
    t.kind = OpKind::kCollective;
    t.stream = StreamKind::kDp;
    t.group = GroupKind::kDpCp;
    t.collective = CollectiveOp::kAllGather;
    t.phase = Phase::kOptimizer;
    t.bytes = dense * 2;
    t.duration = collective_time(CollectiveOp::kAllGather, t.bytes, GroupKind::kDpCp);
    t.link = placement_[GroupKind::kDpCp].nodes > 1 ? 1 : 0;
    t.label = prog_.add_label("zero.param_all_gather",
                              CollectivePayload{CollectiveOp::kAllGather, GroupKind::kDpCp,
                                                placement_[GroupKind::kDpCp].size, 1});
    // ... and the experts' over their own group, where it shards them.
    if (expert > 0 && placement_[GroupKind::kEdp].size > 1) {
      Timed e = t;
      e.group = GroupKind::kEdp;
      e.label = prog_.add_label("zero.param_all_gather",
                                CollectivePayload{CollectiveOp::kAllGather, GroupKind::kEdp,
                                                  placement_[GroupKind::kEdp].size, 1});
      e.bytes = expert * 2;
      e.duration = collective_time(CollectiveOp::kAllGather, e.bytes, GroupKind::kEdp);
      e.link = placement_[GroupKind::kEdp].nodes > 1 ? 1 : 0;
      last = add(rs, e, -1, 0, last);
    }
    const int dp = placement_[GroupKind::kDpCp].size;
    const bool copies = o_.timing.nanotron_zero_copies && dp > 1;
    // nanotron's all_gather_coalesced (FrameworkTiming::nanotron_zero_copies): flatten the input
    // shard and every rank's output list, gather, copy each rank's part out of the flat buffer,
    // then copy every parameter slice back into the model.
    if (copies)
      last =
          add(rs, copy_op("zero.param_flatten", 4 * local + 4 * shard, dp + 1, Phase::kOptimizer),
              -1, 0, last);
    last = add(rs, t, -1, 0, last);
    if (copies) {
      last = add(rs, copy_op("zero.param_copy_out", 4 * local, dp, Phase::kOptimizer), -1, 0, last);
      add(rs,
          copy_op("zero.param_update", 4 * local, nanotron_param_tensors(rs.stage) * dp,
                  Phase::kOptimizer),
          -1, 0, last);
    }
  }
  return Status::ok();
}

// Parameter tensors nanotron's optimizer sees on `stage`: per Llama decoder layer the fused
// qkv_proj, o_proj, fused gate_up_proj, down_proj and two RMSNorm weights
// (src/nanotron/models/llama.py); the token embedding on the first chunk; the final norm and
// the LM head on the last (one tensor with the embedding when both are on one stage and tied).
int64_t ProgramBuilder::nanotron_param_tensors(int stage) const {
  int64_t n = 0;
  for (int v = 0; v < local_chunks(); ++v) {
    const int g = global_chunk(v, stage);
    n += 6 * static_cast<int64_t>(plan_.chunks[g].layers);
    if (first_chunk(g)) n += 1;
    if (last_chunk(g)) n += (m_.tied_embeddings && stage_of(g) == stage_of(0)) ? 1 : 2;
  }
  return n;
}

}  // namespace scaleplan::sim::build
