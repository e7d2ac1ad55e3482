// Hugging Face config.json -> ModelSpec, with the per-family field aliases of ecosystem.md §1.
#include "models/model_spec.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <nlohmann/json.hpp>

#include "core/data_dir.h"
#include "core/suggest.h"
#include "models/families.h"

namespace scaleplan::models {
namespace {

namespace fs = std::filesystem;

// The first of `keys` present (and not null) in `cfg`, or nullptr. Families spell the same field
// differently (GPT-2 n_embd vs hidden_size; Mixtral num_local_experts vs Qwen num_experts).
const char* present_key(const Json& cfg, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    if (json_has(cfg, k)) return k;
  }
  return nullptr;
}

// An integer under the first present alias; `fallback` when none is present. Errors name the alias
// actually found (or the first, canonical, one when the field is missing altogether).
Result<int64_t> int_alias(const Json& cfg, std::initializer_list<const char*> keys,
                          std::string_view ctx, std::optional<int64_t> fallback = std::nullopt,
                          bool positive = true, int64_t max = 2147483647) {
  const char* k = present_key(cfg, keys);
  return json_int(cfg, k ? k : *keys.begin(), ctx, fallback, positive, max);
}

// The FFN an activation makes in a family with (gated) or without a gate (HF ACT2FN names). A
// gated FFN is SwiGLU with "silu" and GeGLU with the GELU variants (Gemma's gelu_pytorch_tanh);
// a two-matrix FFN takes the GELU variants (GPT-2's gelu_new), ReLU or squared ReLU.
Result<FfnKind> ffn_kind_of(const std::string& act, bool gated, std::string_view field,
                            std::string_view ctx) {
  const bool silu = act == "silu" || act == "swish" || act == "swiglu";
  const bool gelu = act.rfind("gelu", 0) == 0;
  if (gated && silu) return FfnKind::kSwiGlu;
  if (gated && gelu) return FfnKind::kGeGlu;
  if (!gated && gelu) return FfnKind::kGelu;
  if (!gated && act == "relu") return FfnKind::kRelu;
  if (!gated && (act == "relu2" || act == "relu_squared" || act == "squared_relu"))
    return FfnKind::kRelu2;
  return Status::invalid(
      std::string(ctx) + ": " + std::string(field) + ": activation '" + act +
      "' is not supported in this family's " +
      (gated ? "gated FFN (silu or gelu)" : "two-matrix FFN (gelu, relu or relu2)"));
}

Status invalid(std::string_view ctx, const std::string& msg) {
  return Status::invalid(std::string(ctx) + ": " + msg);
}

// Llama 4's MoE (transformers Llama4TextMoe, Llama4Router, Llama4TextConfig): every MoE layer has
// one shared expert of the routed experts' width (Llama4TextMLP, no gate); the router takes the
// top-k logits through a sigmoid, not renormalized; the MoE layers are moe_layers, or every
// interleave_moe_layer_step-th from step - 1 (range(step - 1, L, step)).
Status read_llama4_moe(const Json& cfg, const ModelSpec& m, MoeSpec& moe, std::string_view ctx) {
  moe.num_shared_experts = 1;
  moe.shared_expert_ffn = moe.expert_ffn;
  moe.score_function = "sigmoid";
  moe.norm_topk_prob = false;
  SP_ASSIGN_OR_RETURN(moe.layer_freq, json_int(cfg, "interleave_moe_layer_step", ctx, 1));
  moe.layer_freq_phase = 1;
  if (!json_has(cfg, "moe_layers")) return Status::ok();
  const Json& arr = cfg.at("moe_layers");
  if (!arr.is_array()) return invalid(ctx, "moe_layers: expected an array of layer indices");
  std::vector<bool> is_moe(static_cast<size_t>(m.num_layers), false);
  for (const Json& v : arr) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.num_layers)
      return invalid(ctx, "moe_layers: " + v.dump() + " is not a layer index in [0, " +
                              std::to_string(m.num_layers) + ")");
    is_moe[static_cast<size_t>(v.get<int64_t>())] = true;
  }
  moe.layer_freq = 1;
  moe.layer_freq_phase = 0;
  for (int64_t l = 0; l < m.num_layers; ++l)
    if (!is_moe[static_cast<size_t>(l)]) moe.dense_layers.push_back(l);
  return Status::ok();
}

