// Exporters: a chosen layout written as the arguments or configuration a training framework takes
// (ecosystem.md §2), one file per framework (export/<framework>.cc), and the plan file that
// `simulate` and `run` read back (export/plan_file.h).
//
//   megatron    a torchrun + pretrain_gpt.py command: the model-shape flags (--num-layers,
//               --hidden-size, --ffn-hidden-size, --num-attention-heads, --group-query-attention
//               --num-query-groups, --kv-channels, ...), the batch and sequence flags and the
//               parallelism flags (TP, PP, VPP, uneven first/last stages, SP, CP, EP/ETP,
//               recompute, distributed optimizer or Megatron FSDP for ZeRO-2/3).
//   megatron-bridge  a Megatron-Bridge recipe run with Hydra overrides
//               (export/megatron_bridge.h).
//   torchtitan  torchtitan main: a Python config function (export/torchtitan.h).
//   torchtitan-0.2.2  a TOML job file ([parallelism], [training], [activation_checkpoint]); the
//               model shape, which torchtitan keeps in code (a flavor's ModelArgs), as a comment.
//   deepspeed   ds_config.json: batch sizes, gradient accumulation, zero_optimization.stage, bf16.
//   nanotron    a YAML config: parallelism, tokens, optimizer.zero_stage, model.model_config.
//   json        the plan file: model config (the HF config.json object itself) with its MoE
//               options, cluster, GPUs, sequence length, layout string, the framework whose
//               conventions were simulated (and the host launch cost, if one was given), and the
//               predicted metrics: everything `simulate --plan` (and `run --plan`) needs to
//               reproduce the prediction exactly.
//
// What a framework cannot express (AFAB or ZB-H1 in Megatron-LM, ZeRO-2/3 in nanotron, PP in a
// plain DeepSpeed JSON, ...) is returned in `notes` and, where the format has comments, written
// into the output too; the exporter never silently changes the layout. Pure functions of their
// inputs (the json exporter reads the model's config.json); thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/framework.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "export/plan_file.h"  // PlanFile, read_plan_file: the json format read back
#include "models/model_spec.h"
#include "planner/prediction.h"
#include "planner/search_space.h"

