// The operator list; conventions and sources in operators.h.
#include "models/operators.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "models/tensors.h"

namespace scaleplan::models {
namespace {

constexpr int64_t kAct = 2;   // bytes per activation element: bf16
constexpr int64_t kFp8 = 1;   // an fp8 linear's quantized input (Builder::linear_input)
constexpr int64_t kFp32 = 4;  // log-sum-exp, norm statistics, router probabilities, logits

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Local (out, in, copies) of a 2-D weight on one rank: the TP (or, for experts, ETP) split of
// tensors.h, experts over ep. Same arithmetic as shard_numel, kept per dimension.
struct LocalWeight {
  int64_t out = 0, in = 0, count = 1;
};
LocalWeight local_weight(const TensorEntry& t, const ModelSpec& m, const Layout& l) {
  const int64_t split = t.expert ? std::max(l.etp, 1) : std::max(l.tp, 1);
  LocalWeight w{t.shape[0], t.shape[1], t.expert ? ceil_div(t.count, std::max(l.ep, 1)) : t.count};
  switch (t.tp_split) {
    case TpSplit::kReplicated:
      break;
    case TpSplit::kColumn:
    case TpSplit::kVocab:
      w.out = ceil_div(w.out, split);
      break;
    case TpSplit::kRow:
      w.in = ceil_div(w.in, split);
      break;
    case TpSplit::kKvColumn: {
      const int64_t kv = std::max<int64_t>(m.num_kv_heads, 1);
      w.out = kv >= split ? ceil_div(w.out, split) : w.out / kv;
      break;
    }
  }
  return w;
}

// "self_attn.q_proj.weight" -> "attn.q"; "mlp.experts.down_proj.weight" -> "moe.expert.down".
std::string op_name(std::string_view tensor) {
  std::string s(tensor);
  auto replace = [&](std::string_view from, std::string_view to) {
    if (auto p = s.find(from); p != std::string::npos) s.replace(p, from.size(), to);
  };
  replace(".weight", "");
  replace("_proj", "");
  replace("self_attn.", "attn.");
  replace("mlp.experts.", "moe.expert.");
  replace("mlp.shared_experts.", "moe.shared.");
  if (s == "mlp.gate" && tensor.starts_with("mlp.gate.")) s = "moe.router";
  return s;
}

Op make_op(std::string name, Pass pass, OpKind kind) {
  Op op;
  op.name = std::move(name);
  op.pass = pass;
  op.kind = kind;
  return op;
}

Op gemm(std::string name, Pass pass, int64_t m, int64_t n, int64_t k, int64_t batch, DType dt,
        Bytes saved = Bytes(0)) {
  Op op = make_op(std::move(name), pass, OpKind::kGemm);
  GemmShape g{m, n, k, batch, dt};
  op.flops = g.flops();
  op.shape = g;
  op.saved = saved;
  return op;
}

// A memory-bound kernel computing `kind` (core/kernel_shapes.h MemOp) over `bytes` read plus
// written.
Op memory_bound(MemOp kind, std::string name, Pass pass, int64_t bytes, Bytes saved = Bytes(0)) {
  Op op = make_op(std::move(name), pass, OpKind::kMemoryBound);
  op.shape = MemoryBoundShape{Bytes(bytes), Flops(0), kind};
  op.saved = saved;
  return op;
}

// The memory-bound kind of the model's norms and of its FFN activation.
MemOp norm_op(const ModelSpec& m) {
  return m.norm == NormKind::kLayerNorm ? MemOp::kLayerNorm : MemOp::kRmsNorm;
}
MemOp act_op(const ModelSpec& m) {
  switch (m.ffn_kind) {
    case FfnKind::kSwiGlu:
      return MemOp::kSwiglu;
    case FfnKind::kGelu:
      return MemOp::kGelu;
    default:
      return MemOp::kElementwise;  // ReLU, squared ReLU
  }
}

Op comm(std::string name, Pass pass, CollectiveOp kind, GroupKind group, int size, int64_t bytes,
        int steps = 1) {
  Op op = make_op(std::move(name), pass, OpKind::kComm);
  op.shape = CommShape{kind, group, size, Bytes(bytes), steps};
  return op;
}

// Builds one forward list and, for each forward op, what the backward emits when it reaches that
// op in reverse. Comm conjugates (Megatron's f/g operators: an all-gather forward is a
// reduce-scatter backward, an all-reduce after a row-parallel linear is the identity backward and
// the identity before a column-parallel linear is an all-reduce backward) are placed there too.
class Builder {
 public:
  Builder(const ModelSpec& m, const Layout& l, int64_t seq)
      : m_(m), l_(l), seq_(seq), tok_(token_counts(l, seq)) {}

  const TokenCounts& tok() const { return tok_; }
  bool sp() const { return l_.tp > 1 && l_.sequence_parallel(); }

  void push(Op fwd, std::vector<Op> bwd) {
    fwd_.push_back(std::move(fwd));
    bwd_.push_back(std::move(bwd));
  }
  // Prepends `op` to the backward of the most recent forward op.
  void prepend_bwd(Op op) { bwd_.back().insert(bwd_.back().begin(), std::move(op)); }

  // A linear layer: forward GEMM, input-gradient and weight-gradient GEMMs. `bf16_only` keeps it
  // in bf16 under dtype=fp8, as Megatron-core keeps the LM head and the MoE router (only
  // Transformer Engine's linears of the decoder layers run in fp8).
  void gemm_fwd(const std::string& name, int64_t tokens, const LocalWeight& w, Bytes saved,
                bool bf16_only = false) {
    const DType dt = bf16_only ? DType::kBf16 : l_.dtype;
    // Tokens spread over copies (experts) arrive as the batch of equal GEMMs.
    const int64_t m = w.count > 1 ? ceil_div(tokens, w.count) : tokens;
    Op dgrad = gemm(name + ".dgrad", Pass::kBackwardInput, m, w.in, w.out, w.count, dt);
    Op wgrad = gemm(name + ".wgrad", Pass::kBackwardWeight, w.out, w.in, m, w.count, dt);
    if (dt != DType::kFp8) {
      push(gemm(name, Pass::kForward, m, w.out, w.in, w.count, dt, saved),
           {std::move(dgrad), std::move(wgrad)});
      return;
    }
    // Transformer Engine's fp8 linear quantizes each GEMM operand it is handed in bf16: the input
    // before the forward GEMM and the output gradient before the backward ones, each with one
    // cast-transpose kernel that reads the bf16 tensor (2 B per element) and writes its fp8 copy
    // and the fp8 transpose the weight gradient needs (1 + 1 B). The weights' fp8 copies are made
    // once per step and not counted.
    push(memory_bound(MemOp::kCast, name + ".fp8_cast", Pass::kForward, 4 * m * w.in * w.count),
         {});
    push(gemm(name, Pass::kForward, m, w.out, w.in, w.count, dt, saved),
         {memory_bound(MemOp::kCast, name + ".fp8_cast.bwd", Pass::kBackwardInput,
                       4 * m * w.out * w.count),
          std::move(dgrad), std::move(wgrad)});
  }

  // A memory-bound op computing `kind` and its backward (`bwd_factor` times the bytes).
  void elementwise(MemOp kind, const std::string& name, int64_t bytes, Bytes saved,
                   double bwd_factor = 1.5) {
    push(memory_bound(kind, name, Pass::kForward, bytes, saved),
         {memory_bound(kind, name + ".bwd", Pass::kBackwardInput,
                       static_cast<int64_t>(static_cast<double>(bytes) * bwd_factor))});
  }

  // Bytes per element of what a decoder linear quantizes and keeps of its input: 1 under
  // dtype=fp8, else 2 (bf16).
  int64_t linear_input_element() const { return l_.dtype == DType::kFp8 ? kFp8 : kAct; }

  // What a decoder linear stores of its input for the weight gradient: `elements` of it (the
  // sequence shard under SP) in bf16, nothing if `shared` (another op keeps that bf16 tensor).
  // Under dtype=fp8 it keeps its own fp8 copy, 1 B per element, shared or not: Transformer
  // Engine's _Linear and _LayerNormLinear quantize the input for the forward GEMM and save the
  // quantized tensor (its column-wise data, or under SP the row-wise data the backward
  // all-gathers), not the bf16 one.
  Bytes linear_input(int64_t elements, bool shared = false) const {
    if (l_.dtype == DType::kFp8) return Bytes(elements * kFp8);
    return Bytes(shared ? 0 : elements * kAct);
  }

