// The program builder's data-parallel emitter (sim/emit.h): DP gradient buckets, ZeRO-3's gathers
// and reduce-scatters, the tied-embedding reduction and DualPipe's mirror sync.
#include "sim/emit.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

namespace scaleplan::sim::build {

// DP gradient reduction of the parameters in `params` (one entry per layer, backward order),
// called after the layer's last gradient op `after_layer[i]`.
// `tensors` (ZeRO-3 with FrameworkTiming::zero3_per_tensor_sync, one layer): the layer's
// reduce-scatter is one collective per tensor.
void ProgramBuilder::reduce_buckets(RankState& rs, const std::vector<int64_t>& dense,
                                    const std::vector<int64_t>& expert, int64_t extra,
                                    int64_t extra_expert, const std::vector<OpId>& after_layer,
                                    OpId last, int chunk, bool one_bucket,
                                    const std::vector<int64_t>* tensors) {
  const bool zero3 = l_.zero >= 3;
  const CollectiveOp op = l_.zero >= 1 ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce;
  // ZeRO-3 reduce-scatters bf16 gradients; FSDP2 widens them to fp32 first (fsdp2_copies).
  const int bytes_per = zero3 ? (o_.timing.fsdp2_copies ? 4 : 2) : o_.timing.dp_grad_bytes;
  auto issue = [&](int64_t params, GroupKind g, OpId after, const std::string& name) {
    if (params <= 0 || placement_[g].size <= 1) return;
    Timed t;
    t.kind = OpKind::kCollective;
    t.stream = StreamKind::kDp;
    t.group = g;
    t.collective = op;
    t.phase = split_weight_ ? Phase::kBackwardWeight : Phase::kBackwardInput;
    t.bytes = params * bytes_per;
    t.duration = tensors && g == GroupKind::kDpCp ? per_tensor_time(op, *tensors, bytes_per, g)
                                                  : collective_time(op, t.bytes, g);
    if (zero3 && o_.timing.fsdp2_copies) {
      // FrameworkTiming::fsdp2_copies: chunk_cat of the bf16 gradients into the fp32 input.
      t.duration += in_.kernels->memory_bound(MemoryBoundShape{Bytes(6 * params), Flops(0)});
    }
    t.link = placement_[g].nodes > 1 ? 1 : 0;
    // Interned once per (name, group) and build: the payload is the same every time.
    auto [label, fresh] = bucket_labels_.try_emplace({name, static_cast<int>(g), op}, 0);
    if (fresh)
      label->second = prog_.add_label(name, CollectivePayload{op, g, placement_[g].size, 1});
    t.label = label->second;
    rs.dp_ops.push_back(add(rs, t, -1, chunk, after));
  };
  const Bucketing how = zero3        ? Bucketing::kPerLayer
                        : one_bucket ? Bucketing::kOne
                                     : Bucketing::kBySize;
  for (const DpBucket& b :
       dp_buckets(dense, expert, extra, extra_expert, how, o_.dp_bucket_params)) {
    const OpId after = b.after < dense.size() ? after_layer[b.after] : last;
    issue(b.dense, GroupKind::kDpCp, after, zero3 ? "zero3.reduce_scatter" : "dp.grad_bucket");
    issue(b.expert, GroupKind::kEdp, after, "edp.grad_bucket");
  }
}

// Two ranks of one pipeline, on different stages, exchanging with each other (DualPipe's mirror
// sync, the tied-embedding reduce): inside a node if the pipeline is, else one per node, with
// every GPU of the node exchanging with its own counterpart at once.
hw::GroupPlacement ProgramBuilder::pipeline_pair() const {
  if (placement_[GroupKind::kPp].nodes <= 1) return hw::GroupPlacement::packed(*in_.cluster, 2);
  return {.size = 2,
          .ranks_per_node = 1,
          .nodes = 2,
          .in_nvlink_domain = false,
          .ranks_per_domain = 1,
          .domains = 2,
          .nic_sharing = 1,
          .concurrent_groups = std::max(1, in_.cluster->gpus_per_node)};
}

// The two copies' gradients are summed before the step (Megatron-LM finalize_model_grads:
// _allreduce_word_embedding_grads over the embedding group of the first and last stage, for
// tied embeddings and MTP alike; nanotron syncs its tied parameters likewise), an all-reduce of
// the rank's vocab/tp x hidden shard in the DP gradients' precision, between the pipeline's
// ends (pipeline_pair).
void ProgramBuilder::tied_embedding_reduce(RankState& rs, OpId after) {
  if (!plan_.embedding_copy_on_last) return;
  if (rs.stage != 0 && rs.stage != l_.pp - 1) return;
  const hw::GroupPlacement g = pipeline_pair();
  Timed t;
  t.kind = OpKind::kCollective;
  t.stream = StreamKind::kDp;
  t.group = GroupKind::kEmbedding;  // on the DP stream, reported with the gradient reduction
  t.collective = CollectiveOp::kAllReduce;
  t.phase = split_weight_ ? Phase::kBackwardWeight : Phase::kBackwardInput;
  t.bytes = plan_.tied_shard * o_.timing.dp_grad_bytes;
  t.duration = in_.collectives->estimate(CollectiveOp::kAllReduce, Bytes(t.bytes), g).time;
  t.link = g.nodes > 1 ? 1 : 0;
  t.label = prog_.add_label(
      "embedding.tied_grad_all_reduce",
      CollectivePayload{CollectiveOp::kAllReduce, GroupKind::kEmbedding, g.size, 1});
  // With every rank simulated the two ends meet in it (Megatron-LM's all-reduce over the
  // embedding group); with one rank per stage each end runs it alone.
  rs.dp_ops.push_back(add(rs, t, -1, 0, after));
}

// ZeRO-3 parameter all-gather of one layer (bf16), on the DP stream, over `group`: the dense
// parameters over DP x CP, the experts' over the expert-data-parallel group they are sharded
// on; `tensors`: one collective per tensor (FrameworkTiming::zero3_per_tensor_sync).
OpId ProgramBuilder::gather_layer(RankState& rs, int64_t params,
                                  const std::vector<int64_t>* tensors, OpId after, int mb,
                                  int chunk, Phase phase, GroupKind group) {
  Timed t;
  t.kind = OpKind::kCollective;
  t.stream = StreamKind::kDp;
  t.group = group;
  t.collective = CollectiveOp::kAllGather;
  t.phase = phase;
  t.bytes = params * 2;
  t.duration = tensors ? per_tensor_time(CollectiveOp::kAllGather, *tensors, 2, group)
                       : collective_time(CollectiveOp::kAllGather, t.bytes, group);
  if (o_.timing.fsdp2_copies) {
    // FrameworkTiming::fsdp2_copies: the copy-in of the shard (6 + 4 B per shard element).
    const int64_t shard = params / std::max(1, placement_[group].size);
    t.duration += in_.kernels->memory_bound(MemoryBoundShape{Bytes(10 * shard), Flops(0)});
  }
  t.link = placement_[group].nodes > 1 ? 1 : 0;
  uint32_t& label = zero3_labels_[static_cast<int>(group)];
  if (label == kNoMatch) {
    label = prog_.add_label("zero3.all_gather", CollectivePayload{CollectiveOp::kAllGather, group,
                                                                  placement_[group].size, 1});
  }
  t.label = label;
  return add(rs, t, mb, chunk, after);
}

// The backward of the last micro-batch: the chain with a DP bucket issued after each layer.
// `bounds`: the list's per-layer blocks (ChunkOps::backward_bounds or weight_bounds).
OpId ProgramBuilder::emit_with_buckets(RankState& rs, const ChunkOps& c,
                                       const std::vector<Timed>& ops,
                                       const std::vector<size_t>& bounds, OpId start, int mb,
                                       int chunk) {
  const size_t layers = c.layer_dense_params.size();
  const std::vector<int64_t> flatten = zero_flatten_buckets(c);
  // nanotron ZeRO-1/2: the hook flattens a bucket on the compute stream before reducing it.
  auto flatten_after = [&](size_t i, OpId p) {
    if (flatten.empty() || flatten[i] <= 0) return p;
    const int dp = placement_[GroupKind::kDpCp].size;
    return add(rs,
               copy_op("zero.grad_flatten", 4 * o_.timing.dp_grad_bytes * flatten[i], 2 * dp,
                       split_weight_ ? Phase::kBackwardWeight : Phase::kBackwardInput),
               mb, chunk, p);
  };
  std::vector<OpId> after(layers);
  OpId prev = start;
  size_t pos = bounds[0];
  prev = chain(rs, ops, 0, pos, prev, mb, chunk);
  for (size_t i = 0; i < layers; ++i) {
    prev = chain(rs, ops, pos, bounds[i + 1], prev, mb, chunk);
    prev = flatten_after(i, prev);
    after[i] = prev;
    pos = bounds[i + 1];
  }
  prev = chain(rs, ops, pos, ops.size(), prev, mb, chunk);
  prev = flatten_after(layers, prev);
  reduce_buckets(rs, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                 c.extra_expert_params, after, prev, chunk);
  return prev;
}

// Gradient elements of the DP bucket closed after each layer of chunk `c` (index i < layers)
// and at the end of its backward (index layers), as reduce_buckets forms them, when nanotron's
// ZeRO-1/2 flatten copies apply (FrameworkTiming::nanotron_zero_copies); empty otherwise.
std::vector<int64_t> ProgramBuilder::zero_flatten_buckets(const ChunkOps& c) const {
  if (!o_.timing.nanotron_zero_copies || (l_.zero != 1 && l_.zero != 2) ||
      placement_[GroupKind::kDpCp].size <= 1)
    return {};
  std::vector<int64_t> out(c.layer_dense_params.size() + 1, 0);
  for (const DpBucket& b :
       dp_buckets(c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(), 0,
                  Bucketing::kBySize, o_.dp_bucket_params))
    out[b.after] = b.dense + b.expert;
  return out;
}

// ZeRO-3 forward or backward: gather each block's parameters (prefetching one block ahead)
// before its ops, the blocks being the chunk's layers and, where the chunk holds them, the
// embedding and the final norm with the LM head (FSDP wraps them as units of their own); in the
// backward, reduce-scatter each layer's gradients after its ops.
// `when`: kFirstForward as ZeRO-3 runs every pass; for ZeRO-1/2's overlapped parameter gather
// (BuildOptions::param_gather) the first block's gather, or every block's (kAligned), is
// dispatched when the step starts instead of waiting for the pass.
OpId ProgramBuilder::emit_zero3(RankState& rs, int g, const std::vector<Timed>& ops, OpId start,
                                int mb, int chunk, bool fwd, ParamGather when) {
  const ChunkOps& c = chunks_[g];
  const size_t layers = c.layer_dense_params.size();
  // Forward: [embedding][layer 0]..[layer n-1][head]; backward: [head][layer n-1]..[layer 0]
  // [embedding] (ChunkOps::forward_bounds, backward_bounds).
  const std::vector<size_t>& bounds = fwd ? c.forward_bounds : c.backward_bounds;
  const bool sync = o_.timing.zero3_per_tensor_sync;
  // Under full recompute the backward gathers each layer twice: the recomputed forward runs the
  // module's forward hooks, which gather and then release the parameters again, and the
  // backward hooks gather them once more (DeepSpeed ZeRO-3 partition_parameters / FSDP
  // reshard-after-forward). Three gathers per layer and micro-batch in all. The embedding and
  // head are not recomputed: one gather per pass.
  const int layer_gathers = !fwd && l_.recompute == Recompute::kFull ? 2 : 1;
  // Expert weights are sharded over the expert-data-parallel group; where that is one rank
  // they are whole on every rank and nothing is gathered.
  const bool gather_experts = placement_[GroupKind::kEdp].size > 1;
  struct Block {
    size_t begin, end;
    int64_t dense, expert;
    const std::vector<int64_t>* tensors;
    int gathers;
  };
  std::vector<Block> blocks;
  const std::vector<int64_t>* embed_tensors = sync ? &c.embed_tensors : nullptr;
  const std::vector<int64_t>* head_tensors = sync ? &c.head_tensors : nullptr;
  const int64_t head_experts = gather_experts ? c.extra_expert_params : 0;
  blocks.push_back({0, bounds[0], fwd ? c.embed_params : c.head_params, fwd ? 0 : head_experts,
                    fwd ? embed_tensors : head_tensors, 1});
  for (size_t i = 0; i < layers; ++i) {
    const size_t j = fwd ? layers - 1 - i : i;
    blocks.push_back({bounds[i], bounds[i + 1], c.layer_dense_params[j],
                      gather_experts ? c.layer_expert_params[j] : 0,
                      sync ? &c.layer_tensor_params[j] : nullptr, layer_gathers});
  }
  blocks.push_back({bounds[layers], ops.size(), fwd ? c.head_params : c.embed_params,
                    fwd ? head_experts : 0, fwd ? head_tensors : embed_tensors, 1});
  const Phase phase = fwd ? Phase::kForward : Phase::kBackward;
  // A block's gathers, in order on the DP stream: its dense parameters over DP x CP, then its
  // experts' over EDP; the last one ending completes the block.
  auto gather = [&](size_t k, OpId after) {
    const Block& b = blocks[k];
    OpId done = kNoOp;
    for (int n = 0; n < b.gathers; ++n) {
      if (b.dense > 0) done = gather_layer(rs, b.dense, b.tensors, after, mb, chunk, phase);
      if (b.expert > 0)
        done = gather_layer(rs, b.expert, nullptr, after, mb, chunk, phase, GroupKind::kEdp);
    }
    return done;
  };
  auto holds = [&](size_t k) { return blocks[k].dense > 0 || blocks[k].expert > 0; };
  // Block k+1's gather is issued when block k starts (one ahead), the first block holding
  // parameters at the pass's start; with zero3_per_tensor_sync a block's gather waits for the
  // compute before it (and, on the DP stream, for the previous layer's reduce-scatter), and a
  // layer's reduce-scatter is issued as soon as its backward ends: everything runs one after
  // another.
  const bool reduce = !fwd && !split_weight_;
  std::vector<OpId> gathered(blocks.size(), kNoOp);
  std::vector<bool> issued(blocks.size(), false);
  if (!sync) {
    const bool aligned = when == ParamGather::kAligned;
    const OpId first_after = when == ParamGather::kFirstForward ? start : kNoOp;
    for (size_t k = 0; k < blocks.size(); ++k) {
      issued[k] = true;
      gathered[k] = gather(k, first_after);
      if (holds(k) && !aligned) break;
    }
  }
  std::vector<OpId> after(layers);
  OpId prev = start;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const Block& b = blocks[k];
    if (sync && holds(k)) gathered[k] = gather(k, prev);
    OpId block_start = prev;
    if (holds(k)) {
      std::array<OpId, 2> block_deps = {prev, gathered[k]};
      block_start = prog_.add_op(rs.rank,
                                 {.kind = OpKind::kCompute,
                                  .phase = phase,
                                  .label = start_label_,
                                  .microbatch = mb,
                                  .chunk = chunk},
                                 unique_deps(block_deps));
      if (!sync && k + 1 < blocks.size() && !issued[k + 1]) {
        issued[k + 1] = true;
        gathered[k + 1] = gather(k + 1, block_start);
      }
      if (o_.timing.fsdp2_copies) {
        // FrameworkTiming::fsdp2_copies: the gathered block copied out into its parameters, on
        // the compute stream, once per gather.
        Timed copy;
        copy.phase = phase;
        const MemoryBoundShape shape{Bytes(4 * (b.dense + b.expert) * b.gathers), Flops(0),
                                     MemOp::kCopy};
        copy.duration = in_.kernels->memory_bound(shape);
        copy.label =
            prog_.add_label("fsdp.copy_out", KernelPayload{KernelKind::kMemoryBound, shape});
        block_start = add(rs, copy, mb, chunk, block_start);
      }
    } else if (!sync && k + 1 < blocks.size() && !issued[k + 1]) {
      // Nothing to wait for here: the next block's gather starts with this one.
      issued[k + 1] = true;
      gathered[k + 1] = gather(k + 1, prev);
    }
    prev = chain(rs, ops, b.begin, b.end, block_start, mb, chunk);
    if (k == 0 || k > layers) continue;
    const size_t i = k - 1;
    after[i] = prev;
    if (sync && reduce) {
      reduce_buckets(rs, {c.layer_dense_params[i]}, {c.layer_expert_params[i]}, 0, 0, {prev}, prev,
                     chunk, /*one_bucket=*/false, blocks[k].tensors);
    }
  }
  if (reduce) {
    if (sync) {
      reduce_buckets(rs, {}, {}, c.extra_dense_params(), c.extra_expert_params, {}, prev, chunk);
    } else {
      reduce_buckets(rs, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                     c.extra_expert_params, after, prev, chunk);
    }
  }
  return prev;
}

