// Validation as a library (validate/validation.h): record parsing, the conventions a record ran
// under, the metric it is compared on, the statistics, and the one memory prediction that
// `validate` and `memory --validate` share.
#include "validate/validation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "hw_profiles/cluster.h"
#include "hw_profiles/placement.h"
#include "models/operators.h"
#include "sim/simulate.h"

namespace scaleplan::planner {
namespace {

Json llama_tiny_config() {
  std::ifstream in(std::string(SCALEPLAN_SOURCE_DIR) + "/models/presets/llama-tiny.json");
  std::stringstream text;
  text << in.rdbuf();
  return Json::parse(text.str());
}

// A record of llama-tiny on one DGX H100 node.
Json record(const std::string& id, const std::string& framework, const std::string& source,
            const std::string& layout, Json measured) {
  return {{"id", id},
          {"source", source},
          {"model", llama_tiny_config()},
          {"cluster", "dgx-h100"},
          {"gpus", 8},
          {"seq_len", 1024},
          {"layout", layout},
          {"framework", framework},
          {"measured", std::move(measured)}};
}

// A bundled validation set, parsed.
Result<std::vector<RunRecord>> bundled_records(const std::string& name) {
  SP_ASSIGN_OR_RETURN(std::string file, validation_file(name));
  std::ifstream in(file);
  return parse_run_records(Json::parse(in), file);
}

std::vector<RunRecord> parse(const Json& records) {
  auto r = parse_run_records(records, "test.json");
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : std::vector<RunRecord>{};
}

// The conventions of a record follow from its framework text and publication date
// (core/framework.h resolve_run_framework), and its set from its id and framework.
TEST(Validation, EachRecordRunsTheConventionsOfItsFrameworkAndDate) {
  const Json ok = {{"status", "ok"}};
  const auto recs = parse(Json::array(
      {record("megatron2021_a", "Megatron-LM (2021)", "Narayanan et al.", "tp=8", ok),
       record("korthikanti2022_b", "Megatron-LM", "Korthikanti et al. 2022", "tp=8", ok),
       record("ds", "DeepSpeed ZeRO-3", "arXiv:2104.04473, Table 2", "dp=8,zero=3", ok),
       record("ds_late", "DeepSpeed ZeRO-3", "arXiv:2107.00001", "dp=8,zero=3", ok),
       record("nano", "nanotron", "Ultra-Scale Playbook", "dp=8", ok),
       record("titan", "torchtitan", "2025 release notes", "dp=8", ok),
       record("titan_compiled", "torchtitan + torch.compile", "2025", "dp=8", ok),
       record("nemo", "NeMo 25.02 container (Megatron-Core)", "dgxc-benchmarking 2025", "tp=8",
              ok)}));
  ASSERT_EQ(recs.size(), 8u);
  auto fw = [&](size_t i) { return recs[i].conventions.framework; };
  EXPECT_EQ(fw(0), FrameworkId::kMegatron2022);  // before 2023: the unfused, fp16 Megatron-LM
  EXPECT_EQ(recs[0].group, "megatron-2021");
  EXPECT_EQ(fw(1), FrameworkId::kMegatron2022);
  EXPECT_EQ(recs[1].group, "korthikanti");
  EXPECT_EQ(recs[2].month, 2021 * 12 + 3);  // arXiv 2104: April 2021
  EXPECT_EQ(fw(2), FrameworkId::kDeepspeed2021);
  EXPECT_EQ(fw(3), FrameworkId::kMegatron2022);  // July 2021: after DeepSpeed PR #1188
  EXPECT_EQ(fw(4), FrameworkId::kNanotron);
  EXPECT_EQ(recs[4].group, "nanotron");
  EXPECT_EQ(fw(5), FrameworkId::kTorchtitan2025);
  EXPECT_EQ(fw(6), FrameworkId::kMegatron);  // compiled: Megatron-core's fused conventions ...
  EXPECT_EQ(recs[6].conventions.attention_of, FrameworkId::kTorchtitan2025);  // ... SDPA's kernel
  EXPECT_EQ(fw(7), FrameworkId::kMegatron);
  EXPECT_EQ(recs[7].group, "other");
  // The compiled torchtitan record runs torchtitan-2025's attention on an H100: FlashAttention-2
  // (cuDNN first only on sm100 in its 2025 releases), where Megatron-core's would be cuDNN.
  auto h100 = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(h100.is_ok());
  EXPECT_EQ(sim::framework_attention(sim::run_framework(recs[6].conventions).timing, h100->gpu),
            AttentionKernel::kFlash2);
  EXPECT_EQ(sim::framework_attention(sim::framework(FrameworkId::kMegatron).timing, h100->gpu),
            AttentionKernel::kCudnn);
}

TEST(Validation, ParseErrorsNameTheFileTheRecordAndTheKey) {
  EXPECT_FALSE(parse_run_records(Json::object(), "f.json").is_ok());
  auto not_object = parse_run_records(Json::array({1}), "f.json");
  ASSERT_FALSE(not_object.is_ok());
  EXPECT_NE(not_object.status().message().find("f.json: records[0]"), std::string::npos);
  // Every field is checked before anything reads it (models::check_records).
  auto no_model = parse_run_records(Json::array({{{"id", "x"}}}), "f.json");
  ASSERT_FALSE(no_model.is_ok());
  EXPECT_NE(no_model.status().message().find("f.json: records[0]: model"), std::string::npos);
  auto bad_gpus = parse_run_records(
      Json::array({{{"id", "x"}, {"model", Json::object()}, {"gpus", "eight"}}}), "f.json");
  ASSERT_FALSE(bad_gpus.is_ok());
  EXPECT_EQ(bad_gpus.status().message(),
            "f.json: records[0]: gpus: expected an integer, got \"eight\"");
}

// The options a NeMo or Megatron-Bridge recipe set beyond the layout (recipe_options cites each
// recipe): Megatron-Bridge's performance configs overlap TP under SP (not for NVFP4), reduce in
// bf16 and keep fp8 parameters under fp8; NeMo 2's scripts reduce in bf16 only under fp8; a
// Megatron-LM run sets none of them.
TEST(Validation, RecipeOptionsFollowWhoseRecipesRanTheRecord) {
  const Json ok = {{"status", "ok"}};
  Json bridge_nvfp4 =
      record("b2", "Megatron-Bridge 26.02 (NeMo container, Megatron-Core)", "", "tp=2", ok);
  bridge_nvfp4["precision"] = "NVFP4";
  const auto recs = parse(Json::array(
      {record("b1", "Megatron-Bridge 26.02 (NeMo container, Megatron-Core)", "", "tp=2", ok),
       bridge_nvfp4,
       record("n2", "NeMo 25.02.01 container (NeMo 2 scripts/performance recipe, Megatron-Core)",
              "", "tp=2", ok),
       record("m", "Megatron-LM", "", "tp=2", ok)}));
  ASSERT_EQ(recs.size(), 4u);
  Layout fp8 = *parse_layout("tp=2,dtype=fp8"), bf16 = *parse_layout("tp=2");
  const sim::RecipeOptions b1 = recipe_options(recs[0], fp8);
  EXPECT_TRUE(b1.tp_comm_overlap && b1.fp8_param_gather);
  EXPECT_EQ(b1.grad_reduce_in_fp32, false);
  const sim::RecipeOptions b2 = recipe_options(recs[1], fp8);
  EXPECT_FALSE(b2.tp_comm_overlap || b2.fp8_param_gather);
  EXPECT_FALSE(recipe_options(recs[2], bf16).grad_reduce_in_fp32.has_value());
  EXPECT_EQ(recipe_options(recs[2], fp8).grad_reduce_in_fp32, false);
  const sim::RecipeOptions m = recipe_options(recs[3], fp8);
  EXPECT_FALSE(m.tp_comm_overlap || m.fp8_param_gather || m.grad_reduce_in_fp32.has_value());
}

// The userbuffers preset a record's recipe passes (recipe_options; models/ub_presets.cc holds each
// row's file:line): dgxc's Llama 3.1 scripts pick NeMo 2.2's by model and precision on H100
// (pretrain_llama31.py:78-99: 405B = hidden 16384), Megatron-Bridge's Llama configs v0.3.0's by
// GPU (the B200 preset on a GB200) and precision (fp8 for MXFP8); dgxc's GPT-3 175B its YAML's;
// a recipe that names none (Nemotron-4 on H100: its preset is set on B200 only) runs TE's
// defaults (nullptr), and a run without the overlap has none.
TEST(Validation, RecipeOptionsCarryTheRecipesUserbuffersPreset) {
  const Json ok = {{"status", "ok"}};
  const char* nemo2 = "NeMo 25.02.01 container (NeMo 2 scripts/performance recipe, Megatron-Core)";
  const char* bridge = "Megatron-Bridge 26.02 (NeMo container, Megatron-Core)";
  const char* launcher =
      "NeMo 24.12 container (NeMo-Framework-Launcher hydra config, Megatron-Core)";
  auto with_model = [&](const char* id, const char* fw, Json model, const char* cluster,
                        const char* precision) {
    Json r = record(id, fw, "", "tp=8", ok);
    r["model"] = std::move(model);
    r["cluster"] = cluster;
    r["precision"] = precision;
    return r;
  };
  Json llama405 = llama_tiny_config();
  llama405["hidden_size"] = 16384;
  Json llama70 = llama_tiny_config();
  llama70["hidden_size"] = 8192;
  const Json gpt3 = {{"model_type", "gpt2"}, {"n_embd", 12288},     {"n_layer", 2},
                     {"n_head", 96},         {"vocab_size", 50257}, {"n_positions", 2048}};
  Json nemotron = llama_tiny_config();
  nemotron["model_type"] = "nemotron";
  const auto recs = parse(Json::array({with_model("d405", nemo2, llama405, "dgx-h100", "BF16"),
                                       with_model("b70", bridge, llama70, "gb200-nvl72", "MXFP8"),
                                       with_model("g", launcher, gpt3, "dgx-h100", "FP8"),
                                       with_model("nt", nemo2, nemotron, "dgx-h100", "BF16"),
                                       with_model("b405", bridge, llama405, "dgx-h100", "FP8")}));
  ASSERT_EQ(recs.size(), 5u);
  const Layout bf16 = *parse_layout("tp=8"), fp8 = *parse_layout("tp=8,dtype=fp8");
  auto preset_of = [&](size_t i, const Layout& l) -> std::string {
    const models::UbPreset* p = recipe_options(recs[i], l).tp_comm_overlap_preset;
    return p ? std::string(p->name) : "";
  };
  EXPECT_EQ(preset_of(0, bf16), "nemo-2.2/userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192");
  EXPECT_EQ(preset_of(1, fp8), "mbridge-0.3/userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192");
  EXPECT_EQ(preset_of(2, fp8), "dgxc-25.04.01/gpt3_175b_hydra");
  EXPECT_EQ(preset_of(3, bf16), "");
  EXPECT_EQ(preset_of(4, fp8), "mbridge-0.3/userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192");
  // Without SP there is no overlap, so no preset.
  EXPECT_EQ(recipe_options(recs[0], *parse_layout("tp=8,sp=off")).tp_comm_overlap_preset, nullptr);
  // The framework the record is simulated with carries it to its operator lists.
  EXPECT_EQ(sim::with_recipe(sim::framework(FrameworkId::kMegatron), recipe_options(recs[0], bf16))
                .ops.tp_comm_overlap_preset,
            recipe_options(recs[0], bf16).tp_comm_overlap_preset);
}

// The fp8 recipe a record ran (recipe_options cites Megatron-Bridge's performance scripts): its
// summary's FP8 is fp8_cs, current scaling (tensorwise); MXFP8 is fp8_mx; NVFP4 is nvfp4
// (bf16_with_nvfp4_mixed); NeMo 2's delayed scaling keeps the default; a bf16 layout has no fp8
// recipe to set.
TEST(Validation, Fp8RecipeFollowsTheRecordsPrecision) {
  const Json ok = {{"status", "ok"}};
  const char* bridge = "Megatron-Bridge 26.02 (NeMo container, Megatron-Core)";
  Json records = Json::array();
  for (const char* p : {"FP8", "MXFP8", "NVFP4", "BF16"}) {
    Json r = record(std::string("b_") + p, bridge, "", "tp=2", ok);
    r["precision"] = p;
    records.push_back(r);
  }
  Json nemo = record("n",
                     "NeMo 25.02.01 container (NeMo 2 scripts/performance recipe, "
                     "Megatron-Core)",
                     "", "tp=2", ok);
  nemo["precision"] = "FP8";
  records.push_back(nemo);
  const auto recs = parse(records);
  ASSERT_EQ(recs.size(), 5u);
  const Layout fp8 = *parse_layout("tp=2,dtype=fp8"), bf16 = *parse_layout("tp=2");
  using models::Fp8Recipe;
  EXPECT_EQ(recipe_options(recs[0], fp8).fp8_recipe, Fp8Recipe::kTensorwise);
  EXPECT_EQ(recipe_options(recs[1], fp8).fp8_recipe, Fp8Recipe::kMxfp8);
  EXPECT_EQ(recipe_options(recs[2], fp8).fp8_recipe, Fp8Recipe::kNvfp4);
  EXPECT_EQ(recipe_options(recs[3], bf16).fp8_recipe, Fp8Recipe::kDelayed);
  EXPECT_EQ(recipe_options(recs[4], fp8).fp8_recipe, Fp8Recipe::kDelayed);
  // The framework the record is simulated with carries it.
  EXPECT_EQ(sim::with_recipe(sim::framework(FrameworkId::kMegatron), recipe_options(recs[1], fp8))
                .ops.fp8_recipe,
            Fp8Recipe::kMxfp8);
}

// Megatron-core accepts 126 layers on pp=16 only with the embedding and the loss counted as
// pipeline layers (126 + 2 = 128 = 16 x 8: Megatron-Bridge's Llama 3.1 405B config); 128 layers
// divide already, and other conventions never count them.
TEST(Validation, PipelineAccountingOnlyWhereMegatronCoreNeedsIt) {
  Layout l = *parse_layout("pp=16");
  infer_pipeline_accounting(l, 126, FrameworkId::kMegatron);
  EXPECT_TRUE(l.pp_embedding && l.pp_loss);
  Layout even = *parse_layout("pp=16");
  infer_pipeline_accounting(even, 128, FrameworkId::kMegatron);
  EXPECT_FALSE(even.pp_embedding || even.pp_loss);
  Layout nano = *parse_layout("pp=16");
  infer_pipeline_accounting(nano, 126, FrameworkId::kNanotron);
  EXPECT_FALSE(nano.pp_embedding || nano.pp_loss);
}

// The first published of step time, throughput, MFU, TFLOP/s and HFU (the last three only when
// positive); none for a run that did not run or whose timing measured a framework bug.
TEST(Validation, ARecordIsComparedOnTheFirstQuantityItPublishes) {
  const auto recs = parse(Json::array(
      {record("a", "nanotron", "", "dp=8", {{"status", "ok"}, {"sec_per_iter", 2.0}, {"mfu", 0.4}}),
       record("b", "nanotron", "", "dp=8", {{"status", "ok"}, {"mfu", 0.0}, {"hfu", 0.5}}),
       record("c", "nanotron", "", "dp=8",
              {{"status", "ok"}, {"tokens_per_s_per_gpu", 900.0}, {"timing_valid", false}}),
       record("d", "nanotron", "", "dp=8", {{"status", "oom"}, {"sec_per_iter", 1.0}})}));
  ASSERT_EQ(recs.size(), 4u);
  ASSERT_TRUE(timed_measurement(recs[0]).has_value());
  EXPECT_EQ(timed_measurement(recs[0])->metric, Metric::kStepTime);
  ASSERT_TRUE(timed_measurement(recs[1]).has_value());
  EXPECT_EQ(timed_measurement(recs[1])->metric, Metric::kHfu);  // an MFU of 0 is not published
  EXPECT_FALSE(timed_measurement(recs[2]).has_value());
  EXPECT_FALSE(timed_measurement(recs[3]).has_value());
  // A step time of 2 s predicted as 1.6 s: 20% off, the simulation 1.25 times as fast.
  EXPECT_DOUBLE_EQ(abs_pct_error(1.6, 2.0), 20.0);
  EXPECT_DOUBLE_EQ(speed_ratio(Metric::kStepTime, 1.6, 2.0), 1.25);
  EXPECT_DOUBLE_EQ(speed_ratio(Metric::kMfu, 0.5, 0.4), 1.25);
}

// Quantiles interpolate between order statistics: of {1, 2, 3, 10} the median is 2.5 and the
// 90th percentile 3 + 0.7·(10 − 3) = 7.9; the worst is the first record with the largest error.
TEST(Validation, StatisticsInterpolateBetweenOrderStatistics) {
  EXPECT_DOUBLE_EQ(percentile({3, 1, 10, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile({3, 1, 10, 2}, 0.9), 7.9);
  EXPECT_DOUBLE_EQ(percentile({}, 0.5), 0.0);
  const ErrorStats s =
      error_stats({{3, 1.2, "a"}, {1, 0.9, "b"}, {10, 1.5, "c"}, {10, 1.1, "d"}, {2, 0.8, "e"}});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.median, 3);
  EXPECT_DOUBLE_EQ(s.worst, 10);
  EXPECT_EQ(s.worst_id, "c");
  EXPECT_EQ(s.predicted_faster, 3);
  EXPECT_DOUBLE_EQ(s.median_speed_ratio, 1.1);
}

// `validate` and `memory --validate` predict one memory per record: the estimate the simulation
// itself makes, under the conventions of the record's framework and date (fp16 main gradients for
// the 2021-2022 Megatron-LM, DeepSpeed's ZeRO-3 of 2021, torchtitan's fp32 sharded parameters,
// nanotron's own pipeline split and its step-peak measurement), with a layout's dtype=bf16 taken
// into account. They used to differ: memory --validate gave every record but nanotron's
// Megatron-core's conventions and stage 0's peak.
TEST(Validation, ValidateAndMemoryValidateAgreeOnEveryRecordsMemory) {
  const Json ok = {{"status", "ok"}, {"sec_per_iter", 1.0}, {"peak_memory_gib", 10.0}};
  const auto recs = parse(Json::array(
      {record("m2021", "Megatron-LM (2021)", "", "tp=2,pp=2,dp=2,gbs=8", ok),
       record("m2021_bf16", "Megatron-LM (2021)", "", "tp=2,pp=2,dp=2,gbs=8,dtype=bf16", ok),
       record("mcore", "Megatron-LM", "", "tp=2,pp=2,dp=2,gbs=8,zero=1", ok),
       record("ds", "DeepSpeed ZeRO-3", "arXiv:2104.04473", "dp=8,gbs=8,zero=3", ok),
       record("nano", "nanotron", "", "tp=1,pp=4,dp=2,gbs=8", ok),
       record("titan", "torchtitan", "2025", "tp=2,pp=2,dp=2,gbs=8,zero=2", ok),
       record("titan_c", "torchtitan + torch.compile", "2025", "tp=2,dp=4,gbs=8", ok)}));
  ASSERT_EQ(recs.size(), 7u);
  ClusterSet clusters;
  clusters.emplace("dgx-h100", *hw::load_cluster("dgx-h100"));
  const MemoryValidation mem = validate_memory(recs, clusters, "");
  ASSERT_EQ(mem.rows.size(), recs.size()) << (mem.skip_reasons.empty() ? "" : mem.skip_reasons[0]);
  for (size_t i = 0; i < recs.size(); ++i) {
    SCOPED_TRACE(recs[i].id);
    const RecordPrediction p = predict_record(recs[i], clusters, {});
    ASSERT_TRUE(p.skip.empty()) << p.skip;
    ASSERT_TRUE(p.mem_predicted_gib.has_value());
    EXPECT_EQ(*p.mem_predicted_gib, mem.rows[i].predicted_allocated_gib);
    EXPECT_EQ(p.predicted_fits, mem.rows[i].predicted_fits);
    // ... which is the simulation's own estimate (non-nanotron: the allocated peak over stages).
    if (recs[i].conventions.framework != FrameworkId::kNanotron) {
      auto setup = setup_record(recs[i], std::nullopt);
      ASSERT_TRUE(setup.is_ok());
      sim::SimulateOptions so;
      so.gpus = recs[i].gpus;
      so.framework = setup->framework;
      auto r =
          sim::simulate(setup->model, clusters.at("dgx-h100"), recs[i].seq_len, setup->layout, so);
      ASSERT_TRUE(r.is_ok());
      EXPECT_EQ(*p.mem_predicted_gib, to_gib(r->peak_memory));
    }
  }
  // The 2021 Megatron-LM kept fp16 main gradients (2 B/param); dtype=bf16 forces fp32 (4 B): the
  // first record needs less memory than the second.
  EXPECT_LT(mem.rows[0].predicted_allocated_gib, mem.rows[1].predicted_allocated_gib);
}

// issue 44: the Megatron-Bridge records ran as NVIDIA's performance launcher submits them:
// sbatch --segment = the largest divisor of the node count up to 18 (an NVL72 rack's trays), the
// whole job where it has at most 18 nodes (NVIDIA-NeMo/Megatron-Bridge
// scripts/performance/utils/executors.py lines 168-176 at 067f987df03b). The records do not say
// so; validate places them packed, and on the GB200/GB300 racks (4 GPUs per node) that puts each
// record's ranks in the launcher's segments.
TEST(Validation, MegatronBridgeRecordsArePlacedAsNvidiasLauncherSegmentsThem) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  int racks = 0;
  for (const RunRecord& r : *recs) {
    if (r.framework.find("Megatron-Bridge") == std::string::npos) continue;
    SCOPED_TRACE(r.id);
    auto setup = setup_record(r, std::nullopt);
    if (!setup.is_ok()) continue;  // a model family scaleplan does not model (validate says so)
    EXPECT_EQ(setup->layout.placement(), Placement::kPacked);
    if (r.layout.find("dp=") == std::string::npos) continue;  // the grid needs the model
    auto c = hw::load_cluster(r.cluster);
    if (!c.is_ok() || c->gpus_per_node != 4 || r.gpus <= 72) continue;
    ++racks;
    const int64_t nodes = r.gpus / 4;
    int64_t segment = nodes;
    if (nodes > 18) {
      for (segment = 18; nodes % segment != 0; --segment) {
      }
    }
    ASSERT_EQ(setup->layout.gpus(), r.gpus);
    const auto m = hw::rank_map(setup->layout, *c);
    ASSERT_TRUE(m.is_ok());
    EXPECT_EQ(m->per_domain, segment * 4);
  }
  EXPECT_GT(racks, 0);
}

// issue 43: `validate` predicted 4,028 tokens/s/GPU for Megatron-Bridge 26.02's DeepSeek-V3 on 256
// B200s where `simulate --model deepseek-v3` of its layout gave 2,668: the record's config had lost
// the multi-token-prediction module that the recipe trains (`mtp_num_layers=1`,
// src/megatron/bridge/recipes/deepseek/deepseek_v3.py:198,244 at Megatron-Bridge v0.3.0), and both
// split the 61 layers evenly where the recipe's layout map puts the embedding and 4 layers in the
// first of 16 chunks, 4 in each of the next 14 and 1 with the MTP module and the loss in the last
// (deepseek_v3.py:54-56; Kimi-K2 the same without MTP, kimi_k2.py:35-38 at v0.3.1), and run
// selective recompute of MLA's up projections (deepseek_workload_base_configs.py:111).
TEST(Validation, MegatronBridgeDeepSeekRecordsRunTheirRecipesMtpSplitAndRecompute) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  // 16 chunks: pp=16 (B200, B300), pp=4 vpp=4 (GB200), pp=2 vpp=8 (GB300).
  std::vector<int> sixteen(15, 4);
  sixteen.push_back(1);
  int deepseek = 0, kimi = 0;
  for (const RunRecord& r : *recs) {
    const bool is_deepseek = r.id.find("DeepSeekV3") != std::string::npos;
    const bool is_kimi = r.id.find("Kimi_K2") != std::string::npos;
    if (!is_deepseek && !is_kimi) continue;
    SCOPED_TRACE(r.id);
    auto setup = setup_record(r, std::nullopt);
    ASSERT_TRUE(setup.is_ok()) << setup.status().message();
    EXPECT_EQ(setup->model.num_layers, 61);
    EXPECT_EQ(setup->model.mtp_layers, is_deepseek ? 1 : 0);  // Kimi-K2's config says 0
    EXPECT_EQ(setup->layout.pp * setup->layout.vpp_degree(), 16);
    EXPECT_EQ(setup->chunk_layers, sixteen);
    EXPECT_EQ(setup->layout.recompute_module_set(), kRecomputeMlaUpProj);
    (is_deepseek ? deepseek : kimi)++;
  }
  EXPECT_EQ(deepseek, 10);
  EXPECT_EQ(kimi, 1);
}

// The setup of one timed record of `cfg` on `gpus` DGX B200s at seq 4096.
RecordSetup setup_of(const Json& cfg, int gpus, const std::string& framework,
                     const std::string& layout) {
  Json rec = {{"id", "one"},
              {"model", cfg},
              {"cluster", "dgx-b200"},
              {"gpus", gpus},
              {"seq_len", 4096},
              {"layout", layout},
              {"framework", framework},
              {"measured", {{"status", "ok"}, {"tokens_per_s_per_gpu", 1000.0}}}};
  auto recs = parse(Json::array({rec}));
  EXPECT_EQ(recs.size(), 1u);
  auto s = setup_record(recs.front(), std::nullopt);
  EXPECT_TRUE(s.is_ok()) << s.status().message();
  return *s;
}

// The recipes' other maps (4 and 8 chunks), and what the rule leaves alone: a layout that pins its
// own split or recompute, and the same model under another framework.
TEST(Validation, DeepSeekRecipeSplitFollowsTheLayoutMapAndLeavesStatedChoices) {
  std::ifstream f(std::string(SCALEPLAN_SOURCE_DIR) + "/models/presets/deepseek-v3.json");
  Json cfg = Json::parse(f);
  cfg.erase("num_nextn_predict_layers");
  auto one = [&](const std::string& framework, const std::string& layout) {
    return setup_of(cfg, 256, framework, layout);
  };
  const std::string mb = "Megatron-Bridge 26.02 (NeMo container, Megatron-Core)";
  // deepseek_v3.py:51 (4, 1): 16, 16, 16, 13; :52-53 (8, 1) and (4, 2): 8 × 7, then 5.
  EXPECT_EQ(one(mb, "tp=1,pp=4,dp=64,ep=64,gbs=4096").chunk_layers,
            (std::vector<int>{16, 16, 16, 13}));
  EXPECT_EQ(one(mb, "tp=1,pp=4,dp=64,ep=64,vpp=2,schedule=interleaved,gbs=4096").chunk_layers,
            (std::vector<int>{8, 8, 8, 8, 8, 8, 8, 5}));
  // Recompute as the fp8 workloads run it; the bf16 ones differ by system and are left as stated.
  EXPECT_EQ(one(mb, "tp=1,pp=16,dp=16,ep=8,gbs=4096,dtype=fp8").layout.recompute_module_set(),
            kRecomputeMlaUpProj);
  EXPECT_EQ(one(mb, "tp=1,pp=16,dp=16,ep=8,gbs=4096,dtype=bf16").layout.recompute,
            Recompute::kNone);
  // No map entry for 2 chunks: Megatron-core's default split.
  EXPECT_TRUE(one(mb, "tp=1,pp=2,dp=128,ep=64,gbs=4096").chunk_layers.empty());
  // A stated split and a stated recompute stay.
  const RecordSetup pinned = one(mb, "tp=1,pp=16,dp=16,ep=8,gbs=4096,pp_first=3,recompute=none");
  EXPECT_TRUE(pinned.chunk_layers.empty());
  EXPECT_EQ(pinned.layout.recompute, Recompute::kNone);
  EXPECT_EQ(pinned.model.mtp_layers, 1);
  // Another framework's record of the same config is simulated as it says.
  const RecordSetup other = one("Megatron-LM", "tp=1,pp=16,dp=16,ep=8,gbs=4096");
  EXPECT_EQ(other.model.mtp_layers, 0);
  EXPECT_TRUE(other.chunk_layers.empty());
  EXPECT_EQ(other.layout.recompute, Recompute::kNone);
}

// Megatron-Bridge's GPT-OSS 120B bf16 workloads recompute the norms and the experts' activation on
// GB200, B200 and H100 and nothing on GB300 and B300 (v0.3.0 and v0.3.1
// gpt_oss_workload_base_configs.py:45-83); the MXFP8 records ran other configs and are left alone.
TEST(Validation, MegatronBridgeGptOssRecordsRecomputeAsTheirWorkloadConfigs) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  int recomputed = 0, left = 0;
  for (const RunRecord& r : *recs) {
    if (r.id.find("GPT_OSS") == std::string::npos) continue;
    SCOPED_TRACE(r.id);
    auto setup = setup_record(r, std::nullopt);
    ASSERT_TRUE(setup.is_ok()) << setup.status().message();
    const bool bf16 = r.precision == "BF16";
    const bool system =
        r.cluster == "gb200-nvl72" || r.cluster == "dgx-b200" || r.cluster == "dgx-h100";
    if (bf16 && system) {
      EXPECT_EQ(setup->layout.recompute, Recompute::kSelective);
      EXPECT_EQ(setup->layout.recompute_module_set(), kRecomputeLayernorm | kRecomputeMoeAct);
      ++recomputed;
    } else {
      EXPECT_EQ(setup->layout.recompute, Recompute::kNone);
      ++left;
    }
  }
  EXPECT_EQ(recomputed, 6);  // GB200, B200, H100 in each of 26.02 and 26.02.01
  EXPECT_EQ(left, 6);        // GB300, B300 in each; 26.08's two MXFP8 rows
}

