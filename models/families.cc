// The family table; what each trait means in families.h. Sources: transformers v4.57,
// src/transformers/models/<type>/{configuration,modeling}_<type>.py.
#include "models/families.h"

#include <algorithm>
#include <array>

namespace scaleplan::models {
namespace {

constexpr uint32_t kLlamaLike = kGatedFfn;

// Supported families. Llama-style unless a trait says otherwise: gated FFN (LlamaMLP is
// gate/up/down whatever hidden_act names), RMSNorm, RoPE, untied, biases only where
// attention_bias / mlp_bias say.
constexpr std::array kFamilies = {
    Family{"llama", kLlamaLike, "silu", "", ""},
    Family{"mistral", kLlamaLike, "silu", "", ""},
    Family{"mixtral", kLlamaLike, "silu", "", ""},
    // Qwen2Attention: q/k/v Linear(bias=True), o_proj bias=False (Qwen2.5 too).
    Family{"qwen2", kLlamaLike | kQkvBias, "silu", "", ""},
    Family{"qwen2_moe", kLlamaLike | kQkvBias, "silu", "", ""},
    // Qwen3Attention: q_norm, k_norm (Qwen3RMSNorm(head_dim)); biases per attention_bias.
    Family{"qwen3", kLlamaLike | kQkNorm, "silu", "", ""},
    Family{"qwen3_moe", kLlamaLike | kQkNorm, "silu", "", ""},
    Family{"deepseek_v2", kLlamaLike, "silu", "", ""},
    Family{"deepseek_v3", kLlamaLike, "silu", "", ""},
    // Kimi K2 ships DeepseekV3ForCausalLM under its own model_type (its config's architectures).
    Family{"kimi_k2", kLlamaLike, "silu", "", ""},
    // GPT2MLP c_fc/c_proj, Conv1D with biases; LayerNorm; wpe; PretrainedConfig ties by default.
    Family{"gpt2", kLayerNormFamily | kTiedByDefault | kAllLinearBias | kLearnedPositions,
           "gelu_new", "", ""},
    // GptOssAttention sinks; experts' gate_up/down biases; router bias (read_moe).
    Family{"gpt_oss", kLlamaLike | kMlpBiasOn | kAttentionSinks, "silu", "", ""},
    // NemotronMLP: up_proj, down_proj (not gated), relu2; NemotronLayerNorm1P (weight and bias).
    // NemotronConfig: partial_rotary_factor 0.5, norm_eps 1e-5.
    Family{"nemotron", kLayerNormFamily, "relu2", "",
           R"({"partial_rotary_factor": 0.5, "norm_eps": 1e-5})"},
    // Phi3MLP: one gate_up_proj (gated), Phi3Attention: one qkv_proj; no biases.
    Family{"phi3", kLlamaLike, "silu", "", ""},
    // GemmaMLP: gated, gelu_pytorch_tanh (GeGLU); GemmaConfig tie_word_embeddings=True.
    Family{"gemma", kLlamaLike | kTiedByDefault, "gelu_pytorch_tanh", "", R"({"head_dim": 256})"},
    // Gemma2DecoderLayer: input/post_attention/pre_feedforward/post_feedforward layernorms;
    // Gemma2Config soft-caps 50 (attention) and 30 (logits), sliding window 4096 on even layers.
    Family{"gemma2", kLlamaLike | kTiedByDefault | kSandwichNorm, "gelu_pytorch_tanh", "",
           R"({"head_dim": 256, "sliding_window": 4096, "attn_logit_softcapping": 50.0,
               "final_logit_softcapping": 30.0})"},
    // Gemma3TextConfig: a checkpoint's text_config names only what differs from these.
    Family{"gemma3_text", kLlamaLike | kTiedByDefault | kSandwichNorm | kQkNorm,
           "gelu_pytorch_tanh", "",
           R"({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
               "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
               "head_dim": 256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-6,
               "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0, "sliding_window": 4096,
               "sliding_window_pattern": 6})"},
    Family{"gemma3", kMultimodal, "", "gemma3_text", ""},
    // Llama4TextConfig defaults (Llama-4-Scout's shape).
    Family{"llama4_text", kLlamaLike, "silu", "",
           R"({"vocab_size": 202048, "hidden_size": 5120, "intermediate_size": 8192,
               "intermediate_size_mlp": 16384, "num_hidden_layers": 48,
               "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128,
               "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
               "num_local_experts": 16, "num_experts_per_tok": 1, "interleave_moe_layer_step": 1,
               "attention_chunk_size": 8192, "use_qk_norm": true, "no_rope_layer_interval": 4})"},
    Family{"llama4", kMultimodal, "", "llama4_text", ""},
    // GPTNeoXMLP dense_h_to_4h/dense_4h_to_h (nn.Linear, bias); query_key_value and dense with
    // bias=attention_bias (default true); nn.LayerNorm; GPTNeoXConfig rotary_pct 0.25.
    Family{"gpt_neox", kLayerNormFamily | kAttentionBiasOn | kMlpBiasOn | kParallelResidual, "gelu",
           "", R"({"rotary_pct": 0.25, "rotary_emb_base": 10000})"},
    // The record form of dgxc-benchmarking's grok1_314b.yaml (Megatron-Core, Mixtral-style);
    // the xAI release's own layers are refused in model_spec.cc.
    Family{"grok-1", kLlamaLike, "silu", "", ""},
};