Result<MoeSpec> read_moe(const Json& cfg, const ModelSpec& m, int64_t experts,
                         std::string_view ctx) {
  MoeSpec moe;
  moe.num_experts = experts;
  SP_ASSIGN_OR_RETURN(moe.top_k, int_alias(cfg,
                                           {"num_experts_per_tok", "num_experts_per_token",
                                            "experts_per_token", "n_activated_experts"},
                                           ctx));
  if (moe.top_k > experts) {
    return invalid(ctx, "num_experts_per_tok: " + std::to_string(moe.top_k) +
                            " exceeds the number of experts " + std::to_string(experts));
  }
  // Mixtral and gpt_oss give the per-expert width as intermediate_size (ecosystem.md §1.1).
  SP_ASSIGN_OR_RETURN(
      moe.expert_ffn,
      int_alias(cfg, {"moe_intermediate_size", "moe_inter_dim", "intermediate_size"}, ctx));
  SP_ASSIGN_OR_RETURN(int64_t n_shared, json_int(cfg, "n_shared_experts", ctx, 0, false));
  SP_ASSIGN_OR_RETURN(int64_t qwen_shared,
                      json_int(cfg, "shared_expert_intermediate_size", ctx, 0, false));
  if (n_shared > 0) {  // DeepSeek: n_shared_experts experts of moe_intermediate_size each
    moe.num_shared_experts = n_shared;
    moe.shared_expert_ffn = moe.expert_ffn;
  } else if (qwen_shared > 0) {  // Qwen2-MoE: one shared expert of its own width, sigmoid-gated
    moe.num_shared_experts = 1;
    moe.shared_expert_ffn = qwen_shared;
    moe.shared_expert_gate = m.model_type == "qwen2_moe";
  }
  SP_ASSIGN_OR_RETURN(moe.first_dense_layers,
                      int_alias(cfg, {"first_k_dense_replace", "n_dense_layers"}, ctx, 0, false));
  if (const char* k = present_key(cfg, {"moe_layer_freq", "decoder_sparse_step"})) {
    SP_ASSIGN_OR_RETURN(moe.layer_freq, json_int(cfg, k, ctx));
    // DeepSeek: layer_idx % moe_layer_freq == 0; Qwen: (layer_idx + 1) % decoder_sparse_step == 0.
    moe.layer_freq_phase = std::string_view(k) == "decoder_sparse_step" ? 1 : 0;
  }
  if (json_has(cfg, "mlp_only_layers")) {
    const Json& arr = cfg.at("mlp_only_layers");
    if (!arr.is_array()) {
      return invalid(ctx,
                     "mlp_only_layers: expected an array of layer indices, got " + json_brief(arr));
    }
    for (const Json& v : arr) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= m.num_layers) {
        return invalid(ctx, "mlp_only_layers: " + json_brief(v) + " is not a layer index in [0, " +
                                std::to_string(m.num_layers) + ")");
      }
      moe.dense_layers.push_back(v.get<int64_t>());
    }
    std::sort(moe.dense_layers.begin(), moe.dense_layers.end());
  }
  SP_ASSIGN_OR_RETURN(moe.score_function,
                      json_string(cfg, "scoring_func", ctx, std::string("softmax")));
  if (moe.score_function != "softmax" && moe.score_function != "sigmoid") {
    return invalid(
        ctx, "scoring_func: '" + moe.score_function + "' is not supported (softmax or sigmoid)");
  }
  // Mixtral's router always renormalizes the top-k weights (no key); Qwen-MoE and DeepSeek say.
  SP_ASSIGN_OR_RETURN(moe.norm_topk_prob,
                      json_bool(cfg, "norm_topk_prob", ctx, m.model_type != "qwen2_moe"));
  SP_ASSIGN_OR_RETURN(moe.routed_scaling, json_number(cfg, "routed_scaling_factor", ctx, 1.0));
  if (const char* k = present_key(cfg, {"router_aux_loss_coef", "aux_loss_alpha"})) {
    SP_ASSIGN_OR_RETURN(moe.aux_loss_coeff, json_number(cfg, k, ctx));
  }
  SP_ASSIGN_OR_RETURN(moe.seq_aux, json_bool(cfg, "seq_aux", ctx, false));
  SP_ASSIGN_OR_RETURN(moe.n_group, json_int(cfg, "n_group", ctx, 0, false));
  SP_ASSIGN_OR_RETURN(moe.topk_group, json_int(cfg, "topk_group", ctx, 0, false));
  moe.router_bias = m.model_type == "gpt_oss" || m.model_type == "deepseek_v3" ||
                    (json_has(cfg, "topk_method") && cfg.at("topk_method") == "noaux_tc");
  if (m.model_type == "llama4_text") SP_RETURN_IF_ERROR(read_llama4_moe(cfg, m, moe, ctx));
  return moe;
}

Result<MlaSpec> read_mla(const Json& cfg, std::string_view ctx) {
  MlaSpec mla;
  // q_lora_rank null or 0: queries are projected directly (DeepSeek-V2-Lite).
  SP_ASSIGN_OR_RETURN(mla.q_lora_rank, json_int(cfg, "q_lora_rank", ctx, 0, false));
  SP_ASSIGN_OR_RETURN(mla.kv_lora_rank, json_int(cfg, "kv_lora_rank", ctx));
  SP_ASSIGN_OR_RETURN(mla.qk_nope_head_dim, json_int(cfg, "qk_nope_head_dim", ctx));
  SP_ASSIGN_OR_RETURN(mla.qk_rope_head_dim, json_int(cfg, "qk_rope_head_dim", ctx));
  SP_ASSIGN_OR_RETURN(mla.v_head_dim, json_int(cfg, "v_head_dim", ctx));
  return mla;
}

std::string preset_dir() { return data_dir() + "/models/presets"; }

