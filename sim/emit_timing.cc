// The program builder's timing (sim/emit.h): each operator-list op of a distinct layer kind, the
// embedding and the head timed once by the kernel and collective models on the layout's placement,
// then the pipeline transfer; chunks re-timed on their own stage's groups.
#include "sim/emit.h"

#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "models/memory.h"
#include "models/operators.h"
#include "models/tensors.h"
#include "sim/comm_points.h"

namespace scaleplan::sim::build {

namespace {

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

}  // namespace

// The attention shape with the kernel this build runs (BuildOptions::attention).
AttentionShape ProgramBuilder::with_kernel(AttentionShape a) const {
  a.kernel = o_.attention;
  return a;
}

// The typed payload of an operator-list op as this build runs it (its attention kernel).
OpPayload ProgramBuilder::payload_of(const models::Op& op) const {
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
Result<Timed> ProgramBuilder::time_op(const models::Op& op, int chunks) {
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
      t.spares_compute = c.spares_compute;
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
int ProgramBuilder::launches(const models::Op& op) const {
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

// Times the op lists of the distinct layer kinds (dense / MoE) once.
Status ProgramBuilder::time_layers() {
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
      // Compiled, the block's stream kernels are Inductor's (models::compile_layer counts the
      // fp32 stream) and the weight gradients' bf16 -> fp32 converts are generated Triton
      // kernels, not PyTorch's casting loop.
      if (o_.ops.compile_model) {
        for (models::Op& op : ops) {
          auto* s = std::get_if<MemoryBoundShape>(&op.shape);
          if (s != nullptr && s->op == MemOp::kCast && op.pass == models::Pass::kBackwardWeight)
            s->path = MemPath::kVectorized;
        }
      } else {
        add_autocast_stream(ops, layer, 1);  // after the weight cast
      }
    }
    SP_RETURN_IF_ERROR(split(ops, &layer_ops_[kind]));
    layer_saved_[kind] =
        models::layer_saved_bytes(m_, l_, in_.seq_len, layer, ops, o_.memory, o_.ops);
  }
  return Status::ok();
}

// FrameworkTiming::grad_accum_bytes: the separate kernel that adds each micro-batch's weight
// gradients of `params` local parameters into the accumulation buffer.
void ProgramBuilder::add_grad_accumulation(std::vector<models::Op>& ops, int64_t params) const {
  if (o_.timing.grad_accum_bytes <= 0 || params <= 0) return;
  ops.push_back(models::grad_accumulation(params, o_.timing.grad_accum_bytes));
}

// models::autocast_stream_ops of `layer` (-1: the head): forward ops from index `at`, backward
// ops at the end.
void ProgramBuilder::add_autocast_stream(std::vector<models::Op>& ops, int64_t layer,
                                         size_t at) const {
  for (models::Op& op : models::autocast_stream_ops(m_, l_, in_.seq_len, layer)) {
    if (op.pass == models::Pass::kForward) {
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at++), std::move(op));
    } else {
      ops.push_back(std::move(op));
    }
  }
  // The RMSNorm weight-gradient kernel (models: add_row_norm_weight_gradients) reads the norm's
  // input and output gradient, which the list counts at bf16; on the fp32 stream they are twice
  // that: the same bytes once more.
  const size_t n = ops.size();
  for (size_t i = 0; i < n; ++i) {
    if (!ops[i].name.ends_with("norm_weight.bwd")) continue;
    models::Op fp32 = ops[i];
    fp32.name = "autocast." + fp32.name;
    ops.push_back(std::move(fp32));
  }
}

// models::runs_autocast: the forward's weight casts before the block's first op, their
// backward and autograd's accumulation after its last (models::autocast_weight_ops).
void ProgramBuilder::add_autocast(std::vector<models::Op>& ops, int64_t cast_params,
                                  int64_t params) {
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
Status ProgramBuilder::split(const std::vector<models::Op>& ops, ChunkOps* out) {
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

// Re-times a chunk's collectives on its own stage's groups (hw::LayoutPlacement::stages) where
// they are placed otherwise than the layout-wide worst group the lists were timed on.
void ProgramBuilder::charge_stage(ChunkOps& c, int stage) {
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
Status ProgramBuilder::time_boundaries() {
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
  p2p_time_ =
      l_.pp > 1
          ? cm.estimate(CollectiveOp::kSendRecv, Bytes(p2p_bytes_), placement_[GroupKind::kPp]).time
          : Duration::zero();
  p2p_link_ = placement_[GroupKind::kPp].nodes > 1 ? 1 : 0;
  // One label per peer stage: a transfer's payload names the stage it exchanges with.
  p2p_labels_.clear();
  for (int s = 0; s < l_.pp; ++s)
    p2p_labels_.push_back(prog_.add_label("pp.p2p", TransferPayload{s}));
  return Status::ok();
}

Duration ProgramBuilder::collective_time(CollectiveOp op, int64_t bytes, GroupKind g) const {
  if (placement_[g].size <= 1 || bytes <= 0) return Duration::zero();
  return in_.collectives->estimate(op, Bytes(bytes), placement_[g]).time;
}

// One collective per tensor, one after another, each with the framework's per-call host time
// (FrameworkTiming::zero3_per_tensor_sync) and the copies of its list-form call: one per rank of
// the group, each moving the rank's shard (read and written).
Duration ProgramBuilder::per_tensor_time(CollectiveOp op, const std::vector<int64_t>& tensors,
                                         int bytes_per, GroupKind g) const {
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

// A memory-bound copy of `bytes` (read plus written) that the framework issues as `launches`
// kernels: one GPU op, `launches` × HostIssue::per_launch of CPU time to issue it.
Timed ProgramBuilder::copy_op(const std::string& name, int64_t bytes, int64_t launches,
                              Phase phase) {
  Timed t;
  t.phase = phase;
  t.duration = in_.kernels->memory_bound(MemoryBoundShape{Bytes(bytes), Flops(0), MemOp::kCopy});
  t.host = o_.host.per_launch * static_cast<double>(launches);
  t.bytes = bytes;
  t.label =
      prog_.add_label(name, KernelPayload{KernelKind::kMemoryBound,
                                          MemoryBoundShape{Bytes(bytes), Flops(0), MemOp::kCopy}});
  return t;
}

}  // namespace scaleplan::sim::build
