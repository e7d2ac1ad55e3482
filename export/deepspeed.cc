// DeepSpeed (ecosystem.md §2.2): ds_config.json, with what the JSON cannot say as notes.
#include <nlohmann/json.hpp>

#include "export/export_util.h"
#include "export/formats.h"

namespace scaleplan::planner {

// DeepSpeed (ecosystem.md §2.2)

Result<Export> export_deepspeed(const ExportInput& in) {
  const Layout& l = in.layout;
  Export out;
  // DeepSpeed's engine takes its data-parallel size from the topology (mpu or dist world; its
  // only sequence split is Ulysses, sequence_parallel_size, runtime/config.py:697-711 at
  // v0.19.5), which has no ring or all-gather CP axis: a CP group would count as data-parallel
  // ranks and the batch assertion (config.py:924, train_batch == micro · accumulation ·
  // world_size) fails on keys written for dp = world/(tp·pp·cp).
  if (l.cp > 1) {
    return Status::invalid("DeepSpeed has no context parallelism (cp=" + std::to_string(l.cp) +
                           "): its topology would count the CP ranks as data-parallel and its "
                           "batch assertion (runtime/config.py) fails; plan with cp=1");
  }
  if (l.pp > 1) {
    out.notes.push_back("DeepSpeed's JSON has no pipeline degree; pass pp=" + std::to_string(l.pp) +
                        " to the launcher script (Megatron-DeepSpeed --pipeline-model-parallel-size"
                        ") or to deepspeed.pipe.PipelineModule(num_stages=...).");
  }
  if (l.ep > 1)
    out.notes.push_back("expert parallelism is set in the model (deepspeed.moe ep_size).");
  if (l.recompute != Recompute::kNone) {
    out.notes.push_back(
        "activation checkpointing is enabled in the model code "
        "(deepspeed.checkpointing); the JSON section only configures it.");
  }
  if (l.tp > 1 && l.zero == 3) {
    out.notes.push_back("DeepSpeed AutoTP training supports ZeRO stages 0-2 only.");
  }
  if (l.pp > 1 && l.zero >= 2) {
    out.notes.push_back(
        "DeepSpeed's pipeline engine refuses this: \"ZeRO-2 and ZeRO-3 are incompatible with "
        "pipeline parallelism\" (PipelineEngine); use zero_optimization.stage 0 or 1.");
  }
  if (l.dtype == DType::kFp8) {
    out.notes.push_back(
        "DeepSpeed's JSON has no fp8 setting; the fp8 linears simulated come from the model code "
        "(Transformer Engine), without which the run trains in bf16 and is slower.");
  }
  if (in.model->sliding_window > 0)
    out.notes.push_back(sliding_window_note(*in.model, "DeepSpeed's JSON"));
  if (in.model->mtp_layers > 0) {
    out.notes.push_back("the " + std::to_string(in.model->mtp_layers) +
                        " MTP module(s) scaleplan simulated on the last stage are part of the "
                        "model code, which DeepSpeed's JSON does not describe.");
  }
  Json j;
  // train_batch_size = micro · accumulation · data-parallel ranks (DeepSpeed checks it).
  j["train_batch_size"] = l.global_batch();
  j["train_micro_batch_size_per_gpu"] = l.mbs;
  j["gradient_accumulation_steps"] = l.num_microbatches();
  j["zero_optimization"] = {{"stage", l.zero},
                            {"overlap_comm", true},
                            {"contiguous_gradients", true},
                            {"reduce_scatter", true}};
  j["bf16"] = {{"enabled", true}};
  j["gradient_clipping"] = 1.0;
  if (l.tp > 1) j["tensor_parallel"] = {{"autotp_size", l.tp}};
  if (l.recompute != Recompute::kNone) {
    j["activation_checkpointing"] = {{"partition_activations", l.sequence_parallel()},
                                     {"contiguous_memory_optimization", false},
                                     {"cpu_checkpointing", false}};
  }
  j["steps_per_print"] = 10;
  j["wall_clock_breakdown"] = false;
  out.content = j.dump(2) + "\n";
  return out;
}

}  // namespace scaleplan::planner
