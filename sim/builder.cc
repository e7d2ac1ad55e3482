#include "sim/builder.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "models/operators.h"
#include "models/tensors.h"
#include "sim/comm_points.h"
#include "sim/match_table.h"
#include "sim/pass_plan.h"
#include "sim/schedule.h"

namespace scaleplan::sim {
namespace {

// An operator-list op, timed and ready to place.
struct Timed {
  OpKind kind = OpKind::kCompute;
  StreamKind stream = StreamKind::kCompute;
  CollectiveOp collective = CollectiveOp::kAllReduce;  // collectives only
  GroupKind group = GroupKind::kTp;
  Phase phase = Phase::kForward;
  Duration duration;
  Duration host;  // CPU time to issue it (HostIssue); 0: no host op
  int64_t bytes = 0;
  uint32_t label = 0;
  uint8_t link = 0;
  bool overlap_next = false;  // runs beside the next compute op (models::CommShape)
  bool skips_first_microbatch = false;  // models::Op::skips_first_microbatch
  int32_t comm = -1;          // a collective's CommShape (ProgramBuilder::comm_shapes_), else -1
};

// A pass of one chunk, split the way schedules need it.
struct ChunkOps {
  std::vector<Timed> forward;
  std::vector<Timed> backward;  // recompute + input gradients (+ weight gradients unless split)
  std::vector<Timed> weight;    // weight gradients when the schedule splits them (ZB-H1)
  Bytes saved;                  // activations one micro-batch of this chunk keeps
  std::vector<int64_t> layer_dense_params;  // per layer, in backward order: DP bucket contents
  std::vector<int64_t> layer_expert_params;
  // Per layer (backward order), the size of each of its tensors (this GPU's shard), dense and
  // expert together; filled only for FrameworkTiming::zero3_per_tensor_sync, which times one
  // collective per tensor.
  std::vector<std::vector<int64_t>> layer_tensor_params;
  int64_t embed_params = 0;  // the embedding (first chunk)
  int64_t head_params = 0;   // the final norm, the LM head and the MTP modules' dense part (last)
  int64_t extra_expert_params = 0;  // the MTP modules' experts (last chunk)
  // Dense parameters beyond the layers: what DP buckets and the step add to them.
  int64_t extra_dense_params() const { return embed_params + head_params; }
  // Their tensors' sizes, for zero3_per_tensor_sync like layer_tensor_params.
  std::vector<int64_t> embed_tensors, head_tensors;
  // Where the lists split into per-layer blocks (layers + 1 entries each), fixed when the chunk is
  // assembled: forward [embedding][layer 0]..[layer n-1][head], the start of each layer's block
  // and the end of the last; backward and weight [head][layer n-1]..[layer 0][embedding], the end
  // of the head's block and of each layer's.
  std::vector<size_t> forward_bounds, backward_bounds, weight_bounds;
};

Phase phase_of(models::Pass p) {
  switch (p) {
    case models::Pass::kForward:
      return Phase::kForward;
    case models::Pass::kBackwardInput:
      return Phase::kBackwardInput;
    case models::Pass::kBackwardWeight:
      return Phase::kBackwardWeight;
    case models::Pass::kRecompute:
      return Phase::kRecompute;
    case models::Pass::kOptimizer:
      return Phase::kOptimizer;
  }
  return Phase::kOther;
}

class ProgramBuilder {
 public:
  ProgramBuilder(const BuildInputs& in, const BuildOptions& o, hw::LayoutPlacement placement)
      : in_(in), o_(o), l_(*in.layout), m_(*in.model), placement_(std::move(placement)) {}

  Result<Program> build() {
    // The plan this program follows (sim/pass_plan.h), the one the planner's bound sums.
    SP_ASSIGN_OR_RETURN(
        plan_,
        pass_plan(m_, l_, in_.seq_len, o_.timing,
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
        // Ranks differ only at the pipeline ends (embedding, head): room for every rank at the
        // first one's size plus a margin, so that the op array is not copied as it grows.
        const size_t nr = static_cast<size_t>(prog_.num_ranks());
        prog_.reserve(prog_.num_ops() * nr + prog_.num_ops() / 4,
                      prog_.all_deps().size() * nr + prog_.all_deps().size() / 4);
      }
    }
    prog_.set_layout(l_);
    prog_.set_merged_compute(o_.merge_compute);
    SP_RETURN_IF_ERROR(prog_.validate());
    return std::move(prog_);
  }

 private:
  // --- timing -----------------------------------------------------------------------------------

  // The attention shape with the kernel this build runs (BuildOptions::attention).
  AttentionShape with_kernel(AttentionShape a) const {
    a.kernel = o_.attention;
    return a;
  }

  // The typed payload of an operator-list op as this build runs it (its attention kernel).
  OpPayload payload_of(const models::Op& op) const {
    switch (op.kind) {
      case models::OpKind::kGemm:
        return KernelPayload{KernelKind::kGemm, *op.gemm()};
      case models::OpKind::kAttentionFwd:
        return KernelPayload{KernelKind::kAttentionFwd, with_kernel(*op.attention())};
      case models::OpKind::kAttentionBwd:
        return KernelPayload{KernelKind::kAttentionBwd, with_kernel(*op.attention())};
      case models::OpKind::kMemoryBound:
        return KernelPayload{KernelKind::kMemoryBound, std::get<MemoryBoundShape>(op.shape)};
      case models::OpKind::kComm: {
        const auto& c = *op.comm();
        return CollectivePayload{c.kind, c.group, c.group_size, c.steps};
      }
    }
    return std::monostate{};
  }

  // `chunks`: a GEMM runs as this many kernels of 1/chunks of its rows, one after another.
  Result<Timed> time_op(const models::Op& op, int chunks = 1) {
    Timed t;
    t.phase = phase_of(op.pass);
    t.label = prog_.add_label(op.name, payload_of(op), op.flops);
    const auto& k = *in_.kernels;
    switch (op.kind) {
      case models::OpKind::kGemm:
        if (chunks > 1 && op.gemm()->m >= chunks) {
          GemmShape part = *op.gemm();
          part.m /= chunks;
          t.duration = k.gemm(part) * static_cast<double>(chunks);
        } else {
          t.duration = k.gemm(*op.gemm());
        }
        break;
      case models::OpKind::kAttentionFwd:
        t.duration = k.attention(with_kernel(*op.attention()), /*backward=*/false);
        break;
      case models::OpKind::kAttentionBwd:
        t.duration = k.attention(with_kernel(*op.attention()), /*backward=*/true);
        break;
      case models::OpKind::kMemoryBound:
        t.duration = k.memory_bound(std::get<MemoryBoundShape>(op.shape));
        break;
      case models::OpKind::kComm: {
        const auto& c = *op.comm();
        t.group = c.group;
        t.stream = stream_of(t.group);
        t.kind = OpKind::kCollective;
        t.collective = c.kind;
        t.bytes = c.bytes.value() * c.steps;
        const auto& gp = placement_[t.group];
        if (c.group_size > 1) t.duration = comm_time(*in_.collectives, c, gp);
        t.comm = static_cast<int32_t>(comm_shapes_.size());
        comm_shapes_.push_back(c);
        t.link = gp.nodes > 1 ? 1 : 0;
        // The K/V ring runs beside the attention chunk it feeds, and TP collectives under
        // Transformer Engine's overlap beside their GEMM (models::apply_tp_comm_overlap); the
        // list puts each right before its partner. Everything else blocks the next op.
        t.overlap_next = c.overlap_next;
        break;
      }
    }
    t.host = o_.host.per_launch * static_cast<double>(launches(op));
    t.skips_first_microbatch = op.skips_first_microbatch;
    return t;
  }