  // A TP boundary entering a column-parallel block (SP: all-gather of the sequence shards) whose
  // first linear is a decoder linear: under dtype=fp8 it quantizes its input before the
  // all-gather, which then moves 1 B per element (Transformer Engine gathers with the input
  // quantizer, gather_along_first_dim(..., quantizer=input_quantizer); torchao's
  // Float8ColwiseParallel casts to fp8 before the all-gather too); the input gradient's
  // reduce-scatter stays bf16.
  void tp_enter(const std::string& block) {
    const int64_t n = tok_.gemm * m_.hidden;
    tp_enter(block, n * kAct, n * linear_input_element());
  }
  // `bytes`: the bf16 boundary; `gather_bytes`: what the forward all-gather moves under SP.
  void tp_enter(const std::string& block, int64_t bytes) { tp_enter(block, bytes, bytes); }
  void tp_enter(const std::string& block, int64_t bytes, int64_t gather_bytes) {
    if (l_.tp <= 1) return;
    if (sp()) {
      push(comm(block + ".sp_ag", Pass::kForward, CollectiveOp::kAllGather, GroupKind::kTp, l_.tp,
                gather_bytes),
           {comm(block + ".sp_rs.bwd", Pass::kBackwardInput, CollectiveOp::kReduceScatter,
                 GroupKind::kTp, l_.tp, bytes)});
    } else {
      // Identity forward; the input gradient is summed over TP in the backward. It lands after
      // the block's dgrads, i.e. with the backward of the op before the block (the norm).
      prepend_bwd(comm(block + ".tp_ar.bwd", Pass::kBackwardInput, CollectiveOp::kAllReduce,
                       GroupKind::kTp, l_.tp, bytes));
    }
  }
  // Leaving a row-parallel block: all-reduce (or SP reduce-scatter) of the partial outputs.
  void tp_exit(const std::string& block) {
    if (l_.tp <= 1) return;
    const int64_t bytes = tok_.gemm * m_.hidden * kAct;
    if (sp()) {
      push(comm(block + ".sp_rs", Pass::kForward, CollectiveOp::kReduceScatter, GroupKind::kTp,
                l_.tp, bytes),
           {comm(block + ".sp_ag.bwd", Pass::kBackwardInput, CollectiveOp::kAllGather,
                 GroupKind::kTp, l_.tp, bytes)});
    } else {
      push(comm(block + ".tp_ar", Pass::kForward, CollectiveOp::kAllReduce, GroupKind::kTp, l_.tp,
                bytes),
           {});
    }
  }
  // SP saves the sequence shard of a column-parallel input and all-gathers it again for the
  // weight gradient (Megatron-LM LinearWithGradAccumulationAndAsyncCommunication; Transformer
  // Engine gathers the saved fp8 shard under dtype=fp8).
  void sp_regather(const std::string& block) {
    sp_regather(block, tok_.gemm * m_.hidden * linear_input_element());
  }
  void sp_regather(const std::string& block, int64_t bytes) {
    if (!sp() || bytes <= 0) return;
    prepend_bwd(comm(block + ".sp_ag.wgrad", Pass::kBackwardWeight, CollectiveOp::kAllGather,
                     GroupKind::kTp, l_.tp, bytes));
  }

  // Saved input of a column-parallel block: the local sequence shard under SP.
  Bytes block_input_saved() const { return Bytes(tok_.sp * m_.hidden * kAct); }

  // The recompute modules (RecomputeModule bits) a forward op belongs to; 0: none. The MoE
  // block's ops are the moe module's, its shared experts' also the shared_experts module's, and
  // the experts' activation also moe_act's.
  uint8_t module_of(const Op& op) const {
    if (op.kind == OpKind::kAttentionFwd) return kRecomputeCoreAttn;
    return module_of(op.name);
  }
  uint8_t module_of(const std::string& name) const {
    // The core's recompute passes K/V around the ring, or gathers them, again; Ulysses' core
    // reruns from the Q, K, V it stored after the all-to-all.
    if (name == "attn.cp_kv" || name == "attn.cp_ag") return kRecomputeCoreAttn;
    if (name == "attn.norm" || name == "mlp.norm") return kRecomputeLayernorm;
    if (m_.mla && (name == "attn.q_b" || name == "attn.kv_b" || name == "attn.rope" ||
                   name == "attn.sp_ag_latent"))
      return kRecomputeMlaUpProj;
    if (name == "moe.expert.act") return kRecomputeMoeAct | kRecomputeMoe;
    if (name.starts_with("moe.shared.")) return kRecomputeSharedExperts | kRecomputeMoe;
    if (name.starts_with("moe.")) return kRecomputeMoe;
    if (name.starts_with("mlp.") && name != "mlp.residual" && name != "mlp.post_norm")
      return kRecomputeMlp;
    return 0;
  }

  std::vector<Op> finish(Recompute rc) {
    std::vector<Op> out;
    for (Op& op : fwd_) out.push_back(op);
    // Recompute: what reruns before the backward, and what is then not stored.
    if (rc == Recompute::kFull) {
      for (size_t i = 0; i < fwd_.size(); ++i) {
        Op r = fwd_[i];
        r.pass = Pass::kRecompute;
        r.saved = Bytes(0);
        out[i].saved = Bytes(0);
        out.push_back(std::move(r));
      }
      // Only the layer input is checkpointed (Korthikanti et al. 2022 §5: 2sbh/t with SP).
      out.front().saved = Bytes(tok_.sp * m_.hidden * kAct);
    } else if (rc == Recompute::kSelective) {
      const uint8_t modules = l_.recompute_module_set();
      // Output-discarding modules: what consumed the freed output stops storing it.
      for (size_t i = 0; i < fwd_.size(); ++i) {
        const std::string& name = fwd_[i].name;
        if ((modules & kRecomputeLayernorm) && (name == "attn.norm" || name == "mlp.norm")) {
          // The norm's output is the next GEMM's stored input (the router's, in a MoE block).
          // An fp8 linear stores its own fp8 copy instead (linear_input), which stays.
          const int64_t block = block_input_saved().value();
          for (size_t j = i + 1; j < fwd_.size(); ++j) {
            if (fwd_[j].kind != OpKind::kGemm) continue;
            if (out[j].saved.value() >= block) out[j].saved = Bytes(out[j].saved.value() - block);
            break;
          }
        }
        if ((modules & kRecomputeMoeAct) && (name == "moe.expert.down" || name == "moe.expert.fc2"))
          out[i].saved = Bytes(0);  // the activation's output
      }
      // Whole-module checkpoints keep only the module's input, the first GEMM's.
      for (const uint8_t bit : {kRecomputeMlp, kRecomputeSharedExperts}) {
        if ((modules & bit) == 0) continue;
        bool first = true;
        for (size_t i = 0; i < fwd_.size(); ++i) {
          if ((module_of(fwd_[i].name) & bit) == 0) continue;
          if (first && fwd_[i].kind == OpKind::kGemm) {
            first = false;
            continue;
          }
          out[i].saved = Bytes(0);
        }
      }
      if (modules & kRecomputeMoe) {
        // The block's input, the norm's output, stays (the router stored it; unless layernorm
        // freed it); its probabilities and everything after do not.
        for (size_t i = 0; i < fwd_.size(); ++i) {
          if ((module_of(fwd_[i].name) & kRecomputeMoe) == 0) continue;
          const bool router = fwd_[i].name == "moe.router";
          out[i].saved =
              Bytes(router && !(modules & kRecomputeLayernorm) ? block_input_saved().value() : 0);
        }
      }
      for (size_t i = 0; i < fwd_.size(); ++i) {
        if ((modules & module_of(fwd_[i])) == 0) continue;
        Op r = fwd_[i];
        r.pass = Pass::kRecompute;
        r.saved = Bytes(0);
        out.push_back(std::move(r));
      }
    }
    for (size_t i = fwd_.size(); i-- > 0;) {
      for (Op& op : bwd_[i]) out.push_back(std::move(op));
    }
    return out;
  }

