// ModelSpec: the shape of a decoder-only transformer, dense or mixture-of-experts.
//
// A ModelSpec is plain data, read from a Hugging Face config.json (model_from_config) or a
// bundled preset (load_model). Everything countable about a model (parameters, FLOPs, bytes,
// operator shapes) is derived from the tensor table in models/tensors.h, never from these fields
// directly, so that there is one place where a tensor's shape is written down (STYLE.md #8).
//
// Conventions follow Hugging Face transformers: head_dim defaults to hidden/heads, kv heads to
// heads. The family (HF model_type, models/families.h) decides what the file does not say: a
// gated FFN (three matrices: gate, up, down; SwiGLU with "silu", GeGLU with "gelu*") or a
// two-matrix one ("gelu", "relu", "relu2"), the norm, the biases, tied embeddings. A model_type
// scaleplan does not model is refused by name, never read as another family.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/layout.h"
#include "core/status.h"

namespace scaleplan::models {

// kSwiGlu and kGeGlu are gated (gate, up, down: act(gate)·up); the others two-matrix (fc1, act,
// fc2).
enum class FfnKind { kSwiGlu, kGeGlu, kGelu, kRelu, kRelu2 };
enum class NormKind { kRmsNorm, kLayerNorm };

// How a MoE layer moves its tokens to the experts and back. kAllToAll: NCCL all-to-all, every
// token copy crosses (Megatron-core's alltoall dispatcher). kDeepEp: DeepEP's kernels
// (Megatron-core's flex dispatcher with --moe-enable-deepep): across nodes a token crosses the
// network once per destination node and is forwarded there over NVLink.
enum class MoeDispatcher { kAllToAll, kDeepEp };

// DeepSeek multi-head latent attention (DeepSeek-V2/V3). q_lora_rank 0 means queries are
// projected directly (no low-rank query path).
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
};

// Rotary position embedding as the HF config sets it (rope_theta, rope_scaling). Not used by the
// cost models (RoPE costs the same whatever its base); carried so that exports train the model the
// config describes.
struct RopeSpec {
  double theta = 10000.0;  // rope_theta (HF default 10000)
  // Share of each head's channels rotated: partial_rotary_factor (Phi, Nemotron), GPT-NeoX's
  // rotary_pct; 1: all.
  double fraction = 1.0;
  // Gemma-3's sliding layers rotate with their own base (rope_local_base_freq); 0: theta.
  double local_theta = 0;
  // rope_scaling's "rope_type" (or older "type"): "" none, "llama3", "yarn", "linear", "dynamic",
  // "longrope" (Phi-3; its per-channel factor lists are not carried).
  std::string scaling;
  double factor = 1.0;                        // rope_scaling.factor
  int64_t original_max_position = 0;          // original_max_position_embeddings (llama3, yarn)
  double low_freq_factor = 0.0;               // llama3
  double high_freq_factor = 0.0;              // llama3
  double beta_fast = 0.0, beta_slow = 0.0;    // yarn
  double mscale = 0.0, mscale_all_dim = 0.0;  // yarn (DeepSeek)
};

struct MoeSpec {
  int64_t num_experts = 0;         // routed experts per MoE layer
  int64_t top_k = 0;               // experts each token is routed to
  int64_t expert_ffn = 0;          // FFN width of one routed expert
  int64_t num_shared_experts = 0;  // shared experts every token passes through
  int64_t shared_expert_ffn = 0;   // FFN width of one shared expert
  int64_t first_dense_layers =
      0;                   // leading layers with a dense FFN (DeepSeek first_k_dense_replace)
  int64_t layer_freq = 1;  // every layer_freq-th layer (after the dense ones) is MoE
  // Layer l (past the dense ones) is MoE when (l + layer_freq_phase) % layer_freq == 0. DeepSeek
  // tests layer_idx % moe_layer_freq (phase 0); Qwen tests (layer_idx + 1) % decoder_sparse_step
  // (phase 1). With layer_freq 1 both mean "every layer".
  int64_t layer_freq_phase = 0;
  std::vector<int64_t> dense_layers;  // explicit dense layers (Qwen mlp_only_layers)
  // max/mean tokens per EP rank (1 = balanced): the busiest rank's expert GEMMs and all-to-all
  // receives set the pace (set_moe_imbalance).
  double capacity_imbalance = 1.0;
  // DeepSeek's group-limited routing (n_group, topk_group): the experts form n_group groups and a
  // token picks its experts from topk_group of them; 0: none.
  int64_t n_group = 0, topk_group = 0;
  // How expert tokens cross the EP group (set_moe_dispatcher).
  MoeDispatcher dispatcher = MoeDispatcher::kAllToAll;
  bool router_bias = false;         // bias on the router: gpt_oss gate bias, DeepSeek-V3
                                    // e_score_correction_bias [experts]
  bool shared_expert_gate = false;  // Qwen2-MoE sigmoid gate on the shared expert [1, hidden]
  // How the router scores experts: HF scoring_func "softmax" (default) or "sigmoid" (DeepSeek-V3).
  std::string score_function = "softmax";
  // Whether the top-k weights are renormalized to sum to one (HF norm_topk_prob; Mixtral always
  // does, Qwen2-MoE defaults to not).
  bool norm_topk_prob = true;
  // Multiplier on the routed experts' weights (DeepSeek routed_scaling_factor); 1: none.
  double routed_scaling = 1.0;
  // Load-balancing loss: HF router_aux_loss_coef (Mixtral, Qwen) or aux_loss_alpha (DeepSeek), per
  // sequence when seq_aux (DeepSeek). A training choice the config records; 0: none.
  double aux_loss_coeff = 0.0;
  bool seq_aux = false;
};

