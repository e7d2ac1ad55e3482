// The tensor table. Names follow the Hugging Face checkpoints of each family (GPT-2's fused c_attn
// is listed as q/k/v, as Megatron-LM and HF Llama split it; the count is the same).
#include "models/tensors.h"

#include "core/enum_names.h"

#include <algorithm>
#include <utility>

namespace scaleplan::models {
namespace {

// Builds the table in order: embedding, layers, final norm, head.
class TableBuilder {
 public:
  explicit TableBuilder(const ModelSpec& m) : m_(m) {}

  void add(std::string name, Component c, std::vector<int64_t> shape, TpSplit split,
           int64_t count = 1, bool expert = false) {
    TensorEntry t;
    t.name = std::move(name);
    t.component = c;
    t.shape = std::move(shape);
    t.count = count;
    t.layer = layer_;
    t.tp_split = split;
    t.expert = expert;
    t.first_stage = first_;
    t.last_stage = last_;
    out_.push_back(std::move(t));
  }

  // A norm over `width`: RMSNorm has a weight, LayerNorm a weight and a bias.
  void norm(const std::string& prefix, Component c, int64_t width) {
    add(prefix + ".weight", c, {width}, TpSplit::kReplicated);
    if (m_.norm == NormKind::kLayerNorm) add(prefix + ".bias", c, {width}, TpSplit::kReplicated);
  }

  // An FFN of width `f` under `prefix`, `count` copies. Gated (SwiGLU, GeGLU): gate/up [f, h],
  // down [h, f]; two-matrix (GELU/ReLU/ReLU²): fc1 [f, h], fc2 [h, f]. Biases where the family has
  // them: the column-parallel ones split with their outputs, the row-parallel one is replicated.
  void ffn(const std::string& prefix, Component c, int64_t f, int64_t count, bool expert) {
    const int64_t h = m_.hidden;
    const bool bias = m_.has_ffn_bias();
    if (m_.gated_ffn()) {
      add(prefix + ".gate_proj.weight", c, {f, h}, TpSplit::kColumn, count, expert);  // [f, h]
      add(prefix + ".up_proj.weight", c, {f, h}, TpSplit::kColumn, count, expert);    // [f, h]
      if (bias) {
        add(prefix + ".gate_proj.bias", c, {f}, TpSplit::kColumn, count, expert);
        add(prefix + ".up_proj.bias", c, {f}, TpSplit::kColumn, count, expert);
      }
      add(prefix + ".down_proj.weight", c, {h, f}, TpSplit::kRow, count, expert);  // [h, f]
      if (bias) add(prefix + ".down_proj.bias", c, {h}, TpSplit::kReplicated, count, expert);
    } else {
      add(prefix + ".fc1.weight", c, {f, h}, TpSplit::kColumn, count, expert);  // [f, h]
      if (bias) add(prefix + ".fc1.bias", c, {f}, TpSplit::kColumn, count, expert);
      add(prefix + ".fc2.weight", c, {h, f}, TpSplit::kRow, count, expert);  // [h, f]
      if (bias) add(prefix + ".fc2.bias", c, {h}, TpSplit::kReplicated, count, expert);
    }
  }

  void attention() {
    const int64_t h = m_.hidden, a = m_.num_heads, d = m_.head_dim, kv = m_.num_kv_heads;
    const Component c = Component::kAttention;
    if (m_.mla) {
      mla_attention();
    } else {
      add("self_attn.q_proj.weight", c, {a * d, h}, TpSplit::kColumn);     // [heads·d, h]
      add("self_attn.k_proj.weight", c, {kv * d, h}, TpSplit::kKvColumn);  // [kv·d, h]
      add("self_attn.v_proj.weight", c, {kv * d, h}, TpSplit::kKvColumn);  // [kv·d, h]
      if (m_.has_qkv_bias()) {
        add("self_attn.q_proj.bias", c, {a * d}, TpSplit::kColumn);
        add("self_attn.k_proj.bias", c, {kv * d}, TpSplit::kKvColumn);
        add("self_attn.v_proj.bias", c, {kv * d}, TpSplit::kKvColumn);
      }
      add("self_attn.o_proj.weight", c, {h, a * d}, TpSplit::kRow);  // [h, heads·d]
    }
    if (m_.has_o_bias()) add("self_attn.o_proj.bias", c, {h}, TpSplit::kReplicated);
    // Qwen3, Gemma-3: RMSNorm over each head's d channels, shared by all heads. (Llama 4's q/k
    // L2 norm has no weights.)
    if (m_.qk_norm) {
      add("self_attn.q_norm.weight", c, {d}, TpSplit::kReplicated);  // [d]
      add("self_attn.k_norm.weight", c, {d}, TpSplit::kReplicated);  // [d]
    }
    if (m_.attention_sinks) add("self_attn.sinks", c, {a}, TpSplit::kColumn);  // [heads]
  }

