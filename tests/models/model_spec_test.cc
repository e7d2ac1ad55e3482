#include "models/model_spec.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "models/accounting.h"

namespace scaleplan::models {
namespace {

Result<ModelSpec> from(const std::string& text) {
  return model_from_config_text(text, "test", "config.json");
}

// A minimal valid Llama-style config; tests change one field at a time.
nlohmann::json llama() {
  return {{"model_type", "llama"},  {"hidden_size", 256},       {"intermediate_size", 768},
          {"num_hidden_layers", 4}, {"num_attention_heads", 8}, {"num_key_value_heads", 4},
          {"vocab_size", 1024}};
}

void expect_invalid(const Result<ModelSpec>& r, const std::string& needle) {
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(ModelSpec, LlamaDefaults) {
  auto m = from(llama().dump());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->head_dim, 32);  // 256 / 8
  EXPECT_EQ(m->ffn_kind, FfnKind::kSwiGlu);
  EXPECT_EQ(m->norm, NormKind::kRmsNorm);
  EXPECT_FALSE(m->tied_embeddings);
  EXPECT_FALSE(m->is_moe());
  nlohmann::json no_kv = llama();
  no_kv.erase("num_key_value_heads");
  EXPECT_EQ(from(no_kv.dump())->num_kv_heads, 8);  // defaults to the query heads
}

TEST(ModelSpec, ExpertCountAliasesAgree) {
  // Mixtral spells it num_local_experts with the expert width in intermediate_size; Qwen spells
  // it num_experts with moe_intermediate_size; DeepSeek n_routed_experts.
  nlohmann::json mixtral = llama();
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 8;
  mixtral["num_experts_per_tok"] = 2;
  nlohmann::json qwen = llama();
  qwen["model_type"] = "qwen3_moe";
  qwen["num_experts"] = 8;
  qwen["num_experts_per_tok"] = 2;
  qwen["moe_intermediate_size"] = 768;
  qwen["decoder_sparse_step"] = 1;
  nlohmann::json ds = llama();
  ds["n_routed_experts"] = 8;
  ds["num_experts_per_tok"] = 2;
  ds["moe_intermediate_size"] = 768;
  for (const auto& cfg : {mixtral, qwen, ds}) {
    auto m = from(cfg.dump());
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    ASSERT_TRUE(m->is_moe());
    EXPECT_EQ(m->moe->num_experts, 8);
    EXPECT_EQ(m->moe->top_k, 2);
    EXPECT_EQ(m->moe->expert_ffn, 768);
    EXPECT_EQ(m->num_moe_layers(), 4);
  }
}

TEST(ModelSpec, MoeLayerPlacement) {
  // DeepSeek: layer l >= first_k_dense_replace is MoE when l % moe_layer_freq == 0.
  nlohmann::json ds = llama();
  ds["num_hidden_layers"] = 8;
  ds["n_routed_experts"] = 4;
  ds["num_experts_per_tok"] = 1;
  ds["moe_intermediate_size"] = 64;
  ds["first_k_dense_replace"] = 3;
  ds["moe_layer_freq"] = 2;
  auto m = from(ds.dump());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  // Layers 4 and 6 only (3, 5, 7 are odd).
  EXPECT_EQ(m->num_moe_layers(), 2);
  EXPECT_TRUE(m->is_moe_layer(4));
  EXPECT_FALSE(m->is_moe_layer(3));
  // Qwen: (l + 1) % decoder_sparse_step == 0 and l not in mlp_only_layers.
  nlohmann::json q = llama();
  q["num_hidden_layers"] = 8;
  q["num_experts"] = 4;
  q["num_experts_per_tok"] = 1;
  q["moe_intermediate_size"] = 64;
  q["decoder_sparse_step"] = 2;
  q["mlp_only_layers"] = {3};
  m = from(q.dump());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  // (l+1) even: 1, 3, 5, 7; minus 3 -> 1, 5, 7.
  EXPECT_EQ(m->num_moe_layers(), 3);
  EXPECT_TRUE(m->is_moe_layer(1));
  EXPECT_FALSE(m->is_moe_layer(3));
  EXPECT_FALSE(m->is_moe_layer(0));
}

TEST(ModelSpec, Gpt2AliasesAndConventions) {
  nlohmann::json g = {{"model_type", "gpt2"}, {"n_embd", 768},       {"n_layer", 12},
                      {"n_head", 12},         {"n_positions", 1024}, {"vocab_size", 50257},
                      {"n_inner", nullptr}};
  auto m = from(g.dump());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->hidden, 768);
  EXPECT_EQ(m->ffn, 4 * 768);  // n_inner null -> 4·h
  EXPECT_EQ(m->ffn_kind, FfnKind::kGelu);
  EXPECT_EQ(m->norm, NormKind::kLayerNorm);
  EXPECT_TRUE(m->linear_bias);
  EXPECT_TRUE(m->learned_positions);
  EXPECT_TRUE(m->tied_embeddings);
  // GPT-2 small has 124,439,808 parameters (HF gpt2): 12 layers of 12h² + 13h (biases, 2 LNs)
  // = 7,087,872 each, + wte 50257·768 + wpe 1024·768 + final LN 2·768.
  EXPECT_EQ(count_params(*m).total, 124'439'808);
}

TEST(ModelSpec, ValidationRecordGpt2Form) {
  // The validation records write GPT models with HF Llama names and model_type gpt2.
  nlohmann::json g = {
      {"hidden_act", "gelu"},      {"hidden_size", 2304},         {"intermediate_size", 9216},
      {"model_type", "gpt2"},      {"num_attention_heads", 24},   {"num_hidden_layers", 24},
      {"num_key_value_heads", 24}, {"tie_word_embeddings", true}, {"vocab_size", 51200}};
  auto m = from(g.dump());
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->ffn, 9216);
  EXPECT_EQ(m->head_dim, 96);
}

