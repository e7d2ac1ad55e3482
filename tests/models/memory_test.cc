// The memory model: model states under ZeRO, activations against Korthikanti et al., schedules,
// stage placement of the embedding and LM head.
#include "models/memory.h"

#include <gtest/gtest.h>

#include "tests/models/model_fixtures.h"

#include <string>
#include <vector>

#include "models/accounting.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "models/operators_detail.h"

namespace scaleplan::models {
namespace {

using testing::preset;
using testing::resolved;

StageMemory only_stage(const ModelSpec& m, const std::string& layout, int64_t gpus,
                       const MemoryOptions& opt) {
  auto r = estimate_memory(m, resolved(m, layout, 1024, gpus), 1024, opt);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r->stages.front();
}

TEST(Memory, SixteenPsiAndTheZeroStages) {
  // Rajbhandari et al. 2020 §3.1: mixed-precision Adam keeps 2Ψ (bf16 weights) + 2Ψ (bf16 grads)
  // + 12Ψ (fp32 master 4, m 4, v 4) = 16Ψ. On N_d = 64 (§5, Fig. 1):
  //   ZeRO-1: 2Ψ + 2Ψ + 12Ψ/64      ZeRO-2: 2Ψ + (2 + 12)Ψ/64      ZeRO-3: 16Ψ/64
  // Sharding rounds up per tensor; 1 byte/param of slack covers it.
  const ModelSpec m = preset("llama3-8b");
  const double psi = static_cast<double>(count_params(m).total);
  MemoryOptions opt;
  opt.framework.fp32_grad_accum = false;  // the paper's 2-byte gradients
  auto near = [&](Bytes b, double expected_bytes) {
    EXPECT_NEAR(static_cast<double>(b.value()), expected_bytes, 64.0 * 300) << expected_bytes;
  };
  StageMemory z0 = only_stage(m, "dp=64,zero=0", 64, opt);
  near(z0.weights + z0.gradients + z0.optimizer, 16 * psi);
  StageMemory z1 = only_stage(m, "dp=64,zero=1", 64, opt);
  near(z1.weights, 2 * psi);
  near(z1.gradients, 2 * psi);
  near(z1.optimizer, 12 * psi / 64);
  StageMemory z2 = only_stage(m, "dp=64,zero=2", 64, opt);
  near(z2.weights, 2 * psi);
  near(z2.gradients, 2 * psi / 64);
  near(z2.optimizer, 12 * psi / 64);
  StageMemory z3 = only_stage(m, "dp=64,zero=3", 64, opt);
  near(z3.weights + z3.gradients + z3.optimizer, 16 * psi / 64);
  // fp32 gradient accumulation (Megatron-LM with bf16): 18Ψ, and 6Ψ + 12Ψ/N_d with ZeRO-1
  // (Megatron-LM docs/distrib_optimizer.md table).
  MemoryOptions fp32;
  StageMemory f0 = only_stage(m, "dp=64,zero=0", 64, fp32);
  near(f0.weights + f0.gradients + f0.optimizer, 18 * psi);
  StageMemory f1 = only_stage(m, "dp=64,zero=1", 64, fp32);
  near(f1.weights + f1.gradients + f1.optimizer, 6 * psi + 12 * psi / 64);
}

TEST(Memory, Megatron2022KeepsFp16GradientsAndCopiesThemForTheStep) {
  // Megatron-LM --fp16 without --accumulate-allreduce-grads-in-fp32: 2Ψ of fp16 main gradients,
  // so the model states are ZeRO's 16Ψ; the optimizer step first makes an fp32 gradient for every
  // parameter (_copy_model_grads_to_main_grads), 4Ψ more until it ends: 20Ψ at the step.
  const ModelSpec m = preset("llama3-8b");
  const double psi = static_cast<double>(count_params(m).total);
  MemoryOptions opt;
  opt.framework = framework_memory(FrameworkId::kMegatron2022);
  StageMemory z0 = only_stage(m, "dp=64,zero=0", 64, opt);
  EXPECT_NEAR(static_cast<double>(z0.gradients.value()), 2 * psi, 64.0 * 300);
  EXPECT_NEAR(static_cast<double>((z0.weights + z0.gradients + z0.optimizer).value()), 16 * psi,
              64.0 * 300);
  EXPECT_NEAR(static_cast<double>(z0.step_peak.value()), 20 * psi, 64.0 * 300);
  // Megatron-core (bf16, fp32 main gradients the optimizer reads in place): 18Ψ at the step.
  MemoryOptions core;
  StageMemory c0 = only_stage(m, "dp=64,zero=0", 64, core);
  EXPECT_NEAR(static_cast<double>(c0.step_peak.value()), 18 * psi, 64.0 * 300);
}

TEST(Memory, NanotronConventions) {
  // nanotron with dp > 1: DDP's bf16 buckets on top of the fp32 accumulator: 20Ψ without ZeRO;
  // ZeRO-1's flat all-gather adds 2Ψ + 2Ψ/N_d during the optimizer step.
  const ModelSpec m = preset("llama3-8b");
  const double psi = static_cast<double>(count_params(m).total);
  MemoryOptions opt;
  opt.framework = framework_memory(FrameworkId::kNanotron);
  StageMemory z0 = only_stage(m, "dp=8,zero=0", 8, opt);
  EXPECT_NEAR(static_cast<double>(z0.step_peak.value()), 20 * psi, 8.0 * 300);
  StageMemory z1 = only_stage(m, "dp=8,zero=1", 8, opt);
  EXPECT_NEAR(static_cast<double>(z1.step_peak.value()), 10 * psi + 14 * psi / 8, 8.0 * 300);
}

TEST(Memory, KorthikantiTerms) {
  // Korthikanti et al. 2022 Eq. 2: s·b·h·(34 + 5·a·s/h) bytes per layer; Table 2: selective drops
  // 5as/h, full keeps 2sbh, TP+SP divides everything by t.
  const int64_t s = 2048, b = 1, h = 12288, a = 96;
  const double sbh = static_cast<double>(s * b * h);
  EXPECT_EQ(korthikanti_layer_bytes(s, b, h, a, 1, false, Recompute::kNone).value(),
            static_cast<int64_t>(sbh * (34.0 + 5.0 * a * s / h)));
  EXPECT_EQ(korthikanti_layer_bytes(s, b, h, a, 1, false, Recompute::kSelective).value(),
            static_cast<int64_t>(34 * sbh));
  EXPECT_EQ(korthikanti_layer_bytes(s, b, h, a, 1, false, Recompute::kFull).value(),
            static_cast<int64_t>(2 * sbh));
  EXPECT_EQ(korthikanti_layer_bytes(s, b, h, a, 8, true, Recompute::kSelective).value(),
            static_cast<int64_t>(34 * sbh / 8));
  EXPECT_EQ(korthikanti_layer_bytes(s, b, h, a, 8, true, Recompute::kFull).value(),
            static_cast<int64_t>(2 * sbh / 8));
}

TEST(Memory, FlashLayerMatchesKorthikantiWithoutScoresAndDropout) {
  // A GPT layer (GELU FFN of 4h, LayerNorm) under flash attention stores, in units of s·b·h bf16:
  // LN input 1, QKV input 1, Q K V 3, O 1 (also the projection's input), LN input 1, fc1 input 1,
  // GELU input 4, fc2 input 4 = 16 elements = 32·sbh bytes: Korthikanti's 34·sbh less the two
  // dropout masks (sbh each) and without the 5as²b score terms. Plus fp32 statistics: the
  // log-sum-exp (s·b·a·4) and two norms' (s·b·4 each).
  const ModelSpec m = preset("gpt3-175b");
  const int64_t s = 2048;
  const Layout l = resolved(m, "dp=1", s, 1);
  auto ops = layer_operators(m, l, s, 0);
  ASSERT_TRUE(ops.is_ok()) << ops.status().message();
  const int64_t sbh = s * m.hidden;
  const int64_t stats = s * m.num_heads * 4 + 2 * s * 4;
  EXPECT_EQ(total_saved(*ops).value(), 32 * sbh + stats);
  EXPECT_EQ(korthikanti_layer_bytes(s, 1, m.hidden, m.num_heads, 1, false, Recompute::kSelective)
                    .value() -
                2 * sbh,
            32 * sbh);
  // Full recompute keeps the layer input, 2sbh (Korthikanti §5); with TP+SP 2sbh/t.
  auto full = layer_operators(m, resolved(m, "dp=1,recompute=full", s, 1), s, 0);
  EXPECT_EQ(total_saved(*full).value(), 2 * sbh);
  auto full_sp = layer_operators(m, resolved(m, "tp=8,dp=1,recompute=full", s, 8), s, 0);
  EXPECT_EQ(total_saved(*full_sp).value(), 2 * sbh / 8);
  // TP+SP divides the stored activations by t (the fp32 statistics aside).
  auto sp8 = layer_operators(m, resolved(m, "tp=8,dp=1", s, 8), s, 0);
  EXPECT_NEAR(static_cast<double>(total_saved(*sp8).value()) / (32.0 * sbh / 8), 1.0, 0.02);
}

TEST(Memory, MicrobatchesInFlight) {
  // 1F1B (Narayanan et al. 2021 §2.2): stage s of p holds p − s micro-batches; AFAB holds all m.
  const ModelSpec m = preset("llama3-8b");
  const Layout l = resolved(m, "pp=4,dp=1,gbs=8", 1024, 4);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(microbatches_in_flight(l, s), 4 - s);
  const Layout afab = resolved(m, "pp=4,dp=1,gbs=8,schedule=afab", 1024, 4);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(microbatches_in_flight(afab, s), 8);
  // Few micro-batches: 1F1B cannot hold more than m.
  const Layout few = resolved(m, "pp=4,dp=1,gbs=2", 1024, 4);
  EXPECT_EQ(microbatches_in_flight(few, 0), 2);
  // Interleaved, v = 2, p = 4, m = 8: stage 0 warms up (4−1)·2 + (2−1)·4 = 10 chunks, +1 in
  // flight = 11 chunk passes of half a stage each: 5.5 stage-sized micro-batches.
  const Layout il = resolved(m, "pp=4,dp=1,gbs=8,schedule=interleaved", 1024, 4);
  EXPECT_DOUBLE_EQ(microbatches_in_flight(il, 0), 5.5);
  // ZB-H1: stage 0 holds 1F1B's p (Qi et al. 2023: the same peak over the stages); stage s defers
  // s weight passes whose micro-batches' activations stay until then, so every stage holds p.
  const Layout zb = resolved(m, "pp=4,dp=1,gbs=8,schedule=zb-h1", 1024, 4);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(microbatches_in_flight(zb, s), 4);
}

TEST(Memory, EmbeddingOnFirstStageLmHeadOnLast) {
  // Llama-3-8B, pp=2: 16 layers each; the first stage adds the V·h embedding, the last the V·h
  // LM head and the final norm (h).
  const ModelSpec m = preset("llama3-8b");
  auto r = estimate_memory(m, resolved(m, "pp=2,dp=1", 1024, 2), 1024, MemoryOptions{});
  ASSERT_TRUE(r.is_ok());
  ASSERT_EQ(r->stages.size(), 2u);
  const int64_t vh = m.vocab * m.hidden;
  EXPECT_EQ(r->stages[1].params - r->stages[0].params, m.hidden);
  EXPECT_EQ(r->stages[0].params + r->stages[1].params, count_params(m).total);
  EXPECT_GT(r->stages[0].params, vh);
  // Only the last stage stores the fp32 softmax of the loss (s·b·V·4) and has the logits
  // transient (bf16 + fp32 copies, 6 bytes per logit).
  EXPECT_EQ(r->stages[0].logits_transient.value(), 0);
  EXPECT_EQ(r->stages[1].logits_transient.value(), 1024 * m.vocab * 6);
  EXPECT_GT(r->stages[1].activations_per_microbatch.value(), 1024 * m.vocab * 4);
}

TEST(Memory, FitsComparesReservedWithCapacity) {
  const ModelSpec m = preset("llama3-8b");
  MemoryOptions opt;
  opt.gpu_memory = 80_GiB;
  auto small = estimate_memory(m, resolved(m, "tp=8,dp=1", 2048, 8), 2048, opt);
  ASSERT_TRUE(small.is_ok());
  EXPECT_TRUE(small->fits);
  EXPECT_EQ(small->headroom.value(), (80_GiB - small->overhead - small->peak_reserved).value());
  // 18 bytes per parameter of an 8B model is 145 GB: no single GPU holds it.
  auto big = estimate_memory(m, resolved(m, "dp=1", 2048, 1), 2048, opt);
  ASSERT_TRUE(big.is_ok());
  EXPECT_FALSE(big->fits);
  EXPECT_LT(big->headroom.value(), 0);
}

// nanotron's mechanisms (FrameworkMemory; sources in memory.h and docs/memory-model.md). Each test
// switches one mechanism off and checks the difference against bytes derived by hand.
MemoryOptions nanotron_options() {
  MemoryOptions opt;
  opt.framework = framework_memory(FrameworkId::kNanotron);
  return opt;
}

TEST(Memory, NanotronPersistentGatherBuffers) {
  // MemoryBuffer "allgather" (column-parallel input) and "allgather2" (row-parallel backward's
  // gathered grad_output) each hold one full b·s·h bf16 tensor, not divided by tp, for the whole
  // run: with b = 2, s = 1024, h = 4096 that is 2 · 2·1024·4096·2 B = 32 MiB in the optimizer
  // window (step_peak) and in the forward/backward working set (comm_buffers), replacing the
  // transient SP all-gather output (2·1024·4096·2 B = 16 MiB) that Megatron has.
  const ModelSpec m = preset("llama3-8b");
  const int64_t s = 1024, b = 2, h = m.hidden;
  const int64_t one = b * s * h * 2;
  const Layout l = resolved(m, "tp=4,dp=2,mbs=2,gbs=4,zero=1", s, 8);
  MemoryOptions with = nanotron_options(), without = nanotron_options();
  without.framework.tp_gather_buffers = 0;
  auto a = estimate_memory(m, l, s, with);
  auto z = estimate_memory(m, l, s, without);
  ASSERT_TRUE(a.is_ok() && z.is_ok());
  EXPECT_EQ((a->stages[0].step_peak - z->stages[0].step_peak).value(), 2 * one);
  EXPECT_EQ((a->stages[0].comm_buffers - z->stages[0].comm_buffers).value(), 2 * one - one);
  // Without TP there is no all-gather and no buffer.
  const Layout tp1 = resolved(m, "tp=1,dp=8,mbs=2,gbs=16,zero=1", s, 8);
  auto a1 = estimate_memory(m, tp1, s, with);
  auto z1 = estimate_memory(m, tp1, s, without);
  EXPECT_EQ(a1->stages[0].step_peak.value(), z1->stages[0].step_peak.value());
  // Megatron keeps none of this (Korthikanti et al. 2022: gather transient, sharded input saved).
  const FrameworkMemory meg = framework_memory(FrameworkId::kMegatron);
  EXPECT_EQ(meg.tp_gather_buffers, 0);
  EXPECT_FALSE(meg.unfused_glu);
  EXPECT_FALSE(meg.mha_qkv_stack_saved);
}

TEST(Memory, NanotronUnfusedGluStoresTheActivationOutput) {
  // GLUActivation computes act(gate) * up with two ops: autograd keeps act(gate) as well, one
  // more b·s·f/tp bf16 tensor per layer: 32 layers · 1·1024·(14336/4)·2 B = 224 MiB per
  // micro-batch (pp = 1: all layers on the stage).
  const ModelSpec m = preset("llama3-8b");
  const int64_t s = 1024;
  const Layout l = resolved(m, "tp=4,dp=1,mbs=1,gbs=1", s, 4);
  MemoryOptions with = nanotron_options(), without = nanotron_options();
  without.framework.unfused_glu = false;
  auto a = estimate_memory(m, l, s, with);
  auto z = estimate_memory(m, l, s, without);
  ASSERT_TRUE(a.is_ok() && z.is_ok());
  EXPECT_EQ(
      (a->stages[0].activations_per_microbatch - z->stages[0].activations_per_microbatch).value(),
      m.num_layers * s * (m.ffn / 4) * 2);
}

// Per layer and micro-batch, the fp8 linears' stored inputs (Operators.
// Fp8LinearsStoreAndGatherTheirInputsInFp8): Megatron-core's Transformer Engine linears keep
// fp8 copies, 1 B per element, where bf16 keeps 2 (qkv, fc1 and down) and nothing (o: the
// attention output is the core's): llama3-8b at tp = 4 with SP, mbs 1, s 1024, 256 tokens per
// shard, 1024 per GEMM: (256·4096 + 256·4096 + 1024·3584) − 1024·(32/4·128) fewer bytes. torchao's
// float8 linears (torchtitan) keep the bf16 input: the same activations as bf16.
TEST(Memory, Fp8LinearsStoreFp8CopiesUnderTransformerEngineOnly) {
  const ModelSpec m = preset("llama3-8b");
  const int64_t s = 1024;
  const Layout bf16 = resolved(m, "tp=4,dp=1,sp=on,mbs=1,gbs=1", s, 4);
  const Layout fp8 = resolved(m, "tp=4,dp=1,sp=on,mbs=1,gbs=1,dtype=fp8", s, 4);
  for (const char* name : {"megatron", "torchtitan"}) {
    MemoryOptions opt;
    auto fw = parse_framework(name);
    ASSERT_TRUE(fw.is_ok());
    opt.framework = framework_memory(*fw);
    opt.ops = framework_ops(*fw);
    auto a = estimate_memory(m, bf16, s, opt);
    auto b = estimate_memory(m, fp8, s, opt);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    const int64_t saved_less = a->stages[0].activations_per_microbatch.value() -
                               b->stages[0].activations_per_microbatch.value();
    if (std::string(name) == "megatron") {
      EXPECT_EQ(saved_less, m.num_layers * (256 * 4096 + 256 * 4096 + 1024 * 3584 - 1024 * 1024));
    } else {
      EXPECT_EQ(saved_less, 0) << name;
    }
    // Transformer Engine also keeps each decoder weight's fp8 copy and transpose through the
    // step, 2 B per local parameter of the layers (FrameworkMemory::fp8_weight_copies); torchao
    // casts at every GEMM and keeps none; bf16 has none.
    int64_t layer_params = 0;
    for (const TensorEntry& t : tensor_table(m))
      if (t.layer >= 0) layer_params += shard_numel(t, m, 4, 1, 1);
    EXPECT_EQ(a->stages[0].fp8_weight_copies.value(), 0);
    EXPECT_EQ(b->stages[0].fp8_weight_copies.value(),
              std::string(name) == "megatron" ? 2 * layer_params : 0)
        << name;
    EXPECT_EQ((b->stages[0].total - a->stages[0].total).value(),
              b->stages[0].fp8_weight_copies.value() - saved_less)
        << name;
  }
}

// --fp8-param-gather (NeMo's bf16_with_fp8_mixed, Megatron-Bridge's current-scaling and MXFP8
// recipes): the decoder weights live as Transformer Engine fp8 tensors only, so the bf16 copy of
// every decoder parameter, 2 B each, is not held; the fp8 data (row- and column-wise, 2 B) and the
// optimizer's fp32 masters stay. Without dtype=fp8 nothing changes.
TEST(Memory, Fp8PrimaryWeightsHoldNoBf16Copy) {
  const ModelSpec m = preset("llama3-8b");
  const int64_t s = 1024;
  int64_t layer_params = 0;
  for (const TensorEntry& t : tensor_table(m))
    if (t.layer >= 0) layer_params += shard_numel(t, m, 4, 1, 1);
  for (const char* text : {"tp=4,dp=1,mbs=1,gbs=1,dtype=fp8", "tp=4,dp=1,mbs=1,gbs=1"}) {
    const Layout l = resolved(m, text, s, 4);
    MemoryOptions copies, primary;
    copies.framework = framework_memory(FrameworkId::kMegatron);
    primary.framework = copies.framework;
    primary.framework.fp8_primary_weights = true;
    auto a = estimate_memory(m, l, s, copies);
    auto b = estimate_memory(m, l, s, primary);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    const bool fp8 = l.dtype == DType::kFp8;
    EXPECT_EQ((a->stages[0].weights - b->stages[0].weights).value(), fp8 ? 2 * layer_params : 0)
        << text;
    EXPECT_EQ(b->stages[0].fp8_weight_copies, a->stages[0].fp8_weight_copies) << text;
  }
}

// Megatron-core's cross entropy stores, as its softmax, the very fp32 copy its forward makes of
// the logits (VocabParallelCrossEntropy: .float(), exp_ and div_ in place, saved as exp_logits),
// so at the loss the bf16 logits, 2 B each, are all that is alive beside the stored activations;
// a framework whose loss makes a separate fp32 working copy (nanotron, torchtitan) has 4 B more.
// Last stage of llama3-8b (vocab 128,256) at tp 1, 1024 tokens: 128,256 · 1024 logits.
TEST(Memory, MegatronLossStoresItsFp32WorkingCopy) {
  const ModelSpec m = preset("llama3-8b");
  const int64_t logits = 128256LL * 1024;
  MemoryOptions megatron, separate;
  megatron.framework = framework_memory(FrameworkId::kMegatron);
  separate.framework = megatron.framework;
  separate.framework.loss_softmax_in_place = false;
  const StageMemory a = only_stage(m, "tp=1,dp=1,mbs=1,gbs=1", 1, megatron);
  const StageMemory b = only_stage(m, "tp=1,dp=1,mbs=1,gbs=1", 1, separate);
  EXPECT_EQ(a.logits_transient.value(), 2 * logits);
  EXPECT_EQ(b.logits_transient.value(), 6 * logits);
  EXPECT_EQ(a.activations, b.activations);  // the stored fp32 softmax, 4 B each, in both
  EXPECT_TRUE(framework_memory(FrameworkId::kMegatron2022).loss_softmax_in_place);
  EXPECT_FALSE(framework_memory(FrameworkId::kNanotron).loss_softmax_in_place);
  EXPECT_FALSE(framework_memory(FrameworkId::kTorchtitan).loss_softmax_in_place);
}

TEST(Memory, NanotronMhaKeepsTheQkvStack) {
  // Multi-head attention: the [3, b, s, heads/tp, d] stack stays alive through q, so its K and V
  // thirds are stored besides the rotated K/V copy: 2 · b·s·(32/4)·128 · 2 B per layer =
  // 32 layers · 2·1024·8·128·2 B = 128 MiB per micro-batch. GQA takes nanotron's other path
  // (separate contiguous q, k, v; the k, v copies are freed after the cat): nothing extra.
  ModelSpec mha = preset("llama3-8b");
  mha.num_kv_heads = mha.num_heads;
  const int64_t s = 1024;
  MemoryOptions with = nanotron_options(), without = nanotron_options();
  without.framework.mha_qkv_stack_saved = false;
  const Layout l = resolved(mha, "tp=4,dp=1,mbs=1,gbs=1", s, 4);
  auto a = estimate_memory(mha, l, s, with);
  auto z = estimate_memory(mha, l, s, without);
  ASSERT_TRUE(a.is_ok() && z.is_ok());
  EXPECT_EQ(
      (a->stages[0].activations_per_microbatch - z->stages[0].activations_per_microbatch).value(),
      mha.num_layers * 2 * s * (mha.num_heads / 4) * mha.qk_head_dim() * 2);
  const ModelSpec gqa = preset("llama3-8b");
  ASSERT_LT(gqa.num_kv_heads, gqa.num_heads);
  const Layout lg = resolved(gqa, "tp=4,dp=1,mbs=1,gbs=1", s, 4);
  auto ga = estimate_memory(gqa, lg, s, with);
  auto gz = estimate_memory(gqa, lg, s, without);
  EXPECT_EQ(ga->stages[0].activations_per_microbatch.value(),
            gz->stages[0].activations_per_microbatch.value());
}

TEST(Memory, NanotronPipelineSplitBalancesCost) {
  // nanotron's cost rule for the 8.86B sweep model (h 4096, f 14336, 32 layers, V 131072) on
  // pp=2: a layer costs 4·32·128·4096 + 3·14336·4096 = 243.3M, the LM head 536.9M; rank 0 takes
  // layers until the cumulative cost passes half of 8322M: 18 layers (17·243.3M < 4161M < 18·).
  ModelSpec m = preset("llama3-8b");
  m.num_kv_heads = 32;
  m.vocab = 131072;
  const std::vector<int> split = nanotron_chunk_layers(m, 2);
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0], 18);
  EXPECT_EQ(split[1], 14);
}