  // DeepSeek-V2/V3 multi-head latent attention (DeepSeek-V3 report §2.1.1, HF modeling_deepseek).
  // The down projections are replicated across TP ranks (Megatron-Core MLA "duplicated" linears);
  // the up projections split by heads.
  void mla_attention() {
    const MlaSpec& x = *m_.mla;
    const int64_t h = m_.hidden, a = m_.num_heads;
    const int64_t qk = x.qk_nope_head_dim + x.qk_rope_head_dim;
    const Component c = Component::kAttention;
    if (x.q_lora_rank > 0) {
      add("self_attn.q_a_proj.weight", c, {x.q_lora_rank, h}, TpSplit::kReplicated);  // [rq, h]
      add("self_attn.q_a_layernorm.weight", c, {x.q_lora_rank}, TpSplit::kReplicated);
      add("self_attn.q_b_proj.weight", c, {a * qk, x.q_lora_rank}, TpSplit::kColumn);  // [a·qk, rq]
    } else {
      add("self_attn.q_proj.weight", c, {a * qk, h}, TpSplit::kColumn);  // [a·qk, h]
    }
    // [rkv + rope, h]: the latent plus one shared RoPE key.
    add("self_attn.kv_a_proj_with_mqa.weight", c, {x.kv_lora_rank + x.qk_rope_head_dim, h},
        TpSplit::kReplicated);
    add("self_attn.kv_a_layernorm.weight", c, {x.kv_lora_rank}, TpSplit::kReplicated);
    // [a·(nope + v), rkv]
    add("self_attn.kv_b_proj.weight", c, {a * (x.qk_nope_head_dim + x.v_head_dim), x.kv_lora_rank},
        TpSplit::kColumn);
    add("self_attn.o_proj.weight", c, {h, a * x.v_head_dim}, TpSplit::kRow);  // [h, a·v]
  }

  void moe_block(const MoeSpec& moe) {
    const int64_t h = m_.hidden, e = moe.num_experts;
    add("mlp.gate.weight", Component::kRouter, {e, h}, TpSplit::kReplicated);  // [experts, h]
    if (moe.router_bias) add("mlp.gate.bias", Component::kRouter, {e}, TpSplit::kReplicated);
    ffn("mlp.experts", Component::kRoutedExperts, moe.expert_ffn, e, /*expert=*/true);
    if (moe.num_shared_experts > 0) {
      // Shared experts sit on the dense grid (TP-split like a dense FFN), Megatron-Core style.
      ffn("mlp.shared_experts", Component::kSharedExperts, moe.shared_expert_ffn,
          moe.num_shared_experts, /*expert=*/false);
      if (moe.shared_expert_gate) {
        add("mlp.shared_expert_gate.weight", Component::kSharedExperts, {1, h},
            TpSplit::kReplicated);  // [1, h]
      }
    }
  }

  std::vector<TensorEntry> build() {
    const int64_t h = m_.hidden;
    first_ = true;
    add("embed_tokens.weight", Component::kEmbedding, {m_.vocab, h}, TpSplit::kVocab);  // [V, h]
    if (m_.learned_positions) {  // [positions, h], replicated as in Megatron-LM
      add("embed_positions.weight", Component::kEmbedding, {m_.max_position, h},
          TpSplit::kReplicated);
    }
    first_ = false;
    for (int64_t i = 0; i < m_.num_layers; ++i) layer(i);
    layer_ = -1;
    last_ = true;
    norm("norm", Component::kNorm, h);
    if (!m_.tied_embeddings) {
      add("lm_head.weight", Component::kLmHead, {m_.vocab, h}, TpSplit::kVocab);  // [V, h]
    }
    return std::move(out_);
  }

  // Decoder layer i's tensors.
  std::vector<TensorEntry> build_layer(int64_t i) {
    layer(i);
    return std::move(out_);
  }

 private:
  void layer(int64_t i) {
    const int64_t h = m_.hidden;
    layer_ = i;
    norm("input_layernorm", Component::kNorm, h);
    attention();
    // Gemma-2/3 (Gemma2DecoderLayer): post_attention_layernorm on the attention output, then
    // pre_feedforward_layernorm before the FFN and post_feedforward_layernorm after it.
    if (m_.sandwich_norm) norm("attn_output_layernorm", Component::kNorm, h);
    norm("post_attention_layernorm", Component::kNorm, h);
    if (m_.is_moe_layer(layer_)) {
      moe_block(*m_.moe);
    } else {
      ffn("mlp", Component::kMlp, m_.ffn, 1, /*expert=*/false);
    }
    if (m_.sandwich_norm) norm("post_feedforward_layernorm", Component::kNorm, h);
  }