  // Kernels and collectives the CPU issues for one operator-list op (HostIssue). A GEMM, an
  // element-wise op and a collective are one launch each (a collective with one member is none).
  // The flash-attention forward is one kernel and its backward three (FlashAttention-2's
  // flash_bwd_launch_template.h: the dO·O preprocessing, the main kernel, the dQ conversion); the
  // unfused core launches four kernels forward and six backward
  // (KernelCostModel::unfused_attention_forward). The framework's per-layer glue kernels are issued
  // with the attention core.
  int launches(const models::Op& op) const {
    const bool unfused = o_.attention == AttentionKernel::kUnfused;
    switch (op.kind) {
      case models::OpKind::kAttentionFwd:
        return (unfused ? 4 : 1) + o_.host.glue_forward_kernels;
      case models::OpKind::kAttentionBwd:
        return (unfused ? 6 : 3) + o_.host.glue_backward_kernels;
      case models::OpKind::kComm:
        return op.comm()->group_size > 1 ? op.comm()->steps : 0;
      default:
        return 1;
    }
  }

  // The unfused attention core (AttentionKernel::kUnfused) as the kernels it launches, each timed
  // by the kernel model. Every kernel covers the whole q×kv score matrix (the causal mask is
  // applied inside the softmax, nothing is skipped). Per score, in 16-bit: the softmax reads the
  // scores and writes the probabilities (4 B); dropout reads them and writes its output and a
  // 1-byte mask (5 B). Backward: dropout reads the gradient and the mask and writes (5 B); the
  // softmax backward reads its output and the gradient and writes (6 B); the two batched GEMMs of
  // the forward each become two (dgrad of both operands).
  // Times the op lists of the distinct layer kinds (dense / MoE) once.
  Status time_layers() {
    // Parameters per layer (this GPU's TP/EP shard) for the DP buckets, the ZeRO-3 gathers and
    // the gradient accumulation kernel: the plan's (param_shards).
    const ParamShards& sh = plan_.params();
    SP_ASSIGN_OR_RETURN(lists_, operator_lists(m_, l_, in_.seq_len, o_.ops, o_.attention));
    // In the order the kinds first appear in the model (the order their labels are interned).
    for (int64_t layer = 0; layer < m_.num_layers; ++layer) {
      const int kind = m_.layer_kind(layer);
      if (lists_.first_layer[kind] != layer) continue;
      std::vector<models::Op>& ops = lists_.layer[kind];
      const auto li = static_cast<size_t>(layer);
      add_grad_accumulation(ops, sh.layer_dense[li] + sh.layer_expert[li]);
      if (autocast_) {
        add_autocast(ops, autocast_->layer[li], sh.layer_dense[li] + sh.layer_expert[li]);
        add_autocast_stream(ops, layer, 1);  // after the weight cast
      }
      SP_RETURN_IF_ERROR(split(ops, &layer_ops_[kind]));
      layer_saved_[kind] =
          models::layer_saved_bytes(m_, l_, in_.seq_len, layer, ops, o_.memory, o_.ops);
    }
    return Status::ok();
  }

  // FrameworkTiming::grad_accum_bytes: the separate kernel that adds each micro-batch's weight
  // gradients of `params` local parameters into the accumulation buffer.
  void add_grad_accumulation(std::vector<models::Op>& ops, int64_t params) const {
    if (o_.timing.grad_accum_bytes <= 0 || params <= 0) return;
    ops.push_back(models::grad_accumulation(params, o_.timing.grad_accum_bytes));
  }

  // models::autocast_stream_ops of `layer` (-1: the head): forward ops from index `at`, backward
  // ops at the end.
  void add_autocast_stream(std::vector<models::Op>& ops, int64_t layer, size_t at) const {
    for (models::Op& op : models::autocast_stream_ops(m_, l_, in_.seq_len, layer)) {
      if (op.pass == models::Pass::kForward) {
        ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at++), std::move(op));
      } else {
        ops.push_back(std::move(op));
      }
    }
  }

  // models::runs_autocast: the forward's weight casts before the block's first op, their
  // backward and autograd's accumulation after its last (models::autocast_weight_ops).
  static void add_autocast(std::vector<models::Op>& ops, int64_t cast_params, int64_t params) {
    for (models::Op& op : models::autocast_weight_ops(cast_params, params)) {
      if (op.pass == models::Pass::kForward) {
        ops.insert(ops.begin(), std::move(op));
      } else {
        ops.push_back(std::move(op));
      }
    }
  }

  // Splits an operator list into forward / backward / weight lists, timed. CP ring transfers are
  // put before the attention kernel they overlap (the backward list has them after it).
  Status split(const std::vector<models::Op>& ops, ChunkOps* out) {
    int chunks = 1;  // the splits this GEMM runs in (models::CommShape::partner_chunks)
    for (const auto& op : ops) {
      SP_ASSIGN_OR_RETURN(Timed t, time_op(op, chunks));
      chunks = op.comm() != nullptr && op.comm()->overlap_next ? op.comm()->partner_chunks : 1;
      const std::optional<PassKind> pass = chunk_pass(op.pass, split_weight_);
      if (!pass) continue;  // the step's
      (*pass == PassKind::kForward          ? out->forward
       : *pass == PassKind::kBackwardWeight ? out->weight
                                            : out->backward)
          .push_back(t);
    }
    return Status::ok();
  }

  Status build_chunk(int g, int first_layer, int layers) {
    ChunkOps& c = chunks_[g];
    std::vector<models::Op> head, embed;
    ChunkOps e, h;
    if (first_chunk(g)) {
      embed = lists_.embedding;
      add_grad_accumulation(embed, plan_.params().first_extra);
      if (autocast_) {
        for (models::Op& op : models::autocast_embedding_ops(plan_.params().first_extra))
          embed.push_back(std::move(op));
      }
      SP_RETURN_IF_ERROR(split(embed, &e));
      c.saved += models::total_saved(embed);
      c.embed_params = plan_.params().first_extra;
      c.embed_tensors = plan_.params().first_tensors;
    }
    if (last_chunk(g)) {
      head = lists_.head;
      add_grad_accumulation(head, plan_.head_params() + plan_.params().mtp_expert);
      if (autocast_) {
        add_autocast(head, autocast_->head, plan_.head_params());
        add_autocast_stream(head, -1, 1);
      }
      SP_RETURN_IF_ERROR(split(head, &h));
      c.saved += models::total_saved(head);
      c.extra_expert_params = plan_.params().mtp_expert;
      c.head_params = plan_.head_params();
      c.head_tensors = plan_.params().last_tensors;
      if (plan_.embedding_copy_on_last) c.head_tensors.push_back(plan_.tied_shard);
    }
    auto append = [](std::vector<Timed>& dst, const std::vector<Timed>& src) {
      dst.insert(dst.end(), src.begin(), src.end());
    };
    append(c.forward, e.forward);
    for (int i = 0; i < layers; ++i) {
      const int kind = m_.layer_kind(first_layer + i);
      c.forward_bounds.push_back(c.forward.size());
      append(c.forward, layer_ops_[kind].forward);
      c.saved += layer_saved_[kind];
    }
    c.forward_bounds.push_back(c.forward.size());
    append(c.forward, h.forward);
    // Backward in reverse layer order; the weight pass (ZB-H1) likewise.
    append(c.backward, h.backward);
    append(c.weight, h.weight);
    c.backward_bounds.push_back(c.backward.size());
    c.weight_bounds.push_back(c.weight.size());
    for (int i = layers - 1; i >= 0; --i) {
      const int64_t layer = first_layer + i;
      const int kind = m_.layer_kind(layer);
      append(c.backward, layer_ops_[kind].backward);
      append(c.weight, layer_ops_[kind].weight);
      c.backward_bounds.push_back(c.backward.size());
      c.weight_bounds.push_back(c.weight.size());
      const auto li = static_cast<size_t>(layer);
      c.layer_dense_params.push_back(plan_.params().layer_dense[li]);
      c.layer_expert_params.push_back(plan_.params().layer_expert[li]);
      if (o_.timing.zero3_per_tensor_sync)
        c.layer_tensor_params.push_back(plan_.params().layer_tensors[li]);
    }
    append(c.backward, e.backward);
    append(c.weight, e.weight);
    charge_stage(c, plan_.chunks[static_cast<size_t>(g)].stage);
    return Status::ok();
  }