// Transformer Engine's GroupedLinear launches one GEMM per local expert over 4 streams
// (ops.expert_gemm_streams, docs/simulator.md EP row): that changes the kernels, not what is
// stored or which gradients are alive together. DeepSeek-V3 at ep=8 holds 32 local experts, 8
// launches of 4 per expert GEMM; the experts' down-projection input gradient of all 32 is alive
// in the FFN backward, as with one grouped GEMM (a bug found in session 10 counted one launch).
TEST(Memory, ExpertGemmsSplitIntoLaunchesKeepTheMemory) {
  const ModelSpec m = preset("deepseek-v3");
  const int64_t s = 4096;
  for (const char* text : {"tp=2,pp=8,ep=8,mbs=1,zero=1,dtype=fp8",
                           "tp=1,pp=4,ep=16,mbs=2,zero=1,recompute=selective"}) {
    SCOPED_TRACE(text);
    const Layout l = resolved(m, text, s, 256);
    MemoryOptions split, grouped;
    split.framework = framework_memory(FrameworkId::kMegatron);
    split.ops = framework_ops(FrameworkId::kMegatron);
    ASSERT_GT(split.ops.expert_gemm_streams, 0);
    grouped = split;
    grouped.ops.expert_gemm_streams = 0;
    auto a = estimate_memory(m, l, s, split);
    auto b = estimate_memory(m, l, s, grouped);
    ASSERT_TRUE(a.is_ok() && b.is_ok());
    ASSERT_EQ(a->stages.size(), b->stages.size());
    for (size_t i = 0; i < a->stages.size(); ++i) {
      EXPECT_EQ(a->stages[i].activations, b->stages[i].activations) << "stage " << i;
      EXPECT_EQ(a->stages[i].backward_transient, b->stages[i].backward_transient) << "stage " << i;
      EXPECT_EQ(a->stages[i].total, b->stages[i].total) << "stage " << i;
    }
  }
}