  const ModelSpec& m_;
  const Layout& l_;
  int64_t seq_;
  TokenCounts tok_;
  std::vector<Op> fwd_;
  std::vector<std::vector<Op>> bwd_;
};

Status check_divides(const ModelSpec& m, const Layout& l, int64_t seq) {
  SP_RETURN_IF_ERROR(shard_size(m.num_heads, l.tp, "num_attention_heads by tp").status());
  SP_RETURN_IF_ERROR(shard_size(seq, l.cp, "seq_len by cp").status());
  if (m.moe) SP_RETURN_IF_ERROR(shard_size(m.moe->num_experts, l.ep, "experts by ep").status());
  // Chunked layers (Llama 4) are timed as whole chunks; how a ring or a gather of K/V shards
  // would split a chunk is not modelled.
  if (const int64_t c = m.attention_chunk; c > 0 && c < seq && m.num_chunked_layers() > 0) {
    if (seq % c != 0)
      return Status::invalid("seq_len " + std::to_string(seq) +
                             " is not a multiple of attention_chunk_size " + std::to_string(c) +
                             ": chunked-attention layers are modelled as whole chunks");
    if (l.cp > 1)
      return Status::invalid("cp=" + std::to_string(l.cp) +
                             " with chunked attention "
                             "(attention_chunk_size " +
                             std::to_string(c) + " < seq_len " + std::to_string(seq) +
                             ") is not modelled");
  }
  return Status::ok();
}

// MLA's projections before the attention core, as Megatron-core's MLASelfAttention runs them:
// the down projections of the hidden states (q_a, kv_a_with_mqa) are duplicated on every TP rank
// (TELinear, parallel_mode="duplicated"); under sequence parallelism each runs on the rank's
// sequence shard, and the compressed latents, not the hidden states, are gathered over TP by the
// column-parallel up projections (q_b, kv_b), which re-gather them for their weight gradients.
// Without SP the down projections run on every token on every TP rank. A column-parallel
// projection of the hidden states (q without a q latent) gathers them as any such block does.
// Stored: the hidden shard once, and for each up projection its latent's norm input and output
// (on the sequence shard under SP).
void mla_projections(Builder& b, const ModelSpec& m, const Layout& l,
                     const std::vector<const TensorEntry*>& weights) {
  const TokenCounts& t = b.tok();
  const int64_t h = m.hidden;
  struct Proj {
    std::string name;
    LocalWeight w;
  };
  std::vector<Proj> down, column, up;
  for (const TensorEntry* w : weights) {
    if (w->component != Component::kAttention) continue;
    const std::string name = op_name(w->name);
    if (name == "attn.o") continue;  // after the core
    const LocalWeight lw = local_weight(*w, m, l);
    if (lw.in != h)
      up.push_back({name, lw});
    else if (w->tp_split == TpSplit::kReplicated)
      down.push_back({name, lw});
    else
      column.push_back({name, lw});
  }
  const bool sp = b.sp();
  bool hidden_stored = false;  // the first projection stores the hidden shard; the others share it
  auto input = [&] { return b.linear_input(t.sp * h, std::exchange(hidden_stored, true)); };
  // Without SP the hidden states are whole on every rank: the usual identity-forward boundary
  // (all-reduce of the input gradient); with SP only a column-parallel projection needs them
  // gathered.
  if (!sp || !column.empty()) b.tp_enter("attn");
  for (const Proj& p : column) b.gemm_fwd(p.name, t.gemm, p.w, input());
  for (const Proj& p : down) b.gemm_fwd(p.name, sp ? t.sp : t.gemm, p.w, input());
  int64_t latent = 0;  // widths the up projections read
  for (const Proj& p : up) latent += p.w.in;
  if (sp && !down.empty()) {
    int64_t width = 0;  // the latents the down projections produce (incl. the shared rope key)
    for (const Proj& p : down) width += p.w.out;
    const int64_t bytes = t.gemm * width * kAct;
    b.push(comm("attn.sp_ag_latent", Pass::kForward, CollectiveOp::kAllGather, GroupKind::kTp, l.tp,
                bytes),
           {comm("attn.sp_rs_latent.bwd", Pass::kBackwardInput, CollectiveOp::kReduceScatter,
                 GroupKind::kTp, l.tp, bytes)});
  }
  for (const Proj& p : up) {
    const int64_t latent_elements = (sp ? t.sp : t.gemm) * p.w.in;
    b.gemm_fwd(p.name, t.gemm, p.w,
               Bytes(latent_elements * kAct) + b.linear_input(latent_elements));
  }
  // The weight gradients' re-gathers: the latents, and the hidden states for a column-parallel
  // projection of them, as stored (fp8 copies under dtype=fp8).
  b.sp_regather("attn", t.gemm * (latent + (column.empty() ? 0 : h)) * b.linear_input_element());
}

void attention_block(Builder& b, const ModelSpec& m, const Layout& l, int64_t layer,
                     const std::vector<const TensorEntry*>& weights) {
  const TokenCounts& t = b.tok();
  const int64_t h = m.hidden;
  const int64_t heads = m.num_heads / l.tp;
  const int64_t dqk = m.qk_head_dim(), dv = m.v_head_dim();
  // KV heads per rank: MLA expands the latent to every head; GQA divides or replicates one.
  const int64_t kv = m.mla ? heads : std::max<int64_t>(1, m.num_kv_heads / l.tp);
  const Bytes norm_saved(t.sp * h * kAct + t.sp * kFp32);
  b.elementwise(norm_op(m), "attn.norm", 2 * t.sp * h * kAct, norm_saved);
  if (m.mla) {
    mla_projections(b, m, l, weights);
  } else {
    b.tp_enter("attn");
    // One column-parallel GEMM for Q, K and V (Megatron-LM's query_key_value / linear_qkv,
    // nanotron's qkv_proj): their weights are concatenated along the output dimension.
    LocalWeight qkv{0, h, 1};
    for (const TensorEntry* w : weights) {
      if (w->component != Component::kAttention || op_name(w->name) == "attn.o") continue;
      qkv.out += local_weight(*w, m, l).out;
    }
    b.gemm_fwd("attn.qkv", t.gemm, qkv, b.linear_input(t.sp * h));
    b.sp_regather("attn");
  }
  // Qwen3/Gemma-3's weighted RMSNorm, or Llama 4's L2 norm on its RoPE layers: each stores its
  // input for the backward.
  if (m.qk_norm || (m.qk_l2_norm && m.uses_rope(layer))) {
    const int64_t qk = t.gemm * (heads + kv) * dqk * kAct;
    b.elementwise(m.qk_norm ? norm_op(m) : MemOp::kL2Norm, "attn.qk_norm", 2 * qk, Bytes(qk));
  }
  if (m.uses_rope(layer)) {
    const int64_t rope_dim = m.mla ? m.mla->qk_rope_head_dim : dqk;
    b.elementwise(MemOp::kRope, "attn.rope", 2 * t.gemm * (heads + kv) * rope_dim * kAct, Bytes(0),
                  1.0);
  }
  const int64_t kv_chunk = t.gemm * kv * (dqk + dv) * kAct;
  const int64_t q_bytes = t.gemm * heads * dqk * kAct, o_bytes = t.gemm * heads * dv * kAct;
  const CpComm cp_comm = l.cp > 1 ? l.cp_comm_type() : CpComm::kP2p;
  if (l.cp > 1 && cp_comm == CpComm::kP2p) {
    // The ring runs beside the attention core it feeds (overlap_next: it precedes the core);
    // its backward, which passes K/V and their gradients around the ring again, precedes the
    // core's backward below.
    Op ring = comm("attn.cp_kv", Pass::kForward, CollectiveOp::kSendRecv, GroupKind::kCp, l.cp,
                   kv_chunk, l.cp - 1);
    std::get<CommShape>(ring.shape).overlap_next = true;
    b.push(std::move(ring), {});
  } else if (cp_comm == CpComm::kAllGather) {
    // K and V gathered whole before the attention; their gradients reduce-scattered after its
    // backward (Transformer Engine's AttnFuncWithCPAndKVAllGather).
    b.push(comm("attn.cp_ag", Pass::kForward, CollectiveOp::kAllGather, GroupKind::kCp, l.cp,
                kv_chunk * l.cp),
           {comm("attn.cp_rs.bwd", Pass::kBackwardInput, CollectiveOp::kReduceScatter,
                 GroupKind::kCp, l.cp, kv_chunk * l.cp)});
  } else if (cp_comm == CpComm::kA2a) {
    // Ulysses: Q, K and V turn from sequence shards of every head into head shards of the whole
    // sequence (AttnFuncWithCPAndQKVOA2A); their gradients go back the same way.
    b.push(comm("attn.cp_a2a_qkv", Pass::kForward, CollectiveOp::kAllToAll, GroupKind::kCp, l.cp,
                q_bytes + kv_chunk),
           {comm("attn.cp_a2a_qkv.bwd", Pass::kBackwardInput, CollectiveOp::kAllToAll,
                 GroupKind::kCp, l.cp, q_bytes + kv_chunk)});
  }
  // Zig-zag CP: a rank's two half-chunks do the average causal work, which a causal block of
  // q = s/cp queries over (s + s/cp)/2 keys reproduces exactly (core/kernel_shapes.cc). Ulysses:
  // the whole sequence's causal square on heads/cp of the heads.
  AttentionShape a{t.seqs, heads, kv, t.gemm / t.seqs, 0, dqk, dv, true};
  a.window = m.attention_window(layer);  // a sliding layer's queries see at most this many keys
  const int64_t s = a.q_len * l.cp;
  a.kv_len = (s + a.q_len) / 2;
  if (l.cp == 1) a.kv_len = s;
  // A chunked layer shorter than the sequence (Llama 4) is causal attention over each chunk of c
  // tokens: the kernel runs s/c sequences of c (HF builds the same block-diagonal causal mask).
  if (const int64_t c = m.attention_chunk_of(layer); c > 0 && c < s) {
    a.batch *= s / c;
    a.q_len = a.kv_len = c;
  }
  if (cp_comm == CpComm::kA2a) {
    a.heads = heads / l.cp;
    a.kv_heads = std::max<int64_t>(kv / l.cp, 1);
    a.q_len = a.kv_len = s;
  }
  // Stored for the backward: Q, K, V, O (O is also the o-projection's input) and the fp32
  // log-sum-exp per query and head; no s×s scores (Dao et al. 2022). Selective recompute reruns
  // the core from the stored Q, K, V and drops only the log-sum-exp. (Ulysses stores the same
  // bytes: the whole sequence of heads/cp heads.)
  const int64_t lse = l.recomputes(kRecomputeCoreAttn) ? 0 : t.gemm * heads * kFp32;
  // MLA's up-projection recompute frees Q, K and V (recomputed from the stored latents).
  const int64_t qkv = m.mla && l.recomputes(kRecomputeMlaUpProj) ? 0 : q_bytes + kv_chunk;
  Op fwd = make_op("attn.core", Pass::kForward, OpKind::kAttentionFwd);
  fwd.shape = a;
  fwd.flops = a.forward_flops();
  fwd.saved = Bytes(qkv + o_bytes + lse);
  Op bwd = make_op("attn.core.bwd", Pass::kBackwardInput, OpKind::kAttentionBwd);
  bwd.shape = a;
  bwd.flops = a.backward_flops();
  std::vector<Op> core_bwd;
  if (l.cp > 1 && cp_comm == CpComm::kP2p) {
    Op ring = comm("attn.cp_kv.bwd", Pass::kBackwardInput, CollectiveOp::kSendRecv, GroupKind::kCp,
                   l.cp, 2 * kv_chunk, l.cp - 1);
    std::get<CommShape>(ring.shape).overlap_next = true;
    core_bwd.push_back(std::move(ring));
  }
  // The all-gather variant keeps its own K/V shard and gathers the whole again for the backward.
  if (cp_comm == CpComm::kAllGather) {
    core_bwd.push_back(comm("attn.cp_ag.bwd", Pass::kBackwardInput, CollectiveOp::kAllGather,
                            GroupKind::kCp, l.cp, kv_chunk * l.cp));
  }
  core_bwd.push_back(std::move(bwd));
  b.push(std::move(fwd), std::move(core_bwd));
  if (cp_comm == CpComm::kA2a) {
    b.push(comm("attn.cp_a2a_o", Pass::kForward, CollectiveOp::kAllToAll, GroupKind::kCp, l.cp,
                o_bytes),
           {comm("attn.cp_a2a_o.bwd", Pass::kBackwardInput, CollectiveOp::kAllToAll, GroupKind::kCp,
                 l.cp, o_bytes)});
  }
  for (const TensorEntry* w : weights) {
    if (op_name(w->name) != "attn.o") continue;
    const LocalWeight o = local_weight(*w, m, l);
    b.gemm_fwd("attn.o", t.gemm, o, b.linear_input(t.gemm * o.in, /*shared=*/true));
  }
  // Parallel residual (GPT-NeoX): the attention and FFN partial sums are reduced together, once,
  // after the FFN (gpt-neox ParallelTransformerLayer with gpt_j_residual: both row-parallel
  // outputs keep parallel_output and one reduce sums them); the residual add is the FFN's.
  if (m.parallel_residual) return;
  b.tp_exit("attn");
  // Gemma-2/3: the attention output is normalised before the residual add; the norm stores its
  // input and statistics.
  if (m.sandwich_norm)
    b.elementwise(norm_op(m), "attn.post_norm", 2 * t.sp * h * kAct,
                  Bytes(t.sp * h * kAct + t.sp * kFp32));
  b.elementwise(MemOp::kAdd, "attn.residual", 3 * t.sp * h * kAct, Bytes(0), 1.0);
}

// A dense FFN (or a group of shared experts) on the dense grid: `prefix` is "mlp" or "moe.shared".
// `input_elements` of its input are stored for fc1's weight gradient (linear_input), or shared
// with another op when `input_shared`.
void ffn_gemms(Builder& b, const ModelSpec& m, const Layout& l,
               const std::vector<const TensorEntry*>& weights, const std::string& prefix,
               int64_t tokens, int64_t input_elements, bool input_shared) {
  const bool gated = m.gated_ffn();
  LocalWeight first{}, down{};
  for (const TensorEntry* w : weights) {
    const std::string name = op_name(w->name);
    if (!name.starts_with(prefix + ".")) continue;
    const LocalWeight lw = local_weight(*w, m, l);
    const bool is_down = name.ends_with(".down") || name.ends_with(".fc2");
    if (is_down) {
      down = lw;
      continue;
    }
    // A gated FFN's gate and up share one GEMM (Megatron-LM's linear_fc1 with gated_linear_unit,
    // nanotron's gate_up_proj): `first` accumulates their output widths.
    if (first.out == 0)
      first = lw;
    else
      first.out += lw.out;
  }
  b.gemm_fwd(prefix + ".fc1", tokens, first, b.linear_input(input_elements, input_shared));
  if (gated) first.out /= 2;
  const int64_t rows = first.count > 1 ? ceil_div(tokens, first.count) * first.count : tokens;
  const int64_t width = rows * first.out;  // elements of one FFN-wide activation on this rank
  // A gated FFN stores gate and up for act(gate)·up; GELU/ReLU store their input. The down
  // projection stores its input, the activation's output.
  b.elementwise(act_op(m), prefix + ".act", (gated ? 3 : 2) * width * kAct,
                Bytes((gated ? 2 : 1) * width * kAct));
  b.gemm_fwd(prefix + (gated ? ".down" : ".fc2"), tokens, down, b.linear_input(width));
}

void mlp_block(Builder& b, const ModelSpec& m, const Layout& l, int64_t layer,
               const std::vector<const TensorEntry*>& weights) {
  const TokenCounts& t = b.tok();
  const int64_t h = m.hidden;
  // Under a parallel residual the FFN's norm reads the layer input that the attention's norm
  // already stored: only its statistics are its own.
  b.elementwise(norm_op(m), "mlp.norm", 2 * t.sp * h * kAct,
                Bytes((m.parallel_residual ? 0 : t.sp * h * kAct) + t.sp * kFp32));
  if (!m.is_moe_layer(layer)) {
    b.tp_enter("mlp");
    ffn_gemms(b, m, l, weights, "mlp", t.gemm, t.sp * m.hidden, false);
    b.sp_regather("mlp");
    b.tp_exit("mlp");
  } else {
    const MoeSpec& moe = *m.moe;
    // Tokens entering the MoE block on this rank: the SP shard (Megatron-Core requires SP with
    // TP for MoE), routed to top_k experts; balanced dispatch brings as many token copies back
    // to each EP rank, spread over its experts; ETP all-gathers them within the ETP group. With
    // an imbalance f the busiest EP rank receives f times the mean: its all-to-alls carry f times
    // the copies (the collective ends with its busiest member) and its experts run f times the
    // rows; that rank is the one simulated.
    const int64_t tokens = t.sp;
    const double f = std::max(1.0, moe.capacity_imbalance);
    const int64_t routed = tokens * moe.top_k;
    const auto busiest = [f](int64_t n) {
      return static_cast<int64_t>(static_cast<double>(n) * f + 0.5);
    };
    const int64_t expert_rows = busiest(routed * l.etp);
    const int64_t a2a = busiest(routed) * h * kAct;  // bytes of the busiest rank's all-to-all
    for (const TensorEntry* w : weights) {
      if (w->component == Component::kRouter && w->shape.size() == 2) {
        b.gemm_fwd("moe.router", tokens, local_weight(*w, m, l),
                   Bytes(tokens * h * kAct + tokens * moe.num_experts * kFp32),
                   /*bf16_only=*/true);
      }
    }
    b.elementwise(MemOp::kCopy, "moe.permute", 2 * routed * h * kAct, Bytes(0), 1.0);
    // The dispatcher's all-to-all: DeepEP's deduplicates per destination node.
    auto a2a_op = [&](const std::string& name, Pass pass) {
      Op op = comm(name, pass, CollectiveOp::kAllToAll, GroupKind::kEp, l.ep, a2a);
      if (moe.dispatcher == MoeDispatcher::kDeepEp) {
        auto& c = std::get<CommShape>(op.shape);
        c.dedup_top_k = static_cast<int>(moe.top_k);
        c.route_groups = static_cast<int>(moe.n_group);
        c.route_group_topk = static_cast<int>(moe.topk_group);
      }
      return op;
    };
    if (l.ep > 1)
      b.push(a2a_op("moe.dispatch", Pass::kForward),
             {a2a_op("moe.dispatch.bwd", Pass::kBackwardInput)});
    if (l.etp > 1) {
      b.push(comm("moe.etp_ag", Pass::kForward, CollectiveOp::kAllGather, GroupKind::kEtp, l.etp,
                  a2a * l.etp),
             {comm("moe.etp_rs.bwd", Pass::kBackwardInput, CollectiveOp::kReduceScatter,
                   GroupKind::kEtp, l.etp, a2a * l.etp)});
    }
    ffn_gemms(b, m, l, weights, "moe.expert", expert_rows, expert_rows * h, false);
    if (l.etp > 1) {
      b.push(comm("moe.etp_rs", Pass::kForward, CollectiveOp::kReduceScatter, GroupKind::kEtp,
                  l.etp, a2a * l.etp),
             {comm("moe.etp_ag.bwd", Pass::kBackwardInput, CollectiveOp::kAllGather,
                   GroupKind::kEtp, l.etp, a2a * l.etp)});
    }
    if (l.ep > 1)
      b.push(a2a_op("moe.combine", Pass::kForward),
             {a2a_op("moe.combine.bwd", Pass::kBackwardInput)});
    // The sum of the top_k expert outputs. Megatron-core weights each copy by its router
    // probability inside the experts' activation ("Scaled activation": weighted_bias_swiglu,
    // TEGroupedMLP; the all-to-all dispatcher's token_unpermutation calls unpermute without
    // probs; Megatron-LM d98e8a6 transformer/moe/experts.py, token_dispatcher.py), so the
    // unpermute stores nothing and the router's gradient needs only the probabilities the
    // activation keeps, fp32 per routed row (counted here). Before 2026-11-27 the expert outputs,
    // routed·h bf16, were counted as stored for it.
    b.elementwise(MemOp::kCopy, "moe.unpermute", 2 * routed * h * kAct, Bytes(expert_rows * kFp32),
                  1.0);
    if (moe.num_shared_experts > 0) {
      // The shared experts read the router's input, the norm's output: one tensor, which the
      // router already keeps (with SP the column-parallel linear keeps the same sequence shard).
      b.tp_enter("moe.shared");
      ffn_gemms(b, m, l, weights, "moe.shared", t.gemm, t.sp * h, /*input_shared=*/true);
      b.sp_regather("moe.shared");
      b.tp_exit("moe.shared");
    }
  }
  if (m.sandwich_norm)
    b.elementwise(norm_op(m), "mlp.post_norm", 2 * t.sp * h * kAct,
                  Bytes(t.sp * h * kAct + t.sp * kFp32));
  // Parallel residual: x + attn + ffn, three tensors read and one written.
  b.elementwise(MemOp::kAdd, "mlp.residual", (m.parallel_residual ? 4 : 3) * t.sp * h * kAct,
                Bytes(0), 1.0);
}

}  // namespace

double deepep_network_share(int nodes, int top_k, int route_groups, int route_group_topk) {
  if (nodes <= 1 || top_k <= 0) return 0;
  const double n = nodes;
  const double m =
      route_groups == nodes && route_group_topk > 0 ? std::min(route_group_topk, nodes) : n;
  const double reached = m * (1.0 - std::pow(1.0 - 1.0 / m, top_k));
  return reached * (n - 1.0) / n / static_cast<double>(top_k);
}

std::string_view to_string(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "forward";
    case Pass::kBackwardInput:
      return "backward-input";
    case Pass::kBackwardWeight:
      return "backward-weight";
    case Pass::kRecompute:
      return "recompute";
    case Pass::kOptimizer:
      return "optimizer";
  }
  return "?";
}

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kAttentionFwd:
      return "attention_fwd";
    case OpKind::kAttentionBwd:
      return "attention_bwd";
    case OpKind::kMemoryBound:
      return "memory_bound";
    case OpKind::kComm:
      return "comm";
  }
  return "?";
}

