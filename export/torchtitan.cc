#include "export/torchtitan.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "export/export_util.h"
#include "sim/framework.h"

namespace scaleplan::planner {
namespace {

using models::ModelSpec;

// Each pipeline chunk's modules, in model order, as torchtitan main names them
// (_generate_llm_fqn_per_model_part, distributed/pipeline_parallel.py: tok_embeddings, layers.N,
// norm, lm_head; v0.2.2 called the last one `output`).
std::string fqns_per_model_part(const std::vector<int>& chunks) {
  std::string s = "[";
  int layer = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    s += c ? ", [" : "[";
    std::vector<std::string> names;
    if (c == 0) names.push_back("tok_embeddings");
    for (int i = 0; i < chunks[c]; ++i) names.push_back("layers." + std::to_string(layer++));
    if (c + 1 == chunks.size()) {
      names.push_back("norm");
      names.push_back("lm_head");
    }
    for (size_t i = 0; i < names.size(); ++i) s += (i ? ", \"" : "\"") + names[i] + "\"";
    s += "]";
  }
  return s + "]";
}

std::string py_bool(bool b) { return b ? "True" : "False"; }

// The shipped config function of a flavor: the one whose model_registry call names it (the
// first such, by line, in config_registry.py: llama3_8b for 8B, deepseek_v3_671b for 671B).
std::string base_function(const Json& defs, const Flavor& f) {
  std::string best;
  int best_line = 0;
  for (const auto& [name, fn] : defs["config_functions"][f.module].items()) {
    if (!fn["flavor"].is_string() || fn["flavor"].get<std::string>() != f.name) continue;
    const int line = fn["line"].get<int>();
    if (best.empty() || line < best_line) best = name, best_line = line;
  }
  return best;
}

}  // namespace

