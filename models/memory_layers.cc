// Memory-model internals (models/memory_layers.h): a decoder layer's activations from its lists.
#include "models/memory_layers.h"

#include <algorithm>
#include <string>

namespace scaleplan::models::memory_layers {
namespace {
constexpr int64_t kAct = 2;  // bf16 activation element
}  // namespace

Bytes unfused_glu_half(const std::vector<Op>& ops) {
  // The experts' units where the list runs their SiLU and product apart (torchtitan's
  // GroupedExperts and shared FeedForward: "<prefix>.swiglu_unfused"); a dense FFN's always.
  auto unfused = [&](const std::string& prefix) {
    return std::ranges::any_of(ops, [&](const Op& op) {
      return op.pass == Pass::kForward && op.name == prefix + ".swiglu_unfused";
    });
  };
  const bool experts = unfused("moe.expert"), shared = unfused("moe.shared");
  Bytes half(0);
  for (const Op& op : ops) {
    if (op.pass != Pass::kForward) continue;
    if (op.name == "mlp.act" || (experts && op.name == "moe.expert.act") ||
        (shared && op.name == "moe.shared.act"))
      half += Bytes(op.saved.value() / 2);
  }
  return half;
}

Bytes framework_layer_extra(const ModelSpec& m, const Layout& l, const FrameworkMemory& fw,
                            Bytes glu_half, const TokenCounts& tok) {
  if (l.recompute == Recompute::kFull) return Bytes(0);
  Bytes extra(0);
  if (fw.unfused_glu && m.ffn_kind == FfnKind::kSwiGlu) {
    // mlp.act stores gate and up (2·T·f_l bf16); act(gate) is a third f-wide tensor: half of it.
    // On an MoE layer, the experts' units that run apart (unfused_glu_half).
    extra += glu_half;
  }
  if (fw.mha_qkv_stack_saved && !m.mla && m.num_kv_heads == m.num_heads) {
    // The K and V thirds of the [3, b, s, heads_l, d] stack: 2 · T · heads_l · d bf16.
    const int64_t heads_l = m.num_heads / std::max(l.tp, 1);
    extra += Bytes(2 * tok.gemm * heads_l * m.qk_head_dim() * kAct);
  }
  return extra;
}

bool op_level_sac(const ModelSpec& m, const Layout& l, int64_t layer, const FrameworkOps& fw_ops) {
  return fw_ops.op_level_selective_ac && l.recompute == Recompute::kSelective &&
         !m.is_moe_layer(layer) && !m.mla;
}

ListSums list_sums(const std::vector<Op>& ops) {
  ListSums s;
  s.saved = total_saved(ops);
  s.glu_half = unfused_glu_half(ops);
  // The GEMM whose input gradient was last counted: a grouped expert GEMM split into launches
  // (split_grouped_expert_gemms) stores its bytes on its first launch, and the launches after it
  // carry the rest of its experts, whose input gradients are alive as well.
  const Op* counted = nullptr;
  for (const Op& op : ops) {
    if (op.pass != Pass::kForward) continue;
    // The FFN's stored intermediates (activation inputs and the down projection's input) have
    // gradients of the same size, alive together during the FFN backward.
    const bool ffn =
        op.name.ends_with(".act") || op.name.ends_with(".down") || op.name.ends_with(".fc2");
    // The down projection's input gradient is bf16 even where an fp8 linear stored its input in
    // fp8: the gradient is the size of the input, not of what was stored.
    const GemmShape* g = op.gemm();
    const bool later_launch =
        counted != nullptr && g != nullptr && op.saved.value() == 0 && op.name == counted->name;
    if (ffn && g != nullptr && (op.saved.value() > 0 || later_launch)) {
      s.ffn_grad += Bytes(g->m * g->k * g->batch * kAct);
      if (!later_launch) counted = &op;
    } else {
      counted = nullptr;
      if (ffn) s.ffn_grad += op.saved;
    }
    if (op.name.ends_with(".act")) s.largest_act = std::max(s.largest_act, op.saved);
  }
  return s;
}

std::optional<ListSums> ListSumsCache::find(const Key& k) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = sums_.find(k);
  return it == sums_.end() ? std::nullopt : std::optional<ListSums>(it->second);
}