// One rope_scaling object (transformers' rope_config_validation names: rope_type, or the older
// type; factor; llama3's low/high_freq_factor and original_max_position_embeddings; yarn's
// beta_fast, beta_slow, mscale, mscale_all_dim; longrope's per-channel factor lists, "su" in
// early Phi-3 configs, which are not carried).
Status read_rope_scaling(const Json& rs, const Json& cfg, RopeSpec& r, std::string_view sctx) {
  if (!rs.is_object()) return invalid(sctx, "expected an object or null");
  const char* type_key = present_key(rs, {"rope_type", "type"});
  if (type_key == nullptr) return invalid(sctx, "rope_type: missing");
  SP_ASSIGN_OR_RETURN(std::string type, json_string(rs, type_key, sctx));
  if (type == "default") return Status::ok();
  if (type == "su") type = "longrope";
  if (type != "llama3" && type != "yarn" && type != "linear" && type != "dynamic" &&
      type != "longrope") {
    return invalid(sctx, std::string(type_key) + ": '" + type +
                             "' is not supported (llama3, yarn, linear, dynamic, longrope)");
  }
  r.scaling = type;
  // Phi-3's original length sits beside rope_scaling, not in it.
  const Json& orig_src = json_has(rs, "original_max_position_embeddings") ? rs : cfg;
  SP_ASSIGN_OR_RETURN(r.original_max_position,
                      json_int(orig_src, "original_max_position_embeddings", sctx, 0, false));
  std::optional<double> factor_default;
  if (type == "longrope") factor_default = 1.0;  // transformers derives it from the lengths
  SP_ASSIGN_OR_RETURN(r.factor, json_number(rs, "factor", sctx, factor_default));
  SP_ASSIGN_OR_RETURN(r.low_freq_factor, json_number(rs, "low_freq_factor", sctx, 0.0));
  SP_ASSIGN_OR_RETURN(r.high_freq_factor, json_number(rs, "high_freq_factor", sctx, 0.0));
  // transformers' yarn defaults: beta_fast 32, beta_slow 1; mscale 1, mscale_all_dim 0.
  SP_ASSIGN_OR_RETURN(r.beta_fast, json_number(rs, "beta_fast", sctx, type == "yarn" ? 32.0 : 0.0));
  SP_ASSIGN_OR_RETURN(r.beta_slow, json_number(rs, "beta_slow", sctx, type == "yarn" ? 1.0 : 0.0));
  SP_ASSIGN_OR_RETURN(r.mscale, json_number(rs, "mscale", sctx, type == "yarn" ? 1.0 : 0.0));
  SP_ASSIGN_OR_RETURN(r.mscale_all_dim, json_number(rs, "mscale_all_dim", sctx, 0.0));
  return Status::ok();
}

// Rotary embedding: the base (rope_theta; GPT-NeoX rotary_emb_base), the rotated share of each
// head (partial_rotary_factor; GPT-NeoX rotary_pct), Gemma-3's local base
// (rope_local_base_freq), and the scaling: rope_scaling, or transformers 5's rope_parameters,
// flat or per layer type ({"full_attention": {...}, "sliding_attention": {...}}).
Status read_rope(const Json& cfg, ModelSpec& m, std::string_view ctx) {
  RopeSpec& r = m.rope;
  const char* theta_key = present_key(cfg, {"rope_theta", "rotary_emb_base"});
  SP_ASSIGN_OR_RETURN(r.theta,
                      json_number(cfg, theta_key ? theta_key : "rope_theta", ctx, 10000.0));
  const char* frac_key = present_key(cfg, {"partial_rotary_factor", "rotary_pct"});
  SP_ASSIGN_OR_RETURN(r.fraction,
                      json_number(cfg, frac_key ? frac_key : "partial_rotary_factor", ctx, 1.0));
  if (!(r.fraction > 0 && r.fraction <= 1))
    return invalid(ctx, std::string(frac_key) + ": expected a share in (0, 1], got " +
                            std::to_string(r.fraction));
  SP_ASSIGN_OR_RETURN(r.local_theta, json_number(cfg, "rope_local_base_freq", ctx, 0.0));
  if (json_has(cfg, "rope_parameters")) {
    const Json& rp = cfg.at("rope_parameters");
    const std::string pctx = std::string(ctx) + ": rope_parameters";
    if (!rp.is_object()) return invalid(pctx, "expected an object");
    const bool per_type = json_has(rp, "full_attention");
    const Json& global = per_type ? rp.at("full_attention") : rp;
    const std::string gctx = per_type ? pctx + ": full_attention" : pctx;
    if (!global.is_object()) return invalid(gctx, "expected an object");
    SP_ASSIGN_OR_RETURN(r.theta, json_number(global, "rope_theta", gctx, r.theta));
    if (per_type && json_has(rp, "sliding_attention")) {
      const Json& local = rp.at("sliding_attention");
      if (!local.is_object()) return invalid(pctx + ": sliding_attention", "expected an object");
      SP_ASSIGN_OR_RETURN(r.local_theta, json_number(local, "rope_theta", pctx, r.theta));
    }
    if (json_has(global, "rope_type")) return read_rope_scaling(global, cfg, r, gctx);
    return Status::ok();
  }
  if (!json_has(cfg, "rope_scaling")) return Status::ok();
  return read_rope_scaling(cfg.at("rope_scaling"), cfg, r, std::string(ctx) + ": rope_scaling");
}

}  // namespace

