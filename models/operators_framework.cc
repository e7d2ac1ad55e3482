// Framework adjustments to the operator lists (nanotron, torchtitan, Transformer Engine, autocast);
// conventions and sources in operators.h.
#include "models/operators.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <optional>
#include <utility>

#include "core/enum_names.h"
#include "models/inductor.h"
#include "models/operators_detail.h"
#include "models/tensors.h"

namespace scaleplan::models {
using namespace detail;  // NOLINT(google-build-using-namespace): the op constructors

namespace {

// Query and key/value heads of the attention core on one TP rank, as attention_block counts
// them (MLA: as many key/value heads as queries).
struct LocalHeads {
  int64_t q = 0, kv = 0;
};
LocalHeads local_heads(const ModelSpec& m, const Layout& l) {
  const int64_t q = std::max<int64_t>(1, m.num_heads / std::max(l.tp, 1));
  return {q, m.mla ? q : std::max<int64_t>(1, m.num_kv_heads / std::max(l.tp, 1))};
}

// A framework's memory-bound kernel `name` of `kind` beside the list's op `anchor`: before or after
// it in the forward (`fwd_bytes`), and its backward "<name>.bwd" (`bwd_bytes`) right after
// `bwd_anchor` ("<anchor>.bwd" when empty) in the input-gradient pass. Errors name the anchor.
Status add_kernel_pair(std::vector<Op>& ops, MemOp kind, const std::string& anchor, bool before,
                       const std::string& name, int64_t fwd_bytes, int64_t bwd_bytes,
                       const std::string& bwd_anchor = "") {
  SP_RETURN_IF_ERROR(insert_at(ops, anchor, Pass::kForward,
                               memory_bound(kind, name, Pass::kForward, fwd_bytes), before));
  return insert_at(ops, bwd_anchor.empty() ? anchor + ".bwd" : bwd_anchor, Pass::kBackwardInput,
                   memory_bound(kind, name + ".bwd", Pass::kBackwardInput, bwd_bytes),
                   /*before=*/false);
}

// Whether the list runs a rotary embedding (not on learned positions, nor on a model's NoPE layers:
// ModelSpec::uses_rope).
bool has_rope(const std::vector<Op>& ops) {
  return std::ranges::any_of(
      ops, [](const Op& op) { return op.pass == Pass::kForward && op.name == "attn.rope"; });
}

// SwiGLU's SiLU and product as separate eager kernels on the FFN `prefix` ("mlp", the shared
// experts "moe.shared", the routed experts "moe.expert"): 4 B per element of its activation
// output more than the list's fused activation forward (10 B against 6), `backward_extra` B more
// backward than the list's fused gated backward (10 B: ffn_gemms). The width is the down
// projection's input, over all its experts (a grouped GEMM's batch). Nothing where the layer has
// no such FFN. They compute the SwiGLU (kSwiglu), as the list's fused activation does: a
// profiler trace files SiLU, its backward and the bf16 product under the same kind
// (sim::classify_aten_op). The op is "<prefix>.<name>".
Status add_unfused_swiglu(std::vector<Op>& ops, const ModelSpec& m, const std::string& prefix,
                          const std::string& name, int64_t backward_extra) {
  if (m.ffn_kind != FfnKind::kSwiGlu) return Status::ok();
  int64_t width = 0;
  for (const Op& op : ops) {
    if (const GemmShape* g = op.gemm();
        g && op.pass == Pass::kForward && op.name == prefix + ".down")
      width += g->m * g->k * g->batch;
  }
  if (width == 0) return Status::ok();
  return add_kernel_pair(ops, MemOp::kSwiglu, prefix + ".act", /*before=*/false,
                         prefix + "." + name, 4 * width, backward_extra * width);
}
}  // namespace

Status add_nanotron_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
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
  // Before the rotary embedding, or the attention core on a layer without one, which the copies
  // feed.
  const std::string qkv_anchor = has_rope(ops) ? "attn.rope" : "attn.core";
  SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kCopy, qkv_anchor, /*before=*/true,
                                     "attn.qkv_layout", qkv_bytes, qkv_bytes));
  // The attention output [b·s, heads, d] is viewed as [b, s, h] and transposed to [s, b, h]
  // before o_proj; with b > 1 the GEMM's reshape to 2-D copies it (read and write), and the
  // gradient is copied back. With b = 1 the transpose is a view.
  if (l.mbs > 1) {
    const int64_t out_bytes = 2 * t.gemm * hq * kAct;
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kCopy, "attn.o", /*before=*/true,
                                       "attn.out_layout", out_bytes, out_bytes, "attn.o.dgrad"));
  }
  // GLUActivation: torch.split of gate_up_proj's output (views), self.act(gate) and "* up" as
  // two eager kernels: SiLU reads and writes the gate (4 B per FFN element), the product reads
  // two and writes one (6 B): 10 B where the list's fused activation moves 6. Backward: the
  // product's two gradients (read grad and the other factor, write: 2 × 6 B), SiLU's backward
  // (read grad and gate, write: 6 B) and split's backward concatenating the two halves into the
  // merged gradient (read 4, write 4 B): 26 B where the list's fused gated backward moves 10.
  // Nanotron's MoE models are not modelled with these kernels: the list's fused units stay.
  if (!m.moe) SP_RETURN_IF_ERROR(add_unfused_swiglu(ops, m, "mlp", "glu_unfused", 16));
  return Status::ok();
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