TEST(Memory, EstimatorEqualsEstimateMemoryBitForBit) {
  // The planner's cached estimator must give exactly estimate_memory's answer: every field of
  // every stage, over layouts that exercise every cache key (tp, cp, ep, etp, sp, mbs, recompute)
  // and what is computed per call (pp, vpp, schedule, pinned splits, ZeRO, dp), for a dense, a
  // tied-embedding and a MoE model, in both frameworks' conventions.
  struct Case {
    const char* model;
    int64_t seq, gpus;
    std::vector<std::string> layouts;
  };
  const std::vector<Case> cases = {
      {"llama3.1-405b",
       8192,
       16384,
       {"tp=8,pp=16,mbs=1,zero=1", "tp=8,pp=16,schedule=interleaved,vpp=3,mbs=1,zero=1",
        "tp=4,pp=8,cp=2,mbs=2,zero=3,recompute=full",
        "tp=8,pp=16,pp_first=6,pp_last=6,zero=2,sp=off",
        "tp=8,pp=8,schedule=zb-h1,mbs=1,zero=0,recompute=selective", "tp=2,pp=32,schedule=afab"}},
      {"gpt3-175b", 2048, 1024, {"tp=8,pp=8,zero=1", "tp=8,pp=1,zero=3,recompute=full"}},
      {"mixtral-8x7b",
       4096,
       64,
       {"tp=2,pp=4,ep=8,zero=1", "tp=4,pp=2,ep=4,etp=2,mbs=2,zero=3,recompute=selective",
        "tp=1,pp=8,ep=8,zero=0"}},
      // The estimator keeps the sums of each layer list it builds (memory_layers.h) and reads
      // them again for other layouts: a layout with recompute modules, the activation cache or
      // full recompute also reads its layer's list without them, which is another layout's own
      // list (the first one here). Each order of first use must give the uncached answer.
      {"deepseek-v3",
       4096,
       256,
       {"tp=2,pp=8,ep=8,mbs=1,zero=1,recompute=none,dtype=fp8",
        "tp=2,pp=8,ep=8,mbs=1,zero=1,recompute=selective,recompute_modules=core_attn+layernorm+"
        "moe_act+mla_up_proj,dtype=fp8",
        "tp=2,pp=8,ep=8,mbs=1,zero=1,recompute=full,dtype=fp8",
        "tp=2,pp=8,ep=8,mbs=1,zero=1,recompute=none,dtype=fp8,act_cache=fp8",
        "tp=1,pp=4,ep=16,mbs=1,zero=1,recompute=full"}},
      {"llama3-8b",
       8192,
       16,
       {"tp=2,pp=1,zero=1,recompute=full", "tp=2,pp=1,zero=2,recompute=selective",
        "tp=2,pp=1,zero=1,recompute=none"}},
  };
  for (const char* fw : {"megatron", "nanotron", "torchtitan"}) {
    for (const Case& c : cases) {
      const ModelSpec m = preset(c.model);
      MemoryOptions opt;
      opt.framework = framework_memory(*parse_framework(fw));
      opt.ops = framework_ops(*parse_framework(fw));
      opt.gpu_memory = 80_GiB;
      const MemoryEstimator est(m, c.seq, opt);
      for (int pass = 0; pass < 2; ++pass) {  // the second pass hits the caches
        for (const std::string& text : c.layouts) {
          SCOPED_TRACE(std::string(fw) + " " + c.model + " " + text);
          const Layout l = resolved(m, text, c.seq, c.gpus);
          auto a = estimate_memory(m, l, c.seq, opt);
          auto b = est.estimate(l);
          ASSERT_TRUE(a.is_ok() && b.is_ok());
          ASSERT_EQ(a->stages.size(), b->stages.size());
          for (size_t s = 0; s < a->stages.size(); ++s) {
            const StageMemory &x = a->stages[s], &y = b->stages[s];
            EXPECT_EQ(x.layers, y.layers);
            EXPECT_EQ(x.params, y.params);
            EXPECT_EQ(x.in_flight, y.in_flight);
            for (auto f : {&StageMemory::weights, &StageMemory::gradients, &StageMemory::optimizer,
                           &StageMemory::activations, &StageMemory::activations_per_microbatch,
                           &StageMemory::logits_transient, &StageMemory::backward_transient,
                           &StageMemory::comm_buffers, &StageMemory::buffers,
                           &StageMemory::optimizer_transient, &StageMemory::step_peak,
                           &StageMemory::fwd_bwd_peak, &StageMemory::total,
                           &StageMemory::fragmentation, &StageMemory::reserved}) {
              EXPECT_EQ(x.*f, y.*f);
            }
          }
          EXPECT_EQ(a->peak_stage, b->peak_stage);
          EXPECT_EQ(a->peak_reserved, b->peak_reserved);
          EXPECT_EQ(a->peak_allocated, b->peak_allocated);
          EXPECT_EQ(a->overhead, b->overhead);
          EXPECT_EQ(a->headroom, b->headroom);
          EXPECT_EQ(a->fits, b->fits);
        }
      }
    }
  }
}

}  // namespace
}  // namespace scaleplan::models