// The 26.08 GPT-OSS MXFP8 workloads run the experts through Transformer Engine's op fuser
// (`_apply_gpt_oss_120b_full_iter_fp8mx_configs`, Megatron-Bridge v0.6.0
// perf_recipes/gpt_oss/common.py), which fuses the clamp into the activation; the 26.02 and
// 26.02.01 bf16 workloads (core_r0.16.0) clamp in eager PyTorch, and their layer lists say so.
TEST(Validation, MegatronBridgeGptOssRecordsClampAsTheirContainersMegatron) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  int fused = 0, eager = 0;
  for (const RunRecord& r : *recs) {
    if (r.id.find("GPT_OSS") == std::string::npos) continue;
    SCOPED_TRACE(r.id);
    auto setup = setup_record(r, std::nullopt);
    ASSERT_TRUE(setup.is_ok()) << setup.status().message();
    const bool op_fuser = r.framework.find("26.08") != std::string::npos;
    EXPECT_EQ(setup->framework.ops.te_op_fuser, op_fuser);
    auto l =
        resolve_layout(setup->layout, models::layout_constraints(setup->model, r.seq_len), r.gpus);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    auto ops =
        models::framework_layer_operators(setup->model, *l, r.seq_len, 0, setup->framework.ops);
    ASSERT_TRUE(ops.is_ok()) << ops.status().message();
    const bool clamps = std::ranges::any_of(
        *ops, [](const models::Op& op) { return op.name == "moe.expert.clamp"; });
    EXPECT_EQ(clamps, !op_fuser);
    (op_fuser ? fused : eager)++;
  }
  EXPECT_EQ(fused, 2);   // 26.08's GB200 and GB300 MXFP8 rows
  EXPECT_EQ(eager, 10);  // every bf16 row of 26.02 and 26.02.01
}

