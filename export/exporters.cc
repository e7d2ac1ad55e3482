#include "export/exporters.h"

#include "core/enum_names.h"

#include <algorithm>

#include "export/export_util.h"
#include "export/formats.h"
#include "export/megatron_bridge.h"
#include "export/torchtitan.h"

namespace scaleplan::planner {

constexpr std::string_view kExportFormatNames[] = {
    "megatron", "torchtitan-0.2.2", "deepspeed", "nanotron",
    "json",     "megatron-bridge",  "torchtitan"};
static_assert(std::ssize(kExportFormatNames) ==
              static_cast<int>(ExportFormat::kTorchtitanMain) + 1);

std::string_view to_string(ExportFormat f) { return name_in(kExportFormatNames, f); }

// PyTorch's schedule class for each schedule, as both torchtitan exporters name it (beside the
// schedules torchtitan runs, runnable_values below).
// Indexed by Schedule, in its declared order; DualPipe runs as torchtitan's DualPipeV.
constexpr std::string_view kTorchtitanScheduleNames[] = {
    "GPipe",     "1F1B",      "Interleaved1F1B", "InterleavedZeroBubble",
    "DualPipeV", "DualPipeV", "ZBVZeroBubble"};
static_assert(std::ssize(kTorchtitanScheduleNames) == static_cast<int>(Schedule::kZbV) + 1);

std::string torchtitan_schedule(Schedule s) {
  return std::string(name_in(kTorchtitanScheduleNames, s));
}

std::vector<std::pair<std::string, std::vector<std::string>>> runnable_values(ExportFormat f) {
  switch (f) {
    // act_cache=fp8 is DeepSeek-V3's own framework's caching (not public); no target caches the
    // attention output in E5M6 or the experts' SwiGLU input in fp8. moments=bf16 is Megatron-core's
    // precision-aware optimizer (--use-precision-aware-optimizer, megatron/training/arguments.py
    // :3500-3517 at 5be9626); torchtitan, nanotron and DeepSpeed keep Adam's moments in fp32.
    case ExportFormat::kMegatron:
    case ExportFormat::kMegatronBridge:  // Megatron-core's schedules
      return {{"schedule", {"1f1b", "interleaved"}}, {"act_cache", {"default"}}};
    case ExportFormat::kTorchtitan:
      return {{"schedule", {"afab", "1f1b", "interleaved", "zb-h1", "dualpipev", "zb-v"}},
              {"zero", {"0", "2", "3"}},
              {"recompute_modules", {"none", "core_attn"}},
              {"cp_comm", {"p2p", "all_gather"}},  // no Ulysses in PyTorch's CP
              {"moments", {"fp32"}},
              {"act_cache", {"default"}}};
    case ExportFormat::kTorchtitanMain:  // export/torchtitan.h
      return {{"schedule", {"afab", "1f1b", "interleaved", "zb-h1", "dualpipev", "zb-v"}},
              {"zero", {"0", "2", "3"}},
              {"recompute_modules", {"none", "core_attn"}},
              {"etp", {"1"}},  // experts shard over expert_parallel_degree only
              {"moments", {"fp32"}},
              {"act_cache", {"default"}}};
    case ExportFormat::kNanotron:
      return {{"schedule", {"afab", "1f1b"}},
              {"zero", {"0", "1"}},
              {"cp_comm", {"p2p", "all_gather"}},  // ring and llama3_ring_attention
              {"recompute", {"none", "full"}},
              {"pp_first", {"none"}},
              {"pp_last", {"none"}},
              {"pp_embedding", {"off"}},
              {"pp_loss", {"off"}},
              {"moments", {"fp32"}},
              {"act_cache", {"default"}}};
    case ExportFormat::kDeepspeed:
      // DeepSpeed has no ring (or all-gather) context parallelism: its topology knows data,
      // pipe and model axes only (runtime/pipe/topology.py PipeModelDataParallelTopology), so
      // a CP group would be counted as data-parallel ranks and break the batch assertion.
      return {{"schedule", {"1f1b"}},
              {"recompute_modules", {"none", "core_attn"}},
              {"cp", {"1"}},
              {"moments", {"fp32"}},
              {"act_cache", {"default"}}};
    case ExportFormat::kJson:
      return {};
  }
  return {};
}

std::vector<std::pair<std::string, std::vector<std::string>>> runnable_values(
    ExportFormat f, const models::ModelSpec& model) {
  auto out = runnable_values(f);
  if ((f == ExportFormat::kTorchtitan || f == ExportFormat::kTorchtitanMain) &&
      model.tied_embeddings)
    out.push_back({"pp", {"1"}});
  return out;
}

std::vector<RefusedCombination> refused_combinations(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
    case ExportFormat::kMegatronBridge:  // the same TransformerConfig check
      return {
          {"sp=on with ep and tp > 1",
           [](const Layout& l) { return l.ep > 1 && l.tp > 1 && !l.sequence_parallel(); }, "sp"},
          // OptimizerConfig.__post_init__: "--use-precision-aware-optimizer only supported
          // with distributed optimizer" (megatron/core/optimizer/optimizer_config.py:434-436
          // at 5be9626; Megatron FSDP turns the distributed optimizer on itself).
          {"zero=1|2|3 with moments=bf16 (the precision-aware optimizer needs the "
           "distributed optimizer)",
           [](const Layout& l) { return l.moments == MomentDtype::kBf16 && l.zero == 0; }, "zero"}};
    case ExportFormat::kDeepspeed:
      return {{"zero=0|1 with pp > 1", [](const Layout& l) { return l.pp > 1 && l.zero >= 2; },
               "zero"}};
    case ExportFormat::kTorchtitanMain:
      // ParallelDims._validate: "expert_parallel_degree must divide dp_shard * cp * tp"; the
      // shard mesh is dp under FSDP (zero >= 1), 1 under DDP.
      return {
          {"ep dividing dp_shard*cp*tp",
           [](const Layout& l) {
             const int64_t shard = l.zero >= 1 ? l.dp_degree() : 1;
             return l.ep > 1 && (shard * l.cp * l.tp) % l.ep != 0;
           },
           "ep"},
          // torchtitan main sets no rotate method: PyTorch's default all-gathers K/V.
          {"cp_comm=all_gather with cp > 1",
           [](const Layout& l) { return l.cp > 1 && l.cp_comm_type() != CpComm::kAllGather; },
           "cp_comm"},
          // PyTorch's interleaved schedules' rounds rule holds for torchtitan main too (it runs
          // the same torch.distributed.pipelining schedules): see kTorchtitan below.
          {"interleaved and zb-h1 with micro-batches a multiple of max(1, m/pp) (PyTorch's "
           "rounds rule)",
           [](const Layout& l) { return !torchtitan_rounds_accept(l); }, "mbs"},
      };
    case ExportFormat::kTorchtitan:
      return {
          // models/llama3/infra/parallelize.py:148-151 (v0.2.2; deepseek_v3, llama4, gpt_oss
          // alike): without FSDP, replication is DDP, which raises "DDP has not supported > 1D
          // parallelism" unless the replicate mesh is the whole world. (qwen3's parallelize.py
          // checks only the mesh's ndim; the rule is kept for every module, the safe direction.)
          {"zero=2|3 with dp > 1 and tp or pp > 1 (torchtitan's DDP refuses > 1D parallelism)",
           [](const Layout& l) {
             return l.zero == 0 && l.dp.value_or(1) > 1 && (l.tp > 1 || l.pp > 1);
           },
           "zero"},
          // parallel_dims.py:136-138: the expert mesh is efsdp = dp_shard·cp·tp / (etp·ep), and
          // ZeRO-0 exports dp_shard = 1, so ep·etp must divide cp·tp.
          {"zero=2|3 with ep·etp not dividing tp·cp (torchtitan's expert mesh borrows from the "
           "FSDP shard degree)",
           [](const Layout& l) {
             return l.zero == 0 && l.ep > 1 &&
                    (int64_t{l.tp} * l.cp) % (int64_t{l.ep} * l.etp) != 0;
           },
           "zero"},
          // distributed/parallel_dims.py:334 fsdp_enabled = dp_shard_enabled or cp_enabled: with
          // cp > 1 torchtitan always shards the model states over the CP ranks, so ZeRO-0 is
          // never what it runs.
          {"zero=2|3 with cp > 1 (torchtitan turns FSDP on over the CP ranks)",
           [](const Layout& l) { return l.zero == 0 && l.cp > 1; }, "zero"},
          // PyTorch's ScheduleInterleaved1F1B and ScheduleInterleavedZeroBubble (which torchtitan
          // runs for interleaved and zb-h1) raise unless the micro-batches are a multiple of
          // number_of_rounds = max(1, m // pp), and run groups of m / number_of_rounds.
          {"interleaved and zb-h1 with micro-batches a multiple of max(1, m/pp) (PyTorch's "
           "rounds rule)",
           // Lifted by naming the micro-batch size (which sets the count), not the schedule: a
           // --fix schedule=interleaved still gets only counts PyTorch accepts.
           [](const Layout& l) { return !torchtitan_rounds_accept(l); }, "mbs"},
      };
    default:
      return {};
  }
}