// The family decides whether the FFN is gated; the activation only which nonlinearity. Before
// families, a Llama config with hidden_act relu2 was read as a two-matrix FFN, though LlamaMLP is
// gate/up/down whatever its activation.
TEST(ModelSpec, ActivationsInGatedAndTwoMatrixFamilies) {
  nlohmann::json r = llama();
  r["hidden_act"] = "gelu";  // LlamaMLP with GELU: GeGLU, three matrices
  EXPECT_EQ(from(r.dump())->ffn_kind, FfnKind::kGeGlu);
  r["hidden_act"] = "relu2";  // a gated squared ReLU is no FFN scaleplan models
  expect_invalid(from(r.dump()),
                 "hidden_act: activation 'relu2' is not supported in this "
                 "family's gated FFN");
  nlohmann::json n = llama();
  n["model_type"] = "nemotron";  // NemotronMLP: up, relu2, down
  n["hidden_act"] = "relu2";
  EXPECT_EQ(from(n.dump())->ffn_kind, FfnKind::kRelu2);
  n["hidden_act"] = "relu";
  EXPECT_EQ(from(n.dump())->ffn_kind, FfnKind::kRelu);
  n["hidden_act"] = "tanh";
  expect_invalid(from(n.dump()), "hidden_act");
}

TEST(ModelSpec, FamilyFlags) {
  nlohmann::json q2 = llama();
  q2["model_type"] = "qwen2";
  EXPECT_TRUE(from(q2.dump())->has_qkv_bias());
  EXPECT_FALSE(from(q2.dump())->has_o_bias());
  nlohmann::json q3 = llama();
  q3["model_type"] = "qwen3";
  q3["head_dim"] = 64;  // explicit, differs from 256/8
  auto m = from(q3.dump());
  EXPECT_TRUE(m->qk_norm);
  EXPECT_EQ(m->head_dim, 64);
}

