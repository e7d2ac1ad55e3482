// Parameter and FLOP accounting from the tensor table; conventions and sources in accounting.h.
#include "models/accounting.h"

#include <algorithm>
#include <cmath>

namespace scaleplan::models {
namespace {

// Copies of `t` one token passes through: top_k of the routed experts, all of anything else.
int64_t active_numel(const TensorEntry& t, const ModelSpec& m) {
  if (t.component != Component::kRoutedExperts || !m.moe) return t.numel();
  return t.numel() / t.count * m.moe->top_k;
}

// A weight a token is multiplied by: 2-D and not the embedding lookup tables.
bool is_matmul_weight(const TensorEntry& t) {
  return t.shape.size() == 2 && t.component != Component::kEmbedding;
}

}  // namespace

ParamCounts count_params(const ModelSpec& m) {
  ParamCounts p;
  for (const TensorEntry& t : tensor_table(m)) {
    const int64_t n = t.numel();
    p.total += n;
    p.active += active_numel(t, m);
    p.by_component[t.component] += n;
    if (t.component == Component::kEmbedding) p.embedding += n;
  }
  for (const TensorEntry& t : mtp_tensor_table(m)) p.mtp += t.numel();
  return p;
}

double FlopsPerToken::hardware(Recompute r, uint8_t modules) const {
  switch (r) {
    case Recompute::kNone:
      return model();
    case Recompute::kSelective:
      return model() + ((modules & kRecomputeCoreAttn) ? selective_recompute : 0) +
             ((modules & kRecomputeMlaUpProj) ? mla_up_proj_forward : 0) +
             ((modules & kRecomputeMlp) ? mlp_forward : 0) +
             ((modules & kRecomputeMoe)             ? moe_forward
              : (modules & kRecomputeSharedExperts) ? shared_experts_forward
                                                    : 0);
    case Recompute::kFull:
      return model() + forward - head_forward - mtp_head_forward;
  }
  return model();
}

FlopsPerToken flops_per_token(const ModelSpec& m, int64_t seq) {
  double matmul = 0, up_proj = 0, mlp = 0, shared = 0, moe = 0, mtp = 0;
  const std::vector<TensorEntry> main_table = tensor_table(m), mtp_table = mtp_tensor_table(m);
  for (const auto* table : {&main_table, &mtp_table}) {
    for (const TensorEntry& t : *table) {
      if (!is_matmul_weight(t)) continue;
      const double n = static_cast<double>(active_numel(t, m));
      (table == &main_table ? matmul : mtp) += n;
      // What selective recompute modules rerun, in the main layers and the MTP layers alike.
      if (t.component == Component::kMlp) mlp += n;
      if (t.component == Component::kSharedExperts) shared += n;
      if (t.component == Component::kSharedExperts || t.component == Component::kRoutedExperts ||
          t.component == Component::kRouter)
        moe += n;
      if (m.mla && (t.name.find("q_b_proj") != std::string::npos ||
                    t.name.find("kv_b_proj") != std::string::npos))
        up_proj += n;
    }
  }
  // Tied embeddings: the output projection multiplies by embed_tokens, which has no lm_head entry.
  if (m.tied_embeddings) matmul += static_cast<double>(m.vocab) * static_cast<double>(m.hidden);

  // Causal attention per token and layer: 2·a·(d_qk + d_v)·K, K the keys a query sees on
  // average: s/2 (accounting.h derives it), and under a sliding window w < s the mean of min(w, i)
  // over the s positions, (w(w+1)/2 + w(s - w))/s. Chunked attention with chunks of c < s tokens
  // is causal attention within each chunk: q = floor(s/c) whole chunks see c/2 keys per token on
  // average, the remainder r = s - q·c sees r/2: (q·c² + r²)/(2s).
  const double s = static_cast<double>(seq);
  const double per_key = 2.0 * static_cast<double>(m.num_heads) *
                         static_cast<double>(m.qk_head_dim() + m.v_head_dim());
  double attn = 0;
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const double w = static_cast<double>(m.attention_window(layer));
    const double c = static_cast<double>(m.attention_chunk_of(layer));
    double keys = s / 2;
    if (w > 0 && w < s) {
      keys = (w * (w + 1) / 2 + w * (s - w)) / s;
    } else if (c > 0 && c < s) {
      const double whole = std::floor(s / c), rest = s - whole * c;
      keys = (whole * c * c + rest * rest) / (2 * s);
    }
    attn += per_key * keys;
  }
  const double full_layer_attn = per_key * s / 2;
  FlopsPerToken f;
  f.matmul_params = matmul;
  f.attention_forward = attn;
  // MTP modules: their own matmul weights (eh_proj, the layer), the shared head again, and one
  // layer's attention each.
  const double mtp_layers = static_cast<double>(std::max<int64_t>(m.mtp_layers, 0));
  const double mtp_attn = mtp_layers * full_layer_attn;
  mtp += mtp_layers * static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  f.mtp_forward = 2.0 * mtp + mtp_attn;
  f.mtp_head_forward = mtp_layers * 2.0 * static_cast<double>(m.hidden) *
                       (static_cast<double>(m.vocab) + 2.0 * static_cast<double>(m.hidden));
  f.forward = 2.0 * matmul + attn + f.mtp_forward;
  f.backward = 2.0 * f.forward;
  f.selective_recompute = attn + mtp_attn;
  f.head_forward = 2.0 * static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  f.mla_up_proj_forward = 2.0 * up_proj;
  f.mlp_forward = 2.0 * mlp;
  f.shared_experts_forward = 2.0 * shared;
  f.moe_forward = 2.0 * moe;
  return f;
}

}  // namespace scaleplan::models
