// --emit torchtitan (torchtitan main, Python config functions) and --emit torchtitan-0.2.2 (its
// last TOML release): the names, what current torchtitan runs as simulated, and what the config
// says. The config read back with torchtitan's definitions is
// tests/export/new_exports/check_new_exports.py.
#include "export/torchtitan.h"

#include <gtest/gtest.h>

#include <algorithm>
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
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  x.model = *m;
  auto parsed = parse_layout(layout);
  ASSERT_TRUE(parsed.is_ok()) << parsed.status().message();
  auto resolved = resolve_layout(*parsed, models::layout_constraints(x.model, seq), gpus);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  x.in.model = &x.model;
  x.in.model_source = model;
  x.in.cluster = "dgx-h100";
  x.in.gpus = gpus;
  x.in.gpu_sm = 90;
  x.in.seq_len = seq;
  x.in.layout = *resolved;
}

Layout resolved(const std::string& model, int64_t gpus, int64_t seq, const std::string& text) {
  Input x;
  input(x, model, gpus, seq, text);
  return x.in.layout;
}

TEST(TorchtitanExport, TheNameIsCurrentTorchtitanAndTheTomlKeepsItsVersion) {
  auto current = parse_export_format("torchtitan");
  ASSERT_TRUE(current.is_ok());
  EXPECT_EQ(*current, ExportFormat::kTorchtitanMain);
  auto toml = parse_export_format("torchtitan-0.2.2");
  ASSERT_TRUE(toml.is_ok());
  EXPECT_EQ(*toml, ExportFormat::kTorchtitan);
  EXPECT_EQ(conventions_for(*current), FrameworkId::kTorchtitan);
  EXPECT_EQ(framework_name(*current), "torchtitan");
}

TEST(TorchtitanExport, RanksOnlyWhatCurrentTorchtitanRuns) {
  // No expert tensor parallelism: experts shard over expert_parallel_degree only.
  const auto values = runnable_values(ExportFormat::kTorchtitanMain);
  const auto etp =
      std::find_if(values.begin(), values.end(), [](const auto& kv) { return kv.first == "etp"; });
  ASSERT_NE(etp, values.end());
  EXPECT_EQ(etp->second, std::vector<std::string>{"1"});
  const auto refused = refused_combinations(ExportFormat::kTorchtitanMain);
  auto refuses = [&](const Layout& l) {
    return std::any_of(refused.begin(), refused.end(), [&](const auto& r) { return r.refuses(l); });
  };
  // ParallelDims._validate: ep must divide dp_shard·cp·tp. Under DDP (zero=0) the shard mesh is
  // 1, so ep = 8 with tp = 1, cp = 1 is refused; under FSDP (zero=3, dp_shard = dp = 8) accepted.
  EXPECT_TRUE(refuses(resolved("mixtral-8x7b", 8, 4096, "tp=1,ep=8,mbs=1,gbs=8,zero=0")));
  EXPECT_FALSE(refuses(resolved("mixtral-8x7b", 8, 4096, "tp=1,ep=8,mbs=1,gbs=8,zero=3")));
  // CP gathers K/V at once (PyTorch's default rotate method; torchtitan main sets none).
  EXPECT_TRUE(refuses(resolved("llama3-8b", 8, 8192, "cp=2,cp_comm=p2p,mbs=1,gbs=8,zero=3")));
  EXPECT_FALSE(
      refuses(resolved("llama3-8b", 8, 8192, "cp=2,cp_comm=all_gather,mbs=1,gbs=8,zero=3")));
}

TEST(TorchtitanExport, CountsTheBatchInTokensAndPipelineMicroBatches) {
  // 64 GPUs, tp 2, pp 4: dp 8; gbs 256 of mbs 1 is 32 micro-batches per replica, all in one
  // pipeline pass: num_pp_microbatches 32; one forward is 1·8192 tokens; a step 256·8192.
  Input x;
  input(x, "llama3-8b", 64, 8192, "tp=2,pp=4,vpp=2,schedule=interleaved,mbs=1,gbs=256,zero=3");
  auto e = export_layout(x.in, ExportFormat::kTorchtitanMain);
  ASSERT_TRUE(e.is_ok()) << e.status().message();
  const std::string& c = e->content;
  EXPECT_NE(c.find("config = llama3_8b()\n"), std::string::npos) << c;
  EXPECT_NE(c.find("num_tokens_per_microbatch_per_dp_rank = 8192\n"), std::string::npos);
  EXPECT_NE(c.find("num_tokens_per_train_step = 2097152\n"), std::string::npos);
  EXPECT_NE(c.find("num_pp_microbatches = 32\n"), std::string::npos);
  EXPECT_NE(c.find("data_parallel_shard_degree = 8\n"), std::string::npos);
  EXPECT_NE(c.find("pipeline_parallel_schedule = \"Interleaved1F1B\"\n"), std::string::npos);
  // 8 model parts of 4 layers; torchtitan main calls the output module lm_head.
  EXPECT_NE(c.find("\"layers.31\", \"norm\", \"lm_head\"]]"), std::string::npos);
  // 64 GPUs are 8 nodes of 8: run_train.sh starts one node, so the header names torchrun.
  EXPECT_NE(c.find("torchrun --nnodes 8 --nproc_per_node 8"), std::string::npos) << c;
  EXPECT_NE(c.find("-m torchtitan.train --module scaleplan_plan --config scaleplan_plan"),
            std::string::npos);
}

TEST(TorchtitanExport, RefusesWhatItHasNoModuleOrParallelismFor) {
  Input mixtral;
  input(mixtral, "mixtral-8x7b", 64, 4096, "tp=2,ep=8,mbs=1,gbs=64,zero=3");
  auto e = export_layout(mixtral.in, ExportFormat::kTorchtitanMain);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("no model for model_type 'mixtral'"), std::string::npos)
      << e.status().message();
  Input etp;
  input(etp, "deepseek-v3", 256, 4096, "tp=2,pp=8,ep=8,etp=2,mbs=1,gbs=256,zero=3");
  auto f = export_layout(etp.in, ExportFormat::kTorchtitanMain);
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(f.status().message().find("no expert tensor parallelism"), std::string::npos)
      << f.status().message();
}

TEST(TorchtitanExport, TrainsMtpModulesOnlyWithoutPipelining) {
  // models/deepseek_v3/mtp.py raises "MTP does not support pipeline parallelism yet.".
  Input flat;
  input(flat, "deepseek-v3", 256, 4096, "tp=2,ep=8,mbs=1,gbs=256,zero=3");
  auto a = export_layout(flat.in, ExportFormat::kTorchtitanMain);
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_NE(a->content.find("num_mtp_layers=1,"), std::string::npos) << a->content;
  Input piped;
  input(piped, "deepseek-v3", 256, 4096, "tp=2,pp=8,ep=8,mbs=1,gbs=256,zero=3");
  auto b = export_layout(piped.in, ExportFormat::kTorchtitanMain);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_EQ(b->content.find("num_mtp_layers"), std::string::npos);
  bool said = false;
  for (const auto& n : b->notes) said = said || n.find("MTP does not support") != std::string::npos;
  EXPECT_TRUE(said);
}

}  // namespace
}  // namespace scaleplan::planner
