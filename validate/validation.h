// Validation: published training runs re-simulated and compared with what they measured.
//
// The library half of `scaleplan validate FILE` and `scaleplan memory --validate FILE`: record
// parsing (validation/README.md has the schema), the conventions a record ran under
// (core/framework.h resolves its framework text and publication date once), which of its
// measurements a prediction is compared with (the metric), the predictions themselves and the
// statistics over them. The two commands share every rule, so a record's predicted memory is the
// same number in both; the command line only chooses what to print.
//
// What a record's memory is compared with: nanotron logs torch.cuda.max_memory_allocated() of
// global rank 0 after a reset that leaves only the gradient sync and the optimizer step in the
// window (src/nanotron/trainer.py training_step / train_step_logs; docs/validation.md "Memory
// model"), so its prediction is stage 0's optimizer-phase peak; every other record's is the
// allocated peak over the stages. Its reserved memory: stage 0's reserved estimate (rank 0's
// max_memory_reserved, which the reset does not shrink). Out of memory: an "oom" record is
// called right when some stage does not fit.
//
// Functions are pure but for predict_records' threads; results come in record order whatever the
// thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/framework.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "sim/framework.h"
#include "sim/simulate.h"

namespace scaleplan::planner {

// One record of a validation file, parsed.
struct RunRecord {
  std::string id, source, cluster, layout;
  std::string framework;  // as the record writes it ("Megatron-LM (2021)", "nanotron", ...)
  std::shared_ptr<const Json> model;  // the Hugging Face config object
  int64_t gpus = 0, seq_len = 0;
  bool incomplete = false;    // the source lacks part of the layout: not simulated
  std::string status = "ok";  // measured.status: "ok", "oom" or "failed"
  bool timing_valid = true;   // measured.timing_valid
  // What the run measured; nullopt where the source does not say.
  std::optional<double> sec_per_iter, tokens_per_s_per_gpu, mfu, tflops_per_gpu, hfu;
  std::optional<double> peak_memory_gib, peak_reserved_gib;
  std::string precision;  // "precision" as the record writes it ("nvfp4", ...); may be empty
  // The published set it belongs to, for per-set summaries (the sets docs/validation.md reports):
  // "korthikanti" (Korthikanti et al. 2022), "megatron-2021" (Narayanan et al. 2021, its
  // DeepSpeed ZeRO-3 rows included), "nanotron" (the Ultra-Scale Playbook sweep), "dgxc" (NVIDIA's
  // dgxc-benchmarking recipes, Grok-1 included), the Megatron-Bridge performance summary split
  // into "mbridge-moe" (models with routed experts, any GPU), "mbridge-blackwell" (dense, on
  // B200/B300/GB200/GB300) and "mbridge-h100" (dense, on H100), and "other" (record_groups()).
  std::string group;
  // When the run was published, year·12 + month − 1 (month 0 when only the year is known): from
  // an arXiv identifier in its source (arXiv:YYMM.NNNNN, the month of first submission), else
  // from a year 2017-2035 standing alone in its framework ("Megatron-LM (2021)"), its source or
  // its id ("korthikanti2022_..."), in that order. nullopt: undated.
  std::optional<int> month;
  // The conventions it trained under (resolve_run_framework of its framework and month).
  RunConventions conventions;
};

// The sets of record_groups order.
const std::vector<std::string>& record_groups();

// The bundled validation sets (validation/ of the data directory, core/data_dir.h): the stems of
// its run-record files ("dev_runs", "dev_runs_2026"), sorted; component_figures.json, which holds
// component measurements rather than runs, is not one.
std::vector<std::string> validation_set_names();

// The file `validate` and `memory --validate` read for `name_or_path`: an existing file, else a
// bundled set of that name. Neither: an invalid-input error naming the value and the sets.
Result<std::string> validation_file(const std::string& name_or_path);

// The records of a validation file: a JSON array of objects, checked field by field first
// (models::check_records: types, bounds, null refused). Errors name `file`, the record and the
// field.
Result<std::vector<RunRecord>> parse_run_records(const Json& records, const std::string& file);

// The Megatron-core options a record's recipe set beyond its layout (sim::RecipeOptions), from
// whose recipes ran it (core/framework.h RunRecipes):
//  - tp_comm_overlap, Transformer Engine's userbuffers overlap (needs TP > 1 with SP). NeMo's and
//    Megatron-Bridge's performance recipes turn it on: dgxc-benchmarking v25.04.01
//    llama3.1/pretrain_llama31.py (70B, 405B: tp_comm_overlap_cfg userbuffers_{bf16,fp8}_h100_*),
//    nemotron/gsw_nemo.patch (pretrain_nemotron4_15b/340b.py set tp_comm_overlap_cfg),
//    nemo_megatron/cfg/gpt3_175b_hydra.yaml (ub_tp_comm_overlap: true); Megatron-Bridge v0.3.0
//    scripts/performance/configs: llama3 and llama31 CommOverlapConfig(tp_comm_overlap=tp > 1)
//    but off for NVFP4, qwen3 CommOverlapConfig(tp_comm_overlap=True). dgxc's one MoE recipe,
//    grok1, has ub_tp_comm_overlap: false in cfg/grok1_314b.yaml, but its grok1/configure.sh
//    passes model.ub_tp_comm_overlap=true on the command line, which Hydra applies over the YAML;
//    NeMo v2.1.0 (the 24.12 container) then initializes userbuffers and sets tp_comm_overlap in
//    the TransformerConfig (megatron_gpt_model.py:443, 2188-2211). Megatron-core core_r0.10.0
//    builds the experts' linears without TE's TP communication (explicit expert communication),
//    so only the attention block's linears overlap (models::apply_tp_comm_overlap).
//    tp_comm_overlap_preset, the userbuffers configuration the recipe passes (models/ub_presets.h):
//    dgxc's Llama 3.1 70B / 405B on H100 NeMo 2.2's userbuffers_{bf16,fp8}_h100_* by precision;
//    its GPT-3 175B its YAML's ub_tp_comm_overlap_cfg; Megatron-Bridge's Llama 3 70B and 3.1 405B
//    configs v0.3.0's H100 or B200 preset by GPU and precision; none (TE's defaults) for dgxc's
//    Nemotron-4 on H100 and Grok-1 (ub_tp_comm_overlap_cfg: null), Megatron-Bridge's Qwen3
//    (CommOverlapConfig without tp_comm_overlap_cfg) and Nemotron 3 (its 26.08 config not read).
//  - grad_reduce_in_fp32 = false (bf16 main gradients): every Megatron-Bridge v0.3.0 performance
//    config (cfg.ddp.grad_reduce_in_fp32 = False), NeMo 2's performance scripts for fp8
//    (pretrain_llama31.py: plugins.grad_reduce_in_fp32 = False after bf16_with_fp8_mixed()), and
//    dgxc's Grok-1 (grok1_314b.yaml optim: mcore_distributed_optim, grad_sync_dtype: bf16; NeMo
//    v2.1.0 megatron_gpt_model.py:585-588: grad_reduce_in_fp32 = grad_sync_dtype == "fp32"). The
//    NeMo launcher's GPT-3 175B runs NeMo's distributed_fused_adam, another optimizer, and keeps
//    the framework default here.
//  - fp8_param_gather under dtype=fp8: NeMo 2's bf16_with_fp8_mixed (fp8_param_gather = True),
//    the NeMo launcher's fp8 configs (gpt3_175b_hydra.yaml fp8_params: true; grok1's YAML says
//    false but grok1/configure.sh passes model.fp8_params=True for fp8 runs, which NeMo v2.1.0
//    turns into fp8_model_init and the DDP config's fp8_param_gather, megatron_gpt_model.py:396,
//    598), Megatron-Bridge's current-scaling and MXFP8 recipes (training/mixed_precision.py
//    fp8_param_gather = True; NVFP4 False).
//  - fp8_recipe under dtype=fp8: Megatron-Bridge's performance scripts take the precision as
//    `-c bf16|fp8_cs|fp8_mx|fp8_sc|nvfp4` (scripts/performance/argument_parser.py:698 at
//    067f987df), and utils/precision.py maps fp8_cs to bf16_with_fp8_current_scaling_mixed
//    (fp8_recipe "tensorwise") and fp8_mx to bf16_with_mxfp8_mixed ("mxfp8")
//    (src/megatron/bridge/training/mixed_precision.py:255-300): the summary's FP8 rows ran
//    tensorwise, its MXFP8 rows mxfp8, its NVFP4 rows nvfp4 (bf16_with_nvfp4_mixed,
//    mixed_precision.py:405-417: fp4 "e2m1", fp4_recipe "nvfp4"; first_last_layers_bf16 keeps
//    its default False, so every decoder layer runs fp4). NeMo 2's bf16_with_fp8_mixed (dgxc) is
//    delayed scaling (fp8_amax_history_len 1024,
//    nemo/collections/llm/recipes/precision/mixed_precision.py), the default.
//  - moe_router_fusion and moe_router_force_load_balancing on models with routed experts: every
//    Megatron-Bridge MoE performance config sets both (v0.3.0 scripts/performance/configs:
//    qwen/qwen3_llm_pretrain.py:36,44, deepseek/deepseek_llm_pretrain.py:33,40,
//    gpt_oss/gpt_oss_llm_pretrain.py:32,34; for the 26.08 summary, 067f987df
//    src/megatron/bridge/perf_recipes/{deepseek/common.py:34,37, qwen/*/qwen3_moe.py,
//    gpt_oss/*/gpt_oss.py, nemotronh/common.py:88,113}). NeMo's (dgxc Grok-1) set neither.
//  - moe_sequential_experts on models with routed experts run by the NeMo launcher: dgxc's Grok-1
//    recipe (dgxc-benchmarking v25.04.01 grok1/cfg/grok1_314b.yaml, moe_grouped_gemm: false, not
//    overridden by grok1/configure.sh) passes moe_grouped_gemm to Megatron-core unchanged (NeMo
//    v2.1.0, the 24.12 container, megatron_gpt_model.py:2216; core_r0.10.0 per its
//    Dockerfile.ci MCORE_TAG), whose MoELayer then builds SequentialMLP (moe_layer.py:93-105).
//  - moe_core_r010 on the same Grok-1 records: the launcher pins the NeMo 24.12 container
//    (grok1/launch.sh FW_VERSION=24.12), NeMo v2.1.0, whose Dockerfile.ci pins Megatron-core
//    core_r0.10.0 (MCORE_TAG), so its MoE layer (unfused router, eager permute and unpermute with
//    the probabilities) runs, not the list's core_r0.16.0 one (docs/simulator.md, "dgxc's Grok-1
//    MoE layer as it ran").
//  - no_fused_attention on the same Grok-1 records: grok1/configure.sh exports NVTE_FUSED_ATTN=0
//    (the launcher's other recipe, nemo_megatron/configure.sh, exports 1), so Transformer
//    Engine's backend selection (v1.13 pytorch/attention.py:403-404 get_attention_backend:
//    use_fused_attention from NVTE_FUSED_ATTN) leaves the flash-attn package; FlashAttention-3
//    needs a separate install of flash-attention's hopper build (attention.py:176-190), which
//    NeMo v2.1.0's Dockerfile.ci does not make, so FlashAttention-2.
sim::RecipeOptions recipe_options(const RunRecord& record, const Layout& layout);

// Megatron-core accepts an interleaved or plain pipeline whose decoder layers do not divide into
// its pp·vpp chunks only with first/last-stage counts, a layout string, or with the embedding and
// the loss counted as pipeline layers (TransformerConfig.__post_init__, Megatron-LM d98e8a6:
// "num_layers ... after enable account_for_embedding_in_pipeline_split or
// account_for_loss_in_pipeline_split must be divisible"). Where the layers plus those two divide
// and the layers alone do not, a record simulated under Megatron-core's conventions ran with both
// (Megatron-Bridge v0.3.0 llama31_405b_pretrain_config sets both for Llama 3.1 405B); the layout
// string has no such key, so it is set here.
void infer_pipeline_accounting(Layout& layout, int64_t layers, FrameworkId framework);

// What a record is simulated with: its model, its layout (parsed, not resolved; with the
// embedding and loss counted as pipeline layers where infer_pipeline_accounting says so), its
// conventions (the record's, or `framework` when given) with the bf16 adjustment of a layout that
// names dtype=bf16 (sim::with_bf16_named) and its recipe's options (recipe_options), and the layer
// split of its framework (nanotron balances its pipeline stages by cost:
// models::nanotron_chunk_layers; empty: the default split).
struct RecordSetup {
  models::ModelSpec model;
  Layout layout;
  sim::Framework framework;
  sim::RecipeOptions recipe;
  std::vector<int> chunk_layers;
};
Result<RecordSetup> setup_record(const RunRecord& record,
                                 const std::optional<sim::Framework>& framework);

// Megatron-Bridge's DeepSeek-V3 and Kimi-K2 recipes (61 layers), which the records' tables do not
// spell out (NVIDIA-NeMo/Megatron-Bridge v0.3.0, the 26.02 container; unchanged through
// 067f987df03b): DeepSeek-V3 trains one multi-token-prediction module (`_deepseek_v3_common`'s
// `mtp_num_layers=1`, src/megatron/bridge/recipes/deepseek/deepseek_v3.py:198,244; the records'
// model TFLOP/s over their tokens/s, 260 GFLOP per token, is the 25.11 table's "DeepSeekV3 (w/
// MTP)" figure, not its "w/o MTP" 250: Megatron-Bridge's count adds the MTP layer and head,
// training/utils/flop_utils.py:212-216,357), so a config without `num_nextn_predict_layers` gets
// one; under fp8 both run selective recompute of MLA's up projections where the layout says nothing
// of recompute (scripts/performance/configs/deepseek/deepseek_llm_pretrain.py:34,
// deepseek_workload_base_configs.py:53,81,96,111; Kimi-K2 v0.3.1
// scripts/performance/configs/kimi/kimi_workload_base_configs.py:38,55,70,
// kimi_llm_pretrain.py:47); and both split the pipeline by the recipes'
// `pipeline_model_parallel_layout` maps, keyed by (pp, vpp) and alike for every pair of one product
// C = pp·vpp: C = 4, 8, 16 chunks in model order (chunk c on stage c mod pp, Megatron-LM
// pipeline_parallel_layer_layout.py:51) of 16/16/16/13, 8×7 then 5, 4×15 then 1 layers: the
// embedding with the first chunk, the MTP module and the loss with the last (deepseek_v3.py:49-56;
// kimi_k2.py:30-39 at v0.3.1; the GB300 workload's explicit `pp_layout="Et*4|(t*4|)*14tmL"`,
// deepseek_workload_base_configs.py:48). A layout that pins its own split (pp_first/pp_last,
// pp_embedding/pp_loss) keeps it.
void apply_deepseek_v3_recipe(const RunRecord& record, RecordSetup& s);
// Megatron-Bridge's GPT-OSS 120B bf16 performance workloads (the 26.02 and 26.02.01 records) on
// GB200, B200 and H100 run selective recompute of the norms and the experts' activation
// (`recompute_modules=["layernorm", "moe_act"]`, Megatron-Bridge v0.3.0 and v0.3.1
// scripts/performance/configs/gpt_oss/gpt_oss_workload_base_configs.py:54-59, 71-76, 79-83,
// which scripts/performance/utils/overrides.py:141-143 turns into selective recompute);
// GB300's and B300's recompute nothing (lines 45-51, 62-68). Applied where the layout says
// nothing of recompute; the MXFP8 records (26.08, other configs) are left as stated. The 26.08
// MXFP8 workloads (GB200 and GB300) set `use_transformer_engine_op_fuser = True`
// (`_apply_gpt_oss_120b_full_iter_fp8mx_configs`, Megatron-Bridge v0.6.0 and 067f987df03b
// src/megatron/bridge/perf_recipes/gpt_oss/common.py, called from gb200/gpt_oss.py and
// gb300/gpt_oss.py), under which Megatron-core's experts run the clamped activation as one
// Transformer Engine op: models::FrameworkOps::te_op_fuser, so no eager clamp. Every
// Megatron-Bridge GPT-OSS recipe trains without a load-balancing loss, whatever the HF config's
// router_aux_loss_coef (0.9): moe_router_load_balancing_type "none" (v0.3.0
// src/megatron/bridge/models/gpt_oss/gpt_oss_provider.py:75; v0.6.0
// src/megatron/bridge/models/gpt_oss/gpt_oss_bridge.py:71), so MoeSpec::aux_loss_coeff is 0.
void apply_gpt_oss_recipe(const RunRecord& record, RecordSetup& s);
// The token dispatcher each Megatron-Bridge MoE workload ran: the flex dispatcher (HybridEP or
// DeepEP: `moe_flex_dispatcher_backend`, apply_flex_dispatcher_backend sets
// moe_token_dispatcher_type="flex", src/megatron/bridge/training/flex_dispatcher_backend.py:67 at
// v0.3.0) for DeepSeek-V3 and Kimi-K2 everywhere (deepseek_workload_base_configs.py:50-129;
// kimi_workload_base_configs.py:34,53 at v0.3.1), for Qwen3-235B on GB200 and GB300 and for
// Qwen3-30B everywhere but the 26.02 B200 workload; the alltoall dispatcher for GPT-OSS (no
// workload sets a backend; gpt_oss_provider.py:72), Qwen3-235B on B300, B200 and H100 (no backend
// at v0.3.0; "alltoall" set at v0.3.1 qwen3_llm_pretrain.py:133,159,185) and Qwen3-30B's 26.02 B200
// workload (v0.3.0 qwen3_workload_base_configs.py:389-405; v0.3.1 sets "flex" for every Qwen3-30B
// system, qwen3_llm_pretrain.py:211-315). Scripts of the 26.08 container are not pinned here: its
// rows take the 26.02.01 choice, which for their models and systems is also the 26.02 one. Flex is
// simulated as MoeDispatcher::kDeepEp (one permute each way, tokens deduplicated per node across
// nodes; every flex row's EP group lies inside one node or NVLink domain).
void apply_moe_dispatcher_recipe(const RunRecord& record, RecordSetup& s);

// The memory model's estimate for a record, as the simulation computes it (same conventions,
// GPU memory and split): `layout` resolved on the record's GPU count.
Result<models::MemoryResult> record_memory(const RecordSetup& setup, const RunRecord& record,
                                           const hw::Cluster& cluster);
// The predicted counterpart of what the record measured as its peak (file comment), in bytes.
Bytes predicted_peak(const RunRecord& record, const models::MemoryResult& memory);

// The timed quantity a record is compared on: the first it publishes of seconds per iteration,
// tokens/s per GPU, MFU, model TFLOP/s per GPU and HFU (the last three only when positive).
enum class Metric { kStepTime, kThroughput, kMfu, kTflops, kHfu };
std::string_view to_string(Metric m);  // "step_time", "throughput", "mfu", "tflops", "hfu"
struct Measured {
  Metric metric;
  double value;
};
// nullopt when the record publishes none, did not run ("oom", "failed") or its timing measured a
// framework bug (timing_valid false).
std::optional<Measured> timed_measurement(const RunRecord& record);
// The simulated value of `metric`: seconds, tokens/s per GPU, MFU, MFU × the dense 16-bit peak in
// TFLOP/s, or HFU.
double predicted_value(Metric metric, const sim::SimulationResult& r, const hw::GpuSpec& gpu);
// 100·|predicted − measured| / measured.
double abs_pct_error(double predicted, double measured);
// Predicted speed over measured speed: above 1 the simulation is faster than the run. A step time
// is the inverse of a speed; throughput, MFU, TFLOP/s and HFU are speeds.
double speed_ratio(Metric metric, double predicted, double measured);

// Statistics of a set of errors.
struct ErrorSample {
  double abs_error = 0;  // |predicted − measured| / measured, in the caller's unit
  double speed_ratio = 0;
  std::string id;
};
struct ErrorStats {
  int n = 0;
  double median = 0, p90 = 0, worst = 0;
  std::string worst_id;  // the first record with the worst error
  // Predicted speed over measured speed: the median, and how many records the simulation makes
  // faster than measured. The |error| says how far; this says which way.
  double median_speed_ratio = 0;
  int predicted_faster = 0;
};
// The q-quantile of `v` (0 <= q <= 1), interpolated linearly between order statistics; 0 if empty.
double percentile(std::vector<double> v, double q);
ErrorStats error_stats(const std::vector<ErrorSample>& samples);

// One record re-simulated (`scaleplan validate`).
struct RecordPrediction {
  const RunRecord* record = nullptr;
  std::string skip;           // why it was not simulated; empty if it was
  std::string framework;      // the conventions simulated
  std::string attention;      // the attention kernel simulated
  sim::RecipeOptions recipe;  // the recipe options simulated (recipe_options)
  std::optional<Metric> metric;
  std::optional<double> predicted, measured;
  std::optional<double> mem_predicted_gib, mem_measured_gib;
  std::optional<double> how_sure_min, how_sure_max;  // --how-sure: the metric's range
  bool predicted_fits = false;
  double mfu = 0;
  std::vector<sim::StageResult> stages;  // per simulated stage
  // A timed record: predicted and measured, the measurement positive.
  bool timed() const { return predicted && measured && *measured > 0; }
  bool within_how_sure() const {
    return how_sure_min && measured && *measured >= *how_sure_min && *measured <= *how_sure_max;
  }
};

struct PredictOptions {
  std::optional<sim::Framework> framework;  // every record under these conventions (--framework)
  bool how_sure = false;  // also simulate on the perturbed profiles of planner/robustness.h
  std::optional<Duration> host_launch;  // the host issue model at this cost per launch
};
// Clusters by the names records use (the caller loads them, with any substitutions).
using ClusterSet = std::map<std::string, hw::Cluster>;

RecordPrediction predict_record(const RunRecord& record, const ClusterSet& clusters,
                                const PredictOptions& options);
// Every record, on `threads` threads (0: all cores), in record order. `progress(done, total)` is
// called from the calling thread every 50 ms while records remain (may be empty). An exception in
// a worker (a bug, std::bad_alloc) does not escape its thread: the first is an internal error.
Result<std::vector<RecordPrediction>> predict_records(
    const std::vector<RunRecord>& records, const ClusterSet& clusters,
    const PredictOptions& options, int threads,
    const std::function<void(size_t done, size_t total)>& progress = {});

// What `validate` summarizes.
struct ValidationSummary {
  int simulated = 0, skipped = 0;
  std::map<std::string, int> skip_reasons;
  ErrorStats time;  // over timed records, in percent
  std::map<std::string, ErrorStats> time_by_group;
  ErrorStats memory;  // "ok" records with a measured peak, in percent
  int oom_rows = 0, oom_called_right = 0, ok_rows = 0, ok_called_fits = 0;
  // --how-sure, per group: timed records and those whose measurement lies within the range.
  std::map<std::string, std::pair<int, int>> within_how_sure;  // group -> (within, timed)
};
ValidationSummary summarize(const std::vector<RecordPrediction>& predictions);

// `scaleplan memory --validate`: the memory model alone against every record that ran with a
// measured peak or ran out of memory.
struct MemoryRecordCheck {
  std::string id;
  std::string status;  // "ok" or "oom"
  std::string layout;  // resolved
  bool predicted_fits = false;
  double predicted_allocated_gib = 0;      // comparable with measured.peak_memory_gib
  double predicted_reserved_gib = 0;       // comparable with measured.peak_reserved_gib
  double predicted_peak_reserved_gib = 0;  // over all stages (what decides fits)
  std::optional<double> measured_allocated_gib;
  std::optional<double> measured_reserved_gib;
};
struct MemoryValidation {
  std::vector<MemoryRecordCheck> rows;
  int skipped = 0;                        // failed / incomplete / filtered out / unusable records
  std::vector<std::string> skip_reasons;  // "id: why" for records that could not be evaluated
  ErrorStats allocated, reserved;         // fractions (not percent)
  int oom_rows = 0, oom_called_oom = 0;   // OOM rows and how many the model says do not fit
  int ok_rows = 0, ok_called_oom = 0;     // rows that ran and how many the model calls OOM
};
// Every record whose framework text contains `framework_filter` (case-insensitive; empty: all).
// A record whose cluster `clusters` lacks is skipped with a reason.
MemoryValidation validate_memory(const std::vector<RunRecord>& records, const ClusterSet& clusters,
                                 std::string_view framework_filter);

}  // namespace scaleplan::planner
