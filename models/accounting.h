// Exact parameter and FLOP accounting, derived from the tensor table (models/tensors.h).
//
// Parameters. `total` counts every tensor of the table once. DeepSeek's multi-token-prediction
// (MTP) modules are left out, as in the published totals (DeepSeek-V3: 671B; the 685B of the HF
// checkpoint adds the 14B MTP module), and reported separately in `mtp`. `active` is what one
// token passes through: top_k of the routed experts instead of all of them, everything else in
// full, the input embedding and the LM head included. That is the convention that reproduces the
// published "active" figures: Mixtral-8x7B 12.9B, Mixtral-8x22B 39B, Qwen3-30B-A3B 3.3B,
// Qwen3-235B-A22B 22B, DeepSeek-V3 37B (docs/models.md has the table).
//
// FLOPs per token of training, a multiply-add counted as 2 FLOPs:
//   forward  = 2 · (active matmul weights) + attention
//     matmul weights: every 2-D weight a token multiplies: q/k/v/o (or the MLA projections), the
//     FFN or its top_k routed experts plus the shared ones, the router, and the LM head (also when
//     tied to the embedding: the output projection still runs). Not the input embedding (a lookup),
//     norms or biases (element-wise, O(h) per token) — Kaplan et al. 2020 Table 1; Narayanan et
//     al. 2021 §5.1, Eq. 3.
//     attention: per layer, token i of a causal sequence scores against i keys (QK^T: 2·a·d_qk·i)
//     and mixes i values (PV: 2·a·d_v·i). Averaged over the sequence, i ≈ s/2, so per token and
//     layer: a·(d_qk + d_v)·s = 2·s·a·d for standard heads — half the non-causal 4·s·h of
//     Narayanan et al. Eq. 3 and of Chowdhery et al. 2022 App. B (12·L·H·Q·T for training, which
//     does not halve for the causal mask). MLA uses d_qk = nope + rope, d_v = v_head_dim.
//     A sliding layer's token i sees min(w, i) keys (ModelSpec::attention_window): on average
//     (w(w+1)/2 + w(s − w))/s in place of s/2 when w < s. A chunked layer (Llama 4,
//     ModelSpec::attention_chunk_of) is causal within chunks of c tokens: (q·c² + r²)/(2s) keys
//     on average, q = floor(s/c) whole chunks and r = s − q·c tokens left, when c < s.
//   backward = 2 × forward (input and weight gradients; Narayanan et al. 2021 §5.1).
//   model    = forward + backward ≈ 6·N_active + 6·L·s·a·(d_qk+d_v)/2; what MFU counts.
//   hardware = model + what recomputation runs again (what HFU counts): selective recompute
//     re-runs the attention core forward (QK^T, softmax, PV; Korthikanti et al. 2022), full
//     recompute re-runs the whole forward.
// Not modelled: softmax and element-wise FLOPs.
#pragma once

#include <cstdint>
#include <map>

#include "core/layout.h"
#include "models/model_spec.h"
#include "models/tensors.h"

namespace scaleplan::models {

struct ParamCounts {
  int64_t total = 0;
  int64_t active = 0;                         // per token
  std::map<Component, int64_t> by_component;  // total, per component
  int64_t embedding = 0;                      // input embedding (and position table) only
  int64_t mtp = 0;  // DeepSeek MTP modules, not in total (embedding/head shared, not repeated)
};
ParamCounts count_params(const ModelSpec& m);

struct FlopsPerToken {
  double forward = 0;            // matmuls + attention, model FLOPs
  double backward = 0;           // 2 × forward
  double attention_forward = 0;  // the s-dependent attention part of `forward` (QK^T and PV)
  double model() const { return forward + backward; }
  // Hardware FLOPs: model FLOPs plus what recomputation runs again; `modules` is what selective
  // recompute reruns (RecomputeModule bits; Layout::recompute_module_set).
  double hardware(Recompute r) const { return hardware(r, kDefaultRecomputeModules); }
  double hardware(Recompute r, uint8_t modules) const;
  double selective_recompute = 0;  // attention core forward, run again under selective recompute
  // The LM head's forward (2·V·h): full recompute reruns the decoder layers' forward, not the
  // output layer's (Megatron-LM checkpoints transformer layers; its FLOP count, Narayanan et al.
  // 2021 Eq. 3, counts the logit layer 3x where the layers count 4x).
  double head_forward = 0;
  // Forward matmul FLOPs of the parts selective recompute can rerun besides the attention core
  // (layernorm and moe_act rerun memory-bound kernels only): MLA's up projections, the dense
  // MLPs, the shared experts.
  double mla_up_proj_forward = 0;
  double mlp_forward = 0;
  double shared_experts_forward = 0;
  double moe_forward = 0;  // the MoE blocks: router, active routed experts, shared experts
  // DeepSeek's multi-token-prediction modules, trained with the model: their eh_proj, decoder
  // layer (matmuls and attention) and second pass through the shared output head. In `forward`.
  double mtp_forward = 0;
  double mtp_head_forward = 0;  // of which outside the MTP layers (eh_proj, the head pass): full
                                // recompute does not rerun it
  double matmul_params = 0;     // active matmul weights per token (forward matmul FLOPs / 2)
};
// Training FLOPs per token at sequence length `seq` (causal attention).
FlopsPerToken flops_per_token(const ModelSpec& m, int64_t seq);

}  // namespace scaleplan::models