struct ModelSpec {
  std::string name;              // preset name or file stem
  std::string model_type;        // HF model_type: llama, mistral, mixtral, qwen2, qwen3, qwen3_moe,
                                 // deepseek_v3, gpt2, ...
  int64_t hidden = 0;            // hidden_size
  int64_t ffn = 0;               // intermediate_size: width of a dense FFN
  int64_t num_layers = 0;        // num_hidden_layers
  int64_t num_heads = 0;         // num_attention_heads (query heads)
  int64_t num_kv_heads = 0;      // num_key_value_heads
  int64_t head_dim = 0;          // head_dim, default hidden / heads
  int64_t vocab = 0;             // vocab_size
  int64_t max_position = 0;      // max_position_embeddings (0 when absent)
  bool tied_embeddings = false;  // tie_word_embeddings
  FfnKind ffn_kind = FfnKind::kSwiGlu;
  NormKind norm = NormKind::kRmsNorm;
  bool linear_bias = false;        // biases on the linear layers (GPT-2 style)
  bool qkv_bias = false;           // biases on q/k/v only (Qwen2)
  bool qk_norm = false;            // per-head RMSNorm on q and k (Qwen3)
  bool learned_positions = false;  // learned position embedding table (GPT-2 style)
  bool attention_bias = false;     // biases on q/k/v/o (HF attention_bias; gpt_oss)
  bool mlp_bias = false;           // biases on the FFN and expert linears (HF mlp_bias; gpt_oss)
  bool attention_sinks = false;    // one learned sink logit per head and layer (gpt_oss)
  double glu_clamp = 0;            // swiglu_limit (gpt_oss): the gated activation's clamp; 0: none
  int64_t mtp_layers = 0;  // DeepSeek multi-token-prediction modules (not in the main count)
  double norm_eps = 1e-6;  // rms_norm_eps / layer_norm_epsilon (HF Llama default 1e-6)
  RopeSpec rope;           // unused with learned_positions
  // Sliding-window attention: a query of a sliding layer sees itself and the sliding_window - 1
  // tokens before it (HF's sliding-window causal mask, kv_idx > q_idx - sliding_window). Which
  // layers slide: HF layer_types ("sliding_attention"; gpt_oss), else Qwen's use_sliding_window
  // with max_window_layers (layers from that index on; off by default for qwen*), else every
  // layer (Mistral). 0: none (also when no layer slides).
  int64_t sliding_window = 0;
  std::vector<bool> sliding_layers;  // per decoder layer, when sliding_window > 0
  // Chunked attention (Llama 4, HF "chunked_attention" layers): a query sees the tokens of its
  // own chunk of attention_chunk tokens up to itself (chunk = position / attention_chunk). 0:
  // none. With a sequence no longer than the chunk it is plain causal attention.
  int64_t attention_chunk = 0;
  std::vector<bool> chunked_layers;  // per decoder layer, when attention_chunk > 0
  // Layers without rotary embedding (Llama 4's NoPE layers, HF no_rope_layers 0); empty: none.
  std::vector<bool> nope_layers;
  // Gemma-2/3: a norm on each branch's output too, before the residual add
  // (post_attention_layernorm, post_feedforward_layernorm): four norms per layer.
  bool sandwich_norm = false;
  // GPT-NeoX/Pythia (use_parallel_residual): attention and FFN read the same layer input and both
  // outputs are added to it, x + attn(ln1(x)) + mlp(ln2(x)).
  bool parallel_residual = false;
  // Llama 4 (use_qk_norm): q and k L2-normalised, no weights, on its RoPE layers.
  bool qk_l2_norm = false;
  // Soft-capping, cap·tanh(x/cap) (Gemma-2): of the attention scores (attn_logit_softcapping)
  // and of the output logits (final_logit_softcapping); 0: none.
  double attn_softcap = 0, final_softcap = 0;
  // What the reader left out, for the user to see ("the vision encoder (vision_config) is not
  // modelled"); empty for a plain language model.
  std::vector<std::string> notes;
  std::optional<MlaSpec> mla;
  std::optional<MoeSpec> moe;

