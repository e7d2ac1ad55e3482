// The planner's lower bound on the iteration (planner/iteration_bound.h) against the simulator it
// bounds: for every layout of a small space and a spread of layouts of real models, the simulated
// iteration is at least the bound. This is the property that makes the planner's pruning exact.
#include "planner/iteration_bound.h"
#include "calibrate/kernel_model.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/model_evaluator.h"
#include "planner/search_space.h"

namespace scaleplan::planner {
namespace {

struct Job {
  const char* model;
  int64_t gpus, seq, gbs;
  const char* fix = nullptr;  // a --fix restriction of the space, e.g. "schedule=dualpipe"
  const char* framework = "megatron";
  double moe_imbalance = 1.0;            // --moe-imbalance
  const char* moe_dispatcher = nullptr;  // --moe-dispatcher
};

ModelEvaluator evaluator(const Job& job) {
  auto model = models::load_model(job.model);
  auto cluster = hw::load_cluster("dgx-h100");
  auto fw = models::framework_memory(job.framework);
  EXPECT_TRUE(model && cluster && fw);
  if (job.moe_imbalance > 1.0) {
    EXPECT_TRUE(models::set_moe_imbalance(*model, job.moe_imbalance).is_ok());
  }
  if (job.moe_dispatcher != nullptr) {
    EXPECT_TRUE(models::set_moe_dispatcher(*model, job.moe_dispatcher).is_ok());
  }
  auto kernels = calibrate::kernel_cost_model_for(*cluster);
  EXPECT_TRUE(kernels.is_ok());
  return ModelEvaluator(*model, *cluster, job.seq, *fw, std::move(*kernels));
}

std::vector<Layout> space(const Job& job, const ModelEvaluator& ev) {
  SearchOptions o;
  o.model = models::layout_constraints(ev.model(), job.seq);
  o.gpus = job.gpus;
  o.gbs = job.gbs;
  o.nvlink_domain_gpus = ev.cluster().gpus_per_domain();
  if (job.fix) {
    EXPECT_TRUE(o.fixes.add(job.fix).is_ok());
  }
  auto s = enumerate_layouts(o);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return s.is_ok() ? s->candidates : std::vector<Layout>{};
}

// Checks simulated ≥ bound on every `stride`-th layout of the job's space (fitting or not: the
// bound must hold for any layout the simulator accepts). Returns how many were compared.
int check(const Job& job, size_t stride) {
  const ModelEvaluator ev = evaluator(job);
  const std::vector<Layout> layouts = space(job, ev);
  int compared = 0;
  for (size_t i = 0; i < layouts.size(); i += stride) {
    const Layout& l = layouts[i];
    auto bound = ev.iteration_lower_bound(l);
    auto sim = ev.simulate(l);
    if (!sim) continue;  // a layout the simulator rejects needs no bound
    EXPECT_TRUE(bound.is_ok()) << format_layout(l) << ": " << bound.status().message();
    if (!bound) continue;
    EXPECT_GT(*bound, Duration::zero()) << format_layout(l);
    EXPECT_LE(*bound, sim->iteration) << format_layout(l) << ": bound " << format_duration(*bound)
                                      << ", simulated " << format_duration(sim->iteration);
    ++compared;
  }
  EXPECT_GT(compared, 0);
  return compared;
}

TEST(IterationBound, BelowTheSimulationOnEveryLayoutOfASmallSpace) {
  // llama-tiny on one node: every schedule, TP/CP/PP split, ZeRO stage and recompute mode.
  check({"llama-tiny", 8, 1024, 16}, 1);
}

TEST(IterationBound, BelowTheSimulationForDualPipe) {
  // Two chunks per rank from both ends: the bound counts each rank's own half of two stages.
  EXPECT_GT(check({"llama-tiny", 8, 1024, 16, "schedule=dualpipe"}, 1), 0);
  EXPECT_GT(check({"mixtral-tiny", 16, 1024, 32, "schedule=dualpipe"}, 3), 0);
  // With lighter ends on ranks 0 and pp-1 (two_chunk_end_splits) among the candidates.
  EXPECT_GT(check({"llama3-8b", 8, 4096, 64, "schedule=dualpipe"}, 3), 0);
}

TEST(IterationBound, BelowTheSimulationForTheVSchedules) {
  // DualPipeV and ZB-V: two chunks per rank in a V, rank 0 with both ends of the model.
  EXPECT_GT(check({"llama-tiny", 8, 1024, 16, "schedule=dualpipev"}, 1), 0);
  EXPECT_GT(check({"mixtral-tiny", 16, 1024, 32, "schedule=dualpipev"}, 3), 0);
  // With lighter ends on rank 0 (pp_first / pp_last, dualpipev_splits) among the candidates.
  EXPECT_GT(check({"llama3-8b", 8, 4096, 64, "schedule=dualpipev"}, 3), 0);
  // ZB-V's V without pairs.
  EXPECT_GT(check({"llama-tiny", 8, 1024, 16, "schedule=zb-v"}, 1), 0);
  EXPECT_GT(check({"mixtral-tiny", 16, 1024, 32, "schedule=zb-v"}, 3), 0);
}

TEST(IterationBound, BelowTheSimulationWithTorchtitansConventions) {
  // torchtitan's selective checkpointing reruns other ops than the attention core (and its eager
  // kernels run on top): the bound follows the same recompute policy.
  EXPECT_GT(check({"llama-tiny", 8, 1024, 16, "recompute=selective", "torchtitan"}, 1), 0);
  EXPECT_GT(check({"llama3-8b", 8, 8192, 16, "recompute=selective", "torchtitan"}, 5), 0);
  EXPECT_GT(check({"llama3-8b", 8, 32768, 8, "recompute=selective", "torchtitan"}, 3), 0);
}

TEST(IterationBound, BelowTheSimulationForAMoEModel) {
  // Expert parallelism: the EP all-to-alls are on the critical path and counted in the bound.
  check({"mixtral-tiny", 16, 1024, 32}, 7);
  // With a load imbalance the busiest rank's experts and all-to-alls grow in both.
  check({"mixtral-tiny", 16, 1024, 32, nullptr, "megatron", 1.5}, 7);
  // DeepEP's deduplicated dispatch across the two nodes: the bound times it the same way.
  check({"mixtral-tiny", 16, 1024, 32, nullptr, "megatron", 1.0, "deepep"}, 7);
}

TEST(IterationBound, BelowTheSimulationForMlaAndRecomputeModules) {
  // MLA (latent gathers under SP), a dense first layer, shared experts, and selective recompute
  // with the output-discarding modules the planner searches for such models.
  EXPECT_GT(check({"deepseek-tiny", 16, 1024, 32}, 5), 0);
  EXPECT_GT(check({"deepseek-tiny", 16, 1024, 32,
                   "recompute_modules=core_attn+layernorm+moe_act+mla_up_proj|core_attn+mlp+moe"},
                  3),
            0);
}

TEST(IterationBound, BelowTheSimulationWithSlidingWindowLayers) {
  // llama-tiny's shape with a 64-token window on three of its four layers (HF layer_types), at a
  // length where attention is most of the work: the bound times the sliding and the full layers
  // apart, as the simulator does (timing them all as the first, full, layer would put it above
  // the simulation).
  const std::string path = ::testing::TempDir() + "/scaleplan_swa_tiny.json";
  {
    std::ofstream f(path);
    f << R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
             "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
             "vocab_size": 1024, "sliding_window": 64,
             "layer_types": ["full_attention", "sliding_attention", "sliding_attention",
                             "sliding_attention"]})";
  }
  EXPECT_GT(check({path.c_str(), 8, 4096, 16}, 1), 0);
  std::remove(path.c_str());
}