namespace scaleplan::planner {

enum class ExportFormat {
  kMegatron,
  kTorchtitan,
  kDeepspeed,
  kNanotron,
  kJson,
  kMegatronBridge,  // export/megatron_bridge.h
  kTorchtitanMain,  // torchtitan main (Python configs), export/torchtitan.h
};
std::string_view to_string(ExportFormat f);
// "megatron", "megatron-bridge", "torchtitan" (current torchtitan: kTorchtitanMain),
// "torchtitan-0.2.2" (its last TOML release: kTorchtitan), "deepspeed", "nanotron", "json"; the
// error lists them.
Result<ExportFormat> parse_export_format(std::string_view text);

// What a format's framework runs as predicted, per layout key (canonical values; keys not listed
// take any): a plan exported with another value would run something else than was simulated.
// Megatron-LM: schedules 1F1B and interleaved. torchtitan: GPipe, 1F1B, Interleaved1F1B,
// InterleavedZeroBubble (for ZB-H1), ZBVZeroBubble, DualPipeV; ZeRO 0 (DDP), 2 (FSDP2 without
// resharding) and 3 (FSDP2). nanotron: AFAB and 1F1B; ZeRO 0 and 1; no selective recompute; its
// own stage balance (no pinned splits). DeepSpeed: its 1F1B TrainSchedule. json: anything.
std::vector<std::pair<std::string, std::vector<std::string>>> runnable_values(ExportFormat f);
// The same for this model: torchtitan refuses tied embeddings under pipeline parallelism
// ("Weight tying is not supported with Pipeline Parallel", its model configs'
// update_from_config), so for a tied model it runs pp=1 only.
std::vector<std::pair<std::string, std::vector<std::string>>> runnable_values(
    ExportFormat f, const models::ModelSpec& model);
// Combinations of values a format's framework refuses at startup, whatever each value alone:
// Megatron-core's TransformerConfig raises on EP with TP without SP ("When using expert
// parallelism and tensor parallelism, sequence parallelism must be used"); DeepSpeed's
// PipelineEngine asserts "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism".
// torchtitan (v0.2.2 with PyTorch's pipelining schedules): DDP with TP, PP or EP (its
// parallelize.py raises "DDP has not supported > 1D parallelism"), ZeRO-0 with CP (parallel_dims.py
// turns FSDP on over the CP ranks), and interleaved or zb-h1 pipelines whose micro-batches
// PyTorch's rounds rule refuses (torchtitan_rounds_accept).
std::vector<RefusedCombination> refused_combinations(ExportFormat f);
// PyTorch's interleaved schedules (ScheduleInterleaved1F1B, ScheduleInterleavedZeroBubble in
// torch/distributed/pipelining/schedules.py) split m micro-batches into number_of_rounds =
// max(1, m // pp) rounds and raise unless m is a multiple of it; each round is one micro-batch
// group. True when `l` (resolved) is not such a pipeline, or when PyTorch accepts it and runs the
// group the simulator runs (core's interleave_group_size).
bool torchtitan_rounds_accept(const Layout& l);

// Whether one framework runs a layout as predicted: `rule` is the first of its start-up rules or
// runnable values (runnable_values, refused_combinations) the layout breaks, "" when none.
struct FrameworkVerdict {
  ExportFormat format = ExportFormat::kMegatron;
  std::string rule;
  bool runs() const { return rule.empty(); }
};
// The verdicts of Megatron-LM, torchtitan, DeepSpeed and nanotron on `layout` (resolved), in
// that order: plan shows them beside each ranked layout when no --emit chose one. Layout rules
// only: whether a framework has the model itself is the export's check (export_layout).
std::vector<FrameworkVerdict> framework_verdicts(const Layout& layout,
                                                 const models::ModelSpec& model);
// The convention set (--framework) that predicts a run of this format's framework: megatron for
// megatron, deepspeed (no convention set of its own for current DeepSpeed; Megatron-DeepSpeed
// runs Megatron's kernels) and json; torchtitan and nanotron their own.
FrameworkId conventions_for(ExportFormat f);
// The framework's name, for messages: "Megatron-LM", "torchtitan", "DeepSpeed", "nanotron".
std::string_view framework_name(ExportFormat f);

struct ExportInput {
  const models::ModelSpec* model = nullptr;  // not owned; must outlive the call
  std::string model_source;  // preset name or config.json path (the json plan embeds the config)
  std::string cluster;       // bundled profile name or path
  int64_t gpus = 0;
  int gpus_per_node = 8;
  int gpu_sm = 0;  // the GPU's SM version (hw::sm_version: 80 A100, 90 H100, 100 B200); 0 unknown
  int64_t seq_len = 0;
  Layout layout;  // resolved (dp, vpp, sp, gbs set)
  std::optional<Prediction> prediction;
  FrameworkId framework = FrameworkId::kMegatron;  // the conventions the prediction was simulated
                                                   // with
  std::optional<Duration> host_launch;  // --host-launch the prediction was simulated with
  // The prediction overlapped TP collectives with their GEMMs (plan --tp-comm-overlap): the
  // megatron export turns on --tp-comm-overlap, the plan file records it.
  bool tp_comm_overlap = false;
  // torchtitan's torch.compile components the prediction ran ("model", "loss", "model,loss";
  // models::compile_components); empty: eager. The torchtitan exports turn on [compile] with
  // them, the plan file records them.
  std::string compile;
  // place=packed (hw::RankMap): the nodes of each Slurm segment (sbatch --segment), so that each
  // lies in one NVLink domain, and the ranks each domain holds; 0 where the placement is linear
  // and needs no segment.
  int slurm_segment_nodes = 0;
  int ranks_per_domain = 0;
};

struct Export {
  std::string content;             // the file or command text
  std::vector<std::string> notes;  // what the framework cannot express, one sentence each
};

Result<Export> export_layout(const ExportInput& input, ExportFormat format);

}  // namespace scaleplan::planner
