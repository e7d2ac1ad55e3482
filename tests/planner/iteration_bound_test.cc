// The planner's lower bound on the iteration (sim/iteration_bound.h) against the simulator it
// bounds: for every layout of a small space and a spread of layouts of real models, the simulated
// iteration is at least the bound. This is the property that makes the planner's pruning exact.
#include "sim/iteration_bound.h"
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
  bool tp_comm_overlap = false;          // simulate --tp-comm-overlap
  bool sm_clock = true;  // the profile's per-step SM clock (gpu.efficiency.sm_clock)
};

ModelEvaluator evaluator(const Job& job) {
  auto model = models::load_model(job.model);
  auto cluster = hw::load_cluster("dgx-h100");
  auto fw = sim::parse_framework_value(job.framework);
  EXPECT_TRUE(model && cluster && fw);
  if (!job.sm_clock) cluster->gpu.efficiency.sm_clock = hw::SmClock{};
  if (job.moe_imbalance > 1.0) {
    EXPECT_TRUE(models::set_moe_imbalance(*model, job.moe_imbalance).is_ok());
  }
  if (job.moe_dispatcher != nullptr) {
    EXPECT_TRUE(models::set_moe_dispatcher(*model, job.moe_dispatcher).is_ok());
  }
  auto kernels = calibrate::kernel_cost_model_for(*cluster);
  EXPECT_TRUE(kernels.is_ok());
  sim::Framework f = *fw;
  if (job.tp_comm_overlap) f = sim::with_recipe(f, {.tp_comm_overlap = true});
  return ModelEvaluator(*model, *cluster, job.seq, f, std::move(*kernels));
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
    // The refined bound (the schedule's pass order replayed) too, which the planner also prunes by.
    auto refined = ev.refined_lower_bound(l);
    EXPECT_TRUE(refined.is_ok()) << format_layout(l) << ": " << refined.status().message();
    if (refined) {
      EXPECT_LE(*refined, sim->iteration)
          << format_layout(l) << ": refined bound " << format_duration(*refined) << ", simulated "
          << format_duration(sim->iteration);
    }
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

TEST(IterationBound, BelowTheSimulationUnderEveryFramework) {
  // The bound reads the plan under the simulation's framework: megatron-2022's scattered pipeline
  // transfers, fp16 loss scaling and 16-bit gradients; deepspeed-2021's and nanotron's and
  // torchtitan's own optimizer and transfer conventions.
  for (const char* fw : {"megatron-2022", "deepspeed-2021", "nanotron", "torchtitan-2025"}) {
    EXPECT_GT(check({"llama-tiny", 8, 1024, 16, nullptr, fw}, 2), 0) << fw;
  }
}

TEST(IterationBound, BelowTheSimulationWithTiedEmbeddingsAndMtp) {
  // The plan's last stage holds a copy of the embedding (tied to the head, or looked up by
  // DeepSeek's MTP modules) and the MTP modules' parameters: the bound's optimizer step counts them
  // as the builder's does, and must stay below the simulation.
  const std::string tied = ::testing::TempDir() + "/scaleplan_tied_tiny.json";
  const std::string mtp = ::testing::TempDir() + "/scaleplan_mtp_tiny.json";
  std::ofstream(tied) << R"({"model_type": "llama", "hidden_size": 256, "intermediate_size": 768,
      "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 4,
      "vocab_size": 32768, "tie_word_embeddings": true})";
  std::ofstream(mtp) << R"({"model_type": "deepseek_v3", "first_k_dense_replace": 1,
      "hidden_size": 256, "intermediate_size": 512, "kv_lora_rank": 32,
      "moe_intermediate_size": 128, "moe_layer_freq": 1, "n_routed_experts": 8,
      "n_shared_experts": 1, "num_attention_heads": 8, "num_experts_per_tok": 2,
      "num_hidden_layers": 4, "num_key_value_heads": 8, "q_lora_rank": 64,
      "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 32768,
      "num_nextn_predict_layers": 1})";
  EXPECT_GT(check({tied.c_str(), 8, 1024, 16}, 2), 0);
  EXPECT_GT(check({mtp.c_str(), 16, 1024, 32}, 9), 0);
  std::remove(tied.c_str());
  std::remove(mtp.c_str());
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