// Megatron-core's router options (validation.h, recipe_options): every Megatron-Bridge MoE
// performance recipe sets moe_router_fusion and moe_router_force_load_balancing, NeMo's dgxc
// Grok-1 neither; Megatron-Bridge's GPT-OSS trains without a load-balancing loss whatever its HF
// config's router_aux_loss_coef (apply_gpt_oss_recipe), its Qwen3 with one.
TEST(Validation, MegatronBridgeMoeRecordsRunTheFusedRouter) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  int bridge = 0, grok = 0;
  for (const RunRecord& r : *recs) {
    auto setup = setup_record(r, std::nullopt);
    if (!setup.is_ok() || !setup->model.moe) continue;
    SCOPED_TRACE(r.id);
    const bool mbridge = r.group == "mbridge-moe";
    EXPECT_EQ(setup->recipe.moe_router_fusion, mbridge);
    EXPECT_EQ(setup->recipe.moe_router_force_load_balancing, mbridge);
    EXPECT_EQ(setup->framework.ops.router_fusion, mbridge);
    EXPECT_EQ(setup->framework.ops.router_force_balance, mbridge);
    if (r.id.find("GPT_OSS") != std::string::npos) {
      EXPECT_EQ(setup->model.moe->aux_loss_coeff, 0.0);
    }
    if (r.id.find("Qwen3") != std::string::npos) {
      EXPECT_GT(setup->model.moe->aux_loss_coeff, 0.0);
    }
    (mbridge ? bridge : grok)++;
  }
  EXPECT_GT(bridge, 0);
  EXPECT_EQ(grok, 18);  // the dgxc Grok-1 rows, bf16 and fp8
}