// Which layers attend through a sliding window, as transformers reads the config: layer_types
// (gpt-oss alternates sliding and full layers, starting with a sliding one), Qwen's
// use_sliding_window (off by default) with max_window_layers, or every layer (Mistral).
TEST(ModelSpec, SlidingWindowLayers) {
  auto oss = load_model("gpt-oss-120b");
  ASSERT_TRUE(oss.is_ok());
  EXPECT_EQ(oss->sliding_window, 128);
  for (int64_t l = 0; l < oss->num_layers; ++l) {
    EXPECT_EQ(oss->attention_window(l), l % 2 == 0 ? 128 : 0) << l;
    EXPECT_EQ(oss->layer_kind(l), 1 + (l % 2 == 0 ? 2 : 0)) << l;  // every layer is MoE
  }
  EXPECT_EQ(load_model("mistral-7b")->attention_window(31), 4096);
  for (const char* name : {"mixtral-8x7b", "qwen3-8b", "qwen3-30b-a3b", "llama3-8b"})
    EXPECT_EQ(load_model(name)->sliding_window, 0) << name;  // null, or use_sliding_window false

  nlohmann::json c = llama();
  c["sliding_window"] = 64;  // no layer_types, not Qwen: every layer (Mistral)
  EXPECT_EQ(from(c.dump())->attention_window(0), 64);
  c["model_type"] = "qwen2";  // Qwen: off unless use_sliding_window
  EXPECT_EQ(from(c.dump())->sliding_window, 0);
  c["use_sliding_window"] = true;
  c["max_window_layers"] = 2;  // layers 2 and 3 slide
  auto q = from(c.dump());
  ASSERT_TRUE(q.is_ok()) << q.status().message();
  EXPECT_EQ(q->attention_window(1), 0);
  EXPECT_EQ(q->attention_window(2), 64);
  c = llama();
  c["sliding_window"] = 64;
  c["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  auto t = from(c.dump());
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ(t->attention_window(0), 0);
  EXPECT_EQ(t->attention_window(1), 64);
  c["layer_types"] = {"full_attention"};
  expect_invalid(from(c.dump()), "layer_types: expected an array of num_hidden_layers = 4");
  c["layer_types"] = {"full_attention", "causal_attention", "full_attention", "full_attention"};
  expect_invalid(from(c.dump()), "layer_types[1]: \"causal_attention\" is not supported");
  c["layer_types"] = {"full_attention", "chunked_attention", "full_attention", "full_attention"};
  expect_invalid(from(c.dump()), "chunked_attention layers need an attention_chunk_size");
  c["layer_types"] = {"full_attention", "sliding_attention", "full_attention", "full_attention"};
  c.erase("sliding_window");
  expect_invalid(from(c.dump()), "sliding_attention layers need a sliding_window");
  c = llama();
  c["sliding_window"] = -1;
  expect_invalid(from(c.dump()), "sliding_window: must not be negative, got -1");
}

TEST(ModelSpec, MissingFieldIsNamed) {
  nlohmann::json c = llama();
  c.erase("hidden_size");
  expect_invalid(from(c.dump()), "config.json: hidden_size: missing");
  c = llama();
  c.erase("intermediate_size");  // required for a dense model
  expect_invalid(from(c.dump()), "intermediate_size: missing");
  c = llama();
  c["num_local_experts"] = 4;  // MoE without top-k
  expect_invalid(from(c.dump()), "num_experts_per_tok: missing");
}

TEST(ModelSpec, BadValuesAreNamed) {
  nlohmann::json c = llama();
  c["hidden_size"] = -4;
  expect_invalid(from(c.dump()), "config.json: hidden_size: must be positive, got -4");
  c = llama();
  c["num_hidden_layers"] = 0;
  expect_invalid(from(c.dump()), "num_hidden_layers: must be positive, got 0");
  c = llama();
  c["vocab_size"] = "big";
  expect_invalid(from(c.dump()), "vocab_size: expected an integer, got \"big\"");
  c = llama();
  c["tie_word_embeddings"] = "yes";
  expect_invalid(from(c.dump()), "tie_word_embeddings");
  c = llama();
  c["num_key_value_heads"] = 3;
  expect_invalid(from(c.dump()), "num_key_value_heads: 3 must divide num_attention_heads 8");
  c = llama();
  c["num_local_experts"] = 4;
  c["num_experts_per_tok"] = 5;
  expect_invalid(from(c.dump()), "exceeds the number of experts 4");
  expect_invalid(from("[1, 2]"), "expected a JSON object");
}

TEST(ModelSpec, MalformedJsonFile) {
  const std::string path = ::testing::TempDir() + "/scaleplan_bad_config.json";
  {
    std::ofstream out(path);
    out << "{\"hidden_size\": 4096,";
  }
  auto m = load_model(path);
  expect_invalid(m, "malformed JSON");
  EXPECT_NE(m.status().message().find(path), std::string::npos) << m.status().message();
  std::remove(path.c_str());
}

TEST(ModelSpec, ConfigFolderAndFileNames) {
  const std::string dir = ::testing::TempDir() + "/Tiny-Llama-Test";
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir + "/config.json");
    out << llama().dump();
  }
  auto by_dir = load_model(dir);
  ASSERT_TRUE(by_dir.is_ok()) << by_dir.status().message();
  EXPECT_EQ(by_dir->name, "Tiny-Llama-Test");
  auto by_file = load_model(dir + "/config.json");
  ASSERT_TRUE(by_file.is_ok());
  EXPECT_EQ(by_file->name, "Tiny-Llama-Test");
  std::filesystem::remove_all(dir);
}

TEST(ModelSpec, PresetsLoadAndUnknownListsThem) {
  auto names = preset_names();
  ASSERT_GE(names.size(), 9u);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const auto& n : names) {
    auto m = load_model(n);
    EXPECT_TRUE(m.is_ok()) << n << ": " << m.status().message();
    EXPECT_EQ(m->name, n);
  }
  auto bad = load_model("llama9-1t");
  expect_invalid(bad, "llama9-1t");
  EXPECT_NE(bad.status().message().find("llama3-8b"), std::string::npos);
  auto missing = load_model("/nonexistent/config.json");
  EXPECT_FALSE(missing.is_ok());
}

TEST(ModelSpec, PublishedShapes) {
  auto ds = load_model("deepseek-v3");
  ASSERT_TRUE(ds.is_ok());
  ASSERT_TRUE(ds->mla.has_value());
  EXPECT_EQ(ds->mla->kv_lora_rank, 512);
  EXPECT_EQ(ds->qk_head_dim(), 192);
  EXPECT_EQ(ds->v_head_dim(), 128);
  EXPECT_EQ(ds->num_moe_layers(), 58);  // 61 minus first_k_dense_replace 3
  EXPECT_EQ(ds->moe->num_shared_experts, 1);
  EXPECT_EQ(ds->mtp_layers, 1);
  auto l405 = load_model("llama3.1-405b");
  EXPECT_EQ(l405->num_kv_heads, 8);  // the corrected upload, not the first one's 16
  auto c = layout_constraints(*load_model("mixtral-8x7b"), 4096);
  EXPECT_EQ(c.num_experts, 8);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.seq_len, 4096);
}

}  // namespace
}  // namespace scaleplan::models