TEST(IterationBound, BelowTheSimulationWhereTheDpStreamSlowsCompute) {
  // ZeRO-2 reduce-scatters every micro-batch's gradients (FrameworkTiming::
  // zero2_reduce_every_microbatch) over the NICs, and under the roofline model's compute slowdown
  // beside communication the refined bound counts that stretch and the DP stream's tail.
  check({"llama3-8b", 64, 4096, 256, "zero=2"}, 37);
  check({"llama3-8b", 64, 4096, 256, "zero=1"}, 53);
}

TEST(IterationBound, BelowTheSimulationForZero3AcrossNodes) {
  // ZeRO-3 over the NICs: the replay carries each rank's DP stream (gathers one block ahead, the
  // backward's reduce-scatters after them) from pass to pass, under each framework's conventions
  // (torchtitan's FSDP2 copies, DeepSpeed's per-tensor synchronous collectives).
  check({"llama3-8b", 64, 4096, 256, "zero=3"}, 13);
  check({"llama3-8b", 64, 4096, 256, "zero=3", "torchtitan"}, 23);
  check({"llama3-8b", 64, 4096, 256, "zero=3", "deepspeed-2021"}, 23);
}

TEST(IterationBound, BelowTheSimulationWithTpCommunicationOverlap) {
  // Transformer Engine's overlap: each SP collective beside its GEMM, which the bound counts as
  // the longer of the two.
  Job job{"llama3-8b", 64, 4096, 256, "sp=on"};
  job.tp_comm_overlap = true;
  check(job, 41);
}

// The best layout of llama3-70b on 256 H100s (plan, seq 8192, gbs 512): its refined bound is at
// most its simulated time and above `share` of it.
void expect_refined_above(const Job& job, double share) {
  const ModelEvaluator ev = evaluator(job);
  auto l = resolve_layout(
      *parse_layout("tp=2,pp=4,cp=2,vpp=5,schedule=interleaved,sp=on,mbs=1,gbs=512,zero=2"),
      models::layout_constraints(ev.model(), job.seq), job.gpus);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  auto refined = ev.refined_lower_bound(*l);
  auto sim = ev.simulate(*l);
  ASSERT_TRUE(refined.is_ok() && sim.is_ok());
  EXPECT_LE(*refined, sim->iteration);
  EXPECT_GT(refined->to_seconds(), share * sim->iteration.to_seconds())
      << format_duration(*refined) << " vs " << format_duration(sim->iteration);
}

TEST(IterationBound, CloseWhereTheDpStreamSlowsCompute) {
  // The best layout of llama3-70b on 256 H100s (plan, seq 8192, gbs 512): ZeRO-2 over 16 ranks
  // across nodes keeps the DP stream busy for about half the iteration, and the roofline model
  // slows compute by 1.189 beside it, about 0.9 s of a 13.3 s iteration; the pass-level replay
  // alone bounded it 8.5% low, which left hundreds of layouts to simulate. Counting the stretch
  // (and the last buckets' tail) brings the bound within 5%. Without the step's SM clock: the
  // replay times its passes at the maximum clock, 12% faster than this step's GEMMs run (docs/
  // hw_profiles.md, "GH100 under its 700 W limit"), which here leaves it at 0.86.
  Job job{"llama3-70b", 256, 8192, 512};
  job.sm_clock = false;
  expect_refined_above(job, 0.95);
}

TEST(IterationBound, CloseUnderTheStepsSmClock) {
  // The same layout with the profile's clock model on: each stage runs its GEMMs at the clock its
  // mix holds under the 700 W limit, GEMMs about 12% slower than at the maximum. Timing the
  // passes at the maximum left the bound at 0.86 of the simulation (pruning collapsed: 315
  // layouts simulated for the 405B plan on 16,384 GPUs instead of 29); no bound at the maximum
  // clock gets above 1/1.12 = 0.89 of this compute-bound step. At each stage's own clock
  // (sim/stage_clock.h), the CP ring's attention (a pair's compute op) included, every kernel runs
  // at the simulation's clock, so the bound is as close as without the clock model (the test
  // above); with that attention left at the maximum clock it was 0.94.
  expect_refined_above({"llama3-70b", 256, 8192, 512}, 0.95);
}