  // Re-times a chunk's collectives on its own stage's groups (hw::LayoutPlacement::stages) where
  // they are placed otherwise than the layout-wide worst group the lists were timed on.
  void charge_stage(ChunkOps& c, int stage) {
    if (placement_.stages.empty()) return;
    for (std::vector<Timed>* list : {&c.forward, &c.backward, &c.weight}) {
      for (Timed& t : *list) {
        if (t.comm < 0 || t.group == GroupKind::kPp) continue;
        const auto& gp = placement_.at(t.group, stage);
        if (gp == placement_[t.group]) continue;
        const models::CommShape& shape = comm_shapes_[static_cast<size_t>(t.comm)];
        if (shape.group_size > 1) t.duration = comm_time(*in_.collectives, shape, gp);
        t.link = gp.nodes > 1 ? 1 : 0;
      }
    }
  }

  // Pipeline transfers, DP and ZeRO collectives, the gradient norm and the optimizer.
  Status time_boundaries() {
    const auto& cm = *in_.collectives;
    // The layer boundary activation (PassPlan::p2p_bytes), and the TP all-gather after each
    // receive where the sender scattered it over TP (FrameworkTiming::p2p_scatter_gather).
    p2p_bytes_ = plan_.p2p_bytes;
    p2p_gather_.reset();
    if (plan_.p2p_gather_bytes > 0) {
      const int64_t bytes = plan_.p2p_gather_bytes;
      p2p_gather_ =
          Timed{.kind = OpKind::kCollective,
                .stream = StreamKind::kTp,
                .collective = CollectiveOp::kAllGather,
                .group = GroupKind::kTp,
                .duration = collective_time(CollectiveOp::kAllGather, bytes, GroupKind::kTp),
                .host = Duration{},
                .bytes = bytes,
                .label = prog_.add_label("pp.gather",
                                         CollectivePayload{CollectiveOp::kAllGather, GroupKind::kTp,
                                                           placement_[GroupKind::kTp].size, 1})};
    }
    p2p_time_ = l_.pp > 1 ? cm.estimate(CollectiveOp::kSendRecv, Bytes(p2p_bytes_),
                                        placement_[GroupKind::kPp])
                                .time
                          : Duration::zero();
    p2p_link_ = placement_[GroupKind::kPp].nodes > 1 ? 1 : 0;
    // One label per peer stage: a transfer's payload names the stage it exchanges with.
    p2p_labels_.clear();
    for (int s = 0; s < l_.pp; ++s)
      p2p_labels_.push_back(prog_.add_label("pp.p2p", TransferPayload{s}));
    return Status::ok();
  }

  Duration collective_time(CollectiveOp op, int64_t bytes, GroupKind g) const {
    if (placement_[g].size <= 1 || bytes <= 0) return Duration::zero();
    return in_.collectives->estimate(op, Bytes(bytes), placement_[g]).time;
  }

  // --- emission ---------------------------------------------------------------------------------

  uint32_t match_for(int rank, GroupKind g, bool world = false) {
    if (world) {
      // One instance per call site across every simulated rank: keyed by the rank's call count.
      return matches_.instance({.site = MatchKey::Site::kWorld, .seq = world_seq_[rank]++},
                               prog_.num_ranks(), prog_);
    }
    if (!o_.all_ranks || group_size_[static_cast<int>(g)] <= 1) return prog_.add_match(1);
    const int k = static_cast<int>(g);
    return matches_.instance({.site = MatchKey::Site::kGroup,
                              .kind = g,
                              .group = group_of_[k][global_of_[rank]],
                              .seq = coll_seq_[static_cast<size_t>(rank) * kNumGroupKinds + k]++},
                             group_size_[k], prog_);
  }

  // The send/receive pair carrying micro-batch `mb` into global chunk `g` (dir 0: the activation
  // forward, 1: its gradient backward) in this rank's pipeline.
  uint32_t p2p_match(int rank, int dir, int g, int mb) {
    const int64_t pipeline =
        o_.all_ranks ? group_of_[static_cast<int>(GroupKind::kPp)][global_of_[rank]] : 0;
    return matches_.instance({.site = MatchKey::Site::kTransfer,
                              .backward = dir != 0,
                              .group = pipeline,
                              .chunk = g,
                              .seq = mb},
                             2, prog_);
  }

  // Places `t` after `a` and `b` (kNoOp: none). Its host issue op, if any, is a third dependency:
  // three at most, the size of the array they are gathered in.
  OpId add(int rank, const Timed& t, int mb, int chunk, OpId a, OpId b = kNoOp) {
    OpSpec s{.kind = t.kind,
             .stream = t.stream,
             .phase = t.phase,
             .duration = t.duration,
             .bytes = t.bytes,
             .label = t.label,
             .collective = t.collective,
             .link = t.link,
             .microbatch = mb,
             .chunk = chunk};
    if (t.kind == OpKind::kCollective) s.match = match_for(rank, t.group);
    std::array<OpId, 3> d{};
    size_t n = 0;
    for (OpId x : {a, b}) {
      if (x != kNoOp) d[n++] = x;
    }
    if (t.host > Duration::zero()) d[n++] = issue(rank, t.host, t.phase, mb, chunk);
    return prog_.add_op(rank, s, std::span<const OpId>(d.data(), n));
  }

  // The CPU issuing an op (HostIssue): `cost` of host time on the rank's host stream, after the
  // ops issued before it (stream order) and after the synchronizing point it must wait for.
  OpId issue(int rank, Duration cost, Phase phase, int mb, int chunk) {
    if (host_label_ == kNoMatch) host_label_ = prog_.add_label("host.issue", HostPayload{});
    const OpId wait = host_wait_;
    host_wait_ = kNoOp;
    return prog_.add_op(rank,
                        {.kind = OpKind::kHost,
                         .stream = StreamKind::kHost,
                         .phase = phase,
                         .duration = cost,
                         .label = host_label_,
                         .microbatch = mb,
                         .chunk = chunk},
                        std::span<const OpId>(&wait, wait != kNoOp ? 1 : 0));
  }