void apply_torchtitan_embedding_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                        int64_t seq_len, bool fp32_gradient) {
  const int64_t elements = token_counts(l, seq_len).gemm * m.hidden;
  for (Op& op : ops) {
    if (op.name != "embed.lookup.wgrad") continue;
    op = on_path(std::move(op), MemPath::kSegmentSum);
    // embedding_backward_cuda_kernel (aten/src/ATen/native/cuda/EmbeddingBackwardKernel.cu at
    // pytorch 01b9dc56), after sorting the ids: compute_grad_weight reads each token's gradient
    // row (4 B per element in fp32) and writes one partial sum per run of at most
    // NROWS_PER_THREAD = 10 equal ids (acc_type, 4 B; as many runs as tokens where ids rarely
    // repeat, as the random ids of the reference step and of memory_paths.py), sum_and_scatter
    // reads the partial sums (4 B) and writes the gradient's rows (4 B): 16 B per element, as
    // memory_paths.py counts it. A bf16 gradient (FSDP) keeps the list's 6 B, though these
    // kernels move 2 + 4 + 4 + 2 B there: left for a change that moves FSDP's predictions.
    if (fp32_gradient) std::get<MemoryBoundShape>(op.shape).bytes = Bytes(16 * elements);
  }
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
  // PyTorch's kernels (docs/simulator.md, "Memory-bound kernels by implementation"): the fp32
  // norms are _fused_rms_norm's row reductions where the model's norm is an RMSNorm; a cast to
  // bf16 is the vectorized bfloat16_copy_kernel_cuda, one to fp32 and an add of fp32 and bf16
  // operands the dynamic-casting loop.
  const MemPath row = norm == MemOp::kRmsNorm ? MemPath::kRowNorm : MemPath::kVectorized;
  if (layer < 0) {
    // The final norm (fp32 in and out) and the LM head's cast of its output; backward the same.
    ops.push_back(on_path(memory_bound(norm, "autocast.stream_norm", Pass::kForward, 4 * e), row));
    ops.push_back(memory_bound(MemOp::kCast, "autocast.stream_cast", Pass::kForward, 6 * e));
    ops.push_back(
        on_path(memory_bound(MemOp::kCast, "autocast.stream_cast.bwd", Pass::kBackwardInput, 6 * e),
                MemPath::kCastLoop));
    ops.push_back(
        on_path(memory_bound(norm, "autocast.stream_norm.bwd", Pass::kBackwardInput, 6 * e), row));
    return ops;
  }
  const auto [attn, ffn] = autocast_norm_readers(m, layer);
  const int64_t casts = attn + ffn;
  // Forward. Two norms read and write fp32 (8 B where the list moves 4); each reader's cast of a
  // norm output reads fp32 and writes bf16 (6 B; the trace's bfloat16_copy_kernel_cuda of
  // [1, 4096, 4096] before each of wq, wk, wv, w1, w3); two residual adds read fp32 + bf16 and
  // write fp32 (10 B where the list moves 6).
  ops.push_back(
      on_path(memory_bound(norm, "autocast.stream_norm", Pass::kForward, 2 * 4 * e), row));
  ops.push_back(memory_bound(MemOp::kCast, "autocast.stream_cast", Pass::kForward, casts * 6 * e));
  ops.push_back(
      on_path(memory_bound(MemOp::kAdd, "autocast.stream_residual", Pass::kForward, 2 * 4 * e),
              MemPath::kCastLoop));
  // Backward. Each cast's backward widens its bf16 input gradient to fp32 (6 B, the trace's
  // direct_copy_kernel_cuda), and the two residual gradients are narrowed to bf16 for the blocks'
  // outputs (6 B each); the projections' fp32 input gradients are summed (attn - 1 + ffn - 1
  // adds, 12 B each) and so are the two residual branches (12 B where the list moves 6); the two
  // norm backwards read the fp32 input and gradient and write fp32 (12 B where the list moves 6).
  ops.push_back(on_path(
      memory_bound(MemOp::kCast, "autocast.stream_cast.bwd", Pass::kBackwardInput, casts * 6 * e),
      MemPath::kCastLoop));
  ops.push_back(
      memory_bound(MemOp::kCast, "autocast.stream_narrow.bwd", Pass::kBackwardInput, 2 * 6 * e));
  ops.push_back(memory_bound(MemOp::kAdd, "autocast.stream_residual.bwd", Pass::kBackwardInput,
                             ((casts - 2) * 12 + 2 * 6) * e));
  ops.push_back(on_path(
      memory_bound(norm, "autocast.stream_norm.bwd", Pass::kBackwardInput, 2 * 6 * e), row));
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
    // ToCopyBackward0: the bf16 weight gradient back to fp32 (direct_copy_kernel_cuda, whose
    // bf16 -> fp32 direction has no kernel of its own on CUDA: the dynamic-casting loop).
    ops.push_back(on_path(
        memory_bound(MemOp::kCast, "autocast.cast.bwd", Pass::kBackwardWeight, 6 * cast_params),
        MemPath::kCastLoop));
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

Status add_nanotron_head_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                 int64_t seq_len) {
  const TokenCounts t = token_counts(l, seq_len);
  const int64_t logits = t.gemm * ceil_div(m.vocab, std::max(l.tp, 1));
  // _ShardedCrossEntropy (src/nanotron/parallel/tensor_parallel/functional.py) over the fp32
  // logits: max (read 4 B), sharded_logits - max into a new tensor (read 4, write 4), exp in
  // place (4 + 4), sum (4), div_ in place (4 + 4): 32 B per logit where loss.ce counts 16.
  // Backward: a clone of the saved softmax (read 4, write 4), the one-hot subtraction by index
  // (one element per token), mul_ by grad_output in place (4 + 4): 16 B where loss.ce.bwd
  // counts 12.
  return add_kernel_pair(ops, MemOp::kElementwise, "loss.ce", /*before=*/false, "loss.ce_unfused",
                         16 * logits, 4 * logits);
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

Status add_composite_norm(std::vector<Op>& ops, const std::string& norm, int64_t elements) {
  return add_kernel_pair(ops, MemOp::kElementwise, norm, /*before=*/false, norm + "_composite",
                         kCompositeNormFwdExtra * elements, kCompositeNormBwdExtra * elements);
}

// nn.RMSNorm on PyTorch >= 2.9: _fused_rms_norm, one row reduction per token forward
// (vectorized_layer_norm_kernel) and backward (layer_norm_grad_input_kernel_vectorized and the
// weight gradient's GammaBetaBackward), as the H200 trace names them.
void run_rms_norms_as_rows(std::vector<Op>& ops) {
  for (Op& op : ops) {
    auto* s = std::get_if<MemoryBoundShape>(&op.shape);
    if (s != nullptr && s->op == MemOp::kRmsNorm) s->path = MemPath::kRowNorm;
  }
}

// _fused_rms_norm_backward's second kernel: the weight gradient (GammaBetaBackwardCUDAKernel),
// which reads the norm's input and output gradient again, row by row, after
// layer_norm_grad_input_kernel_vectorized has read them for the input gradient (the H200 trace:
// both kernels under each of the step's 36 _fused_rms_norm_backward calls). The list's norm
// backward counts the input gradient's pass only. Two bf16 operands per element; under autocast
// the builder adds what the fp32 stream reads beyond them (sim ProgramBuilder::add_autocast_stream:
// the list does not depend on ZeRO or PP, which autocast does). Its kind is the norm's
// (kRmsNorm): it is the norm's backward, as a profiler trace files it.
Status add_row_norm_weight_gradients(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                     int64_t seq_len, std::initializer_list<const char*> norms) {
  constexpr int64_t stream_bytes = kAct;
  if (norm_op(m) != MemOp::kRmsNorm) return Status::ok();
  const int64_t elements = token_counts(l, seq_len).sp * m.hidden;
  for (const char* norm : norms) {
    const std::string name = norm;
    Op op = on_path(memory_bound(MemOp::kRmsNorm, name + "_weight.bwd", Pass::kBackwardInput,
                                 2 * stream_bytes * elements),
                    MemPath::kRowNorm);
    SP_RETURN_IF_ERROR(insert_at(ops, name + ".bwd", Pass::kBackwardInput, std::move(op),
                                 /*before=*/false));
  }
  return Status::ok();
}

// What torchtitan's MoE layer runs eagerly around the list's router GEMM, its token
// reordering and the weighted sum of the expert outputs (torchtitan b5bcd76c6,
// models/common/moe.py and token_dispatcher.py; docs/simulator.md, "torchtitan's MoE layer").
// T tokens of h, E experts, N = T·top_k routed copies; nothing on a dense layer.
Status add_torchtitan_moe_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l) {
  const auto forward_op = [&](const char* name) {
    return std::ranges::find_if(
        ops, [name](const Op& op) { return op.pass == Pass::kForward && op.name == name; });
  };
  const auto router = forward_op("moe.router");
  const auto unpermute = forward_op("moe.unpermute");
  if (!m.moe || router == ops.end() || router->gemm() == nullptr || unpermute == ops.end())
    return Status::ok();
  const MoeSpec& moe = *m.moe;
  const int64_t tokens = router->gemm()->m;
  const int64_t td = tokens * m.hidden;         // the router's input elements
  const int64_t te = tokens * moe.num_experts;  // the [T, E] scores
  // The list's weighted sum reads and writes the N routed rows (operators.cc): N·h elements.
  const int64_t nd = std::get<MemoryBoundShape>(unpermute->shape).bytes.value() / (2 * kAct);
  const bool full = l.recompute == Recompute::kFull;  // only the layer input is kept
  auto kernel = [](MemOp kind, const std::string& name, Pass pass, int64_t bytes,
                   MemPath path = MemPath::kVectorized) {
    return on_path(memory_bound(kind, name, pass, bytes), path);
  };
  // A forward op's rerun under recompute moves what it moves.
  auto set_bytes = [&](const std::string& name, Pass pass, int64_t bytes) {
    for (Op& op : ops)
      if (op.name == name &&
          (op.pass == pass || (pass == Pass::kForward && op.pass == Pass::kRecompute)))
        std::get<MemoryBoundShape>(op.shape).bytes = Bytes(bytes);
  };

  // TokenChoiceTopKRouter.forward (moe.py:290-292): the gate runs under
  // torch.autocast(dtype=float32), which casts its bf16 input to fp32 (read 2, write 4 B per
  // element: direct_copy_kernel_cuda's dynamic-casting loop) and keeps that copy for the gate's
  // weight gradient: 4 B per element where the list counts the bf16 input's 2, which the shared
  // experts, where there are any, keep as well (their w1 and w3 read it); the fp32 input
  // gradient is narrowed back (ToCopyBackward0, vectorized). The gate's GEMM itself runs in
  // fp32 (no TF32 by PyTorch's default); the list's router GEMM stays bf16: not modelled.
  Op to_fp32 =
      kernel(MemOp::kCast, "moe.router.to_fp32", Pass::kForward, 6 * td, MemPath::kCastLoop);
  const int64_t kept = moe.num_shared_experts > 0 ? kFp32 : kFp32 - kAct;
  to_fp32.saved = Bytes(full ? 0 : kept * td);
  SP_RETURN_IF_ERROR(insert_at(ops, "moe.router", Pass::kForward, std::move(to_fp32), true));
  SP_RETURN_IF_ERROR(insert_at(
      ops, "moe.router.dgrad", Pass::kBackwardInput,
      kernel(MemOp::kCast, "moe.router.to_fp32.bwd", Pass::kBackwardInput, 6 * td), false));
  // After the GEMM, in the order they run (moe.py:296-317, 424-429): the score function over the
  // fp32 [T, E] logits (read and write 4 B; its backward reads the output and the gradient and
  // writes, 12 B); the load-balancing bias added for the choice (expert_bias_E, on by
  // torchtitan's default load_balance_coeff = 1e-3, moe.py:362, 380-386: read 4, write 4 B, the
  // [E] bias broadcast over the tokens, the legacy strided loop); torch.topk reading the
  // scores and writing K fp32 values and int64 indices per token; the one-hot routing map
  // (zeros_like bool, 1 B) summed over the tokens (1 B read). The gather of the top-k scores is
  // T·K elements; its backward zero-fills a [T, E] fp32 gradient (4 B) before scattering them.
  // The ops on [T, K] and [E] (route_norm, route_scale, tokens_per_expert_E.add_, the argsort of
  // the N expert ids) move a few bytes per token and are left out.
  const MemOp score = moe.score_function == "sigmoid" ? MemOp::kElementwise : MemOp::kSoftmax;
  std::vector<Op> fwd{
      kernel(score, "moe.router.scores", Pass::kForward, 8 * te),
      kernel(MemOp::kAdd, "moe.router.bias", Pass::kForward, 8 * te, MemPath::kStrided),
      kernel(MemOp::kMoeRouting, "moe.router.topk", Pass::kForward,
             4 * te + tokens * moe.top_k * (kFp32 + 8)),
      kernel(MemOp::kElementwise, "moe.router.counts", Pass::kForward, 2 * te)};
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it)
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.router", Pass::kForward, std::move(*it), false));
  std::vector<Op> bwd{kernel(MemOp::kFill, "moe.router.gather.bwd", Pass::kBackwardInput, 4 * te),
                      kernel(score, "moe.router.scores.bwd", Pass::kBackwardInput, 12 * te)};
  for (Op& op : bwd)
    SP_RETURN_IF_ERROR(
        insert_at(ops, "moe.router.dgrad", Pass::kBackwardInput, std::move(op), true));

  // The reordering and the weighted sum as the all-to-all dispatcher runs them (DeepEP's
  // dispatcher has its own kernels: the list's).
  if (moe.dispatcher != MoeDispatcher::kAllToAll) return Status::ok();
  // The gathers x[token_indices] (_local_reorder, token_dispatcher.py:93-100) and, under EP,
  // routed[permuted_indices] (_permute, :550) are the list's moe.permute and moe.sort. Their
  // backward (IndexBackward0: index_backward over grad.new_zeros, PyTorch's derivatives.yaml
  // and FunctionsManual.cpp) zero-fills the source's gradient (2 B per element) and accumulates
  // the rows into it with index_put_(accumulate=True), on CUDA the sort-based
  // index_put_with_sort_kernel: it reads each gathered row's gradient (2 B) and reads and writes
  // each destination row once (4 B): for moe.permute 2 B per N·h and 4 B per T·h (each token
  // gathered top_k times), for moe.sort 6 B per row (a permutation), where the list's
  // backward counts a copy of the gathered rows (4 B).
  const int64_t td_out = nd / moe.top_k;  // the combine's output: T·h of the sequence shard
  SP_RETURN_IF_ERROR(insert_at(
      ops, "moe.permute.bwd", Pass::kBackwardInput,
      kernel(MemOp::kFill, "moe.permute.grad_fill", Pass::kBackwardInput, kAct * td_out), true));
  set_bytes("moe.permute.bwd", Pass::kBackwardInput, 2 * nd + 4 * td_out);
  if (const auto sort = forward_op("moe.sort"); sort != ops.end()) {
    const int64_t rd = std::get<MemoryBoundShape>(sort->shape).bytes.value() / (2 * kAct);
    SP_RETURN_IF_ERROR(insert_at(
        ops, "moe.sort.bwd", Pass::kBackwardInput,
        kernel(MemOp::kFill, "moe.sort.grad_fill", Pass::kBackwardInput, kAct * rd), true));
    set_bytes("moe.sort.bwd", Pass::kBackwardInput, 6 * rd);
  }
  // combine (token_dispatcher.py:156-168 at ep = 1, 614-626 under EP): out = zeros_like(x)
  // (2 B per T·h), then (routed.to(float32) * scores[:, None]).to(bf16) as three eager kernels:
  // the widening copy (read 2, write 4 B per routed element, the dynamic-casting loop), the
  // product with the [N, 1] scores broadcast along h (read 4, write 4 B: the legacy strided
  // loop), the narrowing copy (read 4, write 2 B, vectorized). The product keeps its fp32
  // operand for the scores' gradient (4 B per routed element; the scores themselves are the
  // list's fp32 per routed row). Then deterministic_scatter_add (torchtitan/ops/scatter_add.py:
  // out.scatter_add under torch.use_deterministic_algorithms): PyTorch's out-of-place scatter_add
  // copies out (read 2, write 2 B per T·h) and, deterministic on CUDA, runs
  // _scatter_via_index_put, whose index broadcast along h makes it one index_put_(accumulate=True)
  // of the N rows into the T (TensorAdvancedIndexing.cpp, TORCH_IMPL_FUNC(scatter_add)):
  // 2 B per N·h and 4 B per T·h, the list's unpermute (which counted 4 B per N·h). Its backward
  // is the list's gather of the N rows' gradient (scatter_add.py:28-33). Backward of the
  // weighting after it: the narrowing copy's gradient widened (6 B, the dynamic-casting loop),
  // the product's input gradient (grad x scores: 8 B, strided), the scores' gradient (grad x the
  // kept fp32 copy, 12 B, then its sum over h, 4 B, a reduce_kernel), the widening copy's
  // gradient narrowed (6 B).
  set_bytes("moe.unpermute", Pass::kForward, 2 * nd + 4 * td_out);
  Op product =
      kernel(MemOp::kElementwise, "moe.combine.score", Pass::kForward, 8 * nd, MemPath::kStrided);
  product.saved = Bytes(full ? 0 : kFp32 * nd);
  std::vector<Op> before{
      kernel(MemOp::kFill, "moe.combine.zeros", Pass::kForward, kAct * td_out),
      kernel(MemOp::kCast, "moe.combine.to_fp32", Pass::kForward, 6 * nd, MemPath::kCastLoop),
      std::move(product), kernel(MemOp::kCast, "moe.combine.to_bf16", Pass::kForward, 6 * nd),
      kernel(MemOp::kCopy, "moe.combine.out_copy", Pass::kForward, 2 * kAct * td_out)};
  for (Op& op : before)
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.unpermute", Pass::kForward, std::move(op), true));
  std::vector<Op> after{
      kernel(MemOp::kCast, "moe.combine.to_bf16.bwd", Pass::kBackwardInput, 6 * nd,
             MemPath::kCastLoop),
      kernel(MemOp::kElementwise, "moe.combine.score.bwd", Pass::kBackwardInput, 8 * nd,
             MemPath::kStrided),
      kernel(MemOp::kElementwise, "moe.combine.score_grad.bwd", Pass::kBackwardInput, 12 * nd),
      kernel(MemOp::kElementwise, "moe.combine.score_sum.bwd", Pass::kBackwardInput, 4 * nd,
             MemPath::kReduce),
      kernel(MemOp::kCast, "moe.combine.to_fp32.bwd", Pass::kBackwardInput, 6 * nd)};
  for (auto it = after.rbegin(); it != after.rend(); ++it)
    SP_RETURN_IF_ERROR(
        insert_at(ops, "moe.unpermute.bwd", Pass::kBackwardInput, std::move(*it), false));
  return Status::ok();
}

}  // namespace