namespace {

enum class AttnType : uint8_t { kFull, kSliding, kChunked };

// Llama 4's layers without RoPE: no_rope_layers (1 = RoPE, one per layer), else every
// no_rope_layer_interval-th layer ((l + 1) % interval == 0; Llama4TextConfig).
Status read_nope_layers(const Json& cfg, ModelSpec& m, std::string_view ctx) {
  std::vector<bool> nope(static_cast<size_t>(m.num_layers), false);
  if (json_has(cfg, "no_rope_layers")) {
    const Json& arr = cfg.at("no_rope_layers");
    if (!arr.is_array() || static_cast<int64_t>(arr.size()) < m.num_layers)
      return invalid(ctx, "no_rope_layers: expected an array of at least num_hidden_layers = " +
                              std::to_string(m.num_layers) + " entries of 0 or 1");
    for (int64_t l = 0; l < m.num_layers; ++l) {
      const Json& v = arr[static_cast<size_t>(l)];
      if (v != 0 && v != 1)
        return invalid(
            ctx, "no_rope_layers[" + std::to_string(l) + "]: expected 0 or 1, got " + v.dump());
      nope[static_cast<size_t>(l)] = v == 0;
    }
  } else {
    SP_ASSIGN_OR_RETURN(const int64_t every, json_int(cfg, "no_rope_layer_interval", ctx, 4));
    for (int64_t l = 0; l < m.num_layers; ++l) nope[static_cast<size_t>(l)] = (l + 1) % every == 0;
  }
  if (std::find(nope.begin(), nope.end(), true) != nope.end()) m.nope_layers = std::move(nope);
  return Status::ok();
}

// Which layers attend through a sliding window (ModelSpec::sliding_window) or in chunks
// (attention_chunk), as transformers reads the config: layer_types ("full_attention",
// "sliding_attention", "chunked_attention"; gpt-oss, Gemma, Llama 4 configs written by recent
// versions), else the family's pattern (Gemma-2: even layers slide, Gemma2DecoderLayer; Gemma-3:
// all but every sliding_window_pattern-th, Gemma3DecoderLayer; Llama 4: its RoPE layers are
// chunked, Llama4TextConfig), else Qwen's use_sliding_window with max_window_layers, else every
// layer (Mistral). Needs num_layers, model_type and nope_layers.
Status read_attention_layers(const Json& cfg, ModelSpec& m, std::string_view ctx) {
  // Qwen configs carry a sliding_window that applies only with use_sliding_window (transformers
  // Qwen2Config: sliding_window = sliding_window if use_sliding_window else None; default off).
  const bool qwen = m.model_type.rfind("qwen", 0) == 0;
  SP_ASSIGN_OR_RETURN(const bool use, json_bool(cfg, "use_sliding_window", ctx, !qwen));
  SP_ASSIGN_OR_RETURN(const int64_t window, json_int(cfg, "sliding_window", ctx, 0, false));
  SP_ASSIGN_OR_RETURN(const int64_t chunk, json_int(cfg, "attention_chunk_size", ctx, 0, false));
  const size_t n = static_cast<size_t>(m.num_layers);
  std::vector<AttnType> type(n, AttnType::kSliding);
  if (json_has(cfg, "layer_types")) {
    const Json& types = cfg.at("layer_types");
    if (!types.is_array() || types.size() != n)
      return invalid(ctx, "layer_types: expected an array of num_hidden_layers = " +
                              std::to_string(m.num_layers) + " entries");
    for (size_t i = 0; i < n; ++i) {
      const Json& t = types[i];
      if (t == "sliding_attention") {
        type[i] = AttnType::kSliding;
      } else if (t == "chunked_attention") {
        type[i] = AttnType::kChunked;
      } else if (t == "full_attention") {
        type[i] = AttnType::kFull;
      } else {
        return invalid(ctx, "layer_types[" + std::to_string(i) + "]: " + t.dump() +
                                " is not supported (full_attention, sliding_attention or "
                                "chunked_attention)");
      }
    }
  } else if (m.model_type == "gemma2") {
    for (size_t i = 0; i < n; ++i) type[i] = i % 2 == 0 ? AttnType::kSliding : AttnType::kFull;
  } else if (m.model_type == "gemma3_text") {
    SP_ASSIGN_OR_RETURN(const int64_t every, json_int(cfg, "sliding_window_pattern", ctx, 6));
    for (size_t i = 0; i < n; ++i)
      type[i] = (static_cast<int64_t>(i) + 1) % every != 0 ? AttnType::kSliding : AttnType::kFull;
  } else if (m.model_type == "llama4_text") {
    for (size_t i = 0; i < n; ++i)
      type[i] =
          chunk > 0 && m.uses_rope(static_cast<int64_t>(i)) ? AttnType::kChunked : AttnType::kFull;
  } else if (json_has(cfg, "max_window_layers") && qwen) {
    SP_ASSIGN_OR_RETURN(const int64_t from, json_int(cfg, "max_window_layers", ctx, 0, false));
    for (size_t i = 0; i < n; ++i)
      type[i] = static_cast<int64_t>(i) >= from ? AttnType::kSliding : AttnType::kFull;
  }
  const bool any_sliding = std::find(type.begin(), type.end(), AttnType::kSliding) != type.end();
  const bool any_chunked = std::find(type.begin(), type.end(), AttnType::kChunked) != type.end();
  if (any_sliding && use && window == 0 && json_has(cfg, "layer_types"))
    return invalid(ctx, "layer_types: sliding_attention layers need a sliding_window");
  if (any_chunked) {
    if (chunk == 0)
      return invalid(ctx, "layer_types: chunked_attention layers need an attention_chunk_size");
    m.attention_chunk = chunk;
    m.chunked_layers.resize(n);
    for (size_t i = 0; i < n; ++i) m.chunked_layers[i] = type[i] == AttnType::kChunked;
  }
  if (!use || window == 0 || !any_sliding) return Status::ok();
  m.sliding_window = window;
  m.sliding_layers.resize(n);
  for (size_t i = 0; i < n; ++i) m.sliding_layers[i] = type[i] == AttnType::kSliding;
  return Status::ok();
}

}  // namespace