// DualPipe keeps two copies of every stage, on ranks s and pp-1-s, and trains them as one: once
// a chunk's last weight pass is done, its gradients are summed with the other copy's (an
// all-reduce of two, on the DP stream, before the step). The pair spans nodes when the pipeline
// does, and every GPU of a node syncs with its own mirror at once.
void ProgramBuilder::emit_mirror_sync(RankState& rs) {
  const hw::GroupPlacement pair = pipeline_pair();
  // Both ranks of a pair issue their two syncs in the same order, by model chunk (rank s holds
  // model chunks s and pp-1-s, as does its mirror): collectives on one stream in different
  // orders would wait for each other forever, as NCCL's would.
  int order[2] = {0, 1};
  if (model_chunk(l_, global_chunk(1, rs.stage)) < model_chunk(l_, global_chunk(0, rs.stage)))
    std::swap(order[0], order[1]);
  for (int c : order) {
    const int g = global_chunk(c, rs.stage);
    const ChunkOps& ch = chunks_[g];
    int64_t params = ch.extra_dense_params() + ch.extra_expert_params;
    for (size_t i = 0; i < ch.layer_dense_params.size(); ++i)
      params += ch.layer_dense_params[i] + ch.layer_expert_params[i];
    if (params <= 0) continue;
    // Timed by the collective model on the pair's placement; with every rank simulated the
    // two copies meet in it, with one rank per stage each runs it alone.
    const int64_t bytes = params * o_.timing.dp_grad_bytes;
    OpSpec op{
        .kind = OpKind::kCollective,
        .stream = StreamKind::kDp,
        .phase = Phase::kBackwardWeight,
        .duration = in_.collectives->estimate(CollectiveOp::kAllReduce, Bytes(bytes), pair).time,
        .bytes = bytes,
        .match = match_for(rs, GroupKind::kPpMirror),
        .label = prog_.add_label(
            "dualpipe.mirror_grad",
            CollectivePayload{CollectiveOp::kAllReduce, GroupKind::kPpMirror, pair.size, 1}),
        .collective = CollectiveOp::kAllReduce,
        .link = static_cast<uint8_t>(pair.nodes > 1 ? 1 : 0),
        .chunk = c};
    const OpId after = rs.w_end[pass_index(g, last_microbatch(c))];
    rs.dp_ops.push_back(prog_.add_op(rs.rank, op, std::span<const OpId>(&after, 1)));
  }
}

}  // namespace scaleplan::sim::build