Status add_torchtitan_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                    int64_t seq_len, bool composite_rmsnorm) {
  const TokenCounts t = token_counts(l, seq_len);
  // torchtitan/models/llama3/model.py (TransformerBlock): attention_norm and ffn_norm are
  // nn.RMSNorm over the block's input, h per token (the sequence shard under SP).
  if (composite_rmsnorm) {
    SP_RETURN_IF_ERROR(add_composite_norm(ops, "attn.norm", t.sp * m.hidden));
    SP_RETURN_IF_ERROR(add_composite_norm(ops, "mlp.norm", t.sp * m.hidden));
  } else {
    run_rms_norms_as_rows(ops);
  }
  const int64_t dqk = m.qk_head_dim();
  const auto [q_heads, kv_heads] = local_heads(m, l);
  // apply_rotary_emb (torchtitan/models/llama3/model.py at v0.2.2), per q and k element, as three
  // PyTorch kernels each way (the H200 trace: 16 of each per q and per k per step of 4 layers and
  // 4 micro-batches):
  //   xq.float()                   read 2, write 4 B: direct_copy_kernel_cuda, bf16 -> fp32, the
  //                                dynamic-casting loop (Copy.cu has no vectorized kernel that way)
  //   xq_ * freqs_cis (complex64)  read 4, write 4 B: the list's rope op (4 B) and 4 B more
  //   view_as_real(..).type_as(xq) read 4, write 2 B: bfloat16_copy_kernel_cuda, vectorized
  // 20 B where the list's fused rope moves 4. Backward: type_as's gradient widened to fp32 (the
  // dynamic-casting loop), the product's gradient times conj(freqs_cis), and .float()'s gradient
  // narrowed to bf16 (vectorized): the same bytes. The product, both ways, is the legacy strided
  // elementwise_kernel<128, 2> (freqs_cis broadcasts over the heads, so the operands are not
  // contiguous alike: the trace's gpu_kernel_impl_nocast<BinaryFunctor<c10::complex<float>...>>):
  // MemPath::kStrided, 8 B per element as examples/torch_reference/memory_paths.py counts its
  // rope_complex_mul kernels (complex64 read and written; the 2 MB freqs_cis left out).
  if (has_rope(ops)) {
    const int64_t rope_dim = m.mla ? m.mla->qk_rope_head_dim : dqk;
    const int64_t rope = t.gemm * (q_heads + kv_heads) * rope_dim;
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kCast, "attn.rope", /*before=*/true,
                                       "attn.rope_to_fp32", 6 * rope, 6 * rope));
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kRope, "attn.rope", /*before=*/false,
                                       "attn.rope_complex", 4 * rope, 4 * rope));
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kCast, "attn.rope_complex", /*before=*/false,
                                       "attn.rope_to_bf16", 6 * rope, 6 * rope));
    for (Op& op : ops) {
      const bool widens = (op.name == "attn.rope_to_fp32" && op.pass == Pass::kForward) ||
                          (op.name == "attn.rope_to_bf16.bwd" && op.pass == Pass::kBackwardInput);
      const bool product = op.name == "attn.rope" || op.name == "attn.rope.bwd" ||
                           op.name == "attn.rope_complex" || op.name == "attn.rope_complex.bwd";
      if (widens) op = on_path(std::move(op), MemPath::kCastLoop);
      if (product) op = on_path(std::move(op), MemPath::kStrided);
    }
  }
  // repeat_kv (GQA): K and V expanded to every query head and reshaped, a copy (read the
  // kv_heads, write the q_heads width); the backward sums the copies back (the same bytes), as
  // memory_paths.py counts its repeat_kv kernels. The copy reads a stride-0 dimension, so it is
  // the strided elementwise_kernel<128, 4> (direct_copy_kernel_cuda through
  // gpu_kernel_impl_nocast), the sum a reduce_kernel over the repeats (the H200 trace: 32 of each
  // per step, one per K and V).
  if (kv_heads < q_heads) {
    const int64_t bytes = 2 * t.gemm * (kv_heads + q_heads) * dqk * kAct;
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kCopy, "attn.core", /*before=*/true,
                                       "attn.repeat_kv", bytes, bytes));
    for (Op& op : ops) {
      if (op.name == "attn.repeat_kv") op = on_path(std::move(op), MemPath::kStridedCopy);
      if (op.name == "attn.repeat_kv.bwd") op = on_path(std::move(op), MemPath::kReduce);
    }
  }
  // FeedForward: w2(F.silu(w1(x)) * w3(x)): SiLU reads and writes the gate (4 B per FFN
  // element), the product reads two and writes one (6 B): 10 B where the list's fused activation
  // moves 6; backward: the product's two gradients (2 x 6 B) and SiLU's (6 B): 18 B where the
  // list's fused gated backward moves 10. w1 and w3 are separate linears, so no cat joins the
  // two gradients. The same on every FFN of an MoE model (torchtitan b5bcd76c6): its dense
  // layers and shared experts are this FeedForward (models/common/feed_forward.py:53-54,
  // moe.py:447-448), and GroupedExperts runs F.silu(grouped_mm(x, w1)) * grouped_mm(x, w3)
  // (models/common/moe.py:94-105) as the same two eager kernels over the routed rows.
  for (const char* ffn : {"mlp", "moe.shared", "moe.expert"})
    SP_RETURN_IF_ERROR(add_unfused_swiglu(ops, m, ffn, "swiglu_unfused", 8));
  SP_RETURN_IF_ERROR(add_torchtitan_moe_kernels(ops, m, l));
  return Status::ok();
}