Result<Export> export_torchtitan_main(const ExportInput& in) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
  Export out;
  SP_ASSIGN_OR_RETURN(const Json defs, framework_defs("torchtitan-main"));
  SP_ASSIGN_OR_RETURN(const Flavor flavor, torchtitan_flavor(m, defs));
  const std::string base = base_function(defs, flavor);
  if (base.empty())
    return Status::invalid("torchtitan " + short_commit(defs) + " ships no config function for " +
                           flavor.module + " flavor " + flavor.name + " (torchtitan/models/" +
                           flavor.module + "/config_registry.py)");
  note_flavor_differences(flavor, out.notes);
  // Expert parallelism borrows ranks from dp_shard·cp·tp (ParallelDims._validate: "must divide
  // dp_shard * cp * tp"); experts are not tensor-parallel there.
  if (l.etp > 1)
    return Status::invalid("torchtitan " + short_commit(defs) +
                           " has no expert tensor parallelism (etp=" + std::to_string(l.etp) +
                           "); its experts shard over expert_parallel_degree only");
  const TorchtitanDataParallel data = torchtitan_data_parallel(l, out.notes);
  const int64_t replicate = data.replicate, shard = data.shard;
  const std::string& reshard = data.reshard;
  if (m.moe && l.ep > 1 && (shard * l.cp * l.tp) % l.ep != 0)
    return Status::invalid("torchtitan " + short_commit(defs) + ": expert_parallel_degree (" +
                           std::to_string(l.ep) + ") must divide dp_shard * cp * tp (" +
                           std::to_string(shard * l.cp * l.tp) + ")");
  if (l.cp > 1 && l.cp_comm_type() != CpComm::kAllGather)
    out.notes.push_back(
        "torchtitan sets no K/V rotation, so PyTorch's context parallelism gathers K/V at once "
        "(its default rotate method, all-gather), which scaleplan simulates with "
        "cp_comm=all_gather; this plan was simulated with another exchange.");
  if (m.tied_embeddings && l.pp > 1)
    out.notes.push_back(
        "torchtitan refuses tied embeddings under pipeline parallelism (\"Weight tying is not "
        "supported with Pipeline Parallel.\", models/common/decoder.py); this run needs the model "
        "untied.");
  const bool mtp = m.mtp_layers > 0 && l.pp == 1;
  if (m.mtp_layers > 0 && l.pp > 1)
    out.notes.push_back(
        "torchtitan raises \"MTP does not support pipeline parallelism yet.\" "
        "(models/deepseek_v3/mtp.py), so this run trains without the " +
        std::to_string(m.mtp_layers) +
        " MTP module(s) scaleplan simulated on the last stage: less time and memory there.");
  if (l.recompute == Recompute::kSelective &&
      !sim::framework(in.framework).ops.op_level_selective_ac)
    out.notes.push_back(
        "torchtitan's SelectiveAC saves the outputs of expensive ops and recomputes the rest; "
        "scaleplan's selective recompute recomputes the attention core only.");
  const std::vector<int> chunks = chunk_layers(in);
  const int64_t nproc = std::min<int64_t>(in.gpus, in.gpus_per_node);
  const int64_t nnodes = (in.gpus + nproc - 1) / nproc;
  const std::string ref = short_commit(defs);

  std::ostringstream o;
  o << header_comment(in, out.notes);
  o << "# torchtitan " << ref << " (" << defs.value("commit_date", std::string())
    << "), configured in Python (torchtitan/config/README.md). Save this file as\n"
       "# scaleplan_plan.py where Python finds it (the torchtitan repository root), then\n";
  if (nnodes == 1) {
    o << "#   NGPU=" << nproc << " MODULE=scaleplan_plan CONFIG=scaleplan_plan ./run_train.sh\n";
  } else {
    o << "# on each of the " << nnodes << " nodes (NODE_RANK 0.." << nnodes - 1
      << ", MASTER_ADDR the first node):\n"
      << "#   torchrun --nnodes " << nnodes << " --nproc_per_node " << nproc
      << " --node_rank $NODE_RANK --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:29500 \\\n"
      << "#     -m torchtitan.train --module scaleplan_plan --config scaleplan_plan\n";
  }
  o << "# Left to your site, as the shipped " << base
    << "() sets them: hf_assets_path (tokenizer), the dataloader's dataset, training.steps, the "
       "optimizer.\n";
  o << "from torchtitan.distributed.activation_checkpoint import FullAC, SelectiveAC\n";
  if (l.dtype == DType::kFp8)
    o << "from torchtitan.components.quantization import Float8LinearConverter\n";
  const bool rebuild_model = mtp || l.dtype == DType::kFp8;
  if (rebuild_model) o << "from torchtitan.models." << flavor.module << " import model_registry\n";
  o << "from torchtitan.models." << flavor.module << ".config_registry import " << base << "\n";
  o << "from torchtitan.trainer import Trainer\n\n\n";
  o << "def scaleplan_plan() -> Trainer.Config:\n";
  o << "    config = " << base << "()\n";
  // The model: the flavor again when the export changes how it is built (MTP modules, fp8
  // linears through the float8 converter, components/quantization).
  if (rebuild_model) {
    o << "    config.model_spec = model_registry(\n        \"" << flavor.name << "\",\n";
    if (mtp) o << "        num_mtp_layers=" << m.mtp_layers << ",\n";
    if (l.dtype == DType::kFp8)
      o << "        converters=[Float8LinearConverter.Config(model_compile_enabled=False)],\n";
    o << "    )\n";
  }
  o << "    config.training.max_context_length = " << in.seq_len << "\n";
  o << "    # One forward per data-parallel rank: mbs " << l.mbs << " x seq " << in.seq_len
    << ".\n";
  o << "    config.training.num_tokens_per_microbatch_per_dp_rank = " << l.mbs * in.seq_len << "\n";
  o << "    # One step: gbs " << l.global_batch() << " x seq " << in.seq_len << ".\n";
  o << "    config.training.num_tokens_per_train_step = " << l.global_batch() * in.seq_len << "\n";
  o << "    config.parallelism.data_parallel_replicate_degree = " << replicate << "\n";
  o << "    config.parallelism.data_parallel_shard_degree = " << shard << "\n";
  o << "    config.parallelism.fsdp_reshard_after_forward = \"" << reshard << "\"\n";
  o << "    config.parallelism.tensor_parallel_degree = " << l.tp << "\n";
  o << "    config.parallelism.enable_sequence_parallel = " << py_bool(l.sequence_parallel())
    << "\n";
  o << "    config.parallelism.pipeline_parallel_degree = " << l.pp << "\n";
  if (l.pp > 1) {
    // All of a step's micro-batches in one pipeline pass (gradient accumulation 1), as simulated.
    o << "    config.parallelism.pipeline_parallel_schedule = \"" << torchtitan_schedule(l.schedule)
      << "\"\n";
    o << "    config.parallelism.num_pp_microbatches = " << l.num_microbatches() << "\n";
    // Each chunk's modules, so that torchtitan runs the simulated split (its own split counts the
    // embedding and the output as layers).
    o << "    config.parallelism.pipeline_parallel_layers_per_stage = None\n";
    o << "    config.parallelism.module_fqns_per_model_part = " << fqns_per_model_part(chunks)
      << "\n";
  }
  o << "    config.parallelism.context_parallel_degree = " << l.cp << "\n";
  // validate_cp_backend: "Context Parallel requires parallelism.spmd_backend='spmd_types'".
  if (l.cp > 1) o << "    config.parallelism.spmd_backend = \"spmd_types\"\n";
  o << "    config.parallelism.expert_parallel_degree = " << l.ep << "\n";
  // Async TP stays off: its overlap is not modelled. torch.compile as predicted (plan --compile;
  // CompileConfig, torchtitan/config/configs.py:293-301 at b5bcd76: enable False, components
  // ["model", "loss"]).
  o << "    config.compile.enable_async_tensor_parallel = False\n";
  if (!in.compile.empty()) {
    o << "    config.compile.enable = True\n";
    o << "    config.compile.components = " << torchtitan_compile_components(in.compile) << "\n";
  }
  o << "    config.activation_checkpoint = "
    << (l.recompute == Recompute::kFull        ? "FullAC.Config()"
        : l.recompute == Recompute::kSelective ? "SelectiveAC.Config()"
                                               : "None")
    << "\n";
  o << "    return config\n";
  out.content = o.str();
  return out;
}

}  // namespace scaleplan::planner
