// The operator list; conventions and sources in operators.h.
#include "models/operators.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "models/operators_detail.h"
#include "models/tensors.h"

namespace scaleplan::models {
using namespace detail;  // NOLINT(google-build-using-namespace): the op constructors

namespace {

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
    // and the fp8 transpose the weight gradient needs (1 + 1 B), raising the amax of delayed
    // scaling, Megatron-core's default recipe (kFp8CastTranspose; docs/runtime.md, "fp8 casts").
    // framework_layer_operators turns each into its recipe's kernels on the GPU it runs on
    // (Fp8Recipe). The weights' fp8 copies are made once per step and not counted.
    push(memory_bound(MemOp::kFp8CastTranspose, name + ".fp8_cast", Pass::kForward,
                      4 * m * w.in * w.count),
         {});
    push(gemm(name, Pass::kForward, m, w.out, w.in, w.count, dt, saved),
         {memory_bound(MemOp::kFp8CastTranspose, name + ".fp8_cast.bwd", Pass::kBackwardInput,
                       4 * m * w.out * w.count),
          std::move(dgrad), std::move(wgrad)});
  }

  // A memory-bound op computing `kind` and its backward (`bwd_factor` times the bytes).
  void elementwise(MemOp kind, const std::string& name, int64_t bytes, Bytes saved,
                   double bwd_factor = 1.5) {
    elementwise_pair(kind, name, bytes,
                     static_cast<int64_t>(static_cast<double>(bytes) * bwd_factor), saved);
  }
  // A memory-bound op computing `kind` (`fwd_bytes`) and its backward (`bwd_bytes`).
  void elementwise_pair(MemOp kind, const std::string& name, int64_t fwd_bytes, int64_t bwd_bytes,
                        Bytes saved) {
    push(memory_bound(kind, name, Pass::kForward, fwd_bytes, saved),
         {memory_bound(kind, name + ".bwd", Pass::kBackwardInput, bwd_bytes)});
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
  // Under act_cache=fp8 an activation is cached once, however many linears read it (DeepSeek
  // caches activations, not per-module copies: the attention output serves the attention and the
  // output projection, §3.3.3), as autograd saves a bf16 tensor once.
  Bytes linear_input(int64_t elements, bool shared = false) const {
    if (fp8_cache()) return Bytes(shared ? 0 : fp8_tiles(elements, 2 * kFp8));
    if (l_.dtype == DType::kFp8) return Bytes(elements * kFp8);
    return Bytes(shared ? 0 : elements * kAct);
  }

  // act_cache=fp8 (DeepSeek-V3 technical report §3.3.2-3.3.3): activations cached for the
  // backward in fp8 (E4M3, 1 B), or E5M6 (12 bits) for the attention output, each 1x128 tile with
  // its fp32 scaling factor ("we group and scale elements on a 1x128 tile basis").
  bool fp8_cache() const { return l_.act_cache == ActCache::kFp8; }
  // Bytes of `elements` cached at `half_bytes` half-bytes each (2: fp8; 3: E5M6), plus one fp32
  // scale per 128 of them.
  static int64_t fp8_tiles(int64_t elements, int64_t half_bytes) {
    return elements * half_bytes / 2 + kFp32 * ceil_div(elements, int64_t{128});
  }
  // The cast that writes a cached copy of `elements` bf16 values (read 2 B, write the cached
  // bytes) and, before the backward reads it, the one that restores bf16 (read, write 2 B).
  void cache_cast(const std::string& name, int64_t elements, int64_t cached_bytes) {
    const int64_t bytes = elements * kAct + cached_bytes;
    push(memory_bound(MemOp::kCast, name + ".cache_cast", Pass::kForward, bytes),
         {memory_bound(MemOp::kCast, name + ".cache_cast.bwd", Pass::kBackwardInput, bytes)});
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
    // The forward ops move to the front of the list (a builder finishes once); the recompute and
    // stored-bytes rules below read their names and kinds there, which nothing changes.
    const size_t n = fwd_.size();
    std::vector<Op> out = std::move(fwd_);
    // Recompute: what reruns before the backward, and what is then not stored.
    if (rc == Recompute::kFull) {
      for (size_t i = 0; i < n; ++i) {
        Op r = out[i];
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
      for (size_t i = 0; i < n; ++i) {
        const std::string& name = out[i].name;
        if ((modules & kRecomputeLayernorm) && (name == "attn.norm" || name == "mlp.norm")) {
          // The norm's output is the next GEMM's stored input (the router's, in a MoE block).
          // An fp8 linear stores its own fp8 copy instead (linear_input), which stays.
          const int64_t block = block_input_saved().value();
          for (size_t j = i + 1; j < n; ++j) {
            if (out[j].kind != OpKind::kGemm) continue;
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
        for (size_t i = 0; i < n; ++i) {
          if ((module_of(out[i].name) & bit) == 0) continue;
          if (first && out[i].kind == OpKind::kGemm) {
            first = false;
            continue;
          }
          out[i].saved = Bytes(0);
        }
      }
      if (modules & kRecomputeMoe) {
        // The block's input, the norm's output, stays (the router stored it; unless layernorm
        // freed it); its probabilities and everything after do not.
        for (size_t i = 0; i < n; ++i) {
          if ((module_of(out[i].name) & kRecomputeMoe) == 0) continue;
          const bool router = out[i].name == "moe.router";
          out[i].saved =
              Bytes(router && !(modules & kRecomputeLayernorm) ? block_input_saved().value() : 0);
        }
      }
      for (size_t i = 0; i < n; ++i) {
        if ((modules & module_of(out[i])) == 0) continue;
        Op r = out[i];
        r.pass = Pass::kRecompute;
        r.saved = Bytes(0);
        out.push_back(std::move(r));
      }
    }
    for (size_t i = n; i-- > 0;) {
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
  // act_cache=fp8: O is kept once, in E5M6 with its tile scales, for the attention's backward and
  // the output projection's weight gradient ("Inputs of the Linear after the attention
  // operator", DeepSeek-V3 §3.3.3).
  const int64_t o_elements = o_bytes / kAct;
  const int64_t o_saved = b.fp8_cache() ? Builder::fp8_tiles(o_elements, 3) : o_bytes;
  Op fwd = make_op("attn.core", Pass::kForward, OpKind::kAttentionFwd);
  fwd.shape = a;
  fwd.flops = a.forward_flops();
  fwd.saved = Bytes(qkv + o_saved + lse);
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
  if (b.fp8_cache()) b.cache_cast("attn.core", o_elements, o_saved);
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
  const int64_t act_in = (gated ? 2 : 1) * width;  // the activation's input elements
  Bytes act_saved(act_in * kAct);
  // act_cache=fp8: the routed experts' SwiGLU input is cached in fp8 with its tile scales
  // ("Inputs of the SwiGLU operator in MoE", DeepSeek-V3 §3.3.3); its output is recomputed in
  // the backward (recompute_modules=moe_act).
  const bool cached = b.fp8_cache() && prefix == "moe.expert";
  if (cached) act_saved = Bytes(Builder::fp8_tiles(act_in, 2 * kFp8));
  // Bf16 values moved per element of the activation's output. A one-input activation (GELU,
  // ReLU, ReLU²) reads x and writes y (2), and its backward reads dy and x and writes dx (3). A
  // gated unit reads gate and up and writes act(gate)·up (3); its backward reads dy, gate and up
  // and writes dgate and dup (5: 10 B, 5/3 of the forward, not a one-input activation's 1.5):
  // Megatron-core's compiled swiglu_back and geglu_back (core_r0.16.0
  // megatron/core/fusions/fused_bias_swiglu.py:54-69, fused_bias_geglu.py:48-65), Transformer
  // Engine's op-fuser kernel (scaled_gated_backward_kernel, TransformerEngine d0067d0
  // common/activation/scaled_activation.cu:158-220) and Inductor's (models/inductor.cc) each
  // move these 10 B in one kernel. The frameworks' eager kernels are counted on top of this
  // (operators_framework.cc: nanotron, torchtitan). docs/simulator.md, "The FFN activation's
  // bytes".
  const int64_t act_fwd = gated ? 3 : 2, act_bwd = gated ? 5 : 3;
  b.elementwise_pair(act_op(m), prefix + ".act", act_fwd * width * kAct, act_bwd * width * kAct,
                     act_saved);
  // After the activation, so that its backward restores the input before the activation's.
  if (cached) b.cache_cast(prefix + ".act", act_in, act_saved.value());
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
    // The all-to-all delivers each source rank's rows grouped by expert; with more than one
    // local expert they are regrouped by expert before the experts run and back after
    // (Megatron-core MoEAlltoAllTokenDispatcher "Permutation 2" / "Unpermutation 2",
    // sort_chunks_by_idxs, one gather kernel each under moe_permute_fusion; torchtitan's
    // ExpertParallel _permute / _unpermute). DeepEP's fused dispatch sends rows that one permute
    // on the receiving side orders: its one pass each way is moe.permute / moe.unpermute.
    const bool sort =
        l.ep > 1 && moe.dispatcher == MoeDispatcher::kAllToAll && moe.num_experts / l.ep > 1;
    if (sort) b.elementwise(MemOp::kCopy, "moe.sort", 2 * expert_rows * h * kAct, Bytes(0), 1.0);
    ffn_gemms(b, m, l, weights, "moe.expert", expert_rows, expert_rows * h, false);
    if (sort) b.elementwise(MemOp::kCopy, "moe.unsort", 2 * expert_rows * h * kAct, Bytes(0), 1.0);
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
                                    bool fp32_params, MomentDtype moments) {
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
  // Gradient read (4), master read and written (4 + 4), m and v read and written.
  const int64_t moment = moments == MomentDtype::kBf16 ? 2 : 4;
  Op adam =
      memory_bound(MemOp::kAdamW, "optim.adam", Pass::kOptimizer, (12 + 4 * moment) * local_params);
  // torchtitan's AdamW is PyTorch's fused one (optimizer.implementation = "fused",
  // torchtitan/config/job_config.py:151 at v0.2.2): multi_tensor_apply over the parameter list.
  if (fp32_params) {
    ops.push_back(on_path(std::move(adam), MemPath::kMultiTensor));
    return ops;
  }
  ops.push_back(std::move(adam));
  ops.push_back(
      memory_bound(MemOp::kCast, "optim.copy_params", Pass::kOptimizer, 6 * local_params));
  ops.push_back(memory_bound(MemOp::kFill, "optim.zero_grads", Pass::kOptimizer,
                             int64_t{main_grad_bytes} * local_params));
  return ops;
}

namespace detail {

Result<std::vector<Op>> mtp_module_operators(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                             bool with_layer) {
  SP_RETURN_IF_ERROR(check_divides(m, l, seq_len));
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
    if (with_layer) {
      SP_ASSIGN_OR_RETURN(std::vector<Op> layer, layer_operators(m, l, seq_len, m.num_layers - 1));
      append_in_pass_order(module, std::move(layer));
    }
    SP_ASSIGN_OR_RETURN(std::vector<Op> head, head_operators(m, l, seq_len));
    append_in_pass_order(module, std::move(head));
  }
  return module;
}

}  // namespace detail

Result<std::vector<Op>> mtp_operators(const ModelSpec& m, const Layout& l, int64_t seq_len) {
  std::vector<Op> out;
  if (m.mtp_layers <= 0) return out;
  // The D modules are the same operators (Megatron's MultiTokenPredictionBlock holds D copies of
  // one MultiTokenPredictionLayer spec), chained: module k's forward runs after module k-1's and
  // its backward before. Build one and lay it out D times, forward passes in order and backward
  // passes after them, in linear time (merging module by module copied the list D times).
  SP_ASSIGN_OR_RETURN(std::vector<Op> module,
                      detail::mtp_module_operators(m, l, seq_len, /*with_layer=*/true));
  for (Op& op : module) op.name.insert(0, "mtp.");
  out.reserve(module.size() * static_cast<size_t>(m.mtp_layers));
  // The last module takes the ops themselves, the others copies.
  for (const bool forward : {true, false})
    for (int64_t k = 0; k < m.mtp_layers; ++k)
      for (Op& op : module)
        if ((op.pass == Pass::kForward) == forward) {
          if (k + 1 < m.mtp_layers)
            out.push_back(op);
          else
            out.push_back(std::move(op));
        }
  return out;
}

}  // namespace scaleplan::models