void apply_tp_comm_overlap(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                           const UbPreset& preset) {
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
  // Moves ops[from] to just before ops[to] (to != from) and marks it as `cfg` runs it beside that
  // GEMM (what each method takes: docs/simulator.md, "TP communication overlap"):
  //   ring exchange  the GEMM in tp chunks (split_overlap_ag / split_overlap_rs loop over
  //                  _tp_size, common/comm_gemm_overlap/comm_gemm_overlap.cpp:1161, 1342 at
  //                  d0067d0), tp/2 with `aggregate` (two chunks per GEMM, :1089-1118); each chunk
  //                  a cudaMemcpyAsync on the copy engine ("use_ce": True, userbuffers.cu
  //                  userbuffers_send), so the transfer spares compute.
  //   pipeline       the GEMM in num_splits chunks; the reduce-scatter kernels on num_sm SMs.
  //   bulk           the GEMM whole beside an SM kernel of num_sm CTAs.
  // With set_sm_margin the GEMM is launched on sm_count - num_sm SMs for its whole duration
  // (CommOverlapCore::initialize, _math_sms, :141-144) and the collective's kernels run on the
  // others; without it an SM kernel shares the SMs with the GEMM as NCCL's does (s_overlap).
  auto move_before = [&](size_t from, size_t to, const UbGemmConfig& cfg, bool gather) {
    const bool ring = cfg.method == UbMethod::kRingExchange;
    int chunks = 1;
    if (ring) chunks = cfg.aggregate && gather ? std::max(1, l.tp / 2) : l.tp;
    if (cfg.method == UbMethod::kPipeline) chunks = std::max(1, cfg.num_splits);
    if (auto* g = std::get_if<GemmShape>(&ops[to].shape))
      g->sm_margin = cfg.set_sm_margin ? cfg.num_sm : 0;
    Op op = std::move(ops[from]);
    CommShape& c = std::get<CommShape>(op.shape);
    c.overlap_next = true;
    c.partner_chunks = chunks;
    c.spares_compute = ring || cfg.set_sm_margin;
    ops.erase(ops.begin() + static_cast<std::ptrdiff_t>(from));
    if (to > from) --to;
    ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(to), std::move(op));
    return to + 1;  // the GEMM's index now
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    if (!overlappable(ops[i])) continue;
    const std::string name = ops[i].name;
    const Pass pass = ops[i].pass;
    const bool gather = ops[i].comm()->kind == CollectiveOp::kAllGather;
    const bool attn = name.starts_with("attn.");
    const bool fwd = pass == Pass::kForward || pass == Pass::kRecompute;
    size_t partner = ops.size();
    UbGemm gemm;
    if (name.ends_with(".wgrad")) {
      // The column-parallel input's re-gather for its weight gradient (bulk, with that linear's
      // dgrad): the block's first GEMM after its forward all-gather is the linear.
      gemm = attn ? UbGemm::kQkvDgrad : UbGemm::kFc1Dgrad;
      const std::string block = name.substr(0, name.find('.'));
      for (size_t j = find(block + ".sp_ag", Pass::kForward); j < ops.size(); ++j) {
        if (ops[j].kind != OpKind::kGemm) continue;
        partner = find(ops[j].name + ".dgrad", Pass::kBackwardInput);
        break;
      }
    } else if (gather) {
      // Forward (with qkv_fprop / fc1_fprop) or the row-parallel output gradient's gather (with
      // proj_dgrad / fc2_dgrad): the next GEMM of the same phase.
      gemm = fwd ? (attn ? UbGemm::kQkvFprop : UbGemm::kFc1Fprop)
                 : (attn ? UbGemm::kProjDgrad : UbGemm::kFc2Dgrad);
      for (size_t j = i + 1; j < ops.size() && phase(ops[j].pass) == phase(pass); ++j) {
        if (ops[j].kind == OpKind::kGemm) {
          partner = j;
          break;
        }
      }
    } else {
      // Reduce-scatters of a GEMM's output (with proj_fprop / fc2_fprop; the input gradient's
      // with qkv_wgrad / fc1_wgrad, which runs after the dgrad that produced it): the GEMM just
      // before.
      gemm = fwd ? (attn ? UbGemm::kProjFprop : UbGemm::kFc2Fprop)
                 : (attn ? UbGemm::kQkvWgrad : UbGemm::kFc1Wgrad);
      for (size_t j = i; j-- > 0;) {
        if (ops[j].kind == OpKind::kGemm) {
          partner = j;
          break;
        }
      }
    }
    if (partner == ops.size() || partner == i) continue;
    const UbGemmConfig& cfg = preset[gemm];
    const Bytes rs_bytes = ops[i].comm()->bytes;
    const size_t at = move_before(i, partner, cfg, gather);
    // A ring-exchange reduce-scatter leaves tp partial outputs, which one reduce_bf16 (or
    // reduce_fp8_in_bf16_out) kernel on the main stream sums after the last chunk
    // (comm_gemm_overlap.cpp:1395-1403): it reads the unreduced buffer (the collective's bytes)
    // and writes this rank's 1/tp of it.
    if (!gather && cfg.method == UbMethod::kRingExchange) {
      const int64_t bytes = rs_bytes.value() + rs_bytes.value() / l.tp;
      ops.insert(ops.begin() + static_cast<std::ptrdiff_t>(at + 1),
                 memory_bound(MemOp::kAdd, ops[at].name + ".ub_reduce", pass, bytes));
      if (at + 1 <= i) ++i;  // the ops after it moved on by one
    }
    // Moved back: the op now at i was at i - 1, already seen. Moved on: the op now at i comes next.
    if (partner > i) --i;
  }
}

