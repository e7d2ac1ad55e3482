#include "models/accounting.h"

#include <gtest/gtest.h>

#include "tests/models/model_fixtures.h"

#include <cmath>
#include <string>

#include "models/model_spec.h"

namespace scaleplan::models {
namespace {

using testing::preset;

// A published figure P, stated to a last digit of `unit` (8.03B: unit 0.01B). Vendors round
// (Mixtral 46.70 -> "46.7B") or truncate (DeepSeek-V3 37.55 -> "37B", Qwen3-30B-A3B 3.353 ->
// "3.3B"), so the exact count must lie in [P - unit/2, P + unit): within rounding below, within
// truncation above. Nothing looser.
void expect_published(int64_t computed, double published_b, double unit_b,
                      const std::string& what) {
  const double c = static_cast<double>(computed) / 1e9;
  EXPECT_GE(c, published_b - unit_b / 2) << what << ": computed " << c << "B";
  EXPECT_LT(c, published_b + unit_b) << what << ": computed " << c << "B";
}

struct Published {
  const char* preset;
  double total, total_unit;    // billions, and the unit of the last published digit
  double active, active_unit;  // 0 for dense models (active == total)
  const char* source;
  // The gpt-oss card counts the unembedding in its active figure but not the input embedding
  // (201088·2880 = 0.58B); every other vendor's figure includes both, as count_params does.
  bool active_without_embedding = false;
};

// Sources: model cards and papers, see models/presets/SOURCES.md.
const Published kPublished[] = {
    {"llama3-8b", 8.03, 0.01, 0, 0, "HF meta-llama/Meta-Llama-3-8B safetensors: 8.03B"},
    {"llama3-70b", 70.6, 0.1, 0, 0, "HF meta-llama/Meta-Llama-3-70B safetensors: 70.6B"},
    {"llama3.1-405b", 405.9, 0.1, 0, 0, "HF meta-llama/Llama-3.1-405B safetensors: 405.9B (kv 8)"},
    {"mistral-7b", 7.24, 0.01, 0, 0, "HF mistralai/Mistral-7B-v0.1 safetensors: 7.24B"},
    {"qwen3-8b", 8.2, 0.1, 0, 0, "Qwen3-8B model card: 8.2B"},
    {"mixtral-8x7b", 46.7, 0.1, 12.9, 0.1, "Mixtral paper (Jiang et al. 2024): 46.7B / 12.9B"},
    {"mixtral-8x22b", 141, 1, 39, 1, "Mistral 8x22B announcement: 141B / 39B"},
    {"qwen3-30b-a3b", 30.5, 0.1, 3.3, 0.1, "Qwen3-30B-A3B model card: 30.5B / 3.3B"},
    {"qwen3-235b-a22b", 235, 1, 22, 1, "Qwen3-235B-A22B model card: 235B / 22B"},
    {"deepseek-v3", 671, 1, 37, 1, "DeepSeek-V3 report (2412.19437) §1: 671B / 37B"},
    {"gpt3-175b", 175, 1, 0, 0, "Brown et al. 2020 Table 2.1: 175.0B"},
    {"gpt-oss-120b", 116.83, 0.01, 5.13, 0.01, "gpt-oss model card Table 1: 116.83B / 5.13B", true},
    {"qwen2.5-7b", 7.61, 0.01, 0, 0, "Qwen2.5-7B model card: 7.61B"},
    {"phi3-mini", 3.8, 0.1, 0, 0, "Phi-3 report (2404.14219): phi-3-mini, 3.8B"},
    {"pythia-1b", 1.011781632, 1e-9, 0, 0, "Pythia README models table: 1,011,781,632"},
    {"llama4-maverick", 400, 1, 17, 1, "Llama 4 model card: Maverick 17B active, 400B total"},
    // Not here: llama4-scout (its 109B includes the vision encoder, tests/models/families_test.cc)
    // and the Gemma presets (their reports publish non-embedding counts, compared there).
};

TEST(Accounting, PresetsMatchPublishedParameterCounts) {
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.preset);
    ParamCounts c = count_params(preset(p.preset));
    expect_published(c.total, p.total, p.total_unit, std::string(p.preset) + " total");
    if (p.active > 0) {
      const int64_t active = p.active_without_embedding ? c.active - c.embedding : c.active;
      expect_published(active, p.active, p.active_unit, std::string(p.preset) + " active");
    } else {
      EXPECT_EQ(c.active, c.total);
    }
  }
}

