// Small helpers the one-file-per-framework exporters of export/ share: number formatting that the
// frameworks' readers take back exactly, the header comment every export opens with, the
// per-chunk layer split, Megatron-core's pipeline layout string, the framework definitions and
// the torchtitan flavors. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/json_util.h"
#include "export/exporters.h"

namespace scaleplan::planner {

// v with `digits` digits after the point ("%.*f").
std::string fixed(double v, int digits);
// '#' comment lines: the layout, model, cluster, GPUs, sequence, the prediction, then each note.
std::string header_comment(const ExportInput& in, const std::vector<std::string>& notes);
// Layers of each pipeline chunk (stage order), or an empty vector on error (resolved layouts
// never fail).
std::vector<int> chunk_layers(const ExportInput& in);
bool is_even(const std::vector<int>& c);
// A number as Python's float() and the frameworks' configs read it back exactly: integers without
// a point, others in the shortest form that reads back to the same double.
std::string number(double v);
// Megatron-core's pipeline layout string (PipelineParallelLayerLayout.from_str): E embedding,
// t one decoder layer, m one MTP module, L the LM head and loss, '|' between (virtual) stages, in
// chunk order (the MTP modules follow the decoder layers, on the last stage).
std::string megatron_layout_string(const std::vector<int>& chunks, int64_t mtp_layers);
// The note of a format without a sliding-window key (`format` names it: "torchtitan's TOML").
std::string sliding_window_note(const models::ModelSpec& m, const std::string& format);

// torchtitan: the schedule class name of a layout's schedule (PyTorch's get_schedule_class);
// the framework definitions scaleplan targets (export/frameworks/<name>.json, extracted at the
// pinned commit by scripts/framework_defs/) and their short commit; torchtitan's model module for
// a HF model_type ("" when it has none); the flavor among `defs["flavors"][module]` whose
// Hugging-Face-equivalent shape (`hf_shape`) is this model's, with the training details it sets
// otherwise (RoPE, norm epsilon, router) listed. The error names the version in defs["ref"].
std::string torchtitan_schedule(Schedule s);
Result<Json> framework_defs(const std::string& name);
std::string short_commit(const Json& defs);
std::string torchtitan_module(const models::ModelSpec& m);
struct Flavor {
  std::string module, name;
  std::vector<std::string> differences;  // training details the flavor sets otherwise
};
Result<Flavor> torchtitan_flavor(const models::ModelSpec& m, const Json& defs);
// The note of a flavor that sets training details otherwise than this model (none when equal).
void note_flavor_differences(const Flavor& flavor, std::vector<std::string>& notes);
// torchtitan's data parallelism for `l` (resolved): FSDP2 over the shard mesh is ZeRO-3;
// resharding never after forward keeps the parameters gathered through the backward (ZeRO-2-like);
// plain replication is ZeRO-0 (DDP). There is no ZeRO-1 of its own: ZeRO-1 runs as the ZeRO-2-like
// one, with a note.
struct TorchtitanDataParallel {
  int64_t replicate = 1, shard = 1;
  std::string reshard = "default";  // fsdp_reshard_after_forward
};
TorchtitanDataParallel torchtitan_data_parallel(const Layout& l, std::vector<std::string>& notes);
// torchtitan's compile.components as a TOML / Python list of strings: "model,loss" ->
// ["model", "loss"].
std::string torchtitan_compile_components(const std::string& components);

}  // namespace scaleplan::planner