TokenCounts token_counts(const Layout& l, int64_t seq_len) {
  TokenCounts t;
  t.seqs = l.mbs;
  t.gemm = static_cast<int64_t>(l.mbs) * seq_len / std::max(l.cp, 1);
  t.sp = (l.tp > 1 && l.sequence_parallel()) ? t.gemm / l.tp : t.gemm;
  return t;
}

Result<std::vector<Op>> layer_operators(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                        int64_t layer) {
  SP_RETURN_IF_ERROR(check_divides(m, l, seq_len));
  if (layer < 0 || layer >= m.num_layers) {
    return Status::invalid("layer " + std::to_string(layer) + " is outside the model's " +
                           std::to_string(m.num_layers) + " layers");
  }
  const std::vector<TensorEntry> table = layer_tensor_table(m, layer);
  std::vector<const TensorEntry*> weights;  // the layer's 2-D weights, in table order
  for (const TensorEntry& t : table) {
    if (t.shape.size() == 2) weights.push_back(&t);
  }
  Builder b(m, l, seq_len);
  attention_block(b, m, l, layer, weights);
  mlp_block(b, m, l, layer, weights);
  return b.finish(l.recompute);
}

Result<std::vector<Op>> embedding_operators(const ModelSpec& m, const Layout& l, int64_t seq_len) {
  SP_RETURN_IF_ERROR(check_divides(m, l, seq_len));
  Builder b(m, l, seq_len);
  const TokenCounts& t = b.tok();
  const int64_t out = t.gemm * m.hidden * kAct;
  // Vocab-parallel lookup: each TP rank fills the rows of its vocabulary slice, then the partial
  // outputs are summed (all-reduce, or reduce-scatter into the SP shards). Stores the token ids.
  b.push(
      memory_bound(MemOp::kEmbedding, "embed.lookup", Pass::kForward, 2 * out, Bytes(t.gemm * 8)),
      {memory_bound(MemOp::kEmbedding, "embed.lookup.wgrad", Pass::kBackwardWeight, 3 * out)});
  if (m.learned_positions) b.elementwise(MemOp::kAdd, "embed.positions", 3 * out, Bytes(0), 1.0);
  b.tp_exit("embed");
  std::vector<Op> ops = b.finish(Recompute::kNone);
  return ops;
}