TEST(IterationBound, BelowTheSimulationForEveryContextParallelExchange) {
  // The all-gather and all-to-all variants of CP are on the critical path, in both.
  EXPECT_GT(check({"llama-tiny", 8, 8192, 16, "cp_comm=all_gather|a2a"}, 1), 0);
}

TEST(IterationBound, BelowTheSimulationAcrossNodes) {
  // llama3-8b on 64 GPUs (8 nodes): cross-node DP, PP and ZeRO-3 gathers over the NICs.
  check({"llama3-8b", 64, 4096, 256}, 401);
}

TEST(IterationBound, CloseForAPipelineWhoseBubbleItCounts) {
  // 1F1B with pp = 4 and m = 8 micro-batches: the replayed schedule has the (p−1)/m bubble, so the
  // bound is within the exposed communication of the simulation, not just its compute.
  const Job job{"llama3-8b", 32, 4096, 64};
  const ModelEvaluator ev = evaluator(job);
  auto l = resolve_layout(*parse_layout("tp=1,pp=4,mbs=1,gbs=64,zero=1,schedule=1f1b"),
                          models::layout_constraints(ev.model(), job.seq), job.gpus);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  auto bound = ev.iteration_lower_bound(*l);
  auto sim = ev.simulate(*l);
  ASSERT_TRUE(bound.is_ok() && sim.is_ok());
  EXPECT_LE(*bound, sim->iteration);
  EXPECT_GT(bound->to_seconds(), 0.8 * sim->iteration.to_seconds())
      << format_duration(*bound) << " vs " << format_duration(sim->iteration);
}

}  // namespace
}  // namespace scaleplan::planner