namespace scaleplan::models {
namespace {

// torch.autocast over fp32 parameters (torchtitan on one GPU): the bf16 copies of the cast
// weights are alive through the backward (2 B per cast parameter: Llama-3-8B cut to 4 layers
// casts 4 * 218,103,808 + 525,336,576 = 1,397,751,808), and the fp32 residual stream makes each
// RMSNorm store an fp32 input (2 B per element more, 2 norms per layer and the final one, on
// 4096 tokens x 4096), and each projection save its own bf16 cast of a norm's output. Without TP
// the loss's backward holds two fp32 gradients of the logits (8 B per logit, 4096 x 128256) where
// the forward holds the bf16 logits and their fp32 copy (6).
TEST(Memory, TorchtitanAutocastKeepsTheBf16WeightCopies) {
  ModelSpec m = preset("llama3-8b");
  m.num_layers = 4;
  MemoryOptions opt;
  opt.framework = framework_memory(FrameworkId::kTorchtitan);
  opt.ops = framework_ops(FrameworkId::kTorchtitan);
  const Layout l = resolved(m, "tp=1,pp=1,dp=1,mbs=1,gbs=4", 4096, 1);
  const StageMemory on = estimate_memory(m, l, 4096, opt).value().stages.front();
  opt.ops.autocast_without_fsdp = false;
  const StageMemory off = estimate_memory(m, l, 4096, opt).value().stages.front();
  // The stream: 2 B more per element for 9 fp32 norm inputs, and 2 B for each of the 3 extra
  // bf16 casts per layer that wq, wk, wv and w1, w3 save beyond the list's two.
  const int64_t cache = 2 * 1'397'751'808LL,
                stream = 2LL * 4096 * 4096 * (2 * 4 + 1) + 2LL * 4096 * 4096 * 3 * 4;
  EXPECT_EQ(on.autocast_weight_cache.value(), cache);
  EXPECT_EQ(off.autocast_weight_cache.value(), 0);
  EXPECT_EQ(on.activations.value() - off.activations.value(), stream);  // one micro-batch at pp=1
  EXPECT_EQ(on.fwd_bwd_peak.value() - off.fwd_bwd_peak.value(), cache + stream);
  EXPECT_EQ(on.logits_transient.value(), 8 * 4096LL * 128256);
  // The optimizer step runs outside autocast: its peak has no bf16 copies.
  EXPECT_EQ(on.step_peak, off.step_peak);
}

}  // namespace
}  // namespace scaleplan::models