Result<std::vector<Op>> head_operators(const ModelSpec& m, const Layout& l, int64_t seq_len) {
  SP_RETURN_IF_ERROR(check_divides(m, l, seq_len));
  Builder b(m, l, seq_len);
  const TokenCounts& t = b.tok();
  const int64_t h = m.hidden, vocab = ceil_div(m.vocab, l.tp);
  b.elementwise(norm_op(m), "head.norm", 2 * t.sp * h * kAct,
                Bytes(t.sp * h * kAct + t.sp * kFp32));
  // The LM head runs in bf16 (gemm_fwd's bf16_only): its boundary moves bf16.
  b.tp_enter("head", t.gemm * h * kAct);
  b.gemm_fwd("head.lm", t.gemm, LocalWeight{vocab, h, 1}, b.block_input_saved(),
             /*bf16_only=*/true);
  b.sp_regather("head", t.gemm * h * kAct);
  const int64_t logits = t.gemm * vocab;
  // Gemma-2's final soft-cap, as Gemma2ForCausalLM applies it to the bf16 logits: divide, tanh,
  // multiply, three kernels that each read and write them (4 B per logit), keeping the tanh output
  // for the backward; the backward's three kernels move 14 B per logit.
  if (m.final_softcap > 0)
    b.elementwise(MemOp::kElementwise, "head.softcap", 12 * logits, Bytes(logits * kAct),
                  14.0 / 12.0);
  // Cross entropy in fp32 (Megatron-LM vocab_parallel_cross_entropy): cast, subtract the max,
  // exp in place, divide by the sum: the fp32 softmax is stored for the backward.
  b.elementwise(MemOp::kCast, "loss.cast_fp32", logits * (kAct + kFp32), Bytes(0), 1.0);
  b.push(comm("loss.tp_ar", Pass::kForward, CollectiveOp::kAllReduce, GroupKind::kTp, l.tp,
              3 * t.gemm * kFp32),
         {});
  b.elementwise(MemOp::kCrossEntropy, "loss.ce", 4 * logits * kFp32, Bytes(logits * kFp32), 0.75);
  if (l.tp <= 1) {
    // No TP: the all-reduce of max, sum-exp and the target logit is not needed.
    auto& f = b.fwd_;
    for (size_t i = 0; i < f.size(); ++i) {
      if (f[i].name == "loss.tp_ar") {
        f.erase(f.begin() + static_cast<long>(i));
        b.bwd_.erase(b.bwd_.begin() + static_cast<long>(i));
        break;
      }
    }
  }
  return b.finish(Recompute::kNone);
}

std::vector<Op> optimizer_operators(int64_t local_params, bool fp16_loss_scale, int main_grad_bytes,
                                    bool fp32_params) {
  // Bytes per parameter of each pass (operators.h).
  std::vector<Op> ops;
  if (main_grad_bytes == 2)
    ops.push_back(
        memory_bound(MemOp::kCast, "optim.grad_to_fp32", Pass::kOptimizer, 6 * local_params));
  if (fp16_loss_scale)
    ops.push_back(
        memory_bound(MemOp::kElementwise, "optim.unscale", Pass::kOptimizer, 8 * local_params));
  ops.push_back(
      memory_bound(MemOp::kL2Norm, "optim.grad_norm", Pass::kOptimizer, 4 * local_params));
  ops.push_back(memory_bound(MemOp::kAdamW, "optim.adam", Pass::kOptimizer, 28 * local_params));
  if (fp32_params) return ops;
  ops.push_back(
      memory_bound(MemOp::kCast, "optim.copy_params", Pass::kOptimizer, 6 * local_params));
  ops.push_back(memory_bound(MemOp::kFill, "optim.zero_grads", Pass::kOptimizer,
                             int64_t{main_grad_bytes} * local_params));
  return ops;
}

namespace {
// Inserts `op` right after the first op named `after` in pass `pass` (or before it with
// `before`); appends when there is none.
void insert_at(std::vector<Op>& ops, std::string_view anchor, Pass pass, Op op, bool before) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == anchor && ops[i].pass == pass) {
      ops.insert(ops.begin() + static_cast<long>(before ? i : i + 1), std::move(op));
      return;
    }
  }
  ops.push_back(std::move(op));
}

// Query and key/value heads of the attention core on one TP rank, as attention_block counts
// them (MLA: as many key/value heads as queries).
struct LocalHeads {
  int64_t q = 0, kv = 0;
};
LocalHeads local_heads(const ModelSpec& m, const Layout& l) {
  const int64_t q = std::max<int64_t>(1, m.num_heads / std::max(l.tp, 1));
  return {q, m.mla ? q : std::max<int64_t>(1, m.num_kv_heads / std::max(l.tp, 1))};
}

// SwiGLU's SiLU and product as separate eager kernels on a dense layer: 4 B per FFN element more
// than the list's fused activation forward (10 B against 6), `backward_extra` B more backward.
// The FFN width is the down projection's input.
void add_unfused_swiglu(std::vector<Op>& ops, const ModelSpec& m, const std::string& name,
                        int64_t backward_extra) {
  if (m.ffn_kind != FfnKind::kSwiGlu || m.moe) return;
  int64_t width = 0;
  for (const Op& op : ops) {
    if (op.pass == Pass::kForward && op.name == "mlp.down" && op.gemm())
      width = op.gemm()->m * op.gemm()->k;
  }
  insert_at(ops, "mlp.act", Pass::kForward,
            memory_bound(MemOp::kElementwise, name, Pass::kForward, 4 * width),
            /*before=*/false);
  insert_at(ops, "mlp.act.bwd", Pass::kBackwardInput,
            memory_bound(MemOp::kElementwise, name + ".bwd", Pass::kBackwardInput,
                         backward_extra * width),
            /*before=*/false);
}
}  // namespace

