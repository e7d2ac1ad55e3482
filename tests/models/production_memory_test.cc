// issue 44: the memory conventions of two published production runs, each term from first
// principles, and the two layouts judged with the settings they ran with (docs/memory-model.md,
// "Production layouts as they ran").
#include <gtest/gtest.h>

#include "tests/models/model_fixtures.h"

#include <cstdint>
#include <string>
#include <vector>

#include "models/accounting.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/tensors.h"

namespace scaleplan::models {
namespace {

using testing::preset;
using testing::resolved;

// An 80 GB H100 or H800 as nvidia-smi reports it: 81559 MiB (hw_profiles/bundled/dgx-h100.json,
// dgx-h800.json).
constexpr Bytes kH100Memory = Bytes(int64_t{81559} << 20);

MemoryResult estimate(const ModelSpec& m, const std::string& layout, int64_t seq, int64_t gpus) {
  MemoryOptions opt;  // Megatron-core's conventions (the default framework)
  opt.framework = framework_memory(FrameworkId::kMegatron);
  opt.ops = framework_ops(FrameworkId::kMegatron);
  opt.gpu_memory = kH100Memory;
  auto r = estimate_memory(m, resolved(m, layout, seq, gpus), seq, opt);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : MemoryResult{};
}

// The reserved peak and what sits outside the allocator within the GPU's memory.
void expect_fits(const MemoryResult& r) {
  EXPECT_TRUE(r.fits) << "reserved " << r.peak_reserved.value() << " + overhead "
                      << r.overhead.value();
  EXPECT_LE((r.peak_reserved + r.overhead).value(), kH100Memory.value());
}

// moments=bf16 (Megatron-core's precision-aware optimizer; DeepSeek-V3 technical report §3.3.3):
// Adam's m and v take 2 B each, the fp32 master 4: 8 B per parameter of the ZeRO shard instead of
// 12 (Rajbhandari et al. 2020 §3.1: master 4 + m 4 + v 4). Where the parameters are the fp32
// masters (torchtitan's FSDP2), 4 instead of 8. Nothing else moves.
TEST(ProductionMemory, Bf16MomentsHoldTwoBytesEach) {
  const ModelSpec m = preset("llama3-8b");
  const int64_t s = 1024;
  for (const bool fp32_params : {false, true}) {
    MemoryOptions opt;
    opt.framework.fp32_params = fp32_params;
    auto a = estimate_memory(m, resolved(m, "dp=64,zero=1", s, 64), s, opt);
    auto b = estimate_memory(m, resolved(m, "dp=64,zero=1,moments=bf16", s, 64), s, opt);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    const StageMemory &x = a->stages[0], &y = b->stages[0];
    const int64_t shard = zero_shard(x.params, 0, resolved(m, "dp=64,zero=1", s, 64));
    EXPECT_EQ(x.optimizer.value(), (fp32_params ? 8 : 12) * shard);
    EXPECT_EQ(y.optimizer.value(), (fp32_params ? 4 : 8) * shard);
    EXPECT_EQ(x.weights, y.weights);
    EXPECT_EQ(x.gradients, y.gradients);
    EXPECT_EQ(x.activations, y.activations);
  }
  // The step's Adam kernel reads the gradient (4), master (4), m and v and writes master, m, v:
  // 4 + 8 + 2·2·4 = 28 B per parameter in fp32, 4 + 8 + 2·2·2 = 20 with bf16 moments.
  auto adam_bytes = [](MomentDtype d) {
    for (const Op& op : optimizer_operators(1000, false, 4, false, d))
      if (op.name == "optim.adam") return std::get<MemoryBoundShape>(op.shape).bytes.value();
    return int64_t{0};
  };
  EXPECT_EQ(adam_bytes(MomentDtype::kFp32), 28 * 1000);
  EXPECT_EQ(adam_bytes(MomentDtype::kBf16), 20 * 1000);
}

// act_cache=fp8, DeepSeek-V3 technical report §3.3.2-3.3.3, op by op on a DeepSeek-V3 MoE layer
// (tp = 1, 4,096 tokens, 128 heads of v-dim 128, 8 experts per token on ep = 8: 32 local experts
// of intermediate 2,048), against Transformer Engine's fp8 storage (dtype=fp8 alone):
//  - every linear's fp8 input gains one fp32 scale per 1x128 tile: + 4·⌈n/128⌉ B, and a tensor
//    two linears read is cached once (TE: each linear its own fp8 copy);
//  - the attention output O (n_o = 4096·128·128 elements) is kept once in E5M6, 1.5 B, with its
//    tile scales, where TE keeps the bf16 O for the attention (2 B) and an fp8 copy for the output
//    projection (1 B);
//  - the experts' SwiGLU input (gate and up, 2·rows·2048 elements) is kept in fp8 with its scales
//    instead of bf16 (2 B).
// The two new casts move the bf16 tensor and its cached copy once each way.
TEST(ProductionMemory, DeepSeekFp8CacheOpByOp) {
  const ModelSpec m = preset("deepseek-v3");
  const int64_t s = 4096;
  const int layer = 5;  // a MoE layer (first_k_dense_replace = 3)
  ASSERT_TRUE(m.is_moe_layer(layer));
  const Layout te = resolved(m, "tp=1,pp=1,dp=8,ep=8,mbs=1,dtype=fp8", s, 8);
  const Layout ds = resolved(m, "tp=1,pp=1,dp=8,ep=8,mbs=1,dtype=fp8,act_cache=fp8", s, 8);
  auto a = layer_operators(m, te, s, layer);
  auto b = layer_operators(m, ds, s, layer);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  auto tiles = [](int64_t n) { return 4 * ((n + 127) / 128); };
  const int64_t n_o = s * 128 * 128;
  const int64_t act_in = 2 * (s * 8) * 2048;  // gate and up of every routed row
  int checked = 0;
  for (const Op& x : *a) {
    if (x.pass != Pass::kForward) continue;
    const Op* y = nullptr;
    for (const Op& o : *b)
      if (o.pass == Pass::kForward && o.name == x.name) y = &o;
    ASSERT_NE(y, nullptr) << x.name;
    SCOPED_TRACE(x.name);
    if (x.name == "attn.core") {
      EXPECT_EQ(y->saved.value() - x.saved.value(), (3 * n_o / 2 + tiles(n_o)) - 2 * n_o);
      ++checked;
    } else if (x.name == "attn.o") {
      EXPECT_EQ(x.saved.value(), n_o);  // TE's fp8 copy
      EXPECT_EQ(y->saved.value(), 0);   // the E5M6 O serves both
      ++checked;
    } else if (x.name == "moe.expert.act") {
      EXPECT_EQ(x.saved.value(), 2 * act_in);
      EXPECT_EQ(y->saved.value(), act_in + tiles(act_in));
      ++checked;
    } else if (x.name == "attn.kv_a_with_mqa" || x.name == "moe.shared.fc1") {
      // They read a tensor another linear already caches (q_a's hidden input; the block input
      // the router reads): TE keeps one more fp8 copy (1 B), DeepSeek's cache none.
      EXPECT_EQ(x.saved.value(), s * m.hidden);
      EXPECT_EQ(y->saved.value(), 0);
      ++checked;
    } else if (x.kind == OpKind::kGemm && x.name != "moe.router" && x.saved.value() > 0) {
      // The fp8 part of what the linear keeps: its input rows × input width (tp = 1, no SP).
      const GemmShape* g = x.gemm();
      EXPECT_EQ(y->saved.value() - x.saved.value(), tiles(g->m * g->k * g->batch));
      ++checked;
    } else {
      EXPECT_EQ(y->saved, x.saved);
    }
  }
  EXPECT_GE(checked, 8);  // o, core, act, and the q/kv projections, fc1s and downs
  for (const auto& [name, n, cached] :
       {std::tuple{"attn.core.cache_cast", n_o, 3 * n_o / 2 + tiles(n_o)},
        std::tuple{"moe.expert.act.cache_cast", act_in, act_in + tiles(act_in)}}) {
    int found = 0;
    for (const Op& o : *b) {
      if (o.name != name && o.name != std::string(name) + ".bwd") continue;
      EXPECT_EQ(std::get<MemoryBoundShape>(o.shape).bytes.value(), 2 * n + cached) << o.name;
      ++found;
    }
    EXPECT_EQ(found, 2) << name;  // the forward cast and the backward's restore
  }
}

// Meta's Llama 3.1 405B on 16,384 H100 at 8K (Dubey et al. 2024 §3.3.2, Table 4: tp 8, cp 1,
// pp 16, dp 128, 16 sequences per DP rank, 16M tokens per batch): interleaved with the embedding
// and the output as chunks of their own ("we reduce one Transformer layer each from the first and
// the last stages"; 126 + 2 = 128 = 16·8 chunks of one layer), FSDP sharding the optimizer states
// and the gradients but not the weights, and no activation checkpointing at 8K ("we could pre-train
// Llama 3 on sequences of 8K tokens without activation checkpointing"). It fits an 80 GB H100.
TEST(ProductionMemory, MetaLlama405BFitsAsPublished) {
  const ModelSpec m = preset("llama3.1-405b");
  const int64_t s = 8192;
  const std::string base =
      "tp=8,pp=16,dp=128,vpp=8,schedule=interleaved,mbs=1,gbs=2048,pp_embedding=on,pp_loss=on";
  const MemoryResult meta = estimate(m, base + ",zero=2", s, 16384);
  expect_fits(meta);
  const Layout l = resolved(m, base + ",zero=2", s, 16384);
  for (const StageMemory& st : meta.stages) {
    SCOPED_TRACE(st.stage);
    // bf16 weights whole; fp32 gradients and 12 B of optimizer sharded over the 128 DP ranks.
    const int64_t shard = zero_shard(st.params, 0, l);
    EXPECT_EQ(st.weights.value(), 2 * st.params);
    EXPECT_EQ(st.gradients.value(), 4 * shard);
    EXPECT_EQ(st.optimizer.value(), 12 * shard);
    // 16 micro-batches of one sequence and N = pp = 16 in a group: stage s runs
    // (p − s − 1)·2 + (v − 1)·N + 1 = 143 − 2s chunk passes before its first backward, so stages
    // 0-7 hold all m·v = 128 of them, every micro-batch of every chunk (Meta: "the first stage
    // consumes more memory due to the embedding and the warm-up micro-batches").
    if (st.stage >= 1 && st.stage <= 7) EXPECT_DOUBLE_EQ(st.in_flight, 16.0);
  }
  // With the gradients whole (ZeRO-1) the same layout does not fit: the fit rests on the sharding
  // Meta published.
  const MemoryResult zero1 = estimate(m, base + ",zero=1", s, 16384);
  EXPECT_FALSE(zero1.fits);
}

// DeepSeek-V3 on 2,048 H800 at 4K (technical report §3.2, §3.3, §4.2): pp 16 with DualPipe, ep 64,
// ZeRO-1 over dp 128, no TP, fp8 linears, recompute of every RMSNorm and of MLA's up projections
// (§3.2.3), the experts' SwiGLU output recomputed from its fp8-cached input and the other
// activations cached in fp8 (§3.3.3: act_cache=fp8 with moe_act), Adam's moments in bf16 with fp32
// masters and gradients (§3.3.3), and the EMA in host memory (§3.2.3). The report gives no layer
// split; ranks 0 and 15 hold 16 micro-batches of the embedding's stage and the head's stage with
// the MTP module, so they take fewer layers: 2 + 14·4 + 3 = 61.
TEST(ProductionMemory, DeepSeekV3FitsAsPublished) {
  const ModelSpec m = preset("deepseek-v3");
  const int64_t s = 4096;
  const std::string base =
      "tp=1,pp=16,dp=128,ep=64,schedule=dualpipe,mbs=1,gbs=15360,zero=1,dtype=fp8,"
      "recompute=selective,recompute_modules=layernorm+moe_act+mla_up_proj,pp_first=2,pp_last=3";
  const MemoryResult ds = estimate(m, base + ",moments=bf16,act_cache=fp8", s, 2048);
  expect_fits(ds);
  const MemoryResult fp32_moments = estimate(m, base + ",act_cache=fp8", s, 2048);
  const MemoryResult te_cache = estimate(m, base + ",moments=bf16", s, 2048);
  ASSERT_EQ(ds.stages.size(), 16u);
  for (size_t i = 0; i < ds.stages.size(); ++i) {
    const StageMemory &x = ds.stages[i], &f = fp32_moments.stages[i], &t = te_cache.stages[i];
    SCOPED_TRACE(x.stage);
    // fp32 gradients for accumulation, whole under ZeRO-1: 4 B per parameter the rank holds.
    EXPECT_EQ(x.gradients.value(), 4 * x.params);
    // (4 + 2 + 2) / (4 + 4 + 4) of the optimizer states.
    EXPECT_EQ(3 * x.optimizer.value(), 2 * f.optimizer.value());
    EXPECT_EQ(x.activations, f.activations);
    // DeepSeek's fp8 cache keeps less than Transformer Engine's storage on every stage.
    EXPECT_LT(x.activations.value(), t.activations.value());
    EXPECT_EQ(x.optimizer, t.optimizer);
  }
}

}  // namespace
}  // namespace scaleplan::models