TEST(Accounting, ExactCountsFromTheArchitecture) {
  // Llama-3-8B, h=4096, f=14336, L=32, a=32, kv=8, d=128, V=128256, untied:
  //   attention 4096·4096·2 (q, o) + 4096·1024·2 (k, v) = 41,943,040
  //   SwiGLU    3·4096·14336                               = 176,160,768
  //   norms     2·4096                                     = 8,192
  //   per layer 218,112,000 × 32                           = 6,979,584,000
  //   embedding + head 2·128256·4096 = 1,050,673,152; final norm 4096 -> 8,030,261,248.
  EXPECT_EQ(count_params(preset("llama3-8b")).total, 8'030'261'248);
  // Qwen3-30B-A3B: keras-hub lists 30,532,122,624 parameters for the HF checkpoint.
  EXPECT_EQ(count_params(preset("qwen3-30b-a3b")).total, 30'532'122'624);
}

TEST(Accounting, DeepSeekMtpIsCountedApart) {
  // The HF checkpoint holds 685B: 671B + the MTP module (one MoE layer, eh_proj [h, 2h], three
  // norms; ~11.6B, or 14B with the shared embedding and head counted again).
  ParamCounts c = count_params(preset("deepseek-v3"));
  const double mtp_b = static_cast<double>(c.mtp) / 1e9;
  EXPECT_GT(mtp_b, 11.5);
  EXPECT_LT(mtp_b, 11.7);
  const double with_head = static_cast<double>(c.total + c.mtp + 2 * 129280LL * 7168) / 1e9;
  EXPECT_NEAR(with_head, 685, 1);
}

TEST(Accounting, ComponentsSumToTotal) {
  for (const char* name : {"llama3-8b", "deepseek-v3", "gpt3-175b", "qwen3-30b-a3b"}) {
    ParamCounts c = count_params(preset(name));
    int64_t sum = 0;
    for (const auto& [comp, n] : c.by_component) sum += n;
    EXPECT_EQ(sum, c.total) << name;
    EXPECT_EQ(c.embedding, c.by_component[Component::kEmbedding]) << name;
  }
}

TEST(Accounting, FlopsPerTokenFromFirstPrinciples) {
  // llama-tiny: h=256, f=768, L=4, a=8, kv=4, d=32, V=1024, untied, at s=1024.
  // Matmul weights per layer: q, o 256·256 each; k, v 128·256 each; gate/up/down 3·768·256
  //   = 131,072 + 65,536 + 589,824 = 786,432; × 4 layers = 3,145,728; + LM head 1024·256 = 262,144
  //   -> N = 3,407,872 (no embedding lookup, no norms).
  // Attention (causal, s/2 keys on average): per layer a·(d+d)·s = 8·64·1024 = 524,288; × 4
  //   = 2,097,152.
  // forward = 2N + attention = 6,815,744 + 2,097,152 = 8,912,896; backward 2×; model 3×.
  ModelSpec m = preset("llama-tiny");
  FlopsPerToken f = flops_per_token(m, 1024);
  EXPECT_DOUBLE_EQ(f.matmul_params, 3'407'872);
  EXPECT_DOUBLE_EQ(f.attention_forward, 2'097'152);
  EXPECT_DOUBLE_EQ(f.forward, 8'912'896);
  EXPECT_DOUBLE_EQ(f.backward, 2 * 8'912'896.0);
  EXPECT_DOUBLE_EQ(f.model(), 3 * 8'912'896.0);
  // 6N + 6·L·s·h (the Chowdhery et al. App. B term 12·L·H·Q·T, halved for the causal mask).
  EXPECT_DOUBLE_EQ(f.model(), 6 * 3'407'872.0 + 6.0 * 4 * 1024 * 256);
  EXPECT_DOUBLE_EQ(f.hardware(Recompute::kNone), f.model());
  EXPECT_DOUBLE_EQ(f.hardware(Recompute::kSelective), f.model() + 2'097'152);
  // Full recompute reruns the layers' forward, not the LM head's (2·1024·256 = 524,288).
  EXPECT_DOUBLE_EQ(f.head_forward, 524'288);
  EXPECT_DOUBLE_EQ(f.hardware(Recompute::kFull), f.model() + 8'912'896.0 - 524'288);
}

TEST(Accounting, TiedHeadStillCostsFlops) {
  // GPT-3 ties its output projection to the embedding: no lm_head parameter, but the logits
  // matmul runs. N_matmul = 12·L·h² (+ no biases) + V·h.
  ModelSpec m = preset("gpt3-175b");
  FlopsPerToken f = flops_per_token(m, 2048);
  const double h = 12288, L = 96, V = 50257;
  EXPECT_DOUBLE_EQ(f.matmul_params, 12 * L * h * h + V * h);
  // Causal attention, a·d = h: L·2·s·h forward.
  EXPECT_DOUBLE_EQ(f.attention_forward, L * 2 * 2048 * h);
}

TEST(Accounting, MoeFlopsCountTopKExperts) {
  // mixtral-tiny: h=256, f=512 per expert, 4 experts top-2, L=4, a=8, kv=2, d=32, V=1024.
  // Per layer: q, o 2·256·256 = 131,072; k, v 2·64·256 = 32,768; router 4·256 = 1,024;
  //   two experts 2·3·512·256 = 786,432 -> 951,296; × 4 = 3,805,184; + head 262,144 = 4,067,328.
  FlopsPerToken f = flops_per_token(preset("mixtral-tiny"), 512);
  EXPECT_DOUBLE_EQ(f.matmul_params, 4'067'328);
}

TEST(Accounting, SlidingWindowLayersSeeTheirWindow) {
  // gpt-oss-120b: 64 heads of 64, 36 layers alternating sliding (window 128) and full, from a
  // sliding one. At s = 4096 a full layer's token sees s/2 = 2048 keys on average; a sliding
  // layer's token i sees min(128, i): (128·129/2 + 128·(4096 − 128))/4096 = 126.015625 keys.
  // Per key 2·64·(64 + 64) = 16,384 FLOPs.
  const FlopsPerToken f = flops_per_token(preset("gpt-oss-120b"), 4096);
  EXPECT_DOUBLE_EQ(f.attention_forward, 18 * 16384 * 2048.0 + 18 * 16384 * 126.015625);
  // A window no shorter than the sequence changes nothing: Mistral-7B (4096) at 4096 and 2048.
  for (int64_t s : {2048, 4096}) {
    ModelSpec full = preset("mistral-7b");
    full.sliding_window = 0;
    EXPECT_DOUBLE_EQ(flops_per_token(preset("mistral-7b"), s).attention_forward,
                     flops_per_token(full, s).attention_forward)
        << s;
  }
}

TEST(Accounting, MlaAttentionUsesItsHeadWidths) {
  // DeepSeek-V3: a=128, d_qk = 128 + 64, d_v = 128, L=61: per token a·(192+128)·s per layer.
  FlopsPerToken f = flops_per_token(preset("deepseek-v3"), 4096);
  EXPECT_DOUBLE_EQ(f.attention_forward, 61.0 * 128 * (192 + 128) * 4096);
  // Active matmul weights are the 37B active minus the input embedding and the vector params:
  // between 36B and 37B.
  EXPECT_GT(f.matmul_params, 36.0e9);
  EXPECT_LT(f.matmul_params, 37.0e9);
}

}  // namespace
}  // namespace scaleplan::models