bool ModelSpec::is_moe_layer(int64_t layer) const {
  if (!moe || layer < 0 || layer >= num_layers) return false;
  if (layer < moe->first_dense_layers) return false;
  if (std::binary_search(moe->dense_layers.begin(), moe->dense_layers.end(), layer)) return false;
  return (layer + moe->layer_freq_phase) % moe->layer_freq == 0;
}

int64_t ModelSpec::attention_window(int64_t layer) const {
  if (sliding_window <= 0 || layer < 0 || layer >= static_cast<int64_t>(sliding_layers.size()))
    return 0;
  return sliding_layers[static_cast<size_t>(layer)] ? sliding_window : 0;
}

int64_t ModelSpec::num_sliding_layers() const {
  return std::count(sliding_layers.begin(), sliding_layers.end(), true);
}

int64_t ModelSpec::attention_chunk_of(int64_t layer) const {
  if (attention_chunk <= 0 || layer < 0 || layer >= static_cast<int64_t>(chunked_layers.size()))
    return 0;
  return chunked_layers[static_cast<size_t>(layer)] ? attention_chunk : 0;
}

bool ModelSpec::uses_rope(int64_t layer) const {
  if (learned_positions) return false;
  return layer < 0 || layer >= static_cast<int64_t>(nope_layers.size()) ||
         !nope_layers[static_cast<size_t>(layer)];
}

int64_t ModelSpec::num_chunked_layers() const {
  return std::count(chunked_layers.begin(), chunked_layers.end(), true);
}

int ModelSpec::layer_kind(int64_t layer) const {
  return (is_moe_layer(layer) ? 1 : 0) + (attention_window(layer) > 0 ? 2 : 0) +
         (attention_chunk_of(layer) > 0 ? 4 : 0) + (uses_rope(layer) ? 0 : 8);
}

int64_t ModelSpec::num_moe_layers() const {
  int64_t n = 0;
  for (int64_t l = 0; l < num_layers; ++l) n += is_moe_layer(l) ? 1 : 0;
  return n;
}

int64_t ModelSpec::qk_head_dim() const {
  return mla ? mla->qk_nope_head_dim + mla->qk_rope_head_dim : head_dim;
}
int64_t ModelSpec::v_head_dim() const { return mla ? mla->v_head_dim : head_dim; }