Status add_torchtitan_head_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
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
    SP_RETURN_IF_ERROR(
        add_composite_norm(ops, "head.norm", token_counts(l, seq_len).sp * m.hidden));
  else
    run_rms_norms_as_rows(ops);
  // pred.float(): the bf16 logits widened to fp32 in the dynamic-casting loop.
  for (Op& op : ops) {
    if (op.name == "loss.cast_fp32" && op.pass == Pass::kForward)
      op = on_path(std::move(op), MemPath::kCastLoop);
  }
  if (l.tp == 1) {
    const int64_t logits = token_counts(l, seq_len).gemm * m.vocab;
    for (Op& op : ops) {
      if (op.name == "loss.ce.bwd" && op.kind == OpKind::kMemoryBound)
        std::get<MemoryBoundShape>(op.shape).bytes = Bytes(16 * logits);
    }
    SP_RETURN_IF_ERROR(insert_at(
        ops, "loss.ce.bwd", Pass::kBackwardInput,
        memory_bound(MemOp::kFill, "loss.nll_grad_fill", Pass::kBackwardInput, 4 * logits),
        /*before=*/true));
  }
  return Status::ok();
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

namespace {
// Megatron-core's YaRN concentration factor (_yarn_get_concentration_factor,
// yarn_rotary_pos_embedding.py:252-271): 0.1·ln(factor)·mscale + 1 over the same with
// mscale_all_dim, or 0.1·ln(factor) + 1 when the config gives no mscale pair; 1 without YaRN.
double yarn_concentration(const RopeSpec& r) {
  if (r.scaling != "yarn" || !(r.factor > 1)) return 1.0;
  const auto mscale = [&](double k) { return 0.1 * k * std::log(r.factor) + 1.0; };
  if (r.mscale > 0 && r.mscale_all_dim > 0) return mscale(r.mscale) / mscale(r.mscale_all_dim);
  return mscale(1.0);
}
}  // namespace

Status add_megatron_layer_kernels(std::vector<Op>& ops, const ModelSpec& m,
                                  const FrameworkOps& fw) {
  // Elements of the experts' output and of fc1's output; bytes of the fused RoPE.
  int64_t expert_out = 0, expert_fc1 = 0, rope = 0;
  for (const Op& op : ops) {
    if (op.pass != Pass::kForward) continue;
    if (const GemmShape* g = op.gemm(); g != nullptr && op.name == "moe.expert.down")
      expert_out = g->m * g->n * g->batch;
    if (const GemmShape* g = op.gemm(); g != nullptr && op.name == "moe.expert.fc1")
      expert_fc1 = g->m * g->n * g->batch;
    if (const auto* s = std::get_if<MemoryBoundShape>(&op.shape); s && op.name == "attn.rope")
      rope = s->bytes.value();
  }
  if (m.moe && m.has_ffn_bias() && expert_out > 0) {
    SP_RETURN_IF_ERROR(insert_at(
        ops, "moe.expert.down", Pass::kForward,
        memory_bound(MemOp::kElementwise, "moe.expert.bias", Pass::kForward, 12 * expert_out),
        /*before=*/false));
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.expert.down.dgrad", Pass::kBackwardInput,
                                 memory_bound(MemOp::kElementwise, "moe.expert.bias.bwd",
                                              Pass::kBackwardInput, 16 * expert_out),
                                 /*before=*/true));
  }
  // The clamped gated unit's eager clamps and cat before the fused activation, 8 B per element
  // of fc1's output, and their backward, 15 B (operators.h); rerun with the activation where
  // moe_act is recomputed.
  if (m.moe && m.glu_clamp > 0 && m.gated_ffn() && expert_fc1 > 0 && !fw.te_op_fuser) {
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kElementwise, "moe.expert.act",
                                       /*before=*/true, "moe.expert.clamp", 8 * expert_fc1,
                                       15 * expert_fc1));
    const auto rerun = std::ranges::find_if(ops, [](const Op& op) {
      return op.pass == Pass::kRecompute && op.name == "moe.expert.act";
    });
    if (rerun != ops.end())
      ops.insert(rerun, memory_bound(MemOp::kElementwise, "moe.expert.clamp", Pass::kRecompute,
                                     8 * expert_fc1));
  }
  // The weighted gated unit's backward under torch.compile (operators.h): the input gradient is
  // the list's gated backward (10 B per element of the activation's output, ffn_gemms), then a
  // reduction for the probabilities' gradient that reads the input and the output gradient again
  // (6 B), placed before it so that the clamp's backward still follows the activation's. SwiGLU
  // experts only (gpt-oss's clamped quick-GEGLU is read as one): Megatron-core fuses no other
  // gated unit (experts.py:689-710).
  if (m.moe && m.ffn_kind == FfnKind::kSwiGlu && expert_fc1 > 0 && !fw.te_op_fuser &&
      !fw.moe_core_r010) {
    const int64_t act_out = expert_fc1 / 2;
    auto bwd = std::ranges::find_if(ops, [](const Op& op) {
      return op.pass == Pass::kBackwardInput && op.name == "moe.expert.act.bwd";
    });
    auto* shape = bwd == ops.end() ? nullptr : std::get_if<MemoryBoundShape>(&bwd->shape);
    if (shape == nullptr)
      return Status::invalid("operator list: no memory-bound 'moe.expert.act.bwd' to follow");
    SP_RETURN_IF_ERROR(insert_at(
        ops, "moe.expert.act.bwd", Pass::kBackwardInput,
        memory_bound(shape->op, "moe.expert.act.probs_grad", Pass::kBackwardInput, 6 * act_out),
        /*before=*/true));
  }
  // The fused kernel moves 4 B per rotated element each way: the eager path 20 B more forward
  // and 22 B more backward (operators.h).
  if (!m.mla && rope > 0 && std::abs(yarn_concentration(m.rope) - 1.0) > 1e-12)
    SP_RETURN_IF_ERROR(add_kernel_pair(ops, MemOp::kRope, "attn.rope", /*before=*/false,
                                       "attn.rope_unfused", rope / 4 * 20, rope / 4 * 22));
  return Status::ok();
}