void ListSumsCache::add(const Key& k, const ListSums& s) {
  std::lock_guard<std::mutex> lock(mu_);
  sums_.try_emplace(k, s);
}

namespace {

// list_sums of framework_layer_operators(m, l, seq, layer, fw_ops), from `cache` where given.
Result<ListSums> layer_sums(const ModelSpec& m, const Layout& l, int64_t seq, int64_t layer,
                            const FrameworkOps& fw_ops, ListSumsCache* cache) {
  const ListSumsCache::Key key{operator_list_key(l), layer, fw_ops.op_level_selective_ac};
  if (cache != nullptr) {
    if (std::optional<ListSums> hit = cache->find(key)) return *hit;
  }
  SP_ASSIGN_OR_RETURN(const std::vector<Op> ops,
                      framework_layer_operators(m, l, seq, layer, fw_ops));
  const ListSums s = list_sums(ops);
  if (cache != nullptr) cache->add(key, s);
  return s;
}

}  // namespace

Result<Bytes> layer_list_saved(const ModelSpec& m, const Layout& l, int64_t seq, int64_t layer,
                               const FrameworkOps& fw_ops, ListSumsCache* cache) {
  int64_t first = 0;
  while (first < layer && m.layer_kind(first) != m.layer_kind(layer)) ++first;
  SP_ASSIGN_OR_RETURN(const ListSums s, layer_sums(m, l, seq, first, fw_ops, cache));
  return s.saved;
}

Result<LayerActivations> layer_activations(const ModelSpec& m, const Layout& l, int64_t seq,
                                           int64_t layer, const FrameworkMemory& fw,
                                           const FrameworkOps& fw_ops, ListSumsCache* cache) {
  SP_ASSIGN_OR_RETURN(const ListSums own, layer_sums(m, l, seq, layer, fw_ops, cache));
  LayerActivations a;
  const bool op_sac = op_level_sac(m, l, layer, fw_ops);
  // layer_saved_bytes, from the sums.
  a.saved = own.saved;
  if (!op_sac) a.saved += framework_layer_extra(m, l, fw, own.glu_half, token_counts(l, seq));
  // Recompute modules beyond the attention core free stored tensors that come back, one layer
  // at a time, for that layer's backward: they count as working memory of the backward, and the
  // FFN's gradient sizes are those of the layer without them (and without op-level
  // checkpointing). Likewise act_cache=fp8's cached copies: the backward restores the layer's
  // cached tensors to bf16 (the attention output, the experts' SwiGLU input) before it reads
  // them, one layer at a time.
  ListSums ffn = own;
  if ((l.recompute_module_set() & ~kRecomputeCoreAttn) || l.act_cache != ActCache::kDefault) {
    Layout plain = l;  // the same layer with only its attention-core recompute, if any
    plain.recompute_modules = static_cast<uint8_t>(l.recompute_module_set() & kRecomputeCoreAttn);
    plain.act_cache = ActCache::kDefault;
    FrameworkOps no_sac = fw_ops;
    no_sac.op_level_selective_ac = false;
    SP_ASSIGN_OR_RETURN(ffn, layer_sums(m, plain, seq, layer, no_sac, cache));
    a.grad_working += ffn.saved - own.saved;
  }
  a.grad_working += ffn.ffn_grad;
  a.largest_block = ffn.largest_act;
  if (l.recompute == Recompute::kFull || op_sac) {
    // The layer's forward is rematerialised before its backward: one layer of no-recompute
    // activations is alive on top of the checkpoints.
    Layout none = l;
    none.recompute = Recompute::kNone;
    SP_ASSIGN_OR_RETURN(const ListSums full, layer_sums(m, none, seq, layer, fw_ops, cache));
    a.grad_working += full.saved;
  }
  return a;
}

}  // namespace scaleplan::models::memory_layers