// The expert MLPs each MoE record ran (validation.h, recipe_options): dgxc's Grok-1 recipe sets
// moe_grouped_gemm: false, so its Megatron-core (core_r0.10.0) builds SequentialMLP and runs the
// local experts one after another: one expert GEMM per kernel. Megatron-Bridge's MoE recipes run
// TEGroupedMLP, 4 experts' GEMMs at a time (FrameworkOps::expert_gemm_streams). Grok-1's launcher
// also exports NVTE_FUSED_ATTN=0: FlashAttention-2 on its H100s, where Megatron-core would take
// cuDNN (sm90 and later; framework_attention).
TEST(Validation, DgxcGrokRecordsRunSequentialExpertsAndFlashAttention) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  int bridge = 0, grok = 0;
  for (const RunRecord& r : *recs) {
    auto setup = setup_record(r, std::nullopt);
    if (!setup.is_ok() || !setup->model.moe) continue;
    SCOPED_TRACE(r.id);
    const bool dgxc = r.group == "dgxc";
    EXPECT_EQ(setup->recipe.moe_sequential_experts, dgxc);
    EXPECT_EQ(setup->recipe.moe_core_r010, dgxc);
    EXPECT_EQ(setup->framework.ops.moe_core_r010, dgxc);
    EXPECT_EQ(setup->framework.ops.expert_gemm_streams, dgxc ? 1 : 4);
    EXPECT_EQ(setup->recipe.no_fused_attention, dgxc);
    EXPECT_EQ(setup->framework.timing.cudnn_from_sm, dgxc ? 0 : 90);
    (dgxc ? grok : bridge)++;
  }
  EXPECT_GT(bridge, 0);
  EXPECT_EQ(grok, 18);
}