void add_nanotron_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                int64_t seq_len) {
  const TokenCounts t = token_counts(l, seq_len);
  const int64_t dqk = m.qk_head_dim();
  const int64_t hq = m.num_heads / std::max(l.tp, 1) * dqk;  // local q width
  const int64_t hkv =
      std::max<int64_t>(1, m.num_kv_heads / std::max(l.tp, 1)) * dqk;  // local k (= v) width
  // CausalSelfAttention.forward (src/nanotron/models/llama.py, training path): qkv_states is
  // [s, b, q+k+v]; MHA permutes it to [3, b, s, heads, d] with .contiguous() (GQA: a
  // transpose(0,1).contiguous() per q, k, v: the same bytes), a read and a write of q, k, v;
  // then torch.cat of K and V and .permute(1,2,0,3,4).contiguous() for the flash rotary's packed
  // kv: two more reads and writes of K and V. Each copy's backward copies the gradient back.
  const int64_t qkv_bytes = 2 * t.gemm * (hq + 2 * hkv) * kAct + 4 * t.gemm * 2 * hkv * kAct;
  Op qkv = memory_bound(MemOp::kCopy, "attn.qkv_layout", Pass::kForward, qkv_bytes);
  Op qkv_bwd = memory_bound(MemOp::kCopy, "attn.qkv_layout.bwd", Pass::kBackwardInput, qkv_bytes);
  insert_at(ops, "attn.rope", Pass::kForward, std::move(qkv), /*before=*/true);
  insert_at(ops, "attn.rope.bwd", Pass::kBackwardInput, std::move(qkv_bwd), /*before=*/false);
  // The attention output [b·s, heads, d] is viewed as [b, s, h] and transposed to [s, b, h]
  // before o_proj; with b > 1 the GEMM's reshape to 2-D copies it (read and write), and the
  // gradient is copied back. With b = 1 the transpose is a view.
  if (l.mbs > 1) {
    const int64_t out_bytes = 2 * t.gemm * hq * kAct;
    insert_at(ops, "attn.o", Pass::kForward,
              memory_bound(MemOp::kCopy, "attn.out_layout", Pass::kForward, out_bytes),
              /*before=*/true);
    insert_at(ops, "attn.o.dgrad", Pass::kBackwardInput,
              memory_bound(MemOp::kCopy, "attn.out_layout.bwd", Pass::kBackwardInput, out_bytes),
              /*before=*/false);
  }
  // GLUActivation: torch.split of gate_up_proj's output (views), self.act(gate) and "* up" as
  // two eager kernels: SiLU reads and writes the gate (4 B per FFN element), the product reads
  // two and writes one (6 B): 10 B where the list's fused activation moves 6. Backward: the
  // product's two gradients (read grad and the other factor, write: 2 × 6 B), SiLU's backward
  // (read grad and gate, write: 6 B) and split's backward concatenating the two halves into the
  // merged gradient (read 4, write 4 B): 26 B where the list moves 1.5 × 6 = 9.
  add_unfused_swiglu(ops, m, "mlp.glu_unfused", 17);
}

void append_in_pass_order(std::vector<Op>& first, std::vector<Op> then) {
  std::vector<Op> out;
  out.reserve(first.size() + then.size());
  for (const auto* part : {&first, &then})
    for (const Op& op : *part)
      if (op.pass == Pass::kForward) out.push_back(op);
  for (const auto* part : {&then, &first})
    for (const Op& op : *part)
      if (op.pass != Pass::kForward) out.push_back(op);
  first = std::move(out);
}

Result<std::vector<Op>> mtp_operators(const ModelSpec& m, const Layout& l, int64_t seq_len) {
  std::vector<Op> out;
  if (m.mtp_layers <= 0) return out;
  SP_RETURN_IF_ERROR(check_divides(m, l, seq_len));
  // The D modules are the same operators (Megatron's MultiTokenPredictionBlock holds D copies of
  // one MultiTokenPredictionLayer spec), chained: module k's forward runs after module k-1's and
  // its backward before. Build one and lay it out D times, forward passes in order and backward
  // passes after them, in linear time (merging module by module copied the list D times).
  std::vector<Op> module;
  {
    SP_ASSIGN_OR_RETURN(module, embedding_operators(m, l, seq_len));
    Builder b(m, l, seq_len);
    const TokenCounts& t = b.tok();
    const int64_t h = m.hidden;
    const Bytes norm_saved(t.sp * h * kAct + t.sp * kFp32);
    b.elementwise(norm_op(m), "enorm", 2 * t.sp * h * kAct, norm_saved);
    b.elementwise(norm_op(m), "hnorm", 2 * t.sp * h * kAct, norm_saved);
    // eh_proj on the concatenation [s, 2h], as MultiTokenPredictionLayer._concat_embeddings runs
    // it: a ColumnParallelLinear [2h -> h/tp] (gather_output=False; under SP it all-gathers its
    // input's sequence shards, reduce-scatters their gradient and re-gathers them for the weight
    // gradient; without SP its input gradient is all-reduced), then
    // gather_from_tensor_model_parallel_region (an all-gather of the h/tp output columns; a split
    // backward) and under SP scatter_to_sequence_parallel_region (a split; an all-gather of the
    // sequence shards backward). It stores its 2h-wide input (the sequence shard under SP).
    const int64_t cat_bytes = t.gemm * 2 * h * kAct, out_bytes = t.gemm * h * kAct;
    b.tp_enter("eh_proj", cat_bytes);
    b.gemm_fwd("eh_proj", t.gemm, LocalWeight{ceil_div(h, l.tp), 2 * h, 1},
               Bytes(t.sp * 2 * h * kAct));
    b.sp_regather("eh_proj", cat_bytes);
    if (l.tp > 1) {
      std::vector<Op> bwd;
      if (b.sp())
        bwd.push_back(comm("eh_proj.sp_ag.bwd", Pass::kBackwardInput, CollectiveOp::kAllGather,
                           GroupKind::kTp, l.tp, out_bytes));
      b.push(comm("eh_proj.tp_ag", Pass::kForward, CollectiveOp::kAllGather, GroupKind::kTp, l.tp,
                  out_bytes),
             std::move(bwd));
    }
    append_in_pass_order(module, b.finish(Recompute::kNone));
    SP_ASSIGN_OR_RETURN(std::vector<Op> layer, layer_operators(m, l, seq_len, m.num_layers - 1));
    append_in_pass_order(module, std::move(layer));
    SP_ASSIGN_OR_RETURN(std::vector<Op> head, head_operators(m, l, seq_len));
    append_in_pass_order(module, std::move(head));
  }
  for (Op& op : module) op.name = "mtp." + op.name;
  out.reserve(module.size() * static_cast<size_t>(m.mtp_layers));
  for (const bool forward : {true, false})
    for (int64_t k = 0; k < m.mtp_layers; ++k)
      for (const Op& op : module)
        if ((op.pass == Pass::kForward) == forward) out.push_back(op);
  return out;
}

Op grad_accumulation(int64_t params, int64_t bytes_per_param) {
  return memory_bound(MemOp::kAdd, "grad_accum", Pass::kBackwardWeight, params * bytes_per_param);
}

bool runs_autocast(const FrameworkOps& fw, const Layout& l) {
  return fw.autocast_without_fsdp && l.zero == 0 && l.tp == 1 && l.pp == 1 && l.cp == 1;
}

std::vector<Op> autocast_embedding_ops(int64_t params) {
  // embedding_dense_backward_cuda (aten/src/ATen/native/cuda/Embedding.cu) allocates the
  // gradient with at::zeros({num_weights, ...}); the H200 trace has one fill_ of
  // [128256, 4096] float per micro-batch.
  std::vector<Op> ops{
      memory_bound(MemOp::kFill, "embed.grad_fill", Pass::kBackwardWeight, 4 * params)};
  for (Op& op : autocast_weight_ops(0, params)) ops.push_back(std::move(op));
  return ops;
}

std::pair<int, int> autocast_norm_readers(const ModelSpec& m, int64_t layer) {
  const int attn = m.mla ? 2 : 3;  // wq, wk, wv (torchtitan's separate projections); MLA: q, kv
  const int ffn = m.is_moe_layer(layer) ? 1 : m.gated_ffn() ? 2 : 1;
  return {attn, ffn};
}

std::vector<Op> autocast_stream_ops(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                    int64_t layer) {
  const int64_t e = token_counts(l, seq_len).sp * m.hidden;  // stream elements
  std::vector<Op> ops;
  const MemOp norm = norm_op(m);
  if (layer < 0) {
    // The final norm (fp32 in and out) and the LM head's cast of its output; backward the same.
    ops.push_back(memory_bound(norm, "autocast.stream_norm", Pass::kForward, 4 * e));
    ops.push_back(memory_bound(MemOp::kCast, "autocast.stream_cast", Pass::kForward, 6 * e));
    ops.push_back(
        memory_bound(MemOp::kCast, "autocast.stream_cast.bwd", Pass::kBackwardInput, 6 * e));
    ops.push_back(memory_bound(norm, "autocast.stream_norm.bwd", Pass::kBackwardInput, 6 * e));
    return ops;
  }
  const auto [attn, ffn] = autocast_norm_readers(m, layer);
  const int64_t casts = attn + ffn;
  // Forward. Two norms read and write fp32 (8 B where the list moves 4); each reader's cast of a
  // norm output reads fp32 and writes bf16 (6 B; the trace's bfloat16_copy_kernel_cuda of
  // [1, 4096, 4096] before each of wq, wk, wv, w1, w3); two residual adds read fp32 + bf16 and
  // write fp32 (10 B where the list moves 6).
  ops.push_back(memory_bound(norm, "autocast.stream_norm", Pass::kForward, 2 * 4 * e));
  ops.push_back(memory_bound(MemOp::kCast, "autocast.stream_cast", Pass::kForward, casts * 6 * e));
  ops.push_back(memory_bound(MemOp::kAdd, "autocast.stream_residual", Pass::kForward, 2 * 4 * e));
  // Backward. Each cast's backward widens its bf16 input gradient to fp32 (6 B, the trace's
  // direct_copy_kernel_cuda), and the two residual gradients are narrowed to bf16 for the blocks'
  // outputs (6 B each); the projections' fp32 input gradients are summed (attn - 1 + ffn - 1
  // adds, 12 B each) and so are the two residual branches (12 B where the list moves 6); the two
  // norm backwards read the fp32 input and gradient and write fp32 (12 B where the list moves 6).
  ops.push_back(memory_bound(MemOp::kCast, "autocast.stream_cast.bwd", Pass::kBackwardInput,
                             (casts + 2) * 6 * e));
  ops.push_back(memory_bound(MemOp::kAdd, "autocast.stream_residual.bwd", Pass::kBackwardInput,
                             ((casts - 2) * 12 + 2 * 6) * e));
  ops.push_back(memory_bound(norm, "autocast.stream_norm.bwd", Pass::kBackwardInput, 2 * 6 * e));
  return ops;
}