namespace {

// The forward router GEMM of an MoE layer's list, or nullptr (a dense layer).
const Op* forward_router_gemm(const std::vector<Op>& ops) {
  const auto it = std::ranges::find_if(ops, [](const Op& op) {
    return op.pass == Pass::kForward && op.name == "moe.router" && op.gemm() != nullptr;
  });
  return it == ops.end() ? nullptr : &*it;
}

// The load-balancing loss's per-expert counts all-reduced over the tensor-and-context-parallel
// group, where that group is one of the two (the list has no group kind spanning both).
void add_router_counts_all_reduce(std::vector<Op>& to, const Layout& l, int64_t bytes) {
  if ((l.tp > 1) == (l.cp > 1)) return;
  to.push_back(comm("moe.router.aux_counts_ar", Pass::kForward, CollectiveOp::kAllReduce,
                    l.tp > 1 ? GroupKind::kTp : GroupKind::kCp, std::max(l.tp, l.cp), bytes));
}

// The router's kernels into the list: the forward ones after its GEMM in the order given, the
// backward ones before its input gradient's GEMM.
Status insert_router_kernels(std::vector<Op>& ops, std::vector<Op> fwd, std::vector<Op> bwd) {
  for (auto it = fwd.rbegin(); it != fwd.rend(); ++it)
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.router", Pass::kForward, std::move(*it), false));
  for (Op& op : bwd)
    SP_RETURN_IF_ERROR(
        insert_at(ops, "moe.router.dgrad", Pass::kBackwardInput, std::move(op), true));
  return Status::ok();
}

void add_kernel(std::vector<Op>& to, MemOp kind, const std::string& name, Pass pass,
                int64_t bytes) {
  to.push_back(memory_bound(kind, name, pass, bytes));
}

}  // namespace

Status add_megatron_router_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                   const FrameworkOps& fw) {
  if (!m.moe || (!fw.router_fusion && !fw.router_force_balance)) return Status::ok();
  const Op* router = forward_router_gemm(ops);
  if (router == nullptr) return Status::ok();  // a dense layer
  const MoeSpec& moe = *m.moe;
  const int64_t te = router->gemm()->m * moe.num_experts;  // elements of the [T, E] logits
  const int64_t w = kFp32;        // the list's router width: the GEMM's logits (operators.cc)
  constexpr int64_t kScalar = 8;  // a 0-d loss read and written
  const bool aux = fw.router_fusion && moe.aux_loss_coeff > 0;
  const bool expert_bias = fw.router_fusion && moe.router_bias && moe.score_function == "sigmoid";
  std::vector<Op> fwd, bwd;  // in the order they run
  if (fw.router_force_balance) {
    add_kernel(fwd, MemOp::kCopy, "moe.router.random_copy", Pass::kForward, 2 * te * w);
    add_kernel(fwd, MemOp::kFill, "moe.router.random", Pass::kForward, te * w);
  }
  if (fw.router_fusion) {
    add_kernel(fwd, MemOp::kMoeRouting, "moe.router.topk", Pass::kForward, te * (3 * w + 1));
  }
  if (aux) {
    add_kernel(fwd, MemOp::kMoeRouting, "moe.router.aux_scores", Pass::kForward, te * (3 * w + 1));
    add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_counts", Pass::kForward,
               te + moe.num_experts * 8);
    add_router_counts_all_reduce(fwd, l, moe.num_experts * 8);
    add_kernel(fwd, MemOp::kMoeRouting, "moe.router.aux_loss", Pass::kForward, te * w);
    for (int i = 0; i < (moe.seq_aux ? 3 : 2); ++i)
      add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_log", Pass::kForward, 2 * kScalar);
    for (int i = 0; i < (moe.seq_aux ? 3 : 2); ++i)
      add_kernel(bwd, MemOp::kElementwise, "moe.router.aux_scale.bwd", Pass::kBackwardInput,
                 2 * kScalar);
    add_kernel(bwd, MemOp::kFill, "moe.router.aux_loss.bwd", Pass::kBackwardInput, te * w);
    add_kernel(bwd, MemOp::kMoeRouting, "moe.router.aux_scores.bwd", Pass::kBackwardInput,
               te * 3 * w);
  }
  if (expert_bias)
    add_kernel(fwd, MemOp::kElementwise, "moe.router.expert_counts", Pass::kForward,
               te + moe.num_experts * 4);
  if (fw.router_fusion)
    add_kernel(bwd, MemOp::kMoeRouting, "moe.router.topk.bwd", Pass::kBackwardInput,
               te * (3 * w + 1));
  if (aux) add_kernel(bwd, MemOp::kAdd, "moe.router.grad_sum", Pass::kBackwardInput, te * 3 * w);
  return insert_router_kernels(ops, std::move(fwd), std::move(bwd));
}