TEST(IterationBound, CloseUnderTheStepsSmClockWithTpOverlap) {
  // Under Transformer Engine's TP overlap most of the step's GEMMs are the compute ops of
  // overlapped pairs (each beside its SP collective). Left at the maximum clock, they kept the
  // bound below 1/1.12 = 0.89 of the simulation (it was 0.78); at the stage's clock, each pair
  // lasting the longer of its transfer and its GEMM at that clock, it must pass that.
  Job job{"llama3-70b", 256, 8192, 512};
  job.tp_comm_overlap = true;
  expect_refined_above(job, 0.9);
}

TEST(IterationBound, BelowTheSimulationForClockedPairsInAPipeline) {
  // The CP ring beside each attention and the TP collectives beside their GEMMs, timed at each
  // pipeline stage's clock: the pair lasts the longer of its transfer and its partner at that
  // clock, which must stay at most what the simulation gives it (GEMMs split in pieces included).
  Job job{"llama3-70b", 256, 8192, 512, "cp=2|4"};
  job.tp_comm_overlap = true;
  EXPECT_GE(check(job, 997), 4);
}

// On a network of 1 bit/s every collective across nodes takes past the simulated clock's end
// (units.h: times saturate at int64's end). The bound's sums saturate with them: it stays at
// least the bound on the real network, never wraps negative (found under UBSan, issue 33).
TEST(IterationBound, SaturatesOnANetworkTooSlowForTheClock) {
  auto model = models::load_model("llama-tiny");
  auto fast = hw::load_cluster("dgx-h100");
  const std::string path = ::testing::TempDir() + "/scaleplan_bound_slow_network.json";
  std::ofstream(path) << R"({"extends": "dgx-h100", "name": "slow",
                            "network": {"nic_bandwidth": "1b/s"}})";
  auto slow = hw::load_cluster(path);
  std::remove(path.c_str());
  auto fw = sim::parse_framework_value("megatron");
  ASSERT_TRUE(model && fast && fw);
  ASSERT_TRUE(slow.is_ok()) << slow.status().message();
  auto k_fast = calibrate::kernel_cost_model_for(*fast);
  auto k_slow = calibrate::kernel_cost_model_for(*slow);
  ASSERT_TRUE(k_fast.is_ok() && k_slow.is_ok());
  const ModelEvaluator on_fast(*model, *fast, 1024, *fw, std::move(*k_fast));
  const ModelEvaluator on_slow(*model, *slow, 1024, *fw, std::move(*k_slow));
  // Across the two nodes: the pipeline's sends, the DP reductions and the ZeRO-3 gathers.
  for (const char* text : {"tp=1,pp=2,mbs=1,gbs=16,zero=1,schedule=1f1b",
                           "tp=1,pp=2,vpp=2,mbs=1,gbs=16,zero=1,schedule=interleaved",
                           "tp=1,pp=1,mbs=1,gbs=16,zero=3"}) {
    auto l =
        resolve_layout(*parse_layout(text), models::layout_constraints(on_slow.model(), 1024), 16);
    ASSERT_TRUE(l.is_ok()) << text << ": " << l.status().message();
    auto b_fast = on_fast.iteration_lower_bound(*l);
    auto b_slow = on_slow.iteration_lower_bound(*l);
    ASSERT_TRUE(b_fast.is_ok() && b_slow.is_ok()) << text;
    EXPECT_GT(*b_fast, Duration::zero()) << text;
    EXPECT_GE(*b_slow, *b_fast) << text << ": " << format_duration(*b_slow);
  }
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