struct Refusal {
  std::string_view model_type;
  std::string_view reason;
};

constexpr std::string_view kSsm = "state-space layers are not modelled";
constexpr std::string_view kHybrid = "its state-space (Mamba) layers are not modelled";
constexpr std::string_view kEncDec = "encoder-decoder models are not modelled";
constexpr std::string_view kEncoder = "encoder-only models are not modelled";

// Known architectures that are not decoder-only transformers of the kinds modelled.
constexpr std::array kRefusals = {
    Refusal{"mamba", kSsm},
    Refusal{"mamba2", kSsm},
    Refusal{"falcon_mamba", kSsm},
    Refusal{"jamba", kHybrid},
    Refusal{"zamba", kHybrid},
    Refusal{"zamba2", kHybrid},
    Refusal{"bamba", kHybrid},
    Refusal{"falcon_h1", kHybrid},
    Refusal{"nemotron_h", kHybrid},
    Refusal{"granitemoehybrid", kHybrid},
    Refusal{"plamo2", kHybrid},
    Refusal{"lfm2", "its short convolution layers are not modelled"},
    Refusal{"rwkv", "recurrent (RWKV) layers are not modelled"},
    Refusal{"recurrent_gemma", "recurrent (RG-LRU) layers are not modelled"},
    Refusal{"xlstm", "recurrent (xLSTM) layers are not modelled"},
    Refusal{"t5", kEncDec},
    Refusal{"mt5", kEncDec},
    Refusal{"umt5", kEncDec},
    Refusal{"bart", kEncDec},
    Refusal{"mbart", kEncDec},
    Refusal{"pegasus", kEncDec},
    Refusal{"marian", kEncDec},
    Refusal{"whisper", kEncDec},
    Refusal{"bert", kEncoder},
    Refusal{"roberta", kEncoder},
    Refusal{"xlm-roberta", kEncoder},
    Refusal{"deberta-v2", kEncoder},
    Refusal{"modernbert", kEncoder},
    Refusal{"mllama", "its cross-attention image layers are not modelled"},
    Refusal{"phi3small", "block-sparse attention and its GEGELU are not modelled"},
    Refusal{"gemma3n", "per-layer embeddings, AltUp and LAuReL blocks are not modelled"},
    Refusal{"falcon", "its parallel attention with a shared layer norm is not modelled"},
    Refusal{"gptj", "its parallel attention with a shared layer norm is not modelled"},
    Refusal{"phi", "its parallel attention with a shared layer norm is not modelled"},
};

}  // namespace

Result<const Family*> find_family(std::string_view model_type) {
  for (const Family& f : kFamilies) {
    if (f.model_type == model_type) return &f;
  }
  for (const Refusal& r : kRefusals) {
    if (r.model_type == model_type)
      return Status::invalid("model_type '" + std::string(model_type) +
                             "' is not supported: " + std::string(r.reason));
  }
  std::string list;
  for (const Family& f : kFamilies) list += (list.empty() ? "" : ", ") + std::string(f.model_type);
  return Status::invalid("model_type '" + std::string(model_type) +
                         "' is not supported: scaleplan has not modelled this family's layers "
                         "(supported: " +
                         list + ")");
}

std::vector<std::string_view> supported_model_types() {
  std::vector<std::string_view> out;
  for (const Family& f : kFamilies) out.push_back(f.model_type);
  return out;
}

}  // namespace scaleplan::models