  // Places a list of ops as a chain after `prev`; returns the last op. A transfer marked
  // overlap_next runs beside the next compute op, and the op after that waits for both.
  //
  // With BuildOptions::merge_compute, a run of consecutive compute ops of the chain becomes one op
  // lasting the sum of their durations (its first op's label). Inside a chain each op's only
  // consumer is the next one and nothing else sits between them on the compute stream, so op i+1
  // starts exactly when op i ends; the run's end, the only time anything else waits for, is
  // unchanged, as is every other op's start and end. A compute op that an overlapped transfer
  // runs beside (pending) starts a new run, since the transfer waits for the op before it. The
  // join after that op is left out too: the op after it waits for both instead (`joined`), which
  // starts it at the same tick (a join takes no time and nothing else waits for it).
  OpId chain(int rank, const std::vector<Timed>& ops, size_t begin, size_t end, OpId prev, int mb,
             int chunk) {
    OpId pending = kNoOp;        // an overlapped transfer not yet joined
    OpId joined = kNoOp;         // a transfer the next op also waits for (its join left out)
    const Timed* run = nullptr;  // first op of the compute run being merged
    Duration run_time;
    Phase run_phase = Phase::kOther;
    auto flush = [&] {
      if (run == nullptr) return;
      Timed merged = *run;
      merged.duration = run_time;
      merged.phase = run_phase;
      prev = add(rank, merged, mb, chunk, prev, joined);
      joined = kNoOp;
      run = nullptr;
    };
    for (size_t i = begin; i < end; ++i) {
      const Timed& t = ops[i];
      // autograd's AccumulateGrad steals the first micro-batch's gradient (pp = 1 here: the
      // chunk's first micro-batch is 0).
      if (t.skips_first_microbatch && mb == 0) continue;
      if (o_.merge_compute && pending == kNoOp && t.kind == OpKind::kCompute && !t.overlap_next &&
          t.host == Duration::zero()) {
        if (run != nullptr && merge_class(run_phase) == merge_class(t.phase)) {
          run_time += t.duration;
          if (run_phase != t.phase) run_phase = Phase::kBackward;
          continue;
        }
        flush();
        run = &t;
        run_time = t.duration;
        run_phase = t.phase;
        continue;
      }
      flush();
      if (t.overlap_next) {
        // `joined` stays: the op this transfer runs beside waits for an earlier transfer too, as
        // the join op of the unmerged chain makes it.
        pending = add(rank, t, mb, chunk, prev, joined);
        continue;
      }
      const OpId op = add(rank, t, mb, chunk, prev, joined);
      joined = kNoOp;
      if (pending != kNoOp && t.kind == OpKind::kCompute && o_.merge_compute) {
        prev = op;
        joined = pending;
        pending = kNoOp;
      } else if (pending != kNoOp && t.kind == OpKind::kCompute) {
        // Join: a no-time op on the compute stream that waits for the transfer too.
        prev = prog_.add_op(rank,
                            {.kind = OpKind::kCompute,
                             .phase = t.phase,
                             .label = join_label(),
                             .microbatch = mb,
                             .chunk = chunk},
                            {op, pending});
        pending = kNoOp;
      } else {
        prev = op;
      }
    }
    flush();
    if (joined != kNoOp) {
      // The chain ends at the transfer's partner: join them for the caller's single successor.
      prev = prog_.add_op(rank,
                          {.kind = OpKind::kCompute,
                           .phase = ops[end - 1].phase,
                           .label = join_label(),
                           .microbatch = mb,
                           .chunk = chunk},
                          {prev, joined});
    }
    return prev;
  }

  // Phases that the breakdown (sim/metrics.h) tells apart: compute ops of different classes are
  // never merged. Forward, backward and its input/weight parts count alike there (a merged run of
  // mixed backward parts is labelled kBackward); recompute and the optimizer do not.
  static int merge_class(Phase p) {
    if (p == Phase::kRecompute) return 1;
    if (p == Phase::kOptimizer || p == Phase::kOther) return 2;
    return 0;
  }

  uint32_t join_label() {
    if (join_label_ == kNoMatch) join_label_ = prog_.add_label("cp.join", SyncPayload{});
    return join_label_;
  }

