// torchtitan under torch.compile: Inductor's fused kernels in place of the eager ones
// (conventions and sources in inductor.h and docs/simulator.md, "torchtitan with torch.compile").
#include "models/inductor.h"

#include <algorithm>
#include <map>
#include <utility>

#include "models/operators_detail.h"

namespace scaleplan::models {
using namespace detail;  // NOLINT(google-build-using-namespace): the op constructors

Status set_compile_components(FrameworkOps& fw, std::string_view components) {
  fw.compile_model = fw.compile_loss = false;
  if (components.empty()) return Status::ok();
  std::string_view rest = components;
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view c = rest.substr(0, comma);
    if (c == "model") {
      fw.compile_model = true;
    } else if (c == "loss") {
      fw.compile_loss = true;
    } else {
      return Status::invalid(
          "--compile: expected torchtitan's compile.components, model, loss or "
          "model,loss; got '" +
          std::string(components) + "'");
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  // torch.compile is torchtitan's option ([compile] enable); the other frameworks' conventions
  // are their own fused kernels already.
  if (!fw.torchtitan_kernels)
    return Status::invalid(
        "--compile: torch.compile (compile.components) is torchtitan's option; "
        "use it with --framework torchtitan");
  return Status::ok();
}

std::string compile_components(const FrameworkOps& fw) {
  if (fw.compile_model && fw.compile_loss) return "model,loss";
  if (fw.compile_model) return "model";
  if (fw.compile_loss) return "loss";
  return "";
}

Status check_compile(const ModelSpec& m, const Layout& l) {
  auto refuse = [](const std::string& what) {
    return Status::invalid(
        "--compile: the compiled block is modelled for dense Llama-style "
        "blocks without TP, CP or activation checkpointing; " +
        what);
  };
  if (m.is_moe()) return refuse("this model has MoE layers");
  if (m.mla) return refuse("this model has MLA attention");
  if (m.ffn_kind != FfnKind::kSwiGlu) return refuse("this model's FFN is not SwiGLU");
  if (m.norm != NormKind::kRmsNorm) return refuse("this model's norm is not RMSNorm");
  if (m.sandwich_norm || m.parallel_residual || m.qk_norm || m.qk_l2_norm || m.attn_softcap > 0 ||
      m.final_softcap > 0)
    return refuse("this model's block has norms, residuals or soft-capping beyond Llama's");
  if (l.tp > 1) return refuse("tp=" + std::to_string(l.tp));
  if (l.cp > 1) return refuse("cp=" + std::to_string(l.cp));
  if (l.recompute != Recompute::kNone)
    return refuse("recompute=" + std::string(to_string(l.recompute)));
  if (l.dtype == DType::kFp8) return refuse("dtype=fp8");
  return Status::ok();
}

namespace {

// A fused Triton kernel (MemPath::kVectorized: 16-byte loads, as Inductor generates them) over
// `bytes`, its inputs plus its outputs.
Op fused(MemOp kind, const std::string& name, Pass pass, int64_t bytes) {
  return memory_bound(kind, "compiled." + name, pass, bytes);
}

}  // namespace

Status compile_layer(std::vector<Op>& ops, const ModelSpec& m, const Layout& l, int64_t seq_len,
                     int64_t layer, int64_t stream_bytes) {
  SP_RETURN_IF_ERROR(check_compile(m, l));
  const TokenCounts t = token_counts(l, seq_len);
  const int64_t s = stream_bytes;      // residual stream: fp32 under autocast, else bf16
  const int64_t eh = t.sp * m.hidden;  // stream elements
  const int64_t dqk = m.qk_head_dim();
  const int64_t eq = t.gemm * m.num_heads * dqk;      // query elements
  const int64_t ekv = t.gemm * m.num_kv_heads * dqk;  // key (= value) elements
  int64_t ef = 0;                                     // one FFN-wide activation
  for (const Op& op : ops)
    if (op.pass == Pass::kForward && op.name == "mlp.down" && op.gemm())
      ef = op.gemm()->m * op.gemm()->k;
  // How many linears read each norm's output (torchtitan's separate wq, wk, wv and w1, w3): as
  // many bf16 input gradients come back to be summed in the norm's backward.
  const auto [attn_readers, ffn_readers] = autocast_norm_readers(m, layer);
  const bool gqa = ekv < eq;

  // Drop the eager memory-bound kernels. What a forward one stored stays with the fused kernel
  // that takes its place: the first in the same gap between extern kernels (keyed by the extern
  // kernel before it; "" at the block's start).
  std::map<std::string, Bytes> gap_saved;
  std::string gap;
  std::erase_if(ops, [&](const Op& op) {
    if (op.pass == Pass::kForward && op.kind != OpKind::kMemoryBound) gap = op.name;
    if (op.kind != OpKind::kMemoryBound) return false;
    if (op.pass == Pass::kForward && op.saved.value() > 0)
      gap_saved[gap] = gap_saved[gap] + op.saved;
    return true;
  });
  auto at = [&ops](std::string_view anchor, Pass pass, bool before, Op op) {
    return insert_at(ops, anchor, pass, std::move(op), before);
  };
  const Pass F = Pass::kForward, B = Pass::kBackwardInput;
  // Forward. attention_norm with the one bf16 cast its three readers share (CSE): read the
  // stream, write bf16; rstd is one value per token.
  SP_RETURN_IF_ERROR(
      at("attn.qkv", F, true, fused(MemOp::kRmsNorm, "attn_norm", F, (s + kAct) * eh)));
  // RoPE (apply_rotary_emb's upcast, complex product and downcast in one kernel per tensor),
  // with repeat_kv's expand-and-reshape of K inlined (the kernel writes the repeated K), and V's
  // repeat as its own copy. Inserted in reverse, each right after the projections.
  if (gqa)
    SP_RETURN_IF_ERROR(
        at("attn.qkv", F, false, fused(MemOp::kCopy, "repeat_v", F, kAct * (ekv + eq))));
  if (m.uses_rope(layer)) {
    SP_RETURN_IF_ERROR(
        at("attn.qkv", F, false, fused(MemOp::kRope, "rope_k", F, kAct * (ekv + eq))));
    SP_RETURN_IF_ERROR(at("attn.qkv", F, false, fused(MemOp::kRope, "rope_q", F, 2 * kAct * eq)));
  } else if (gqa) {
    SP_RETURN_IF_ERROR(
        at("attn.qkv", F, false, fused(MemOp::kCopy, "repeat_k", F, kAct * (ekv + eq))));
  }
  // The residual add with ffn_norm and its cast: read the stream and the attention output,
  // write the new stream and the bf16 norm output.
  SP_RETURN_IF_ERROR(
      at("attn.o", F, false, fused(MemOp::kRmsNorm, "residual_norm", F, (2 * s + 2 * kAct) * eh)));
  // silu(w1 x) * w3 x: read gate and up, write the product.
  SP_RETURN_IF_ERROR(at("mlp.down", F, true, fused(MemOp::kSwiglu, "mlp.act", F, 3 * kAct * ef)));
  // The block's last residual add: read the stream and the FFN output, write the stream.
  SP_RETURN_IF_ERROR(
      at("mlp.down", F, false, fused(MemOp::kAdd, "residual", F, (2 * s + kAct) * eh)));

  // Backward. Under autocast the fp32 stream gradient is narrowed to bf16 for w2's backward.
  if (s > kAct)
    SP_RETURN_IF_ERROR(
        at("mlp.down.dgrad", B, true, fused(MemOp::kCast, "residual.bwd", B, (s + kAct) * eh)));
  // SwiGLU backward: read the product's gradient, gate and up; write both gradients.
  SP_RETURN_IF_ERROR(
      at("mlp.down.dgrad", B, false, fused(MemOp::kSwiglu, "mlp.act.bwd", B, 5 * kAct * ef)));
  // ffn_norm backward, one row reduction: read the readers' bf16 input gradients, the saved
  // stream and the residual gradient; write the stream gradient (and, under autocast, its bf16
  // copy for wo's backward). The weight's gradient is a column reduction of its own over the
  // same input gradients and stream. Inserted in reverse after the FFN's input gradient.
  const int64_t narrow = s > kAct ? kAct : 0;
  SP_RETURN_IF_ERROR(
      at("mlp.fc1.dgrad", B, false,
         fused(MemOp::kRmsNorm, "ffn_norm.wgrad", B, (kAct * ffn_readers + s) * eh)));
  SP_RETURN_IF_ERROR(
      at("mlp.fc1.dgrad", B, false,
         fused(MemOp::kRmsNorm, "ffn_norm.bwd", B, (kAct * ffn_readers + 3 * s + narrow) * eh)));
  // RoPE's and repeat_kv's backward: the repeated gradients summed back to the key/value heads
  // (K's with RoPE's conjugate product in the same kernel), Q's RoPE backward.
  if (gqa)
    SP_RETURN_IF_ERROR(
        at("attn.core.bwd", B, false, fused(MemOp::kCopy, "repeat_v.bwd", B, kAct * (ekv + eq))));
  if (m.uses_rope(layer)) {
    SP_RETURN_IF_ERROR(
        at("attn.core.bwd", B, false, fused(MemOp::kRope, "rope_k.bwd", B, kAct * (ekv + eq))));
    SP_RETURN_IF_ERROR(
        at("attn.core.bwd", B, false, fused(MemOp::kRope, "rope_q.bwd", B, 2 * kAct * eq)));
  } else if (gqa) {
    SP_RETURN_IF_ERROR(
        at("attn.core.bwd", B, false, fused(MemOp::kCopy, "repeat_k.bwd", B, kAct * (ekv + eq))));
  }
  // attention_norm backward: as ffn_norm's, its residual gradient being the stream gradient
  // above, its output the block input's gradient.
  SP_RETURN_IF_ERROR(
      at("attn.qkv.dgrad", B, false,
         fused(MemOp::kRmsNorm, "attn_norm.wgrad", B, (kAct * attn_readers + s) * eh)));
  SP_RETURN_IF_ERROR(
      at("attn.qkv.dgrad", B, false,
         fused(MemOp::kRmsNorm, "attn_norm.bwd", B, (kAct * attn_readers + 3 * s) * eh)));
  // The stored bytes back onto each gap's first fused kernel. The SwiGLU kernel is named
  // "compiled.mlp.act" so that the memory model sees the FFN's stored gate and up as it does in
  // eager mode (their gradients' working set); the eager product's SiLU output is not stored
  // (FrameworkMemory::unfused_glu matches the eager "mlp.act" only): Inductor recomputes it in the
  // fused backward, as the partitioner recomputes a cheap pointwise op that no extern kernel reads.
  gap.clear();
  for (Op& op : ops) {
    if (op.pass != Pass::kForward) continue;
    if (op.kind != OpKind::kMemoryBound) {
      gap = op.name;
    } else if (auto it = gap_saved.find(gap); it != gap_saved.end()) {
      op.saved = it->second;
      gap_saved.erase(it);
    }
  }
  // A gap left without a fused kernel (none in this block) would lose its bytes: say so.
  if (!gap_saved.empty())
    return Status::internal("compile_layer: stored bytes after '" + gap_saved.begin()->first +
                            "' have no fused kernel");
  return Status::ok();
}

Status compile_loss(std::vector<Op>& head, const ModelSpec& m, const Layout& l, int64_t seq_len) {
  if (l.tp > 1) return Status::invalid("--compile: the compiled loss is modelled without TP");
  const int64_t logits = token_counts(l, seq_len).gemm * m.vocab;
  Bytes saved(0);
  size_t first = head.size();  // where the eager loss began
  for (size_t i = 0; i < head.size();) {
    const Op& op = head[i];
    if (op.kind == OpKind::kMemoryBound && op.name.starts_with("loss.")) {
      saved = saved + op.saved;
      first = std::min(first, i);
      head.erase(head.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      ++i;
    }
  }
  // Forward: max and sum of exponentials in one pass over the bf16 logits (online softmax), the
  // target logit gathered per token. Backward: softmax minus the one-hot, times the loss
  // gradient, written in bf16 (the .float()'s backward fused): read 2, write 2 B per logit.
  Op fwd = fused(MemOp::kCrossEntropy, "loss", Pass::kForward, kAct * logits);
  fwd.saved = saved;
  head.insert(head.begin() + static_cast<std::ptrdiff_t>(std::min(first, head.size())),
              std::move(fwd));
  return insert_at(head, "head.lm.dgrad", Pass::kBackwardInput,
                   fused(MemOp::kCrossEntropy, "loss.bwd", Pass::kBackwardInput, 2 * kAct * logits),
                   /*before=*/true);
}

}  // namespace scaleplan::models