TEST(IterationBound, ClosedFormCountsTheDpStream) {
  // llama3.1-405b on 16,384 H100s under ZeRO-2 with dp = 128: every one of the 16 micro-batches
  // reduce-scatters the stage's gradients over 128 nodes, which takes the DP stream past twice the
  // stage's compute. The closed form, which orders the search, left the stream to the replay and
  // stayed at the compute (0.42 of the simulation), so such layouts came first and were simulated
  // while nothing bounded them yet. The stream runs its buckets one at a time after the stage's
  // first pass starts, and the iteration is that stream plus what it cannot hide (the passes
  // before the first bucket, the buckets' release times, the step), so a closed form that counts
  // it must come within a quarter of the simulation.
  const Job job{"llama3.1-405b", 16384, 8192, 2048};
  const ModelEvaluator ev = evaluator(job);
  auto l =
      resolve_layout(*parse_layout("tp=4,pp=8,cp=4,schedule=zb-h1,sp=on,mbs=1,gbs=2048,zero=2"),
                     models::layout_constraints(ev.model(), job.seq), job.gpus);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  auto closed = ev.iteration_lower_bound(*l);
  auto refined = ev.refined_lower_bound(*l);
  auto sim = ev.simulate(*l);
  ASSERT_TRUE(closed.is_ok() && refined.is_ok() && sim.is_ok());
  EXPECT_LE(*closed, sim->iteration);
  EXPECT_LE(*refined, sim->iteration);
  EXPECT_GT(closed->to_seconds(), 0.75 * sim->iteration.to_seconds())
      << format_duration(*closed) << " vs " << format_duration(sim->iteration);
}

// The coarse bound (sim::IterationBound::work_bound, ModelEvaluator::coarse_lower_bound) against
// the closed form it stands in for until the planner's walk needs the order of the closed forms:
// on every `stride`-th layout of the job's space, coarse ≤ closed form, so that no layout the walk
// would reach is left without its closed form (planner/planner.cc, run_search). Also above zero
// wherever it claims anything (every schedule but the two-chunk ones), which is what prunes.
// Returns how many layouts had both.
int check_coarse(const Job& job, size_t stride) {
  const ModelEvaluator ev = evaluator(job);
  const std::vector<Layout> layouts = space(job, ev);
  int compared = 0;
  for (size_t i = 0; i < layouts.size(); i += stride) {
    const Layout& l = layouts[i];
    auto closed = ev.iteration_lower_bound(l);
    if (!closed) continue;  // the planner counts an error as zero; so must the coarse one be
    auto coarse = ev.coarse_lower_bound(l);
    EXPECT_TRUE(coarse.is_ok()) << format_layout(l) << ": " << coarse.status().message();
    if (!coarse) continue;
    EXPECT_LE(*coarse, *closed) << format_layout(l) << ": coarse " << format_duration(*coarse)
                                << ", closed form " << format_duration(*closed);
    if (!two_chunks_per_rank(l.schedule)) EXPECT_GT(*coarse, Duration::zero()) << format_layout(l);
    ++compared;
  }
  EXPECT_GT(compared, 0);
  return compared;
}

TEST(IterationBound, CoarseBoundBelowTheClosedFormOnEveryLayout) {
  // Every layout of llama-tiny's space on one node (every schedule, split, ZeRO stage, recompute);
  // spreads of MoE spaces (EP all-to-alls, MLA, shared experts, DeepEP, an imbalance), under every
  // framework's conventions, without the SM clock model and with TE's TP overlap (pairs).
  EXPECT_GT(check_coarse({"llama-tiny", 8, 1024, 16}, 1), 1000);
  EXPECT_GT(check_coarse({"llama-tiny", 8, 1024, 16, "schedule=dualpipe"}, 1), 0);
  EXPECT_GT(check_coarse({"mixtral-tiny", 16, 1024, 32}, 3), 0);
  EXPECT_GT(check_coarse({"mixtral-tiny", 16, 1024, 32, nullptr, "megatron", 1.5, "deepep"}, 5), 0);
  EXPECT_GT(check_coarse({"deepseek-tiny", 16, 1024, 32}, 3), 0);
  EXPECT_GT(check_coarse({"llama3-8b", 64, 4096, 256}, 11), 0);
  for (const char* fw : {"megatron-2022", "deepspeed-2021", "nanotron", "torchtitan"}) {
    EXPECT_GT(check_coarse({"llama-tiny", 8, 1024, 16, nullptr, fw}, 2), 0) << fw;
  }
  EXPECT_GT(check_coarse({"llama-tiny", 8, 1024, 16, nullptr, "megatron", 1.0, nullptr, false,
                          /*sm_clock=*/false},
                         2),
            0);
  EXPECT_GT(check_coarse({"llama3-8b", 16, 4096, 64, nullptr, "megatron", 1.0, nullptr,
                          /*tp_comm_overlap=*/true},
                         3),
            0);
}

}  // namespace
}  // namespace scaleplan::planner