  // DP gradient reduction of the parameters in `params` (one entry per layer, backward order),
  // called after the layer's last gradient op `after_layer[i]`.
  // `tensors` (ZeRO-3 with FrameworkTiming::zero3_per_tensor_sync, one layer): the layer's
  // reduce-scatter is one collective per tensor.
  void reduce_buckets(int rank, const std::vector<int64_t>& dense,
                      const std::vector<int64_t>& expert, int64_t extra, int64_t extra_expert,
                      const std::vector<OpId>& after_layer, OpId last, int chunk,
                      bool one_bucket = false, const std::vector<int64_t>* tensors = nullptr) {
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
      dp_ops_.push_back(add(rank, t, -1, chunk, after));
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
  hw::GroupPlacement pipeline_pair() const {
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
  void tied_embedding_reduce(int rank, int stage, OpId after) {
    if (!plan_.embedding_copy_on_last) return;
    if (stage != 0 && stage != l_.pp - 1) return;
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
    dp_ops_.push_back(add(rank, t, -1, 0, after));
  }

  // One collective per tensor, one after another, each with the framework's per-call host time
  // (FrameworkTiming::zero3_per_tensor_sync) and the copies of its list-form call: one per rank of
  // the group, each moving the rank's shard (read and written).
  Duration per_tensor_time(CollectiveOp op, const std::vector<int64_t>& tensors, int bytes_per,
                           GroupKind g) const {
    const int64_t ranks = placement_[g].size;
    Duration d{};
    for (int64_t n : tensors) {
      d += collective_time(op, n * bytes_per, g) + o_.timing.zero3_call_overhead;
      if (o_.timing.zero3_list_copies && ranks > 1) {
        const int64_t shard = (n + ranks - 1) / ranks * bytes_per;
        d += in_.kernels->memory_bound(MemoryBoundShape{Bytes(2 * shard), Flops(0)}) *
             static_cast<double>(ranks);
        // _allgather_param gathers into a fresh torch.zeros buffer of the whole tensor.
        if (op == CollectiveOp::kAllGather)
          d += in_.kernels->memory_bound(MemoryBoundShape{Bytes(shard * ranks), Flops(0)});
      }
    }
    return d;
  }

  // ZeRO-3 parameter all-gather of one layer (bf16), on the DP stream, over `group`: the dense
  // parameters over DP x CP, the experts' over the expert-data-parallel group they are sharded
  // on; `tensors`: one collective per tensor (FrameworkTiming::zero3_per_tensor_sync).
  OpId gather_layer(int rank, int64_t params, const std::vector<int64_t>* tensors, OpId after,
                    int mb, int chunk, Phase phase, GroupKind group = GroupKind::kDpCp) {
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
    return add(rank, t, mb, chunk, after);
  }

  // One pass of one chunk on one rank; returns its last compute op.
  OpId emit_pass(int rank, const Pass& p, int stage, OpId prev, bool send_out = true) {
    const int g = global_chunk(p.chunk, stage);
    if (split_weight_ && p.kind == PassKind::kBackward) {
      // A whole backward where the chunk lists are split (DualPipe without zero bubble): the
      // input-gradient part, then the weight part at once; the gradient goes to the previous
      // stage only after both, as autograd returns it.
      const OpId input =
          emit_pass(rank, {PassKind::kBackwardInput, p.microbatch, p.chunk}, stage, prev, false);
      const OpId end =
          emit_pass(rank, {PassKind::kBackwardWeight, p.microbatch, p.chunk}, stage, input, false);
      if (remote(g, g - 1)) emit_send(rank, false, g - 1, p, end);
      return end;
    }
    const ChunkOps& c = chunks_[g];
    const bool fwd = p.kind == PassKind::kForward;
    const bool weight = p.kind == PassKind::kBackwardWeight;
    const OpId start = begin_pass(rank, p, g, prev);
    OpId end;
    const std::vector<Timed>& ops = fwd ? c.forward : weight ? c.weight : c.backward;
    const bool reduce_here = (split_weight_ ? weight : !fwd) && (reduces(p) || l_.zero >= 3);
    // BuildOptions::param_gather: a chunk's first forward on this rank gathers the parameters
    // the last step updated, block by block, as a ZeRO-3 forward does.
    const bool gathers_params = fwd && o_.param_gather != ParamGather::kAfterStep &&
                                (l_.zero == 1 || l_.zero == 2) &&
                                params_gathered_.insert({rank, p.chunk}).second;
    if ((l_.zero >= 3 && !weight) || gathers_params) {
      end = emit_zero3(rank, g, ops, start, p.microbatch, p.chunk, fwd,
                       gathers_params ? o_.param_gather : ParamGather::kFirstForward);
    } else if (reduce_here) {
      end = emit_with_buckets(rank, c, ops, weight ? c.weight_bounds : c.backward_bounds, start,
                              p.microbatch, p.chunk);
    } else {
      end = chain(rank, ops, 0, ops.size(), start, p.microbatch, p.chunk);
    }
    if (l_.zero >= 3 && reduce_here && weight) {
      // ZB-H1 with ZeRO-3: the weight pass holds the gradients; reduce them after it.
      reduce_buckets(rank, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                     c.extra_expert_params, std::vector<OpId>(c.layer_dense_params.size(), end),
                     end, p.chunk);
    }
    finish_pass(rank, p, g, end, send_out);
    return end;
  }

  // Whether pass `p` is the one after which its chunk's gradients are complete and the DP
  // buckets are reduced as they close (the last micro-batch of the chunk, with BuildOptions::
  // dp_overlap).
  bool reduces(const Pass& p) const {
    const bool every = reduces_every_microbatch(o_.timing, l_);
    return p.kind != PassKind::kForward && (every || p.microbatch == last_microbatch(p.chunk)) &&
           o_.timing.dp_overlap;
  }

  // A pass's start: a no-time op after the previous op, the input from the neighbouring chunk,
  // the micro-batch's earlier passes and a blocking send; a forward allocates the activations
  // it keeps.
  OpId begin_pass(int rank, const Pass& p, int g, OpId prev) {
    const ChunkOps& c = chunks_[g];
    const bool fwd = p.kind == PassKind::kForward;
    const bool weight = p.kind == PassKind::kBackwardWeight;
    const int mb = p.microbatch;
    const Phase phase = fwd ? Phase::kForward : weight ? Phase::kBackwardWeight : Phase::kBackward;
    const int from = fwd ? g - 1 : g + 1;
    // One slot per source: the previous op, the input, this micro-batch's forward and backward of
    // this chunk, a blocking send.
    std::array<OpId, 5> deps = {prev, kNoOp, kNoOp, kNoOp, kNoOp};
    if (!weight && connected(g, from)) {
      if (remote(g, from)) {
        OpSpec r{.kind = OpKind::kRecv,
                 .stream = StreamKind::kPpRecv,
                 .phase = phase,
                 .bytes = p2p_bytes_,
                 .match = p2p_match(rank, fwd ? 0 : 1, g, mb),
                 .label = p2p_labels_[static_cast<size_t>(stage_of(from))],
                 .collective = CollectiveOp::kSendRecv,
                 .microbatch = mb,
                 .chunk = p.chunk};
        const OpId recv = prog_.add_op(rank, r);
        if (p2p_gather_) {
          Timed gather = *p2p_gather_;
          gather.phase = phase;
          deps[1] = add(rank, gather, mb, p.chunk, recv);
        } else {
          deps[1] = recv;
        }
        // nanotron-style blocking receive: the CPU waits for it before issuing the pass.
        if (o_.host.blocking_recv && o_.host.per_launch > Duration::zero()) host_wait_ = recv;
      } else {
        deps[1] = (fwd ? fwd_end_ : bwd_end_)[pass_index(from, mb)];
      }
    }
    if (!fwd) deps[2] = fwd_end_[pass_index(g, mb)];
    if (weight) deps[3] = bwd_end_[pass_index(g, mb)];
    deps[4] = blocking_send_;  // BuildOptions::blocking_p2p: the previous pass's send
    blocking_send_ = kNoOp;
    // A no-time op gathers the dependencies so that the chain has one predecessor.
    const OpId start = prog_.add_op(rank,
                                    {.kind = OpKind::kCompute,
                                     .phase = phase,
                                     .label = start_label_,
                                     .microbatch = mb,
                                     .chunk = p.chunk},
                                    unique_deps(deps));
    if (fwd && c.saved.value() > 0) {
      prog_.add_op(rank,
                   {.kind = OpKind::kAlloc,
                    .stream = StreamKind::kCompute,
                    .phase = phase,
                    .bytes = c.saved.value(),
                    .label = act_label_,
                    .microbatch = mb,
                    .chunk = p.chunk},
                   {start});
    }
    return start;
  }

  // After a pass's last op `end`: where later passes find it, the release of the activations
  // once the backward no longer needs them, and (unless `send_out` is false) the send to the
  // neighbouring chunk. A whole backward (kBackward) of split lists stands for both parts.
  void finish_pass(int rank, const Pass& p, int g, OpId end, bool send_out) {
    const ChunkOps& c = chunks_[g];
    const bool fwd = p.kind == PassKind::kForward;
    const bool weight = p.kind == PassKind::kBackwardWeight;
    const bool whole = p.kind == PassKind::kBackward;
    const size_t at = pass_index(g, p.microbatch);
    (fwd ? fwd_end_ : weight ? w_end_ : bwd_end_)[at] = end;
    if (whole && split_weight_) w_end_[at] = end;
    const bool releases = split_weight_ ? (weight || whole) : !fwd;
    if (releases && c.saved.value() > 0) {
      prog_.add_op(rank,
                   {.kind = OpKind::kFree,
                    .stream = StreamKind::kCompute,
                    .phase = fwd ? Phase::kForward : Phase::kBackward,
                    .bytes = c.saved.value(),
                    .label = act_label_,
                    .microbatch = p.microbatch,
                    .chunk = p.chunk},
                   {end});
    }
    const int to = fwd ? g + 1 : g - 1;
    if (send_out && !weight && remote(g, to)) {
      if (p.defer_send) {
        deferred_sends_.push_back({fwd, to, p});  // issued after the rank's next pass
      } else {
        emit_send(rank, fwd, to, p, end);
      }
    }
  }

  // DualPipe's forward-backward pair (Pass::with_next): the two passes' ops share the compute
  // stream, which switches to the other pass after every collective, so that each pass's
  // communication (EP all-to-alls, TP collectives) runs beside the other's compute, as the
  // reference's overlapped_forward_backward does. A backward that reduces its chunk's gradients
  // (the last micro-batch) runs after the forward instead. Returns the op that ends both.
  OpId emit_pair(int rank, const Pass& f, const Pass& b, int stage, OpId prev) {
    const int gf = global_chunk(f.chunk, stage), gb = global_chunk(b.chunk, stage);
    if (b.kind != PassKind::kBackward || reduces(b) || l_.zero >= 3) {
      prev = emit_pass(rank, f, stage, prev);
      return emit_pass(rank, b, stage, prev);
    }
    const OpId fs = begin_pass(rank, f, gf, prev);
    const OpId bs = begin_pass(rank, b, gb, prev);
    const ChunkOps& cb = chunks_[gb];
    pair_ops_.assign(cb.backward.begin(), cb.backward.end());
    if (split_weight_) pair_ops_.insert(pair_ops_.end(), cb.weight.begin(), cb.weight.end());
    const std::vector<Timed>& fo = chunks_[gf].forward;
    auto next_switch = [](const std::vector<Timed>& ops, size_t from) {
      for (size_t k = from; k < ops.size(); ++k) {
        if (ops[k].kind == OpKind::kCollective && !ops[k].overlap_next) return k + 1;
      }
      return ops.size();
    };
    OpId fe = fs, be = bs;
    size_t i = 0, j = 0;
    for (bool on_f = true; i < fo.size() || j < pair_ops_.size(); on_f = !on_f) {
      if (on_f && i < fo.size()) {
        const size_t e = next_switch(fo, i);
        fe = chain(rank, fo, i, e, fe, f.microbatch, f.chunk);
        i = e;
      } else if (!on_f && j < pair_ops_.size()) {
        const size_t e = next_switch(pair_ops_, j);
        be = chain(rank, pair_ops_, j, e, be, b.microbatch, b.chunk);
        j = e;
      }
    }
    finish_pass(rank, f, gf, fe, true);
    finish_pass(rank, b, gb, be, true);
    return prog_.add_op(rank,
                        {.kind = OpKind::kCompute,
                         .phase = Phase::kBackward,
                         .label = start_label_,
                         .microbatch = b.microbatch,
                         .chunk = b.chunk},
                        std::span<const OpId>(std::array<OpId, 2>{fe, be}));
  }

  // The activation (forward) or its gradient (backward) of pass `p` to global chunk `to`.
  void emit_send(int rank, bool fwd, int to, const Pass& p, OpId end) {
    OpSpec s{.kind = OpKind::kSend,
             .stream = StreamKind::kPpSend,
             .phase = fwd ? Phase::kForward : Phase::kBackward,
             .duration = p2p_time_,
             .bytes = p2p_bytes_,
             .match = p2p_match(rank, fwd ? 0 : 1, to, p.microbatch),
             .label = p2p_labels_[static_cast<size_t>(stage_of(to))],
             .collective = CollectiveOp::kSendRecv,
             .link = p2p_link_,
             .microbatch = p.microbatch,
             .chunk = p.chunk};
    const OpId send = prog_.add_op(rank, s, {end});
    if (o_.blocking_p2p) blocking_send_ = send;
  }

  // The dependencies in `v` without kNoOp and duplicates, ascending, compacted to its front; no
  // heap allocation. Callers give each source of a dependency its own slot of the array, so there
  // is no count to overflow.
  template <size_t N>
  static std::span<const OpId> unique_deps(std::array<OpId, N>& v) {
    size_t k = 0;
    for (size_t i = 0; i < N; ++i) {
      if (v[i] == kNoOp) continue;
      size_t j = k;  // insertion sort: a handful of entries
      while (j > 0 && v[j - 1] > v[i]) --j;
      if (j > 0 && v[j - 1] == v[i]) continue;
      const OpId x = v[i];
      for (size_t m = k; m > j; --m) v[m] = v[m - 1];
      v[j] = x;
      ++k;
    }
    return {v.data(), k};
  }

  static std::vector<OpId> dedup(std::vector<OpId> v) {
    v.erase(std::remove(v.begin(), v.end(), kNoOp), v.end());
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  }

  // The backward of the last micro-batch: the chain with a DP bucket issued after each layer.
  // `bounds`: the list's per-layer blocks (ChunkOps::backward_bounds or weight_bounds).
  OpId emit_with_buckets(int rank, const ChunkOps& c, const std::vector<Timed>& ops,
                         const std::vector<size_t>& bounds, OpId start, int mb, int chunk) {
    const size_t layers = c.layer_dense_params.size();
    const std::vector<int64_t> flatten = zero_flatten_buckets(c);
    // nanotron ZeRO-1/2: the hook flattens a bucket on the compute stream before reducing it.
    auto flatten_after = [&](size_t i, OpId p) {
      if (flatten.empty() || flatten[i] <= 0) return p;
      const int dp = placement_[GroupKind::kDpCp].size;
      return add(rank,
                 copy_op("zero.grad_flatten", 4 * o_.timing.dp_grad_bytes * flatten[i], 2 * dp,
                         split_weight_ ? Phase::kBackwardWeight : Phase::kBackwardInput),
                 mb, chunk, p);
    };
    std::vector<OpId> after(layers);
    OpId prev = start;
    size_t pos = bounds[0];
    prev = chain(rank, ops, 0, pos, prev, mb, chunk);
    for (size_t i = 0; i < layers; ++i) {
      prev = chain(rank, ops, pos, bounds[i + 1], prev, mb, chunk);
      prev = flatten_after(i, prev);
      after[i] = prev;
      pos = bounds[i + 1];
    }
    prev = chain(rank, ops, pos, ops.size(), prev, mb, chunk);
    prev = flatten_after(layers, prev);
    reduce_buckets(rank, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                   c.extra_expert_params, after, prev, chunk);
    return prev;
  }

  // Gradient elements of the DP bucket closed after each layer of chunk `c` (index i < layers)
  // and at the end of its backward (index layers), as reduce_buckets forms them, when nanotron's
  // ZeRO-1/2 flatten copies apply (FrameworkTiming::nanotron_zero_copies); empty otherwise.
  std::vector<int64_t> zero_flatten_buckets(const ChunkOps& c) const {
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

  // A memory-bound copy of `bytes` (read plus written) that the framework issues as `launches`
  // kernels: one GPU op, `launches` × HostIssue::per_launch of CPU time to issue it.
  Timed copy_op(const std::string& name, int64_t bytes, int64_t launches, Phase phase) {
    Timed t;
    t.phase = phase;
    t.duration = in_.kernels->memory_bound(MemoryBoundShape{Bytes(bytes), Flops(0), MemOp::kCopy});
    t.host = o_.host.per_launch * static_cast<double>(launches);
    t.bytes = bytes;
    t.label = prog_.add_label(
        name, KernelPayload{KernelKind::kMemoryBound,
                            MemoryBoundShape{Bytes(bytes), Flops(0), MemOp::kCopy}});
    return t;
  }

  // Parameter tensors nanotron's optimizer sees on `stage`: per Llama decoder layer the fused
  // qkv_proj, o_proj, fused gate_up_proj, down_proj and two RMSNorm weights
  // (src/nanotron/models/llama.py); the token embedding on the first chunk; the final norm and
  // the LM head on the last (one tensor with the embedding when both are on one stage and tied).
  int64_t nanotron_param_tensors(int stage) const {
    int64_t n = 0;
    for (int v = 0; v < local_chunks(); ++v) {
      const int g = global_chunk(v, stage);
      n += 6 * static_cast<int64_t>(plan_.chunks[g].layers);
      if (first_chunk(g)) n += 1;
      if (last_chunk(g)) n += (m_.tied_embeddings && stage_of(g) == stage_of(0)) ? 1 : 2;
    }
    return n;
  }

  // The plan's chunk-to-stage map (PassPlan, from core/layout.h): chunks per rank, the global
  // chunk a rank's local chunk is, and the stage a global chunk runs on.
  int local_chunks() const { return plan_.local_chunks; }
  int global_chunk(int c, int stage) const { return plan_.global_chunk(stage, c); }
  int stage_of(int g) const { return plan_.chunks[static_cast<size_t>(g)].stage; }
  // Whether data between neighbouring global chunks g and h crosses ranks (a send and a receive);
  // in a V, rank pp-1 passes chunk pp-1's output to chunk pp itself.
  bool remote(int g, int h) const { return plan_.remote(g, h); }
  // Whether global chunk g holds the embedding (first) or the LM head (last) of its pipeline.
  bool first_chunk(int g) const { return plan_.chunks[static_cast<size_t>(g)].embedding; }
  bool last_chunk(int g) const { return plan_.chunks[static_cast<size_t>(g)].head; }
  // Whether data flows between global chunks g and h (the same pipeline, h in range).
  bool connected(int g, int h) const { return plan_.connected(g, h); }
  // The last micro-batch that local chunk c runs.
  int last_microbatch(int c) const { return plan_.last_microbatch(c); }

  // ZeRO-3 forward or backward: gather each block's parameters (prefetching one block ahead)
  // before its ops, the blocks being the chunk's layers and, where the chunk holds them, the
  // embedding and the final norm with the LM head (FSDP wraps them as units of their own); in the
  // backward, reduce-scatter each layer's gradients after its ops.
  // `when`: kFirstForward as ZeRO-3 runs every pass; for ZeRO-1/2's overlapped parameter gather
  // (BuildOptions::param_gather) the first block's gather, or every block's (kAligned), is
  // dispatched when the step starts instead of waiting for the pass.
  OpId emit_zero3(int rank, int g, const std::vector<Timed>& ops, OpId start, int mb, int chunk,
                  bool fwd, ParamGather when = ParamGather::kFirstForward) {
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
        if (b.dense > 0) done = gather_layer(rank, b.dense, b.tensors, after, mb, chunk, phase);
        if (b.expert > 0)
          done = gather_layer(rank, b.expert, nullptr, after, mb, chunk, phase, GroupKind::kEdp);
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
        block_start = prog_.add_op(rank,
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
          block_start = add(rank, copy, mb, chunk, block_start);
        }
      } else if (!sync && k + 1 < blocks.size() && !issued[k + 1]) {
        // Nothing to wait for here: the next block's gather starts with this one.
        issued[k + 1] = true;
        gathered[k + 1] = gather(k + 1, prev);
      }
      prev = chain(rank, ops, b.begin, b.end, block_start, mb, chunk);
      if (k == 0 || k > layers) continue;
      const size_t i = k - 1;
      after[i] = prev;
      if (sync && reduce) {
        reduce_buckets(rank, {c.layer_dense_params[i]}, {c.layer_expert_params[i]}, 0, 0, {prev},
                       prev, chunk, /*one_bucket=*/false, blocks[k].tensors);
      }
    }
    if (reduce) {
      if (sync) {
        reduce_buckets(rank, {}, {}, c.extra_dense_params(), c.extra_expert_params, {}, prev,
                       chunk);
      } else {
        reduce_buckets(rank, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                       c.extra_expert_params, after, prev, chunk);
      }
    }
    return prev;
  }

  Status emit_rank(int rank, int64_t global, int stage) {
    global_of_.resize(prog_.num_ranks());
    global_of_[rank] = static_cast<int>(global);
    world_seq_.resize(prog_.num_ranks(), 0);
    coll_seq_.resize(static_cast<size_t>(prog_.num_ranks()) * kNumGroupKinds, 0);
    start_label_ = prog_.add_label("pass.start", SyncPayload{});
    act_label_ = prog_.add_label("activations", ActivationsPayload{});
    host_wait_ = kNoOp;
    blocking_send_ = kNoOp;
    const size_t passes = chunks_.size() * static_cast<size_t>(l_.num_microbatches());
    fwd_end_.assign(passes, kNoOp);
    bwd_end_.assign(passes, kNoOp);
    w_end_.assign(passes, kNoOp);
    dp_ops_.clear();
    OpId prev = kNoOp;
    const std::vector<Pass>& order = plan_.order[stage];
    deferred_sends_.clear();
    for (size_t i = 0; i < order.size(); ++i) {
      const Pass& p = order[i];
      // Sends held back by the previous pass (Pass::defer_send) go out after this one.
      const std::vector<DeferredSend> due = std::exchange(deferred_sends_, {});
      if (p.with_next && o_.overlap_pairs && i + 1 < order.size()) {
        prev = emit_pair(rank, p, order[++i], stage, prev);
      } else {
        prev = emit_pass(rank, p, stage, prev);
      }
      for (const DeferredSend& d : due) emit_send(rank, d.fwd, d.to, d.pass, prev);
    }
    for (const DeferredSend& d : deferred_sends_) emit_send(rank, d.fwd, d.to, d.pass, prev);
    if (dualpipe_) emit_mirror_sync(rank, stage);  // DualPipeV keeps one copy: nothing to sync
    if (!o_.timing.dp_overlap && l_.zero < 3) {
      // FrameworkTiming::dp_overlap off: each chunk's whole gradient buffer after the last
      // backward.
      for (int v = 0; v < local_chunks(); ++v) {
        const ChunkOps& c = chunks_[global_chunk(v, stage)];
        reduce_buckets(rank, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                       c.extra_expert_params, std::vector<OpId>(c.layer_dense_params.size(), prev),
                       prev, v,
                       /*one_bucket=*/true);
      }
    }
    if (l_.zero < 3) tied_embedding_reduce(rank, stage, prev);
    return emit_step(rank, stage, prev);
  }

  // The step, after the rank's last pass `prev` and every gradient reduction (dp_ops_): the
  // gradient-norm all-reduce over all ranks, the optimizer over the stage's parameters
  // (PassPlan::stage_dense_params, ZeRO-sharded) and ZeRO-1/2's parameter all-gather with its
  // copies.
  Status emit_step(int rank, int stage, OpId prev) {
    std::vector<OpId> deps = dp_ops_;
    deps.push_back(prev);
    deps.push_back(blocking_send_);
    blocking_send_ = kNoOp;
    const OpId ready = prog_.add_op(
        rank, {.kind = OpKind::kCompute, .phase = Phase::kOptimizer, .label = start_label_},
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
    const OpId norm = prog_.add_op(rank,
                                   {.kind = OpKind::kCollective,
                                    .stream = StreamKind::kDp,
                                    .phase = Phase::kOptimizer,
                                    .duration = l_.gpus() > 1 ? norm_time : Duration::zero(),
                                    .bytes = 8,
                                    .match = match_for(rank, GroupKind::kDpCp, true),
                                    .label = norm_label,
                                    .collective = CollectiveOp::kAllReduce},
                                   {ready});
    // The parameters of every chunk this stage runs (PassPlan::stage_dense_params).
    const int64_t dense = plan_.stage_dense_params(stage);
    const int64_t expert = plan_.stage_expert_params(stage);
    const int64_t local = dense + expert;
    // ZeRO shards the dense parameters' optimizer over DP x CP and the experts' over the
    // expert-data-parallel group (core/layout.h zero_shard, as the memory model counts them).
    const int64_t shard = l_.zero >= 1 ? zero_shard(dense, expert, l_) : local;
    OpId last = norm;
    for (const auto& op :
         models::optimizer_operators(shard, o_.timing.fp16_loss_scale, o_.timing.dp_grad_bytes,
                                     o_.memory.fp32_params)) {
      SP_ASSIGN_OR_RETURN(Timed t, time_op(op));
      t.phase = Phase::kOptimizer;
      last = add(rank, t, -1, 0, last);
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
        last = add(rank, e, -1, 0, last);
      }
      const int dp = placement_[GroupKind::kDpCp].size;
      const bool copies = o_.timing.nanotron_zero_copies && dp > 1;
      // nanotron's all_gather_coalesced (FrameworkTiming::nanotron_zero_copies): flatten the input
      // shard and every rank's output list, gather, copy each rank's part out of the flat buffer,
      // then copy every parameter slice back into the model.
      if (copies)
        last = add(rank,
                   copy_op("zero.param_flatten", 4 * local + 4 * shard, dp + 1, Phase::kOptimizer),
                   -1, 0, last);
      last = add(rank, t, -1, 0, last);
      if (copies) {
        last = add(rank, copy_op("zero.param_copy_out", 4 * local, dp, Phase::kOptimizer), -1, 0,
                   last);
        add(rank,
            copy_op("zero.param_update", 4 * local, nanotron_param_tensors(stage) * dp,
                    Phase::kOptimizer),
            -1, 0, last);
      }
    }
    return Status::ok();
  }

  // DualPipe keeps two copies of every stage, on ranks s and pp-1-s, and trains them as one: once
  // a chunk's last weight pass is done, its gradients are summed with the other copy's (an
  // all-reduce of two, on the DP stream, before the step). The pair spans nodes when the pipeline
  // does, and every GPU of a node syncs with its own mirror at once.
  void emit_mirror_sync(int rank, int stage) {
    const hw::GroupPlacement pair = pipeline_pair();
    // Both ranks of a pair issue their two syncs in the same order, by model chunk (rank s holds
    // model chunks s and pp-1-s, as does its mirror): collectives on one stream in different
    // orders would wait for each other forever, as NCCL's would.
    int order[2] = {0, 1};
    if (model_chunk(l_, global_chunk(1, stage)) < model_chunk(l_, global_chunk(0, stage)))
      std::swap(order[0], order[1]);
    for (int c : order) {
      const int g = global_chunk(c, stage);
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
          .match = match_for(rank, GroupKind::kPpMirror),
          .label = prog_.add_label(
              "dualpipe.mirror_grad",
              CollectivePayload{CollectiveOp::kAllReduce, GroupKind::kPpMirror, pair.size, 1}),
          .collective = CollectiveOp::kAllReduce,
          .link = static_cast<uint8_t>(pair.nodes > 1 ? 1 : 0),
          .chunk = c};
      const OpId after = w_end_[pass_index(g, last_microbatch(c))];
      dp_ops_.push_back(prog_.add_op(rank, op, std::span<const OpId>(&after, 1)));
    }
  }

