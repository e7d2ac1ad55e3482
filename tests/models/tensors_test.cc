#include "models/tensors.h"

#include <gtest/gtest.h>

#include "tests/models/model_fixtures.h"

#include <string>

#include "models/model_spec.h"

namespace scaleplan::models {
namespace {

using testing::preset;

const TensorEntry* find(const std::vector<TensorEntry>& t, const std::string& name, int64_t layer) {
  for (const auto& e : t) {
    if (e.name == name && e.layer == layer) return &e;
  }
  return nullptr;
}

TEST(Tensors, GqaShapes) {
  // Llama-3-8B: q [32·128, 4096], k/v [8·128, 4096], o [4096, 32·128].
  auto t = tensor_table(preset("llama3-8b"));
  EXPECT_EQ(find(t, "self_attn.q_proj.weight", 0)->shape, (std::vector<int64_t>{4096, 4096}));
  EXPECT_EQ(find(t, "self_attn.k_proj.weight", 31)->shape, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(find(t, "mlp.down_proj.weight", 5)->shape, (std::vector<int64_t>{4096, 14336}));
  EXPECT_TRUE(find(t, "embed_tokens.weight", -1)->first_stage);
  EXPECT_TRUE(find(t, "lm_head.weight", -1)->last_stage);
  EXPECT_EQ(find(t, "self_attn.q_proj.bias", 0), nullptr);
}

TEST(Tensors, MlaShapes) {
  // DeepSeek-V3: q_a [1536, 7168], q_b [128·192, 1536], kv_a [512+64, 7168], kv_b [128·256, 512],
  // o [7168, 128·128]; routed experts 256 copies of [2048, 7168]; dense layers 0-2.
  auto t = tensor_table(preset("deepseek-v3"));
  EXPECT_EQ(find(t, "self_attn.q_a_proj.weight", 0)->shape, (std::vector<int64_t>{1536, 7168}));
  EXPECT_EQ(find(t, "self_attn.q_b_proj.weight", 0)->shape, (std::vector<int64_t>{24576, 1536}));
  EXPECT_EQ(find(t, "self_attn.kv_a_proj_with_mqa.weight", 0)->shape,
            (std::vector<int64_t>{576, 7168}));
  EXPECT_EQ(find(t, "self_attn.kv_b_proj.weight", 0)->shape, (std::vector<int64_t>{32768, 512}));
  EXPECT_EQ(find(t, "self_attn.o_proj.weight", 0)->shape, (std::vector<int64_t>{7168, 16384}));
  EXPECT_NE(find(t, "mlp.gate_proj.weight", 2), nullptr);
  EXPECT_EQ(find(t, "mlp.gate_proj.weight", 3), nullptr);
  const TensorEntry* e = find(t, "mlp.experts.gate_proj.weight", 3);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->count, 256);
  EXPECT_TRUE(e->expert);
  EXPECT_EQ(find(t, "mlp.shared_experts.down_proj.weight", 60)->shape,
            (std::vector<int64_t>{7168, 2048}));
  EXPECT_FALSE(find(t, "mlp.shared_experts.down_proj.weight", 60)->expert);
  EXPECT_EQ(find(t, "mlp.gate.weight", 3)->shape, (std::vector<int64_t>{256, 7168}));
}

TEST(Tensors, Gpt2HasBiasesLayerNormAndPositions) {
  auto t = tensor_table(preset("gpt3-175b"));
  EXPECT_EQ(find(t, "embed_positions.weight", -1)->shape, (std::vector<int64_t>{2048, 12288}));
  EXPECT_NE(find(t, "input_layernorm.bias", 0), nullptr);
  EXPECT_NE(find(t, "self_attn.o_proj.bias", 0), nullptr);
  EXPECT_EQ(find(t, "mlp.fc1.weight", 0)->shape, (std::vector<int64_t>{49152, 12288}));
  EXPECT_EQ(find(t, "lm_head.weight", -1), nullptr);  // tied
}

TEST(Tensors, QwenNormsAndBiases) {
  auto t = tensor_table(preset("qwen3-8b"));
  EXPECT_EQ(find(t, "self_attn.k_norm.weight", 0)->shape, (std::vector<int64_t>{128}));
}

TEST(Tensors, ShardNumel) {
  ModelSpec m = preset("llama3-8b");  // 8 kv heads
  auto t = tensor_table(m);
  const TensorEntry& q = *find(t, "self_attn.q_proj.weight", 0);
  const TensorEntry& k = *find(t, "self_attn.k_proj.weight", 0);
  const TensorEntry& o = *find(t, "self_attn.o_proj.weight", 0);
  const TensorEntry& norm = *find(t, "input_layernorm.weight", 0);
  const TensorEntry& emb = *find(t, "embed_tokens.weight", -1);
  EXPECT_EQ(shard_numel(q, m, 8, 1, 1), 4096 * 4096 / 8);
  EXPECT_EQ(shard_numel(o, m, 8, 1, 1), 4096 * 4096 / 8);
  EXPECT_EQ(shard_numel(k, m, 8, 1, 1), 1024 * 4096 / 8);  // one kv head per rank
  // tp=16 > 8 kv heads: each rank keeps one whole kv head (128 rows), not half of one.
  EXPECT_EQ(shard_numel(k, m, 16, 1, 1), 128 * 4096);
  EXPECT_EQ(shard_numel(norm, m, 8, 1, 1), 4096);
  EXPECT_EQ(shard_numel(emb, m, 8, 1, 1), 128256 / 8 * 4096);

  ModelSpec x = preset("mixtral-8x7b");
  auto tx = tensor_table(x);
  const TensorEntry& w1 = *find(tx, "mlp.experts.gate_proj.weight", 0);
  // ep=4: 2 of 8 experts; etp=2: half of each expert's 14336 rows. tp does not apply.
  EXPECT_EQ(shard_numel(w1, x, 8, 4, 2), 2 * (14336 / 2) * 4096);
  const TensorEntry& w2 = *find(tx, "mlp.experts.down_proj.weight", 0);
  EXPECT_EQ(shard_numel(w2, x, 8, 8, 1), 4096 * 14336);
}

// layer_operators reads one layer's weights from layer_tensor_table; it must be exactly that
// layer's slice of the whole table (dense and MoE layers, MLA, sandwich norms, biases).
TEST(Tensors, OneLayersTableIsItsSliceOfTheWholeTable) {
  for (const char* name : {"llama3-8b", "deepseek-v3", "gemma2-9b", "pythia-1b", "qwen2.5-7b",
                           "llama4-scout", "gpt-oss-120b"}) {
    SCOPED_TRACE(name);
    const ModelSpec m = preset(name);
    const auto all = tensor_table(m);
    for (int64_t layer = 0; layer < m.num_layers; ++layer) {
      std::vector<TensorEntry> slice;
      for (const auto& e : all)
        if (e.layer == layer) slice.push_back(e);
      const auto one = layer_tensor_table(m, layer);
      ASSERT_EQ(one.size(), slice.size()) << layer;
      ASSERT_FALSE(one.empty());
      for (size_t i = 0; i < one.size(); ++i) {
        EXPECT_EQ(one[i].name, slice[i].name);
        EXPECT_EQ(one[i].shape, slice[i].shape);
        EXPECT_EQ(one[i].count, slice[i].count);
        EXPECT_EQ(one[i].layer, layer);
        EXPECT_EQ(one[i].tp_split, slice[i].tp_split);
        EXPECT_EQ(one[i].expert, slice[i].expert);
        EXPECT_EQ(one[i].component, slice[i].component);
        EXPECT_FALSE(one[i].first_stage || one[i].last_stage);
      }
    }
  }
}

TEST(Tensors, EveryLayerListed) {
  ModelSpec m = preset("llama-tiny");
  auto t = tensor_table(m);
  for (int64_t l = 0; l < m.num_layers; ++l) EXPECT_NE(find(t, "mlp.up_proj.weight", l), nullptr);
  EXPECT_TRUE(mtp_tensor_table(m).empty());
  auto mtp = mtp_tensor_table(preset("deepseek-v3"));
  ASSERT_FALSE(mtp.empty());
  EXPECT_EQ(mtp.front().layer, 61);
  EXPECT_NE(find(mtp, "eh_proj.weight", 61), nullptr);
  EXPECT_NE(find(mtp, "mlp.experts.up_proj.weight", 61), nullptr);
}

}  // namespace
}  // namespace scaleplan::models
