// Model families read as they are: every model_type is supported with its own layers or refused
// by name with the reason; parameter counts against the figures the model's authors published.
#include "models/families.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "models/accounting.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "tests/models/model_fixtures.h"

namespace scaleplan::models {
namespace {

using testing::preset;
using testing::resolved;

Result<ModelSpec> from(const nlohmann::json& cfg) {
  return model_from_config(cfg, "test", "config.json");
}

ModelSpec ok(const nlohmann::json& cfg) {
  auto m = from(cfg);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? *m : ModelSpec{};
}

void expect_refused(const nlohmann::json& cfg, const std::string& needle) {
  auto m = from(cfg);
  ASSERT_FALSE(m.is_ok());
  EXPECT_EQ(m.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().message();
}

// Parameters outside the input embedding and the (untied) output projection: what the Gemma,
// Pythia, Qwen and Nemotron reports call non-embedding parameters.
int64_t non_embedding(const ModelSpec& m) {
  ParamCounts c = count_params(m);
  return c.total - c.by_component[Component::kEmbedding] - c.by_component[Component::kLmHead];
}

// A published figure stated to `unit` (see accounting_test.cc: within rounding below, within
// truncation above).
void expect_published(int64_t computed, double published, double unit, const std::string& what) {
  const double c = static_cast<double>(computed);
  EXPECT_GE(c, published - unit / 2) << what << ": computed " << computed;
  EXPECT_LT(c, published + unit) << what << ": computed " << computed;
}

nlohmann::json llama() {
  return {{"model_type", "llama"},  {"hidden_size", 256},       {"intermediate_size", 768},
          {"num_hidden_layers", 4}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
          {"vocab_size", 1024}};
}

TEST(Families, UnsupportedModelTypesAreRefusedByName) {
  nlohmann::json c = llama();
  c["model_type"] = "mamba";
  expect_refused(c, "model_type 'mamba' is not supported: state-space layers are not modelled");
  c["model_type"] = "nemotron_h";  // a Mamba hybrid (the Nemotron-H records)
  expect_refused(c, "model_type 'nemotron_h' is not supported: its state-space (Mamba) layers");
  c["model_type"] = "t5";
  expect_refused(c, "encoder-decoder models are not modelled");
  c["model_type"] = "bert";
  expect_refused(c, "encoder-only models are not modelled");
  c["model_type"] = "gptj";
  expect_refused(c, "parallel attention with a shared layer norm");
  // An unknown family is refused too, with the list of supported ones, not read as Llama.
  c["model_type"] = "olmo2";
  expect_refused(c,
                 "model_type 'olmo2' is not supported: scaleplan has not modelled this "
                 "family's layers (supported: llama, mistral");
  c.erase("model_type");
  expect_refused(c, "config.json: model_type: missing");
  // Grok-1 as xAI released it (HF ports carry its multipliers) is not the Mixtral-style
  // configuration NVIDIA's benchmarks ran under the same name.
  c = llama();
  c["model_type"] = "grok-1";
  c["num_local_experts"] = 8;
  c["num_experts_per_tok"] = 2;
  EXPECT_TRUE(from(c).is_ok());
  c["attn_output_multiplier"] = 0.088;
  expect_refused(c, "model_type 'grok-1' is not supported as xAI released it");
}

TEST(Families, EverySupportedTypeReadsAMinimalConfig) {
  for (std::string_view type : supported_model_types()) {
    nlohmann::json c = llama();
    c["model_type"] = std::string(type);
    if (type == "gemma3" || type == "llama4") {
      nlohmann::json text = llama();
      text.erase("model_type");
      c = {{"model_type", std::string(type)}, {"text_config", text}};
    }
    if (type == "nemotron") c["hidden_act"] = "relu2";
    auto m = from(c);
    EXPECT_TRUE(m.is_ok()) << type << ": " << m.status().message();
  }
}

// Gemma 2 (Gemma Team 2024, "Gemma 2: Improving Open Language Models at a Practical Size",
// arXiv 2408.00118, Table 1: non-embedding parameters 2,024,517,888 / 8,324,201,984 /
// 26,047,480,320). Their embedding figures use a 256,128-entry table; the HF checkpoints' is
// 256,000, so the embedding is not compared.
TEST(Families, Gemma2CountsAndLayers) {
  // google/gemma-2-9b config.json is the gemma2-9b preset.
  ModelSpec m9 = preset("gemma2-9b");
  EXPECT_EQ(non_embedding(m9), 8'324'201'984);
  EXPECT_EQ(m9.ffn_kind, FfnKind::kGeGlu);  // gelu_pytorch_tanh in a gated MLP
  EXPECT_TRUE(m9.sandwich_norm);
  EXPECT_TRUE(m9.tied_embeddings);  // Gemma2Config default; the file does not say
  EXPECT_DOUBLE_EQ(m9.attn_softcap, 50.0);
  EXPECT_DOUBLE_EQ(m9.final_softcap, 30.0);
  // Gemma2DecoderLayer: even layers slide over 4096 tokens, odd layers attend to everything.
  EXPECT_EQ(m9.attention_window(0), 4096);
  EXPECT_EQ(m9.attention_window(1), 0);
  EXPECT_EQ(m9.num_sliding_layers(), 21);
  nlohmann::json g2 = {{"model_type", "gemma2"},    {"hidden_size", 2304},
                       {"intermediate_size", 9216}, {"num_hidden_layers", 26},
                       {"num_attention_heads", 8},  {"num_key_value_heads", 4},
                       {"head_dim", 256},           {"vocab_size", 256000}};
  EXPECT_EQ(non_embedding(ok(g2)), 2'024'517'888);
  nlohmann::json g27 = {
      {"model_type", "gemma2"},  {"hidden_size", 4608},       {"intermediate_size", 36864},
      {"num_hidden_layers", 46}, {"num_attention_heads", 32}, {"num_key_value_heads", 16},
      {"head_dim", 128},         {"vocab_size", 256000}};
  ModelSpec m27 = ok(g27);
  EXPECT_EQ(non_embedding(m27), 26'047'480'320);
  EXPECT_DOUBLE_EQ(m27.attn_softcap, 50.0);  // Gemma2Config's defaults when the file is silent
  // Gemma (v1, arXiv 2403.08295 Table 1: non-embedding 1,981,884,416 and 7,751,248,896): GeGLU,
  // tied, head_dim 256, two norms per layer.
  nlohmann::json g1 = {
      {"model_type", "gemma"},   {"hidden_size", 3072},       {"intermediate_size", 24576},
      {"num_hidden_layers", 28}, {"num_attention_heads", 16}, {"num_key_value_heads", 16},
      {"head_dim", 256},         {"vocab_size", 256000},      {"hidden_act", "gelu_pytorch_tanh"}};
  ModelSpec m7 = ok(g1);
  EXPECT_EQ(non_embedding(m7), 7'751'248'896);
  EXPECT_FALSE(m7.sandwich_norm);
  g1["hidden_size"] = 2048;
  g1["intermediate_size"] = 16384;
  g1["num_hidden_layers"] = 18;
  g1["num_attention_heads"] = 8;
  g1["num_key_value_heads"] = 1;
  EXPECT_EQ(non_embedding(ok(g1)), 1'981'884'416);
}

// Gemma 3 (Gemma Team 2025, Gemma 3 Technical Report, arXiv 2503.19786, Table 1: non-embedding
// parameters 698M / 3,209M / 10,759M / 25,600M, embedding 302M for the text-only 1B). The
// multimodal checkpoints keep the language model in text_config and write only what differs
// from Gemma3TextConfig's defaults (head_dim 256, vocab 262,208, every 6th layer global).
TEST(Families, Gemma3CountsAndLayers) {
  ModelSpec m27 = preset("gemma3-27b");  // google/gemma-3-27b-pt config.json
  expect_published(non_embedding(m27), 25'600e6, 1e6, "gemma-3-27b non-embedding");
  EXPECT_EQ(m27.model_type, "gemma3_text");
  ASSERT_EQ(m27.notes.size(), 1u);  // the vision tower is left out, and says so
  EXPECT_NE(m27.notes[0].find("vision encoder"), std::string::npos);
  EXPECT_TRUE(m27.qk_norm);
  EXPECT_TRUE(m27.sandwich_norm);
  EXPECT_EQ(m27.attn_softcap, 0);  // Gemma 3 dropped soft-capping
  EXPECT_EQ(m27.vocab, 262208);    // the class default
  EXPECT_EQ(m27.attention_window(4), 1024);
  EXPECT_EQ(m27.attention_window(5), 0);  // (5 + 1) % 6 == 0: global
  EXPECT_EQ(m27.num_sliding_layers(), 62 - 10);
  EXPECT_EQ(m27.rope.scaling, "linear");
  EXPECT_DOUBLE_EQ(m27.rope.local_theta, 10000.0);
  auto text = [](int h, int f, int layers, int heads, int kv) {
    nlohmann::json t = {{"hidden_size", h},
                        {"intermediate_size", f},
                        {"model_type", "gemma3_text"},
                        {"num_attention_heads", heads},
                        {"num_hidden_layers", layers},
                        {"num_key_value_heads", kv}};
    return nlohmann::json{{"model_type", "gemma3"}, {"text_config", t}};
  };
  expect_published(non_embedding(ok(text(3840, 15360, 48, 16, 8))), 10'759e6, 1e6, "12b");
  expect_published(non_embedding(ok(text(2560, 10240, 34, 8, 4))), 3'209e6, 1e6, "4b");
  // google/gemma-3-1b-pt: text-only (Gemma3ForCausalLM), vocab 262,144, window 512.
  nlohmann::json one = {{"model_type", "gemma3_text"},
                        {"hidden_size", 1152},
                        {"intermediate_size", 6912},
                        {"num_hidden_layers", 26},
                        {"num_attention_heads", 4},
                        {"num_key_value_heads", 1},
                        {"head_dim", 256},
                        {"vocab_size", 262144},
                        {"sliding_window", 512}};
  ModelSpec m1 = ok(one);
  expect_published(non_embedding(m1), 698e6, 1e6, "1b non-embedding");
  expect_published(count_params(m1).embedding, 302e6, 1e6, "1b embedding");
  EXPECT_TRUE(m1.notes.empty());
}

// Llama 4 (Meta, "The Llama 4 herd", 2025-04-05, and the model cards: Scout 17B active / 109B
// total, Maverick 17B active / 400B total). The text model is counted; Scout's 109B also holds
// its vision encoder and projector (about 0.87B), which scaleplan does not model, so Scout's
// total is compared as the language model's 107.77B (derivation below), not as 109B.
TEST(Families, Llama4CountsAndLayers) {
  ModelSpec scout = preset("llama4-scout");  // meta-llama/Llama-4-Scout-17B-16E config.json
  ModelSpec maverick = preset("llama4-maverick");
  ParamCounts s = count_params(scout), mv = count_params(maverick);
  expect_published(s.active, 17e9, 1e9, "Scout active");
  expect_published(mv.active, 17e9, 1e9, "Maverick active");
  expect_published(mv.total, 400e9, 1e9, "Maverick total");
  // Scout's language model: per layer attention 2·5120·5120 + 2·5120·1024 = 62,914,560, 16
  // experts of 3·5120·8192 = 2,013,265,920, one shared expert 125,829,120, router 16·5120 =
  // 81,920, two norms 10,240: 2,202,101,760 × 48 = 105,700,884,480; embedding and head
  // 2·202,048·5120 = 2,068,971,520; final norm 5120.
  EXPECT_EQ(s.total, 107'769'861'120);
  ASSERT_TRUE(scout.moe.has_value());
  EXPECT_EQ(scout.moe->num_shared_experts, 1);
  EXPECT_EQ(scout.moe->score_function, "sigmoid");
  EXPECT_EQ(scout.num_moe_layers(), 48);
  EXPECT_EQ(maverick.num_moe_layers(), 24);  // interleave_moe_layer_step 2: layers 1, 3, ...
  EXPECT_TRUE(maverick.is_moe_layer(1));
  EXPECT_FALSE(maverick.is_moe_layer(0));
  EXPECT_EQ(maverick.ffn, 16384);  // intermediate_size_mlp sizes the dense layers
  // Every 4th layer has no RoPE and attends to everything; the others attend within chunks.
  EXPECT_FALSE(scout.uses_rope(3));
  EXPECT_TRUE(scout.uses_rope(2));
  EXPECT_EQ(scout.attention_chunk_of(2), 8192);
  EXPECT_EQ(scout.attention_chunk_of(3), 0);
  EXPECT_EQ(scout.num_chunked_layers(), 36);
  EXPECT_TRUE(scout.qk_l2_norm);
  EXPECT_FALSE(maverick.qk_l2_norm);  // its config sets use_qk_norm false
}

// Chunked attention (Llama 4): at s = 16384 a RoPE layer attends within two chunks of 8192, each
// query seeing on average c/2 = 4096 keys instead of s/2 = 8192; at s <= 8192 nothing changes.
TEST(Families, ChunkedAttentionFlopsAndKernelShape) {
  ModelSpec scout = preset("llama4-scout");
  const double per_key = 2.0 * 40 * (128 + 128);  // 2·a·(d_qk + d_v)
  // 36 chunked layers at 4096 keys, 12 NoPE layers at 8192.
  EXPECT_DOUBLE_EQ(flops_per_token(scout, 16384).attention_forward,
                   per_key * (36 * 4096.0 + 12 * 8192.0));
  EXPECT_DOUBLE_EQ(flops_per_token(scout, 8192).attention_forward, per_key * 48 * 4096.0);
  // The kernel runs two sequences of 8192 per micro-batch sequence on a chunked layer.
  const Layout l = resolved(scout, "tp=8,ep=8,dp=1,mbs=1,gbs=1", 16384, 8);
  auto ops = layer_operators(scout, l, 16384, 0);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  bool seen = false;
  for (const Op& op : *ops) {
    if (op.name != "attn.core") continue;
    seen = true;
    EXPECT_EQ(op.attention()->batch, 2);
    EXPECT_EQ(op.attention()->q_len, 8192);
    EXPECT_EQ(op.attention()->kv_len, 8192);
  }
  EXPECT_TRUE(seen);
  // Context parallelism would split a chunk across ranks: not modelled, refused by name.
  const Layout cp = resolved(scout, "tp=4,cp=2,ep=8,dp=1,mbs=1,gbs=1", 16384, 8);
  auto refused = layer_operators(scout, cp, 16384, 0);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("chunked attention"), std::string::npos);
}

// Pythia (EleutherAI/pythia README, "Models" table: total parameters 70,426,624 /
// 162,322,944 / 1,011,781,632 / 11,846,072,320), GPT-NeoX layers: LayerNorm with biases, biased
// linears, a two-matrix GELU FFN, untied, a parallel residual, 25% rotary.
TEST(Families, GptNeoxCountsAndLayers) {
  ModelSpec p1b = preset("pythia-1b");  // EleutherAI/pythia-1b config.json
  EXPECT_EQ(count_params(p1b).total, 1'011'781'632);
  EXPECT_TRUE(p1b.parallel_residual);
  EXPECT_EQ(p1b.norm, NormKind::kLayerNorm);
  EXPECT_EQ(p1b.ffn_kind, FfnKind::kGelu);
  EXPECT_TRUE(p1b.has_qkv_bias() && p1b.has_o_bias() && p1b.has_ffn_bias());
  EXPECT_DOUBLE_EQ(p1b.rope.fraction, 0.25);
  auto pythia = [](int h, int layers, int heads, int vocab) {
    return nlohmann::json{{"model_type", "gpt_neox"},     {"hidden_size", h},
                          {"intermediate_size", 4 * h},   {"num_hidden_layers", layers},
                          {"num_attention_heads", heads}, {"vocab_size", vocab}};
  };
  EXPECT_EQ(count_params(ok(pythia(512, 6, 8, 50304))).total, 70'426'624);
  EXPECT_EQ(count_params(ok(pythia(768, 12, 12, 50304))).total, 162'322'944);
  EXPECT_EQ(count_params(ok(pythia(5120, 36, 40, 50688))).total, 11'846'072'320);
}

// A parallel residual changes no FLOP, but the two branches' partial sums are reduced once
// (gpt-neox): with tp=2 and no SP a layer's forward has one TP all-reduce, not two; and the FFN's
// norm stores no second copy of the layer input.
TEST(Families, ParallelResidualReducesOnceAndStoresTheInputOnce) {
  ModelSpec par = preset("pythia-1b");
  ModelSpec seq = par;
  seq.parallel_residual = false;
  EXPECT_DOUBLE_EQ(flops_per_token(par, 2048).model(), flops_per_token(seq, 2048).model());
  const Layout l = resolved(par, "tp=2,sp=off,dp=1,mbs=1,gbs=1", 2048, 2);
  auto count_fwd_ar = [&](const ModelSpec& m) {
    auto ops = layer_operators(m, l, 2048, 0);
    EXPECT_TRUE(ops.is_ok());
    int n = 0;
    int64_t saved = 0;
    for (const Op& op : *ops) {
      if (op.pass != Pass::kForward) continue;
      saved += op.saved.value();
      if (op.comm() && op.comm()->kind == CollectiveOp::kAllReduce) ++n;
    }
    return std::make_pair(n, saved);
  };
  const auto [par_ar, par_saved] = count_fwd_ar(par);
  const auto [seq_ar, seq_saved] = count_fwd_ar(seq);
  EXPECT_EQ(par_ar, 1);
  EXPECT_EQ(seq_ar, 2);
  // The layer input, 2048 tokens · 2048 wide in bf16, stored once instead of twice.
  EXPECT_EQ(seq_saved - par_saved, 2048 * 2048 * 2);
}

// Gemma-2/3's extra norms and Gemma-2's final soft-cap are work and memory: two more norm
// kernels per layer, each storing its input (s·h bf16) and statistics (s fp32), and the capped
// logits' tanh output kept for the backward (s·V bf16).
TEST(Families, SandwichNormsAndFinalSoftcapCostMemory) {
  ModelSpec g = preset("gemma2-9b");
  ModelSpec plain = g;
  plain.sandwich_norm = false;
  plain.final_softcap = 0;
  const int64_t s = 4096;
  const Layout l = resolved(g, "tp=1,dp=1,mbs=1,gbs=1", s, 1);
  auto saved = [&](const std::vector<Op>& ops) {
    int64_t n = 0;
    for (const Op& op : ops) n += op.pass == Pass::kForward ? op.saved.value() : 0;
    return n;
  };
  auto with = layer_operators(g, l, s, 0), without = layer_operators(plain, l, s, 0);
  ASSERT_TRUE(with.is_ok() && without.is_ok());
  EXPECT_EQ(saved(*with) - saved(*without), 2 * (s * 3584 * 2 + s * 4));
  auto head = head_operators(g, l, s), head_plain = head_operators(plain, l, s);
  ASSERT_TRUE(head.is_ok() && head_plain.is_ok());
  EXPECT_EQ(saved(*head) - saved(*head_plain), s * 256000 * 2);
}

// Phi-3-mini (Abdin et al. 2024, arXiv 2404.14219: "phi-3-mini, a 3.8 billion parameter
// language model"), Qwen2.5 (model cards: 7B 7.61B total, 6.53B non-embedding; 0.5B 0.49B /
// 0.36B, tied) with q/k/v biases and no o bias, Nemotron-4 15B (Parmar et al. 2024, arXiv
// 2402.16819 §2: 12.5B non-embedding) with squared ReLU and LayerNorm.
TEST(Families, Phi3Qwen25AndNemotronCounts) {
  expect_published(count_params(preset("phi3-mini")).total, 3.8e9, 0.1e9, "phi-3-mini");
  ModelSpec q7 = preset("qwen2.5-7b");
  expect_published(count_params(q7).total, 7.61e9, 0.01e9, "Qwen2.5-7B total");
  expect_published(non_embedding(q7), 6.53e9, 0.01e9, "Qwen2.5-7B non-embedding");
  EXPECT_TRUE(q7.has_qkv_bias());
  EXPECT_FALSE(q7.has_o_bias());
  nlohmann::json half = {{"model_type", "qwen2"},     {"hidden_size", 896},
                         {"intermediate_size", 4864}, {"num_hidden_layers", 24},
                         {"num_attention_heads", 14}, {"num_key_value_heads", 2},
                         {"vocab_size", 151936},      {"tie_word_embeddings", true}};
  ModelSpec q05 = ok(half);
  expect_published(count_params(q05).total, 0.49e9, 0.01e9, "Qwen2.5-0.5B total");
  expect_published(non_embedding(q05), 0.36e9, 0.01e9, "Qwen2.5-0.5B non-embedding");
  nlohmann::json n15 = {{"model_type", "nemotron"}, {"hidden_act", "relu2"},
                        {"hidden_size", 6144},      {"intermediate_size", 24576},
                        {"num_hidden_layers", 32},  {"num_attention_heads", 48},
                        {"num_key_value_heads", 8}, {"head_dim", 128},
                        {"vocab_size", 256000},     {"tie_word_embeddings", false}};
  ModelSpec nem = ok(n15);
  expect_published(non_embedding(nem), 12.5e9, 0.1e9, "Nemotron-4 15B non-embedding");
  EXPECT_EQ(nem.norm, NormKind::kLayerNorm);
  EXPECT_DOUBLE_EQ(nem.rope.fraction, 0.5);  // NemotronConfig partial_rotary_factor
}

}  // namespace
}  // namespace scaleplan::models