namespace {

// The family a config names and the config its language model is read from: the file itself, or
// a multimodal wrapper's text_config (Gemma-3, Llama 4), with the family's class defaults filled
// in where the file omits them (families.h).
struct FamilyConfig {
  const Family* family = nullptr;
  Json config;
  std::string ctx;
  std::vector<std::string> notes;
};

Result<FamilyConfig> resolve_family(const Json& in, std::string_view ctx) {
  FamilyConfig fc;
  fc.ctx = std::string(ctx);
  if (!json_has(in, "model_type"))
    return invalid(ctx,
                   "model_type: missing (the Hugging Face family, e.g. \"llama\"; scaleplan does "
                   "not guess a model's layers)");
  SP_ASSIGN_OR_RETURN(std::string type, json_string(in, "model_type", ctx));
  auto fam = find_family(type);
  if (!fam.is_ok()) return invalid(ctx, fam.status().message());
  fc.family = *fam;
  if (fc.family->has(kMultimodal)) {
    if (!json_has(in, "text_config") || !in.at("text_config").is_object())
      return invalid(
          ctx, "text_config: missing (model_type '" + type + "' keeps its language model there)");
    fc.config = in.at("text_config");
    fc.ctx += ": text_config";
    SP_ASSIGN_OR_RETURN(std::string text_type, json_string(fc.config, "model_type", fc.ctx,
                                                           std::string(fc.family->text_type)));
    auto text = find_family(text_type);
    if (!text.is_ok()) return invalid(fc.ctx, text.status().message());
    if ((*text)->has(kMultimodal))
      return invalid(fc.ctx, "model_type: '" + text_type + "' is not a language model");
    fc.family = *text;
    fc.config["model_type"] = text_type;
    if (json_has(in, "vision_config"))
      fc.notes.push_back(
          "the vision encoder (vision_config) and its projector are not modelled: "
          "parameters, memory and plans cover the language model");
  } else {
    fc.config = in;
  }
  if (!fc.family->defaults.empty()) {
    const Json defaults = Json::parse(fc.family->defaults);
    for (const auto& [key, value] : defaults.items()) {
      if (!fc.config.contains(key)) fc.config[key] = value;
    }
  }
  // Grok-1 as xAI released it (the HF ports' keys) has GeGLU experts, four norms per layer,
  // soft-capped attention logits and output multipliers; the "grok-1" scaleplan reads is the
  // Megatron-Core configuration of it (Mixtral-style) that NVIDIA's benchmarks ran.
  if (type == "grok-1") {
    for (const char* k : {"attn_output_multiplier", "max_attn_value", "embedding_multiplier_scale",
                          "output_multiplier_scale", "widening_factor"}) {
      if (json_has(fc.config, k))
        return invalid(ctx, "model_type 'grok-1' is not supported as xAI released it (" +
                                std::string(k) +
                                "): its GeGLU experts, four norms per layer and soft-capped, "
                                "scaled attention logits are not modelled");
    }
  }
  return fc;
}

// Bounds on a model's sizes (docs/reliability.md, "Bounded work"): several times the largest
// published model's (hidden 25,600 and 128 heads in GPT-3 and Llama-3.1-405B, 126 layers, 256
// experts and a 256k vocabulary), so that no real config is refused while the int64 byte and
// parameter counts of the accounting and the memory model cannot overflow and the simulator's
// program (ops per layer) stays within memory.
constexpr int64_t kMaxLayers = 1 << 12;
struct Bound {
  const char* field;
  int64_t value;
  int64_t max;
};
constexpr double kMaxParameters = 1e14;  // 100T; the largest published models have ~2T

Status check_bounds(const ModelSpec& m, std::string_view ctx) {
  std::vector<Bound> bounds = {{"hidden_size", m.hidden, 1 << 18},
                               {"intermediate_size", m.ffn, 1 << 20},
                               {"num_hidden_layers", m.num_layers, kMaxLayers},
                               {"num_attention_heads", m.num_heads, 1 << 12},
                               {"head_dim", m.head_dim, 1 << 14},
                               {"vocab_size", m.vocab, 1 << 24},
                               // DeepSeek-V3 and Qwen3-Next predict 1 token ahead, Gloeckle et al.
                               // 2024 (arXiv:2404.19737) at most 8; each module is a full layer.
                               {"num_nextn_predict_layers", m.mtp_layers, 64}};
  if (m.moe) {
    bounds.push_back({"num_experts", m.moe->num_experts, 1 << 14});
    bounds.push_back({"moe_intermediate_size", m.moe->expert_ffn, 1 << 20});
    bounds.push_back({"n_shared_experts", m.moe->num_shared_experts, 1 << 10});
    bounds.push_back({"shared_expert_intermediate_size", m.moe->shared_expert_ffn, 1 << 20});
  }
  if (m.mla) {
    bounds.push_back({"q_lora_rank", m.mla->q_lora_rank, 1 << 18});
    bounds.push_back({"kv_lora_rank", m.mla->kv_lora_rank, 1 << 18});
    bounds.push_back({"qk_nope_head_dim", m.mla->qk_nope_head_dim, 1 << 14});
    bounds.push_back({"qk_rope_head_dim", m.mla->qk_rope_head_dim, 1 << 14});
    bounds.push_back({"v_head_dim", m.mla->v_head_dim, 1 << 14});
  }
  for (const Bound& b : bounds) {
    if (b.value > b.max)
      return invalid(ctx, std::string(b.field) + ": " + std::to_string(b.value) +
                              " is more than the " + std::to_string(b.max) +
                              " scaleplan models (several times any published model's)");
  }
  // A rough parameter count in doubles (the exact int64 one comes later, in accounting.cc): the
  // attention and FFN weights of every layer plus embedding and head.
  const double h = static_cast<double>(m.hidden), heads = static_cast<double>(m.num_heads);
  double ffn_width = static_cast<double>(m.ffn);
  if (m.moe)
    ffn_width = std::max(ffn_width,
                         static_cast<double>(m.moe->num_experts * m.moe->expert_ffn +
                                             m.moe->num_shared_experts * m.moe->shared_expert_ffn));
  const double params = static_cast<double>(m.num_layers) *
                            (4 * h * heads * static_cast<double>(m.head_dim) + 3 * h * ffn_width) +
                        2 * static_cast<double>(m.vocab) * h;
  if (params > kMaxParameters)
    return invalid(ctx, "about " + std::to_string(static_cast<int64_t>(params / 1e12)) +
                            "T parameters, more than the 100T scaleplan models");
  return Status::ok();
}

}  // namespace