namespace scaleplan::models {
namespace {

// The memory model sums the head's stored bytes without building the MTP modules' decoder layer
// (detail::framework_head_saved, issue 45): the list is the head and D equal modules adjusted op by
// op, so its bytes are the head's plus D times a module's, the module's layer taken from the layer
// list of its kind. Checked against the list itself, over MTP models whose last layer is of the
// first kind (DeepSeek-V3, with one and two modules) or not (GPT-OSS's alternating windows, given
// a module), every framework's adjustments and each fp8 recipe's kernels.
TEST(Memory, HeadSavedBytesAreThoseOfTheHeadList) {
  ModelSpec two = preset("deepseek-v3");
  two.mtp_layers = 2;
  ModelSpec oss = preset("gpt-oss-120b");
  oss.mtp_layers = 1;
  ASSERT_NE(oss.layer_kind(0), oss.layer_kind(oss.num_layers - 1));
  const std::vector<std::pair<ModelSpec, std::vector<std::string>>> cases = {
      {preset("deepseek-v3"),
       {"tp=2,pp=8,ep=8,mbs=1,recompute=none,dtype=fp8",
        "tp=4,pp=8,ep=16,etp=2,mbs=2,recompute=selective,recompute_modules=core_attn+moe_act,"
        "dtype=fp8,act_cache=fp8",
        "tp=1,pp=16,ep=16,mbs=1,recompute=full", "tp=8,pp=4,cp=2,ep=8,mbs=1,sp=off"}},
      {two, {"tp=2,pp=8,ep=8,mbs=1,dtype=fp8", "tp=1,pp=4,ep=32,mbs=2,recompute=full"}},
      {oss, {"tp=2,pp=4,ep=8,mbs=1", "tp=4,pp=2,ep=4,mbs=1,dtype=fp8"}},
  };
  for (const char* name : {"megatron", "nanotron", "torchtitan"}) {
    const FrameworkId id = *parse_framework(name);
    for (const Fp8Recipe recipe :
         {Fp8Recipe::kDelayed, Fp8Recipe::kTensorwise, Fp8Recipe::kMxfp8}) {
      FrameworkOps ops = framework_ops(id);
      ops.fp8_recipe = recipe;
      // Megatron's layer lists are adjusted op by op alone; nanotron's and torchtitan's are not.
      EXPECT_EQ(detail::layer_adjusted_op_by_op(ops), id == FrameworkId::kMegatron);
      for (const auto& [m, layouts] : cases) {
        for (const std::string& text : layouts) {
          SCOPED_TRACE(std::string(name) + " " + m.name + " " + text);
          const Layout l = resolved(m, text, 4096, 256);
          const int64_t want =
              total_saved(framework_head_operators(m, l, 4096, ops).value()).value();
          EXPECT_EQ(detail::framework_head_saved(m, l, 4096, ops, std::nullopt).value().value(),
                    want);
          if (!detail::layer_adjusted_op_by_op(ops)) continue;
          const int64_t last = m.num_layers - 1;
          int64_t first = 0;
          while (m.layer_kind(first) != m.layer_kind(last)) ++first;
          const Bytes layer =
              total_saved(framework_layer_operators(m, l, 4096, first, ops).value());
          EXPECT_GT(layer.value(), 0);
          EXPECT_EQ(detail::framework_head_saved(m, l, 4096, ops, layer).value().value(), want);
        }
      }
    }
  }
}

}  // namespace
}  // namespace scaleplan::models