// The dispatcher each Megatron-Bridge MoE workload ran (validation.h, apply_moe_dispatcher_recipe):
// alltoall for GPT-OSS, for Qwen3-235B on B300, B200 and H100, and for Qwen3-30B's 26.02 B200
// workload (v0.3.0 qwen3_workload_base_configs.py:389-405 sets no flex backend); flex elsewhere.
TEST(Validation, MegatronBridgeMoeRecordsRunTheirWorkloadsDispatcher) {
  auto recs = bundled_records("dev_runs_2026");
  ASSERT_TRUE(recs.is_ok()) << recs.status().message();
  int alltoall = 0, flex = 0;
  for (const RunRecord& r : *recs) {
    if (r.group != "mbridge-moe") continue;
    auto setup = setup_record(r, std::nullopt);
    if (!setup.is_ok() || !setup->model.moe) continue;  // hybrid Mamba rows are not simulated
    SCOPED_TRACE(r.id);
    const bool dgx = r.cluster == "dgx-b300" || r.cluster == "dgx-b200" || r.cluster == "dgx-h100";
    const bool expect_alltoall = r.id.find("GPT_OSS") != std::string::npos ||
                                 (r.id.find("Qwen3_235B") != std::string::npos && dgx) ||
                                 r.id == "mbridge_26p02_DGXB200_Qwen3_30B_a3B_8gpu_mxfp8";
    EXPECT_EQ(setup->model.moe->dispatcher,
              expect_alltoall ? models::MoeDispatcher::kAllToAll : models::MoeDispatcher::kDeepEp);
    (expect_alltoall ? alltoall : flex)++;
  }
  // GPT-OSS 12; Qwen3-235B on B300, B200, H100 (26.02) and B300, H100 (26.02.01); one Qwen3-30B.
  EXPECT_EQ(alltoall, 12 + 5 + 1);
  EXPECT_GT(flex, 0);
}