  const ModelSpec& m_;
  std::vector<TensorEntry> out_;
  int64_t layer_ = -1;
  bool first_ = false;
  bool last_ = false;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

constexpr std::string_view kComponentNames[] = {"embedding", "attention",      "mlp",
                                                "router",    "routed_experts", "shared_experts",
                                                "norm",      "lm_head"};
static_assert(std::ssize(kComponentNames) == static_cast<int>(Component::kLmHead) + 1);

std::string_view to_string(Component c) { return name_in(kComponentNames, c); }

int64_t TensorEntry::numel() const {
  int64_t n = count;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<TensorEntry> tensor_table(const ModelSpec& m) { return TableBuilder(m).build(); }

std::vector<TensorEntry> layer_tensor_table(const ModelSpec& m, int64_t layer) {
  return TableBuilder(m).build_layer(layer);
}

std::vector<TensorEntry> mtp_tensor_table(const ModelSpec& m) {
  // DeepSeek-V3 MTP module k (report §2.2, HF checkpoint layers.61): enorm, hnorm [h] each, eh_proj
  // [h, 2h], one full decoder layer (MoE), and shared_head.norm [h]; its embedding and output head
  // are shared with the main model, so they are not repeated here.
  std::vector<TensorEntry> out;
  if (m.mtp_layers <= 0) return out;
  ModelSpec one = m;
  one.num_layers = 1;
  one.tied_embeddings = true;
  if (one.moe) {  // the MTP layer is a MoE layer whatever the dense prefix of the main model
    one.moe->first_dense_layers = 0;
    one.moe->dense_layers.clear();
    one.moe->layer_freq = 1;
  }
  const int64_t h = m.hidden;
  for (int64_t k = 0; k < m.mtp_layers; ++k) {
    const int64_t layer = m.num_layers + k;
    std::vector<TensorEntry> t = tensor_table(one);
    for (auto& e : t) {
      if (e.layer != 0) continue;  // drop the embedding and final norm of the one-layer model
      e.layer = layer;
      e.last_stage = true;
      out.push_back(e);
    }
    auto extra = [&](std::string name, Component c, std::vector<int64_t> shape, TpSplit s) {
      TensorEntry e;
      e.name = std::move(name);
      e.component = c;
      e.shape = std::move(shape);
      e.layer = layer;
      e.last_stage = true;
      e.tp_split = s;
      out.push_back(std::move(e));
    };
    extra("enorm.weight", Component::kNorm, {h}, TpSplit::kReplicated);
    extra("hnorm.weight", Component::kNorm, {h}, TpSplit::kReplicated);
    // Megatron-core's eh_proj is a ColumnParallelLinear: its h outputs split over TP.
    extra("eh_proj.weight", Component::kAttention, {h, 2 * h}, TpSplit::kColumn);
    extra("shared_head.norm.weight", Component::kNorm, {h}, TpSplit::kReplicated);
  }
  return out;
}

int64_t shard_numel(const TensorEntry& t, const ModelSpec& m, int tp, int ep, int etp) {
  // The expert grid splits experts over ep and each expert's matrices over etp; the dense grid
  // splits over tp (Megatron-Core). Uneven splits (a vocab or FFN width that tp does not divide)
  // give the largest shard: frameworks pad to a multiple, and memory must hold the largest rank.
  const int64_t split = t.expert ? std::max(etp, 1) : std::max(tp, 1);
  const int64_t count = t.expert ? ceil_div(t.count, std::max(ep, 1)) : t.count;
  std::vector<int64_t> shape = t.shape;
  switch (t.tp_split) {
    case TpSplit::kReplicated:
      break;
    case TpSplit::kColumn:
    case TpSplit::kVocab:
      shape[0] = ceil_div(shape[0], split);
      break;
    case TpSplit::kRow:
      shape.back() = ceil_div(shape.back(), split);
      break;
    case TpSplit::kKvColumn: {
      // KV heads divide over tp, or (fewer heads than ranks) each rank keeps one whole head
      // (Megatron-LM replicates kv heads so that tp is a multiple of them; DESIGN.md layout rules).
      const int64_t kv = std::max<int64_t>(m.num_kv_heads, 1);
      shape[0] = kv >= split ? ceil_div(shape[0], split) : shape[0] / kv;
      break;
    }
  }
  int64_t n = count;
  for (int64_t d : shape) n *= d;
  return n;
}

}  // namespace scaleplan::models