int64_t AutocastParams::total() const {
  int64_t n = head;
  for (int64_t p : layer) n += p;
  return n;
}

AutocastParams autocast_cast_params(const ModelSpec& m, const Layout& l) {
  AutocastParams p;
  p.layer.assign(static_cast<size_t>(m.num_layers), 0);
  for (const TensorEntry& t : tensor_table(m)) {
    const int64_t n = shard_numel(t, m, l.tp, l.ep, l.etp);
    if (t.layer >= 0) {
      if (t.shape.size() >= 2) p.layer[static_cast<size_t>(t.layer)] += n;
    } else if (t.last_stage && t.shape.size() >= 2) {
      p.head += n;  // the LM head
    } else if (t.first_stage && m.tied_embeddings && t.shape.size() >= 2) {
      p.head += n;  // the tied head reads the embedding through the cast
    }
  }
  return p;
}

std::vector<Op> autocast_weight_ops(int64_t cast_params, int64_t params) {
  std::vector<Op> ops;
  // Autocast's cast of an fp32 leaf that requires grad goes through its weight cache
  // (cached_cast, aten/src/ATen/autocast_mode.cpp), cleared when the region exits: one
  // fp32 -> bf16 copy per weight per micro-batch (PyTorch's vectorized bfloat16_copy_kernel_cuda).
  if (cast_params > 0) {
    ops.push_back(memory_bound(MemOp::kCast, "autocast.cast", Pass::kForward, 6 * cast_params));
    // ToCopyBackward0: the bf16 weight gradient back to fp32 (direct_copy_kernel_cuda).
    ops.push_back(
        memory_bound(MemOp::kCast, "autocast.cast.bwd", Pass::kBackwardWeight, 6 * cast_params));
  }
  // AccumulateGrad (torch/csrc/autograd/functions/accumulate_grad.h): with param.grad set to None
  // by zero_grad, the first micro-batch's gradient is stolen; later ones are added in place,
  // param.grad += new_grad in fp32.
  Op acc =
      memory_bound(MemOp::kAdd, "autocast.accumulate_grad", Pass::kBackwardWeight, 12 * params);
  acc.skips_first_microbatch = true;
  if (params > 0) ops.push_back(std::move(acc));
  return ops;
}

void add_nanotron_head_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                               int64_t seq_len) {
  const TokenCounts t = token_counts(l, seq_len);
  const int64_t logits = t.gemm * ceil_div(m.vocab, std::max(l.tp, 1));
  // _ShardedCrossEntropy (src/nanotron/parallel/tensor_parallel/functional.py) over the fp32
  // logits: max (read 4 B), sharded_logits - max into a new tensor (read 4, write 4), exp in
  // place (4 + 4), sum (4), div_ in place (4 + 4): 32 B per logit where loss.ce counts 16.
  // Backward: a clone of the saved softmax (read 4, write 4), the one-hot subtraction by index
  // (one element per token), mul_ by grad_output in place (4 + 4): 16 B where loss.ce.bwd
  // counts 12.
  insert_at(ops, "loss.ce", Pass::kForward,
            memory_bound(MemOp::kElementwise, "loss.ce_unfused", Pass::kForward, 16 * logits),
            /*before=*/false);
  insert_at(
      ops, "loss.ce.bwd", Pass::kBackwardInput,
      memory_bound(MemOp::kElementwise, "loss.ce_unfused.bwd", Pass::kBackwardInput, 4 * logits),
      /*before=*/false);
}

namespace {

// PyTorch's composite rms_norm (aten/src/ATen/native/layer_norm.cpp rms_norm_composite, PyTorch
// <= 2.8; 2.9 dispatches to one fused _fused_rms_norm kernel): to(fp32) (read 2, write 4 B per
// element), pow (4 + 4), mean (4), add eps and rsqrt over one value per token, mul by the rstd
// (4 + 4), mul by the weight (4 + 4), type_as (4 + 2): 40 B per element where the list's fused
// norm moves 4; its autograd backward runs the same chain in reverse, counted at the list's usual
// 1.5 x the forward: 60 B where the list moves 6.
constexpr int64_t kCompositeNormFwdExtra = 40 - 4;
constexpr int64_t kCompositeNormBwdExtra = 60 - 6;

void add_composite_norm(std::vector<Op>& ops, const std::string& norm, int64_t elements) {
  insert_at(ops, norm, Pass::kForward,
            memory_bound(MemOp::kElementwise, norm + "_composite", Pass::kForward,
                         kCompositeNormFwdExtra * elements),
            /*before=*/false);
  insert_at(ops, norm + ".bwd", Pass::kBackwardInput,
            memory_bound(MemOp::kElementwise, norm + "_composite.bwd", Pass::kBackwardInput,
                         kCompositeNormBwdExtra * elements),
            /*before=*/false);
}

}  // namespace

void add_torchtitan_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                  int64_t seq_len, bool composite_rmsnorm) {
  const TokenCounts t = token_counts(l, seq_len);
  // torchtitan/models/llama3/model.py (TransformerBlock): attention_norm and ffn_norm are
  // nn.RMSNorm over the block's input, h per token (the sequence shard under SP).
  if (composite_rmsnorm) {
    add_composite_norm(ops, "attn.norm", t.sp * m.hidden);
    add_composite_norm(ops, "mlp.norm", t.sp * m.hidden);
  }
  const int64_t dqk = m.qk_head_dim();
  const auto [q_heads, kv_heads] = local_heads(m, l);
  // apply_rotary_emb: xq.float() viewed as complex64 (read 2, write 4 B per element), times
  // freqs_cis (4 + 4), view_as_real and type_as (4 + 2): 20 B per q and k element where the
  // list's fused rope moves 4; the backward runs the same three kernels.
  if (!m.learned_positions) {
    const int64_t rope_dim = m.mla ? m.mla->qk_rope_head_dim : dqk;
    const int64_t rope = t.gemm * (q_heads + kv_heads) * rope_dim;
    insert_at(ops, "attn.rope", Pass::kForward,
              memory_bound(MemOp::kElementwise, "attn.rope_complex", Pass::kForward, 16 * rope),
              /*before=*/false);
    insert_at(
        ops, "attn.rope.bwd", Pass::kBackwardInput,
        memory_bound(MemOp::kElementwise, "attn.rope_complex.bwd", Pass::kBackwardInput, 16 * rope),
        /*before=*/false);
  }
  // repeat_kv (GQA): K and V expanded to every query head and reshaped, a copy (read the
  // kv_heads, write the q_heads width); the backward sums the copies back (the same bytes).
  if (kv_heads < q_heads) {
    const int64_t bytes = 2 * t.gemm * (kv_heads + q_heads) * dqk * kAct;
    insert_at(ops, "attn.core", Pass::kForward,
              memory_bound(MemOp::kCopy, "attn.repeat_kv", Pass::kForward, bytes), /*before=*/true);
    insert_at(ops, "attn.core.bwd", Pass::kBackwardInput,
              memory_bound(MemOp::kCopy, "attn.repeat_kv.bwd", Pass::kBackwardInput, bytes),
              /*before=*/false);
  }
  // FeedForward: w2(F.silu(w1(x)) * w3(x)): SiLU reads and writes the gate (4 B per FFN
  // element), the product reads two and writes one (6 B): 10 B where the list's fused activation
  // moves 6; backward: the product's two gradients (2 x 6 B) and SiLU's (6 B): 18 B where the
  // list moves 9.
  add_unfused_swiglu(ops, m, "mlp.swiglu_unfused", 9);
}

void apply_tp_comm_overlap(std::vector<Op>& ops, const ModelSpec& m, const Layout& l) {
  if (l.tp <= 1 || !l.sequence_parallel() || m.mla) return;
  // The blocks whose linears are Transformer Engine's (TE's default overlap configuration names
  // them qkv/proj and fc1/fc2: transformer_engine/pytorch/module/base.py, initialize_ub).
  auto in_block = [](const std::string& name) {
    return name.starts_with("attn.") || name.starts_with("mlp.");
  };
  auto overlappable = [&](const Op& op) {
    const CommShape* c = op.comm();
    return c != nullptr && c->group == GroupKind::kTp && c->group_size > 1 &&
           (c->kind == CollectiveOp::kAllGather || c->kind == CollectiveOp::kReduceScatter) &&
           in_block(op.name) && !c->overlap_next;
  };
  // Forward, recompute, backward: dgrad and wgrad GEMMs interleave in the backward.
  auto phase = [](Pass p) { return p == Pass::kForward ? 0 : p == Pass::kRecompute ? 1 : 2; };
  auto find = [&](const std::string& name, Pass pass) -> size_t {
    for (size_t i = 0; i < ops.size(); ++i)
      if (ops[i].name == name && ops[i].pass == pass) return i;
    return ops.size();
  };
  // Moves ops[from] to just before ops[to] (to != from) and marks it, with the splits its GEMM
  // runs in.
  auto move_before = [&](size_t from, size_t to, int chunks) {
    Op op = std::move(ops[from]);
    std::get<CommShape>(op.shape).overlap_next = true;
    std::get<CommShape>(op.shape).partner_chunks = chunks;
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(from));
    if (to > from) --to;
    ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(to), std::move(op));
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!overlappable(ops[i])) continue;
    const std::string name = ops[i].name;
    const Pass pass = ops[i].pass;
    const bool gather = ops[i].comm()->kind == CollectiveOp::kAllGather;
    size_t partner = ops.size();
    // TE's defaults (initialize_ub get_default_config): "num_splits": tp_size for ring_exchange,
    // 4 for pipeline; a bulk overlap runs the GEMM whole.
    int chunks = 1;
    if (name.ends_with(".wgrad")) {
      // The column-parallel input's re-gather for its weight gradient (bulk, with that linear's
      // dgrad): the block's first GEMM after its forward all-gather is the linear.
      const std::string block = name.substr(0, name.find('.'));
      for (size_t j = find(block + ".sp_ag", Pass::kForward); j < ops.size(); ++j) {
        if (ops[j].kind != OpKind::kGemm) continue;
        partner = find(ops[j].name + ".dgrad", Pass::kBackwardInput);
        break;
      }
    } else if (gather) {
      // Forward (ring exchange with qkv_fprop / fc1_fprop) or the row-parallel output
      // gradient's gather (with proj_dgrad / fc2_dgrad): the next GEMM of the same phase.
      for (size_t j = i + 1; j < ops.size() && phase(ops[j].pass) == phase(pass); ++j) {
        if (ops[j].kind == OpKind::kGemm) {
          partner = j;
          break;
        }
      }
      chunks = l.tp;
    } else {
      // Reduce-scatters of a GEMM's output (pipelined with proj_fprop / fc2_fprop; the input
      // gradient's with qkv_wgrad / fc1_wgrad, which runs after the dgrad that produced it):
      // the GEMM just before.
      for (size_t j = i; j-- > 0;) {
        if (ops[j].kind == OpKind::kGemm) {
          partner = j;
          break;
        }
      }
      if (pass == Pass::kForward || pass == Pass::kRecompute) chunks = 4;
    }
    if (partner == ops.size() || partner == i) continue;
    move_before(i, partner, chunks);
    // Moved back: the op now at i was at i - 1, already seen. Moved on: the op now at i comes next.
    if (partner > i) --i;
  }
}

