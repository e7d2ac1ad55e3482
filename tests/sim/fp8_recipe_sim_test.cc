// Transformer Engine's fp8 recipes on a GPU: which GPUs write no fp8 transpose, where MXFP8 is
// refused, and what a recipe costs a step.
#include <gtest/gtest.h>

#include <string>

#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "sim/framework.h"
#include "sim/simulate.h"

namespace scaleplan::sim {
namespace {

// nvte_is_non_tn_fp8_gemm_supported: compute capability 10.x-11.x and 13.0 on (B200 10.0, B300
// 10.3), not Hopper (9.0) nor consumer Blackwell (12.0); Megatron-core's TE only.
TEST(Fp8RecipeOnGpu, BlackwellTransformerEngineWritesNoTranspose) {
  auto h100 = hw::load_cluster("dgx-h100");
  auto b200 = hw::load_cluster("dgx-b200");
  auto b300 = hw::load_cluster("dgx-b300");
  ASSERT_TRUE(h100.is_ok() && b200.is_ok() && b300.is_ok());
  const Framework megatron = framework(FrameworkId::kMegatron);
  EXPECT_FALSE(on_gpu(megatron, h100->gpu).ops.fp8_gemm_any_layout);
  EXPECT_TRUE(on_gpu(megatron, b200->gpu).ops.fp8_gemm_any_layout);
  EXPECT_TRUE(on_gpu(megatron, b300->gpu).ops.fp8_gemm_any_layout);
  hw::GpuSpec consumer = b200->gpu;
  consumer.compute_capability = 120;
  EXPECT_FALSE(on_gpu(megatron, consumer).ops.fp8_gemm_any_layout);
  consumer.compute_capability = 130;
  EXPECT_TRUE(on_gpu(megatron, consumer).ops.fp8_gemm_any_layout);
  EXPECT_FALSE(on_gpu(framework(FrameworkId::kTorchtitan), b200->gpu).ops.fp8_gemm_any_layout);
}

// MXFP8 needs Blackwell's block-scaled tensor cores: simulate refuses it on an H100, naming the
// option, the GPU and its compute capability; on a B200 it runs, and a bf16 layout ignores it.
// simulate's message for a tiny fp8 step under `recipe` on an H100, which must refuse it; empty
// if it ran.
std::string refused_on_h100(models::Fp8Recipe recipe) {
  auto model = models::load_model("llama-tiny");
  auto h100 = hw::load_cluster("dgx-h100");
  EXPECT_TRUE(model.is_ok() && h100.is_ok());
  if (!model.is_ok() || !h100.is_ok()) return "";
  SimulateOptions so;
  so.framework = framework(FrameworkId::kMegatron);
  so.framework.ops.fp8_recipe = recipe;
  auto r = simulate(*model, *h100, 256, *parse_layout("tp=1,pp=1,dp=1,mbs=1,gbs=2,dtype=fp8"), so);
  EXPECT_FALSE(r.is_ok());
  return r.is_ok() ? "" : r.status().message();
}

TEST(Fp8RecipeOnGpu, Mxfp8IsRefusedBelowBlackwellNamingTheGpu) {
  auto model = models::load_model("llama-tiny");
  auto h100 = hw::load_cluster("dgx-h100");
  auto b200 = hw::load_cluster("dgx-b200");
  ASSERT_TRUE(model.is_ok() && h100.is_ok() && b200.is_ok());
  SimulateOptions so;
  so.framework = framework(FrameworkId::kMegatron);
  so.framework.ops.fp8_recipe = models::Fp8Recipe::kMxfp8;
  const Layout fp8 = *parse_layout("tp=1,pp=1,dp=1,mbs=1,gbs=2,dtype=fp8");
  const std::string msg = refused_on_h100(models::Fp8Recipe::kMxfp8);
  EXPECT_NE(msg.find("fp8_recipe"), std::string::npos) << msg;
  EXPECT_NE(msg.find(h100->gpu.name), std::string::npos) << msg;
  EXPECT_NE(msg.find("9.0"), std::string::npos) << msg;
  EXPECT_TRUE(simulate(*model, *b200, 256, fp8, so).is_ok());
  EXPECT_TRUE(
      simulate(*model, *h100, 256, *parse_layout("tp=1,pp=1,dp=1,mbs=1,gbs=2"), so).is_ok());
}

// NVFP4 needs Blackwell's fp4 tensor cores (TE _compute_nvfp4_support: compute capability 10.0
// or higher, consumer Blackwell 12.x included, unlike MXFP8): refused on an H100 naming the
// option, the recipe and the GPU; on a GB300 its GEMMs run at the fp4 rate, three times the fp8
// one, so the same step is shorter than under MXFP8, whose quantization costs about as much.
TEST(Fp8RecipeOnGpu, Nvfp4NeedsBlackwellAndRunsItsGemmsAtTheFp4Rate) {
  auto gb300 = hw::load_cluster("gb300-nvl72");
  ASSERT_TRUE(gb300.is_ok());
  const std::string msg = refused_on_h100(models::Fp8Recipe::kNvfp4);
  EXPECT_NE(msg.find("fp8_recipe: 'nvfp4'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("H100"), std::string::npos) << msg;
  SimulateOptions so;
  so.framework = framework(FrameworkId::kMegatron);
  so.framework.ops.fp8_recipe = models::Fp8Recipe::kNvfp4;
  const Layout fp8 = *parse_layout("tp=1,pp=1,dp=1,mbs=1,gbs=2,dtype=fp8");
  hw::GpuSpec consumer = gb300->gpu;
  consumer.compute_capability = 120;
  EXPECT_TRUE(check_fp8_recipe(so.framework, fp8, consumer).is_ok());
  // Llama-3-8B at 4096 tokens: GEMMs large enough that their rate, not t_half, sets their time.
  auto llama = models::load_model("llama3-8b");
  ASSERT_TRUE(llama.is_ok());
  auto nvfp4 = simulate(*llama, *gb300, 4096, fp8, so);
  so.framework.ops.fp8_recipe = models::Fp8Recipe::kMxfp8;
  EXPECT_FALSE(check_fp8_recipe(so.framework, fp8, consumer).is_ok());
  auto mxfp8 = simulate(*llama, *gb300, 4096, fp8, so);
  ASSERT_TRUE(nvfp4.is_ok() && mxfp8.is_ok());
  EXPECT_LT(nvfp4->iteration, mxfp8->iteration);
}

// Current scaling adds one amax pass per quantized operand, a memory-bound kernel on the compute
// stream ahead of the cast, and changes nothing else: the same step takes longer.
TEST(Fp8RecipeOnGpu, CurrentScalingIsSlowerThanDelayedOnTheSameStep) {
  auto model = models::load_model("llama-tiny");
  auto h100 = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(model.is_ok() && h100.is_ok());
  const Layout fp8 = *parse_layout("tp=1,pp=1,dp=1,mbs=1,gbs=2,dtype=fp8");
  SimulateOptions so;
  so.framework = framework(FrameworkId::kMegatron);
  auto delayed = simulate(*model, *h100, 256, fp8, so);
  so.framework.ops.fp8_recipe = models::Fp8Recipe::kTensorwise;
  auto current = simulate(*model, *h100, 256, fp8, so);
  ASSERT_TRUE(delayed.is_ok() && current.is_ok());
  EXPECT_GT(current->iteration, delayed->iteration);
}

}  // namespace
}  // namespace scaleplan::sim