Result<ModelSpec> model_from_config(const Json& in, const std::string& name,
                                    std::string_view file_ctx) {
  if (!in.is_object()) return invalid(file_ctx, "expected a JSON object, got " + json_brief(in));
  SP_ASSIGN_OR_RETURN(FamilyConfig fc, resolve_family(in, file_ctx));
  const Json& cfg = fc.config;
  const std::string_view ctx = fc.ctx;
  const Family& fam = *fc.family;
  ModelSpec m;
  m.name = name;
  m.notes = std::move(fc.notes);
  m.model_type = std::string(fam.model_type);
  const bool gpt2 = m.model_type == "gpt2";

  // Sizes every family has, under HF names or their aliases (GPT-2 n_*, DeepSeek inference names).
  SP_ASSIGN_OR_RETURN(m.hidden, int_alias(cfg, {"hidden_size", "n_embd", "dim"}, ctx));
  SP_ASSIGN_OR_RETURN(m.num_layers, int_alias(cfg, {"num_hidden_layers", "n_layer", "n_layers"},
                                              ctx, std::nullopt, true, kMaxLayers));
  SP_ASSIGN_OR_RETURN(m.num_heads,
                      int_alias(cfg, {"num_attention_heads", "n_head", "n_heads"}, ctx));
  SP_ASSIGN_OR_RETURN(m.vocab, json_int(cfg, "vocab_size", ctx));
  SP_ASSIGN_OR_RETURN(m.num_kv_heads,
                      int_alias(cfg, {"num_key_value_heads", "n_kv_heads"}, ctx, m.num_heads));
  if (json_has(cfg, "head_dim")) {
    SP_ASSIGN_OR_RETURN(m.head_dim, json_int(cfg, "head_dim", ctx));
  } else if (m.hidden % m.num_heads != 0) {
    return invalid(ctx, "head_dim: missing, and hidden_size " + std::to_string(m.hidden) +
                            " is not divisible by num_attention_heads " +
                            std::to_string(m.num_heads));
  } else {
    m.head_dim = m.hidden / m.num_heads;
  }
  SP_ASSIGN_OR_RETURN(m.max_position,
                      int_alias(cfg, {"max_position_embeddings", "n_positions", "max_seq_len"}, ctx,
                                gpt2 ? 1024 : 0, false));  // HF GPT2Config n_positions=1024

  // Family conventions (families.h): what the file does not say.
  SP_ASSIGN_OR_RETURN(m.tied_embeddings,
                      json_bool(cfg, "tie_word_embeddings", ctx, fam.has(kTiedByDefault)));
  // Gemma-2/3 name it hidden_activation (Gemma's config.json may carry a stale hidden_act too,
  // which GemmaMLP ignores when hidden_activation is set).
  const char* act_key =
      present_key(cfg, {"hidden_activation", "hidden_act", "activation_function"});
  std::string act(fam.act);
  if (act_key) {
    SP_ASSIGN_OR_RETURN(act, json_string(cfg, act_key, ctx));
  }
  SP_ASSIGN_OR_RETURN(m.ffn_kind,
                      ffn_kind_of(act, fam.has(kGatedFfn), act_key ? act_key : "hidden_act", ctx));
  m.norm = fam.has(kLayerNormFamily) ? NormKind::kLayerNorm : NormKind::kRmsNorm;
  m.linear_bias = fam.has(kAllLinearBias);
  m.learned_positions = fam.has(kLearnedPositions);
  m.qkv_bias = fam.has(kQkvBias);
  m.qk_norm = fam.has(kQkNorm);
  m.attention_sinks = fam.has(kAttentionSinks);
  m.sandwich_norm = fam.has(kSandwichNorm);
  if (fam.has(kParallelResidual)) {
    SP_ASSIGN_OR_RETURN(m.parallel_residual, json_bool(cfg, "use_parallel_residual", ctx, true));
  }
  if (m.model_type == "llama4_text") {
    SP_ASSIGN_OR_RETURN(m.qk_l2_norm, json_bool(cfg, "use_qk_norm", ctx, true));
    SP_RETURN_IF_ERROR(read_nope_layers(cfg, m, ctx));
  }
  SP_ASSIGN_OR_RETURN(m.attn_softcap, json_number(cfg, "attn_logit_softcapping", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(m.final_softcap, json_number(cfg, "final_logit_softcapping", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(m.glu_clamp, json_number(cfg, "swiglu_limit", ctx, 0.0));
  SP_ASSIGN_OR_RETURN(m.attention_bias,
                      json_bool(cfg, "attention_bias", ctx, fam.has(kAttentionBiasOn)));
  SP_ASSIGN_OR_RETURN(m.mlp_bias, json_bool(cfg, "mlp_bias", ctx, fam.has(kMlpBiasOn)));
  SP_ASSIGN_OR_RETURN(m.mtp_layers, json_int(cfg, "num_nextn_predict_layers", ctx, 0, false));
  {
    // HF LlamaConfig rms_norm_eps=1e-6; GPT-2 layer_norm_epsilon=1e-5.
    const char* eps_key =
        present_key(cfg, {"rms_norm_eps", "layer_norm_epsilon", "layer_norm_eps", "norm_eps"});
    SP_ASSIGN_OR_RETURN(
        m.norm_eps, json_number(cfg, eps_key ? eps_key : "rms_norm_eps", ctx, gpt2 ? 1e-5 : 1e-6));
  }
  if (!m.learned_positions) SP_RETURN_IF_ERROR(read_rope(cfg, m, ctx));
  SP_RETURN_IF_ERROR(read_attention_layers(cfg, m, ctx));

  if (json_has(cfg, "kv_lora_rank")) {
    SP_ASSIGN_OR_RETURN(MlaSpec mla, read_mla(cfg, ctx));
    m.mla = mla;
    // MLA has a full set of K/V heads (num_key_value_heads == heads, ecosystem.md §1.1); head_dim
    // here is the query/key width, nope + rope.
    m.num_kv_heads = m.num_heads;
    m.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
  } else if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    return invalid(ctx, "num_key_value_heads: " + std::to_string(m.num_kv_heads) +
                            " must divide num_attention_heads " + std::to_string(m.num_heads));
  }

  SP_ASSIGN_OR_RETURN(
      int64_t experts,
      int_alias(cfg, {"num_local_experts", "num_experts", "n_routed_experts"}, ctx, 0, false));
  if (experts > 0) {
    SP_ASSIGN_OR_RETURN(MoeSpec moe, read_moe(cfg, m, experts, ctx));
    m.moe = std::move(moe);
  }

  // The dense FFN's width; required only when some layer is dense. Llama 4 keeps
  // intermediate_size for its experts and sizes its dense layers with intermediate_size_mlp.
  const bool needs_dense = m.num_moe_layers() < m.num_layers;
  const std::optional<int64_t> dense_default = gpt2          ? std::optional<int64_t>(4 * m.hidden)
                                               : needs_dense ? std::nullopt
                                                             : std::optional<int64_t>(0);
  if (m.model_type == "llama4_text") {
    SP_ASSIGN_OR_RETURN(m.ffn,
                        json_int(cfg, "intermediate_size_mlp", ctx, dense_default, needs_dense));
  } else {
    SP_ASSIGN_OR_RETURN(m.ffn, int_alias(cfg, {"intermediate_size", "n_inner", "inter_dim"}, ctx,
                                         dense_default, needs_dense));
  }
  SP_RETURN_IF_ERROR(check_bounds(m, ctx));
  return m;
}

Result<ModelSpec> model_from_config_text(std::string_view text, const std::string& name,
                                         std::string_view ctx) {
  SP_ASSIGN_OR_RETURN(Json cfg, parse_json(text, ctx));
  return model_from_config(cfg, name, ctx);
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(preset_dir(), ec)) {
    if (e.path().extension() == ".json") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<ModelSpec> load_model(const std::string& name_or_path) {
  std::error_code ec;
  fs::path path(name_or_path);
  std::string name;
  if (fs::is_directory(path, ec) && fs::is_regular_file(path / "config.json", ec)) {
    name = path.filename().string();  // a checkpoint folder: name it after the folder
    path /= "config.json";
  } else if (fs::is_regular_file(path, ec) || name_or_path.find('/') != std::string::npos ||
             path.extension() == ".json") {
    // A file: name it after its stem, or its folder when the file is the usual config.json.
    name = path.stem() == "config" && path.has_parent_path()
               ? path.parent_path().filename().string()
               : path.stem().string();
  } else {
    fs::path preset = fs::path(preset_dir()) / (name_or_path + ".json");
    if (!fs::is_regular_file(preset, ec)) {
      std::string list;
      const std::vector<std::string> names = preset_names();
      if (names.empty()) {  // no presets at all: say where they were looked for
        if (Status st = check_data_dir(); !st.is_ok())
          return st.with_context("model '" + text_brief(name_or_path) + "'");
      }
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return Status::invalid("model '" + text_brief(name_or_path) +
                             "' is neither a file nor a bundled preset" +
                             did_you_mean(name_or_path, names) + " (presets: " + list + ")");
    }
    name = name_or_path;
    path = preset;
  }
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(path.string()));
  return model_from_config_text(text, name, path.string());
}

Status set_moe_imbalance(ModelSpec& m, double imbalance) {
  if (!m.moe)
    return Status::invalid(m.name + " has no routed experts; an imbalance applies to MoE models");
  // No rank can receive more than every token: max/mean is at most the number of EP ranks, which
  // is at most the number of experts.
  const double most = static_cast<double>(m.moe->num_experts);
  if (!std::isfinite(imbalance) || imbalance < 1.0 || imbalance > most) {
    char got[64];
    std::snprintf(got, sizeof got, "%g", imbalance);
    return Status::invalid("expected max/mean tokens per expert-parallel rank, from 1 to the " +
                           std::to_string(m.moe->num_experts) + " experts, got " + got);
  }
  m.moe->capacity_imbalance = imbalance;
  return Status::ok();
}

Status set_moe_dispatcher(ModelSpec& m, std::string_view name) {
  if (!m.moe)
    return Status::invalid(m.name + " has no routed experts; a dispatcher applies to MoE models");
  if (name == "alltoall") {
    m.moe->dispatcher = MoeDispatcher::kAllToAll;
  } else if (name == "deepep") {
    m.moe->dispatcher = MoeDispatcher::kDeepEp;
  } else {
    return Status::invalid("expected alltoall or deepep, got '" + std::string(name) + "'");
  }
  return Status::ok();
}

LayoutConstraints layout_constraints(const ModelSpec& m, int64_t seq_len) {
  LayoutConstraints c;
  c.num_layers = m.num_layers;
  c.num_heads = m.num_heads;
  c.num_kv_heads = m.num_kv_heads;
  c.num_experts = m.moe ? m.moe->num_experts : 0;
  c.seq_len = seq_len;
  c.mla = m.mla.has_value();
  return c;
}

}  // namespace scaleplan::models