void add_torchtitan_head_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                 int64_t seq_len, bool composite_rmsnorm) {
  // The final nn.RMSNorm before the output projection. The loss, cross_entropy(pred.float()),
  // is the list's fp32 cast and cross-entropy (torchtitan/components/loss.py:20-27 at v0.2.2),
  // but its backward is PyTorch's, not a fused one: without TP (with it torchtitan runs
  // loss_parallel) nll_loss_backward zero-fills an fp32 gradient of the logits' size and
  // scatters -1/N into it (4 B per logit), and _log_softmax_backward_data reads that gradient for
  // its row sum, then the gradient and the saved output, and writes the input gradient (16 B per
  // logit where loss.ce.bwd counts 12; PyTorch's cunn_SoftMaxBackward for rows too long for
  // shared memory). The H200 trace: fill_ [4096, 128256] float and one
  // _log_softmax_backward_data per micro-batch.
  if (composite_rmsnorm)
    add_composite_norm(ops, "head.norm", token_counts(l, seq_len).sp * m.hidden);
  if (l.tp == 1) {
    const int64_t logits = token_counts(l, seq_len).gemm * m.vocab;
    for (Op& op : ops) {
      if (op.name == "loss.ce.bwd" && op.kind == OpKind::kMemoryBound)
        std::get<MemoryBoundShape>(op.shape).bytes = Bytes(16 * logits);
    }
    insert_at(ops, "loss.ce.bwd", Pass::kBackwardInput,
              memory_bound(MemOp::kFill, "loss.nll_grad_fill", Pass::kBackwardInput, 4 * logits),
              /*before=*/true);
  }
}

Status save_high_precision_linear_inputs(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                         int64_t seq_len, int64_t layer) {
  if (l.dtype != DType::kFp8) return Status::ok();
  Layout bf16 = l;
  bf16.dtype = DType::kBf16;
  SP_ASSIGN_OR_RETURN(const std::vector<Op> hp, layer_operators(m, bf16, seq_len, layer));
  for (Op& op : ops) {
    if (op.pass != Pass::kForward) continue;
    auto same = std::find_if(hp.begin(), hp.end(), [&](const Op& o) {
      return o.pass == Pass::kForward && o.name == op.name;
    });
    // The fp8 casts have no bf16 counterpart and store nothing.
    if (same != hp.end()) op.saved = same->saved;
  }
  return Status::ok();
}

void apply_torchtitan_selective_ac(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                   int64_t seq_len, int64_t layer) {
  if (l.recompute != Recompute::kSelective || m.is_moe_layer(layer) || m.mla) return;
  const TokenCounts t = token_counts(l, seq_len);
  const int64_t dqk = m.qk_head_dim();
  const auto [q_heads, kv_heads] = local_heads(m, l);
  const int64_t q_width = q_heads * dqk, kv_width = kv_heads * dqk;
  std::erase_if(ops, [](const Op& op) { return op.pass == Pass::kRecompute; });
  std::vector<Op> rerun;
  for (Op& op : ops) {
    if (op.pass != Pass::kForward) continue;
    const GemmShape* g = op.gemm();
    Op r = op;
    r.pass = Pass::kRecompute;
    r.saved = Bytes(0);
    bool reruns = true;
    if (op.name == "attn.norm") {
      op.saved = Bytes(t.sp * m.hidden * kAct);  // the block input (checkpoint boundary)
    } else if (op.name == "attn.qkv" && g != nullptr) {
      // wq and wv saved; wk (the list's fused projection's k columns) reruns.
      op.saved = Bytes(t.gemm * (q_width + kv_width) * kAct);
      r = gemm("attn.qkv.k", Pass::kRecompute, g->m, kv_width, g->k, g->batch, g->dtype);
    } else if (op.name == "attn.core") {
      // SDPA's output and log-sum-exp saved; the core does not rerun.
      op.saved = Bytes(t.gemm * q_width * kAct + t.gemm * q_heads * kFp32);
      reruns = false;
    } else if (op.name == "mlp.fc1" && g != nullptr && m.ffn_kind == FfnKind::kSwiGlu) {
      // w1 (gate) saved; w3 (up, the other half of the list's fused GEMM) reruns.
      op.saved = Bytes(g->m * (g->n / 2) * kAct);
      r = gemm("mlp.fc1.up", Pass::kRecompute, g->m, g->n / 2, g->k, g->batch, g->dtype);
    } else if (op.name == "mlp.down" && g != nullptr) {
      op.saved = Bytes(g->m * g->n * kAct);  // w2's output
      reruns = false;
    } else if (const CommShape* c = op.comm()) {
      // Reduce-scatter outputs are on the save list; all-gathers and all-reduces rerun.
      op.saved = Bytes(0);
      reruns = c->kind != CollectiveOp::kReduceScatter && op.name != "attn.cp_kv";
    } else {
      op.saved = Bytes(0);  // the other matmuls (wo), norms, RoPE, activation, residual adds
    }
    if (reruns) rerun.push_back(std::move(r));
  }
  auto first_backward =
      std::find_if(ops.begin(), ops.end(), [](const Op& op) { return op.pass != Pass::kForward; });
  ops.insert(first_backward, rerun.begin(), rerun.end());
}

FrameworkOps framework_ops(FrameworkId id) {
  FrameworkOps f;
  f.nanotron_kernels = id == FrameworkId::kNanotron;
  f.torchtitan_kernels = is_torchtitan(id);
  f.composite_rmsnorm = id == FrameworkId::kTorchtitan2025;
  f.fp8_saves_high_precision_inputs = is_torchtitan(id);
  f.op_level_selective_ac = is_torchtitan(id);
  f.autocast_without_fsdp = is_torchtitan(id);
  return f;
}

Result<std::vector<Op>> framework_layer_operators(const ModelSpec& m, const Layout& l,
                                                  int64_t seq_len, int64_t layer,
                                                  const FrameworkOps& fw) {
  SP_ASSIGN_OR_RETURN(std::vector<Op> ops, layer_operators(m, l, seq_len, layer));
  if (fw.nanotron_kernels) add_nanotron_layer_kernels(ops, m, l, seq_len);
  if (fw.tp_comm_overlap) apply_tp_comm_overlap(ops, m, l);
  if (fw.torchtitan_kernels) add_torchtitan_layer_kernels(ops, m, l, seq_len, fw.composite_rmsnorm);
  if (fw.fp8_saves_high_precision_inputs)
    SP_RETURN_IF_ERROR(save_high_precision_linear_inputs(ops, m, l, seq_len, layer));
  if (fw.op_level_selective_ac) apply_torchtitan_selective_ac(ops, m, l, seq_len, layer);
  return ops;
}

Result<std::vector<Op>> framework_head_operators(const ModelSpec& m, const Layout& l,
                                                 int64_t seq_len, const FrameworkOps& fw) {
  SP_ASSIGN_OR_RETURN(std::vector<Op> head, head_operators(m, l, seq_len));
  if (fw.nanotron_kernels) add_nanotron_head_kernels(head, m, l, seq_len);
  if (fw.torchtitan_kernels) add_torchtitan_head_kernels(head, m, l, seq_len, fw.composite_rmsnorm);
  SP_ASSIGN_OR_RETURN(std::vector<Op> mtp, mtp_operators(m, l, seq_len));
  append_in_pass_order(head, std::move(mtp));
  return head;
}

Flops total_flops(const std::vector<Op>& ops, Pass pass) {
  Flops f(0);
  for (const Op& op : ops) {
    if (op.pass == pass) f += op.flops;
  }
  return f;
}

Bytes total_saved(const std::vector<Op>& ops) {
  Bytes b(0);
  for (const Op& op : ops) b += op.saved;
  return b;
}

OperatorListKey operator_list_key(const Layout& l) {
  return {l.tp,
          l.cp * 4 + static_cast<int>(l.cp_comm_type()),
          l.ep,
          l.etp,
          l.mbs,
          static_cast<int>(l.recompute) * 256 + l.recompute_module_set(),
          l.sequence_parallel(),
          static_cast<int>(l.dtype)};
}

}  // namespace scaleplan::models
