// --emit megatron-bridge: the recipe each model maps to, the models its vanilla GPT recipe cannot
// build (refused with the reason), and the start-up rules the script itself carries. The export
// read back with Megatron-Bridge's definitions is tests/export/new_exports/check_new_exports.py.
#include "export/megatron_bridge.h"

#include <gtest/gtest.h>

#include <string>

namespace scaleplan::planner {
namespace {

struct Input {
  models::ModelSpec model;
  ExportInput in;
};

// Fills `x` in place: its ExportInput points at its own model.
void input(Input& x, const std::string& model, int64_t gpus, int64_t seq,
           const std::string& layout) {
  auto m = models::load_model(model);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  x.model = *m;
  auto parsed = parse_layout(layout);
  EXPECT_TRUE(parsed.is_ok()) << parsed.status().message();
  auto resolved = resolve_layout(*parsed, models::layout_constraints(x.model, seq), gpus);
  EXPECT_TRUE(resolved.is_ok()) << resolved.status().message();
  x.in.model = &x.model;
  x.in.model_source = model;
  x.in.cluster = "dgx-h100";
  x.in.gpus = gpus;
  x.in.gpu_sm = 90;
  x.in.seq_len = seq;
  x.in.layout = *resolved;
}

TEST(MegatronBridgeExport, IsAnEmitTargetWithMegatronCoresSchedules) {
  auto f = parse_export_format("megatron-bridge");
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(*f, ExportFormat::kMegatronBridge);
  EXPECT_EQ(framework_name(*f), "Megatron-Bridge");
  // Megatron-Bridge trains with Megatron-core: its conventions and its two schedules.
  EXPECT_EQ(conventions_for(*f), FrameworkId::kMegatron);
  EXPECT_EQ(runnable_values(*f), runnable_values(ExportFormat::kMegatron));
  EXPECT_NE(parse_export_format("bridge").status().message().find("megatron-bridge"),
            std::string::npos);
}

TEST(MegatronBridgeExport, MapsTheModelToItsRecipeOrTheVanillaGptRecipe) {
  // The H100 recipes whose AutoBridge reads these models' Hugging Face configs
  // (recipes/llama/h100/llama3.py, recipes/deepseek/h100/deepseek_v3.py at v0.6.0).
  EXPECT_EQ(megatron_bridge_recipe(*models::load_model("llama3-8b")),
            "llama3_8b_pretrain_2gpu_h100_bf16_config");
  EXPECT_EQ(megatron_bridge_recipe(*models::load_model("llama3-70b")),
            "llama3_70b_pretrain_32gpu_h100_bf16_config");
  EXPECT_EQ(megatron_bridge_recipe(*models::load_model("deepseek-v3")),
            "deepseek_v3_pretrain_1024gpu_h100_bf16_config");
  // No Mixtral recipe or bridge at v0.6.0: the bare provider, shaped by overrides.
  EXPECT_EQ(megatron_bridge_recipe(*models::load_model("mixtral-8x22b")),
            "vanilla_gpt_pretrain_1gpu_h100_bf16_config");
}

TEST(MegatronBridgeExport, RefusesWhatTheVanillaRecipeCannotBuild) {
  // deepseek-tiny has DeepSeek's multi-latent attention but is no recipe's model: the vanilla
  // recipe's GPTModelProvider has no MLA fields (MLAModelProvider is another class).
  Input x;
  input(x, "deepseek-tiny", 8, 2048, "tp=1,mbs=1,gbs=8");
  auto e = export_layout(x.in, ExportFormat::kMegatronBridge);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("multi-latent attention"), std::string::npos)
      << e.status().message();
  // gpt-oss: sinks, the clamped GLU and sliding windows.
  Input g;
  input(g, "gpt-oss-120b", 64, 4096, "tp=1,ep=8,mbs=1,gbs=64");
  auto eg = export_layout(g.in, ExportFormat::kMegatronBridge);
  ASSERT_FALSE(eg.is_ok());
  EXPECT_NE(eg.status().message().find("sliding-window"), std::string::npos)
      << eg.status().message();
}

TEST(MegatronBridgeExport, FsdpRunsUnsetTheConnectionLimitAndSaveDtensor) {
  // ConfigContainer._validate_and_apply_megatron_fsdp_configs asserts
  // CUDA_DEVICE_MAX_CONNECTIONS != "1" and, with checkpoint.save set (every recipe sets it),
  // ckpt_format == "fsdp_dtensor".
  Input x;
  input(x, "llama3-8b", 16, 4096, "tp=2,mbs=1,gbs=64,zero=3");
  auto e = export_layout(x.in, ExportFormat::kMegatronBridge);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_NE(e->content.find("unset CUDA_DEVICE_MAX_CONNECTIONS\n"), std::string::npos);
  EXPECT_NE(e->content.find("checkpoint.ckpt_format=fsdp_dtensor"), std::string::npos);
  EXPECT_NE(e->content.find("ddp.data_parallel_sharding_strategy=optim_grads_params"),
            std::string::npos);
  // One node: torchrun --standalone with the node's 8 processes... 16 GPUs are two nodes, each
  // told its rank.
  EXPECT_NE(e->content.find("--nnodes 2"), std::string::npos);
  EXPECT_NE(e->content.find("NODE_RANK:?"), std::string::npos);
}

TEST(MegatronBridgeExport, ReplacesTheRecipesPipelineLayoutWithThePlannedSplit) {
  // 32 layers over pp = 4 with two virtual stages: 8 chunks of 4 layers, in chunk order
  // (Megatron-core's 1-D layout, index vpp_rank · pp + pp_rank); the embedding opens the first
  // chunk and the loss closes the last.
  Input x;
  input(x, "llama3-8b", 64, 8192, "tp=2,pp=4,vpp=2,schedule=interleaved,mbs=1,gbs=256,zero=1");
  auto e = export_layout(x.in, ExportFormat::kMegatronBridge);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  EXPECT_NE(e->content.find("'model.pipeline_model_parallel_layout=\"Etttt|tttt|tttt|tttt|tttt|"
                            "tttt|tttt|ttttL\"'"),
            std::string::npos)
      << e->content;
  EXPECT_NE(e->content.find("model.virtual_pipeline_model_parallel_size=2"), std::string::npos);
  // dp = 64 / (2·4) = 8, M = 256 / 8 = 32: the group Megatron-core accepts is pp = 4.
  EXPECT_NE(e->content.find("model.microbatch_group_size_per_vp_stage=4"), std::string::npos);
  EXPECT_NE(e->content.find("model.num_layers_in_first_pipeline_stage=null"), std::string::npos);
}

}  // namespace
}  // namespace scaleplan::planner