  bool is_moe() const { return moe.has_value(); }
  bool gated_ffn() const { return ffn_kind == FfnKind::kSwiGlu || ffn_kind == FfnKind::kGeGlu; }
  // Tokens of its own chunk a query of decoder layer `layer` may see (attention_chunk on a
  // chunked layer), else 0.
  int64_t attention_chunk_of(int64_t layer) const;
  // Whether decoder layer `layer` applies rotary embedding (not learned positions, not NoPE).
  bool uses_rope(int64_t layer) const;
  // Per-head widths of the attention core: queries/keys and values (MLA: nope+rope and v_head_dim;
  // otherwise head_dim for both).
  int64_t qk_head_dim() const;
  int64_t v_head_dim() const;
  // Which linears carry biases. linear_bias (GPT-2) implies all of them.
  bool has_qkv_bias() const { return linear_bias || attention_bias || qkv_bias; }
  bool has_o_bias() const { return linear_bias || attention_bias; }
  bool has_ffn_bias() const { return linear_bias || mlp_bias; }
  // Whether decoder layer `layer` (0-based) has a routed-expert FFN.
  bool is_moe_layer(int64_t layer) const;
  // Keys a query of decoder layer `layer` sees at most: sliding_window on a sliding layer, else 0
  // (every token before it: full causal attention).
  int64_t attention_window(int64_t layer) const;
  // Layers whose operator lists time alike: bit 0 a routed-expert FFN, bit 1 sliding-window
  // attention, bit 2 chunked attention, bit 3 no RoPE; kLayerKinds values.
  int layer_kind(int64_t layer) const;
  int64_t num_sliding_layers() const;
  int64_t num_chunked_layers() const;
  static constexpr int kLayerKinds = 16;
  int64_t num_moe_layers() const;
};

// Reads a HF config.json object; a pure function of its inputs. `ctx` names the source in errors
// ("config.json"). Unknown fields are ignored; missing required ones (hidden_size,
// num_hidden_layers, num_attention_heads, vocab_size, intermediate_size unless every layer is MoE)
// and zero or negative sizes are errors naming the field. Per-family aliases (ecosystem.md §1):
// Mixtral num_local_experts, Qwen
// num_experts/moe_intermediate_size/shared_expert_intermediate_size/mlp_only_layers/
// decoder_sparse_step, DeepSeek n_routed_experts/n_shared_experts/first_k_dense_replace/
// moe_layer_freq and the MLA ranks, GPT-2 n_embd/n_layer/n_head/n_inner/n_positions.
Result<ModelSpec> model_from_config(const Json& config, const std::string& name,
                                    std::string_view ctx);

// A preset name ("llama3-8b") from models/presets/<name>.json, or a path to a config.json. A
// name that is neither a file nor a preset is an invalid-input error listing the presets.
Result<ModelSpec> load_model(const std::string& name_or_path);

// Parses config.json text (malformed JSON is an invalid-input error naming `ctx`).
Result<ModelSpec> model_from_config_text(std::string_view text, const std::string& name,
                                         std::string_view ctx);

// Names of the bundled presets, sorted.
std::vector<std::string> preset_names();

// Sets the routed experts' load imbalance, max/mean tokens per EP rank (`simulate`, `memory` and
// `plan --moe-imbalance`): from 1 to the expert count (no EP rank receives more than every
// token); an error on a model without routed experts.
// Megatron-LM's --moe-expert-capacity-factor C with --moe-pad-expert-input-to-capacity pads every
// expert to C times the mean: imbalance C.
Status set_moe_imbalance(ModelSpec& m, double imbalance);

// Sets the MoE dispatcher ("alltoall" or "deepep"; `simulate`, `memory` and `plan
// --moe-dispatcher`); an error on a model without routed experts or another name.
Status set_moe_dispatcher(ModelSpec& m, std::string_view name);

// The facts a layout is validated against.
LayoutConstraints layout_constraints(const ModelSpec& m, int64_t seq_len);

}  // namespace scaleplan::models