Status add_megatron_r010_moe_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                     const FrameworkOps& fw) {
  if (!m.moe || !fw.moe_core_r010) return Status::ok();
  const Op* router = forward_router_gemm(ops);
  if (router == nullptr) return Status::ok();  // a dense layer
  const MoeSpec& moe = *m.moe;
  const int64_t tokens = router->gemm()->m, e = moe.num_experts, h = m.hidden;
  const int64_t te = tokens * e;              // elements of the [T, E] logits and maps
  const int64_t routed = tokens * moe.top_k;  // R = T·k routed rows (= C·E with padding)
  constexpr int64_t w = kAct, kIdx = 8, kMap = 1, kInt = 4, kScalar = 8;  // bytes per element
  std::vector<Op> fwd, bwd;  // the router's, in the order they run
  const Pass f = Pass::kForward, b = Pass::kBackwardInput;
  // topk_softmax_with_capacity (post-softmax, drop policy "probs", pad to capacity).
  add_kernel(fwd, MemOp::kMoeRouting, "moe.router.topk", f, te * w + routed * (w + kIdx));
  add_kernel(fwd, MemOp::kSoftmax, "moe.router.softmax", f, routed * (w + kFp32));
  add_kernel(fwd, MemOp::kCast, "moe.router.softmax_cast", f, routed * (kFp32 + w));
  add_kernel(fwd, MemOp::kFill, "moe.router.gates_fill", f, te * w);
  add_kernel(fwd, MemOp::kCopy, "moe.router.gates_copy", f, 2 * te * w);
  add_kernel(fwd, MemOp::kElementwise, "moe.router.gates_scatter", f, routed * (kIdx + 2 * w));
  add_kernel(fwd, MemOp::kFill, "moe.router.map_fill", f, te * w);
  add_kernel(fwd, MemOp::kCast, "moe.router.map_int", f, te * (w + kInt));
  add_kernel(fwd, MemOp::kCopy, "moe.router.map_copy", f, 2 * te * kInt);
  add_kernel(fwd, MemOp::kElementwise, "moe.router.map_scatter", f, routed * (kIdx + kInt));
  add_kernel(fwd, MemOp::kCast, "moe.router.map_bool", f, te * (kInt + kMap));
  add_kernel(fwd, MemOp::kElementwise, "moe.router.counts", f, te * kMap + e * kIdx);
  add_kernel(fwd, MemOp::kMoeRouting, "moe.router.capacity_topk", f, te * w + routed * (w + kIdx));
  add_kernel(fwd, MemOp::kFill, "moe.router.capacity_fill", f, te * w);
  add_kernel(fwd, MemOp::kCopy, "moe.router.capacity_copy", f, 2 * te * w);
  add_kernel(fwd, MemOp::kElementwise, "moe.router.capacity_scatter", f, routed * (kIdx + w));
  add_kernel(fwd, MemOp::kCast, "moe.router.capacity_bool", f, te * (w + kMap));
  add_kernel(fwd, MemOp::kElementwise, "moe.router.probs_mask", f, te * (2 * w + kMap));
  // The load-balancing loss (training) and its logging.
  add_kernel(fwd, MemOp::kSoftmax, "moe.router.aux_softmax", f, te * (w + kFp32));
  add_router_counts_all_reduce(fwd, l, e * kIdx);
  add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_probs_sum", f, te * kFp32 + e * kFp32);
  add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_product", f, e * (kFp32 + kIdx + kFp32));
  add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_sum", f, e * kFp32 + kFp32);
  add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_coeff", f, 2 * kScalar);
  for (int i = 0; i < 2; ++i)
    add_kernel(fwd, MemOp::kElementwise, "moe.router.aux_log", f, 2 * kScalar);
  // Backward, in autograd's order from the router's outputs back to the logits.
  add_kernel(bwd, MemOp::kElementwise, "moe.router.aux_scale.bwd", b, 2 * kScalar);
  add_kernel(bwd, MemOp::kElementwise, "moe.router.aux_scale.bwd", b, 2 * kScalar);
  add_kernel(bwd, MemOp::kElementwise, "moe.router.aux_coeff.bwd", b, 2 * kScalar);
  add_kernel(bwd, MemOp::kElementwise, "moe.router.aux_product.bwd", b, e * (kFp32 + kIdx + kFp32));
  // probs.sum(dim=0)'s gradient is an expanded view, which the softmax backward makes contiguous
  // (PyTorch aten/src/ATen/native/cuda/SoftMax.cu, host_softmax_backward: grad_.contiguous()).
  add_kernel(bwd, MemOp::kCopy, "moe.router.aux_softmax.bwd_contiguous", b, e * kFp32 + te * kFp32);
  add_kernel(bwd, MemOp::kSoftmax, "moe.router.aux_softmax.bwd", b, te * (kFp32 + kFp32 + w));
  add_kernel(bwd, MemOp::kElementwise, "moe.router.probs_mask.bwd", b, te * (2 * w + kMap));
  add_kernel(bwd, MemOp::kElementwise, "moe.router.gates_scatter.bwd", b, routed * (kIdx + 2 * w));
  add_kernel(bwd, MemOp::kCast, "moe.router.softmax_cast.bwd", b, routed * (w + kFp32));
  add_kernel(bwd, MemOp::kSoftmax, "moe.router.softmax.bwd", b, routed * (2 * kFp32 + w));
  add_kernel(bwd, MemOp::kFill, "moe.router.topk.bwd_fill", b, te * w);
  add_kernel(bwd, MemOp::kElementwise, "moe.router.topk.bwd", b, routed * (kIdx + 2 * w));
  add_kernel(bwd, MemOp::kAdd, "moe.router.grad_sum", b, 3 * te * w);
  SP_RETURN_IF_ERROR(insert_router_kernels(ops, std::move(fwd), std::move(bwd)));

  // The dispatcher's counts and permute's index computation before its index_select, new_zeros
  // before index_add_ in its backward.
  for (Op op : {memory_bound(MemOp::kElementwise, "moe.dispatch.counts", f, te * kMap + e * kIdx),
                memory_bound(MemOp::kCopy, "moe.permute.map_t", f, 2 * te * kMap),
                memory_bound(MemOp::kFill, "moe.permute.arange", f, tokens * kIdx),
                memory_bound(MemOp::kElementwise, "moe.permute.select", f,
                             tokens * kIdx + te * kMap + routed * kIdx)})
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.permute", f, std::move(op), true));
  SP_RETURN_IF_ERROR(
      insert_at(ops, "moe.permute.bwd", b,
                memory_bound(MemOp::kFill, "moe.permute.bwd_fill", b, tokens * h * kAct), true));
  // Unpermute with the probabilities, and what its product keeps.
  for (Op op :
       {memory_bound(MemOp::kCopy, "moe.unpermute.probs_t", f, 2 * te * w),
        memory_bound(MemOp::kCopy, "moe.unpermute.map_t", f, 2 * te * kMap),
        memory_bound(MemOp::kElementwise, "moe.unpermute.select", f, te * (w + kMap) + routed * w),
        memory_bound(MemOp::kElementwise, "moe.unpermute.probs", f, routed * h * 2 * kAct),
        memory_bound(MemOp::kFill, "moe.unpermute.fill", f, tokens * h * kAct)})
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.unpermute", f, std::move(op), true));
  for (Op& op : ops)
    if (op.pass == f && op.name == "moe.unpermute")
      op.saved = Bytes(routed * h * kAct + routed * w + te * kMap);
  std::vector<Op> unperm_bwd = {
      memory_bound(MemOp::kElementwise, "moe.unpermute.probs.bwd", b, routed * h * 2 * kAct),
      memory_bound(MemOp::kElementwise, "moe.unpermute.probs_grad", b, routed * h * 3 * kAct),
      memory_bound(MemOp::kElementwise, "moe.unpermute.probs_grad_sum", b,
                   routed * h * kAct + routed * w),
      memory_bound(MemOp::kFill, "moe.unpermute.select.bwd_fill", b, te * w),
      memory_bound(MemOp::kElementwise, "moe.unpermute.select.bwd", b,
                   te * (w + kMap) + routed * w)};
  for (auto it = unperm_bwd.rbegin(); it != unperm_bwd.rend(); ++it)
    SP_RETURN_IF_ERROR(insert_at(ops, "moe.unpermute.bwd", b, std::move(*it), false));
  return Status::ok();
}

void split_grouped_expert_gemms(std::vector<Op>& ops, int streams) {
  if (streams <= 0) return;
  // Kernels each op becomes: lists are rebuilt per operator-list key a search meets (issue 45),
  // so a list with nothing to split is left as it is and the rest is built at its final size.
  auto rounds = [streams](const Op& op) -> int64_t {
    const GemmShape* g = op.gemm();
    if (g == nullptr || g->batch <= streams || op.name.find("moe.expert.") == std::string::npos)
      return 1;
    return (g->batch + streams - 1) / streams;
  };
  size_t kernels = 0;
  for (const Op& op : ops) kernels += static_cast<size_t>(rounds(op));
  if (kernels == ops.size()) return;
  std::vector<Op> out;
  out.reserve(kernels);
  for (Op& op : ops) {
    if (rounds(op) == 1) {
      out.push_back(std::move(op));
      continue;
    }
    const int64_t batch = op.gemm()->batch;
    for (int64_t first = 0; first < batch; first += streams) {
      // The last round takes the op itself, the others copies.
      Op round;
      if (first + streams >= batch)
        round = std::move(op);
      else
        round = op;
      auto& s = std::get<GemmShape>(round.shape);
      s.batch = std::min<int64_t>(streams, batch - first);
      round.flops = s.flops();
      if (first > 0) round.saved = Bytes(0);
      out.push_back(std::move(round));
    }
  }
  ops = std::move(out);
}

namespace {

// Under NVFP4 the fp8 linears' GEMMs (every GEMM of dtype fp8 in the list: the decoder's linears;
// the LM head and the attention core stay bf16) run in e2m1: TE's NVFP4BlockScaling quantizes
// the inputs, the weights and the output gradients (common/recipe/__init__.py:489-610 at
// d0067d0), so fprop, dgrad and wgrad all take fp4 operands.
void apply_fp4_gemms(std::vector<Op>& ops, const FrameworkOps& fw) {
  if (fw.fp8_recipe != Fp8Recipe::kNvfp4) return;
  for (Op& op : ops)
    if (auto* g = std::get_if<GemmShape>(&op.shape); g != nullptr && g->dtype == DType::kFp8)
      g->dtype = DType::kFp4;
}

// Each fp8 operand quantization the list emits (a kFp8CastTranspose of 4 B per bf16 element:
// delayed scaling with a transpose) as `fw`'s recipe runs it on its GPU (Fp8Recipe, in
// operators.h, gives each recipe's kernels and bytes), in the same place and pass.
void apply_fp8_recipe(std::vector<Op>& ops, const FrameworkOps& fw) {
  apply_fp4_gemms(ops, fw);
  if (fw.fp8_recipe == Fp8Recipe::kDelayed && !fw.fp8_gemm_any_layout) return;
  std::vector<Op> out;
  out.reserve(ops.size());
  for (Op& op : ops) {
    const auto* s = std::get_if<MemoryBoundShape>(&op.shape);
    if (s == nullptr || s->op != MemOp::kFp8CastTranspose) {
      out.push_back(std::move(op));
      continue;
    }
    const int64_t e = s->bytes.value() / (kAct + 2 * kFp8);  // the bf16 operand's elements
    const MemOp cast = fw.fp8_gemm_any_layout ? MemOp::kFp8Cast : MemOp::kFp8CastTranspose;
    const int64_t cast_bytes = e * (kAct + (fw.fp8_gemm_any_layout ? 1 : 2) * kFp8);
    switch (fw.fp8_recipe) {
      case Fp8Recipe::kDelayed:
        out.push_back(memory_bound(cast, op.name, op.pass, cast_bytes));
        break;
      case Fp8Recipe::kTensorwise:
        // Float8CurrentScalingQuantizer::quantize_impl (quantizer.cpp:1009-1031): the amax
        // kernel, the scale from it, then the cast.
        out.push_back(memory_bound(MemOp::kAmax, op.name + ".amax", op.pass, e * kAct));
        out.push_back(memory_bound(cast, op.name, op.pass, cast_bytes));
        break;
      case Fp8Recipe::kMxfp8:
        // MXFP8Quantizer::quantize (quantizer.cpp:1835-1849): one nvte_quantize_v2 writing both
        // usages, each with its 1 x 32 E8M0 scales.
        out.push_back(memory_bound(MemOp::kMxfp8Quantize, op.name, op.pass,
                                   e * (kAct + 2 * kFp8) + 2 * ceil_div(e, int64_t{32})));
        break;
      case Fp8Recipe::kNvfp4:
        // NVFP4Quantizer::quantize_impl (quantizer.cpp:2508-2733): the amax pass (with RHT,
        // nvte_hadamard_transform_amax: the row-wise amax and the transformed column-wise one),
        // then one pass writing both usages, e2m1 (half a byte) with an E4M3 scale per 16 each
        // (nvte_quantize_with_hadamard_transform).
        out.push_back(memory_bound(MemOp::kAmax, op.name + ".amax", op.pass, e * kAct));
        out.push_back(memory_bound(MemOp::kMxfp8Quantize, op.name, op.pass,
                                   e * kAct + e + 2 * ceil_div(e, int64_t{16})));
        break;
    }
  }
  ops = std::move(out);
}

constexpr std::string_view kFp8RecipeNames[] = {"delayed", "tensorwise", "mxfp8", "nvfp4"};
static_assert(std::ssize(kFp8RecipeNames) == static_cast<int>(Fp8Recipe::kNvfp4) + 1);

}  // namespace