  static constexpr OpId kNoOp = 0xFFFFFFFFu;
  const BuildInputs& in_;
  const BuildOptions& o_;
  const Layout& l_;
  const models::ModelSpec& m_;
  hw::LayoutPlacement placement_;
  Program prog_;
  PassPlan plan_;
  OperatorLists lists_;
  std::optional<models::AutocastParams> autocast_;  // models::runs_autocast
  std::vector<models::CommShape> comm_shapes_;  // the collectives time_op timed (Timed::comm)
  bool split_weight_ = false;
  // Per ModelSpec::layer_kind: routed experts or not, sliding-window attention or not.
  ChunkOps layer_ops_[models::ModelSpec::kLayerKinds];
  Bytes layer_saved_[models::ModelSpec::kLayerKinds];
  std::vector<ChunkOps> chunks_;
  int64_t p2p_bytes_ = 0;
  std::optional<Timed> p2p_gather_;  // the TP all-gather after each receive (p2p_scatter_gather)
  Duration p2p_time_;
  uint8_t p2p_link_ = 0;
  bool dualpipe_ = false;             // Schedule::kDualPipe: two chunks per rank, one per direction
  std::vector<Timed> pair_ops_;       // emit_pair's backward list (input and weight parts)
  std::vector<uint32_t> p2p_labels_;  // "pp.p2p" per peer stage
  uint32_t start_label_ = 0, act_label_ = 0;
  uint32_t join_label_ = kNoMatch, host_label_ = kNoMatch;
  std::map<std::tuple<std::string, int, CollectiveOp>, uint32_t> bucket_labels_;  // reduce_buckets
  // "zero3.all_gather" per group kind (dense over dp_cp, experts over edp).
  uint32_t zero3_labels_[kNumGroupKinds] = {kNoMatch, kNoMatch, kNoMatch, kNoMatch,
                                            kNoMatch, kNoMatch, kNoMatch, kNoMatch,
                                            kNoMatch, kNoMatch, kNoMatch};
  // (rank, local chunk) whose first forward has gathered its parameters
  // (BuildOptions::param_gather).
  std::set<std::pair<int, int>> params_gathered_;
  OpId host_wait_ = kNoOp;      // a synchronizing op the next host op waits for
  OpId blocking_send_ = kNoOp;  // BuildOptions::blocking_p2p: a send the next pass waits for
  struct DeferredSend {
    bool fwd;
    int to;
    Pass pass;
  };
  std::vector<DeferredSend> deferred_sends_;  // Pass::defer_send: sends of the previous pass
  // Last op of each pass of this rank, indexed by pass_index(chunk, micro-batch); kNoOp if none.
  std::vector<OpId> fwd_end_, bwd_end_, w_end_;
  size_t pass_index(int g, int mb) const {
    return static_cast<size_t>(g) * static_cast<size_t>(l_.num_microbatches()) +
           static_cast<size_t>(mb);
  }
  std::vector<OpId> dp_ops_;
  MatchTable matches_;
  std::vector<int> group_of_[kNumGroupKinds];
  int group_size_[kNumGroupKinds] = {};  // with all_ranks: members of each kind's groups
  std::vector<int> global_of_;
  std::vector<int64_t> world_seq_;
  std::vector<int64_t> coll_seq_;
};

}  // namespace

BuildOptions build_options(const Framework& f, const Layout& l, const hw::GpuSpec& gpu) {
  BuildOptions o;
  o.timing = f.timing;
  o.ops = f.ops;
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
  if (in.placement != nullptr) return ProgramBuilder(in, options, *in.placement).build();
  SP_ASSIGN_OR_RETURN(hw::LayoutPlacement placement, hw::place_layout(*in.layout, *in.cluster));
  return ProgramBuilder(in, options, std::move(placement)).build();
}

}  // namespace scaleplan::sim