bool torchtitan_rounds_accept(const Layout& l) {
  if (l.pp <= 1 || (l.schedule != Schedule::kInterleaved && l.schedule != Schedule::kZbH1))
    return true;
  const int64_t m = l.num_microbatches();
  const int64_t rounds = std::max<int64_t>(1, m / l.pp);
  if (m % rounds != 0) return false;
  // The group PyTorch runs must be the one simulated (core's interleave_group_size), or the run
  // is another schedule than predicted; zb-h1 is simulated without groups.
  return l.schedule != Schedule::kInterleaved || m < l.pp ||
         m / rounds == interleave_group_size(l.pp, m);
}

std::vector<FrameworkVerdict> framework_verdicts(const Layout& l, const models::ModelSpec& model) {
  std::vector<FrameworkVerdict> out;
  // The four targets in their first order, then the two added later (Megatron-Bridge, torchtitan
  // main), so that a reader indexing the first four keeps its meaning.
  for (ExportFormat f :
       {ExportFormat::kMegatron, ExportFormat::kTorchtitan, ExportFormat::kDeepspeed,
        ExportFormat::kNanotron, ExportFormat::kMegatronBridge, ExportFormat::kTorchtitanMain}) {
    FrameworkVerdict v{f, ""};
    for (const auto& [key, values] : runnable_values(f, model)) {
      if (std::find(values.begin(), values.end(), layout_value(l, key)) != values.end()) continue;
      std::string alts;
      for (const auto& x : values) alts += (alts.empty() ? "" : "|") + x;
      v.rule = key + "=" + alts;
      break;
    }
    if (v.rule.empty()) {
      for (const RefusedCombination& r : refused_combinations(f)) {
        if (r.refuses(l)) {
          v.rule = r.text;
          break;
        }
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

FrameworkId conventions_for(ExportFormat f) {
  switch (f) {
    case ExportFormat::kTorchtitan:
    case ExportFormat::kTorchtitanMain:
      return FrameworkId::kTorchtitan;
    case ExportFormat::kNanotron:
      return FrameworkId::kNanotron;
    default:
      return FrameworkId::kMegatron;
  }
}

// The framework each format is read by, as its project names itself; indexed by ExportFormat.
constexpr std::string_view kFrameworkNames[] = {"Megatron-LM", "torchtitan", "DeepSpeed",
                                                "nanotron",    "scaleplan",  "Megatron-Bridge",
                                                "torchtitan"};
static_assert(std::ssize(kFrameworkNames) == std::ssize(kExportFormatNames));

std::string_view framework_name(ExportFormat f) { return name_in(kFrameworkNames, f); }

Result<ExportFormat> parse_export_format(std::string_view text) {
  if (auto f = value_in<ExportFormat>(kExportFormatNames, text)) return *f;
  return Status::invalid("--emit: '" + std::string(text) +
                         "' is not one of megatron, megatron-bridge, torchtitan, "
                         "torchtitan-0.2.2, deepspeed, nanotron, json");
}

Result<Export> export_layout(const ExportInput& in, ExportFormat format) {
  if (in.model == nullptr) return Status::internal("export: no model");
  if (!in.layout.dp || !in.layout.gbs) {
    return Status::internal("export: the layout is not resolved (dp or gbs unset)");
  }
  // The exporter of each format, indexed by ExportFormat in its declared order.
  using Exporter = Result<Export> (*)(const ExportInput&);
  static constexpr Exporter kExporters[] = {
      export_megatron,  export_torchtitan_toml, export_deepspeed,      export_nanotron,
      export_plan_json, export_megatron_bridge, export_torchtitan_main};
  static_assert(std::ssize(kExporters) == std::ssize(kExportFormatNames));
  const auto i = static_cast<size_t>(format);
  if (i >= std::size(kExporters)) return Status::internal("export: unknown format");
  // The precision keys are refused by name where the framework cannot run them: its file would
  // run fp32 moments, or its own activation storage, and not what was simulated.
  for (const auto& [key, values] : runnable_values(format)) {
    if (key != "moments" && key != "act_cache") continue;
    const std::string v = layout_value(in.layout, key);
    if (std::find(values.begin(), values.end(), v) == values.end()) {
      return Status::invalid("layout: " + key + "=" + v + " cannot be exported to " +
                             std::string(framework_name(format)) + ", which has no setting for it");
    }
  }
  for (const RefusedCombination& r : refused_combinations(format)) {
    if (r.text.find("moments=bf16") != std::string::npos && r.refuses(in.layout))
      return Status::invalid("layout: moments=bf16 with zero=0 cannot be exported to " +
                             std::string(framework_name(format)) + ": needs " + r.text);
  }
  return kExporters[i](in);
}

}  // namespace scaleplan::planner