std::string_view to_string(Fp8Recipe r) { return name_in(kFp8RecipeNames, r); }

Result<Fp8Recipe> parse_fp8_recipe(std::string_view s) {
  if (auto r = value_in<Fp8Recipe>(kFp8RecipeNames, s)) return *r;
  return Status::invalid("fp8_recipe: '" + std::string(s) +
                         "' is not one of delayed, tensorwise, mxfp8");
}

FrameworkOps framework_ops(FrameworkId id) {
  FrameworkOps f;
  f.nanotron_kernels = id == FrameworkId::kNanotron;
  f.torchtitan_kernels = is_torchtitan(id);
  f.composite_rmsnorm = id == FrameworkId::kTorchtitan2025;
  f.fp8_saves_high_precision_inputs = is_torchtitan(id);
  f.op_level_selective_ac = is_torchtitan(id);
  f.autocast_without_fsdp = is_torchtitan(id);
  // TEGroupedMLP (Megatron-core core_v0.16.0 megatron/core/transformer/moe/experts.py:512, the
  // default of moe_grouped_gemm: gpt_layer_specs.py:93) runs TE's GroupedLinear, whose
  // general_grouped_gemm reaches nvte_multi_tensor_gemm: cuBLAS, one GEMM per expert over 4
  // streams, except bf16 on Hopper under NVTE_USE_CUTLASS_GROUPED_GEMM (TransformerEngine v2.12
  // common/gemm/cublaslt_gemm.cu:967-1020, 1049-1071; common/util/multi_stream.cpp:52-54).
  f.expert_gemm_streams = id == FrameworkId::kMegatron ? 4 : 0;
  f.megatron_kernels = id == FrameworkId::kMegatron;
  return f;
}

Result<std::vector<Op>> framework_layer_operators(const ModelSpec& m, const Layout& l,
                                                  int64_t seq_len, int64_t layer,
                                                  const FrameworkOps& fw) {
  SP_ASSIGN_OR_RETURN(std::vector<Op> ops, layer_operators(m, l, seq_len, layer));
  if (fw.nanotron_kernels) SP_RETURN_IF_ERROR(add_nanotron_layer_kernels(ops, m, l, seq_len));
  if (fw.megatron_kernels) SP_RETURN_IF_ERROR(add_megatron_layer_kernels(ops, m, fw));
  if (fw.megatron_kernels) SP_RETURN_IF_ERROR(add_megatron_router_kernels(ops, m, l, fw));
  if (fw.megatron_kernels) SP_RETURN_IF_ERROR(add_megatron_r010_moe_kernels(ops, m, l, fw));
  if (fw.tp_comm_overlap)
    apply_tp_comm_overlap(
        ops, m, l, fw.tp_comm_overlap_preset ? *fw.tp_comm_overlap_preset : te_default_ub_preset());
  if (fw.torchtitan_kernels)
    SP_RETURN_IF_ERROR(add_torchtitan_layer_kernels(ops, m, l, seq_len, fw.composite_rmsnorm));
  if (fw.torchtitan_kernels && !fw.composite_rmsnorm)
    SP_RETURN_IF_ERROR(
        add_row_norm_weight_gradients(ops, m, l, seq_len, {"attn.norm", "mlp.norm"}));
  if (fw.fp8_saves_high_precision_inputs)
    SP_RETURN_IF_ERROR(save_high_precision_linear_inputs(ops, m, l, seq_len, layer));
  if (fw.op_level_selective_ac) apply_torchtitan_selective_ac(ops, m, l, seq_len, layer);
  if (fw.compile_model)
    SP_RETURN_IF_ERROR(compile_layer(ops, m, l, seq_len, layer, runs_autocast(fw, l) ? 4 : 2));
  split_grouped_expert_gemms(ops, fw.expert_gemm_streams);
  apply_fp8_recipe(ops, fw);
  return ops;
}

namespace {

// head_operators with the framework's own head kernels (before the MTP modules join it).
Result<std::vector<Op>> framework_head_alone(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                             const FrameworkOps& fw) {
  SP_ASSIGN_OR_RETURN(std::vector<Op> head, head_operators(m, l, seq_len));
  if (fw.nanotron_kernels) SP_RETURN_IF_ERROR(add_nanotron_head_kernels(head, m, l, seq_len));
  if (fw.torchtitan_kernels)
    SP_RETURN_IF_ERROR(add_torchtitan_head_kernels(head, m, l, seq_len, fw.composite_rmsnorm));
  if (fw.torchtitan_kernels && !fw.composite_rmsnorm)
    SP_RETURN_IF_ERROR(add_row_norm_weight_gradients(head, m, l, seq_len, {"head.norm"}));
  if (fw.compile_loss) SP_RETURN_IF_ERROR(compile_loss(head, m, l, seq_len));
  return head;
}

// The adjustments applied to the whole head list, each op by op (an op's replacements depend on
// that op alone, and keep its pass): TE's expert-GEMM launches, then the fp8 recipe's kernels.
void adjust_op_by_op(std::vector<Op>& ops, const FrameworkOps& fw) {
  split_grouped_expert_gemms(ops, fw.expert_gemm_streams);
  apply_fp8_recipe(ops, fw);
}

}  // namespace

Result<std::vector<Op>> framework_head_operators(const ModelSpec& m, const Layout& l,
                                                 int64_t seq_len, const FrameworkOps& fw) {
  SP_ASSIGN_OR_RETURN(std::vector<Op> head, framework_head_alone(m, l, seq_len, fw));
  SP_ASSIGN_OR_RETURN(std::vector<Op> mtp, mtp_operators(m, l, seq_len));
  append_in_pass_order(head, std::move(mtp));
  adjust_op_by_op(head, fw);
  return head;
}

namespace detail {

bool layer_adjusted_op_by_op(const FrameworkOps& fw) {
  return !fw.nanotron_kernels && !fw.tp_comm_overlap && !fw.torchtitan_kernels &&
         !fw.fp8_saves_high_precision_inputs && !fw.op_level_selective_ac && !fw.compile_model;
}

Result<Bytes> framework_head_saved(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                   const FrameworkOps& fw, std::optional<Bytes> mtp_layer_saved) {
  // framework_head_operators' list is the head and D equal MTP modules (renamed "mtp.", which
  // leaves the expert GEMMs' names matching), merged in pass order and adjusted op by op: its
  // stored bytes are the head's plus D times one module's, each adjusted alone. Integer sums: the
  // same bytes in any order.
  SP_ASSIGN_OR_RETURN(std::vector<Op> head, framework_head_alone(m, l, seq_len, fw));
  adjust_op_by_op(head, fw);
  Bytes saved = total_saved(head);
  if (m.mtp_layers <= 0) return saved;
  SP_ASSIGN_OR_RETURN(std::vector<Op> module,
                      mtp_module_operators(m, l, seq_len, /*with_layer=*/!mtp_layer_saved));
  adjust_op_by_op(module, fw);
  const Bytes one = total_saved(module) + mtp_layer_saved.value_or(Bytes(0));
  return saved + one * m.mtp_layers;
}

}  // namespace detail

}  // namespace scaleplan::models