// A GPT-OSS record whose layout states its recompute keeps it; another framework's is untouched.
TEST(Validation, GptOssRecipeLeavesStatedRecomputeAndOtherFrameworks) {
  std::ifstream f(std::string(SCALEPLAN_SOURCE_DIR) + "/models/presets/gpt-oss-120b.json");
  ASSERT_TRUE(f.good());
  const Json cfg = Json::parse(f);
  auto one = [&](const std::string& framework, const std::string& layout) {
    return setup_of(cfg, 64, framework, layout);
  };
  const std::string mb = "Megatron-Bridge 26.02 (NeMo container, Megatron-Core)";
  const std::string layout = "tp=1,pp=1,dp=64,ep=8,mbs=4,gbs=1280,zero=1,dtype=bf16";
  EXPECT_EQ(one(mb, layout).layout.recompute_module_set(), kRecomputeLayernorm | kRecomputeMoeAct);
  EXPECT_EQ(one(mb, layout + ",recompute=none").layout.recompute, Recompute::kNone);
  EXPECT_EQ(one("Megatron-LM", layout).layout.recompute, Recompute::kNone);
  EXPECT_EQ(one(mb, "tp=1,pp=1,dp=64,ep=8,mbs=4,gbs=1280,zero=1,dtype=fp8").layout.recompute,
            Recompute::kNone);
}

}  // namespace
}  // namespace scaleplan::planner
