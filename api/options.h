// Option values that several commands share (simulate, memory, plan, sweep, validate, run), read
// the same way whether they come from the command line or from Python: the host launch cost, the
// memory margin, the MoE options, and the note about a job that does not fill whole nodes. Errors
// name the option as the command line spells it ("--moe-imbalance: ..."), the field a caller
// reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"
#include "sim/framework.h"

namespace scaleplan::api {

// Help texts of the shared options (the command line's and the fields' of api/fields.h).
inline constexpr const char* kMoeImbalanceHelp =
    "MoE load imbalance: max/mean tokens per expert-parallel rank (>= 1; default 1, balanced). "
    "The busiest rank's expert GEMMs and all-to-alls set the pace";

inline constexpr const char* kMoeDispatcherHelp =
    "MoE token dispatcher: alltoall (default; every token copy crosses the all-to-all) or deepep "
    "(across nodes a token crosses the network once per destination node)";

inline constexpr const char* kHostLaunchHelp =
    "CPU time to issue one kernel or collective, e.g. 40us, as a profiler trace of your run "
    "shows: replaces the framework's own (nanotron, torchtitan: 10us; megatron: none, its host "
    "runs ahead of the GPU) and keeps its extra kernels and blocking receives; 0 turns the host "
    "model off (docs/simulator.md, \"Host issue\")";

inline constexpr const char* kFrameworkHelp =
    "megatron (default; Megatron-core), megatron-2022 (Megatron-LM of its 2021-2022 papers), "
    "deepspeed-2021 (its GPT under DeepSpeed's early-2021 ZeRO-3), nanotron, or torchtitan "
    "(eager, no torch.compile; torchtitan-2025: on PyTorch <= 2.8): memory, timing and host "
    "conventions";

// Parses --host-launch (`value` empty: not given, nullopt; sim::framework_host_issue applies it);
// errors name the option and value.
Result<std::optional<Duration>> parse_host_launch(const std::string& value);

// `framework` with --host-launch applied to its host issue model (sim::framework_host_issue: the
// cost per launch replaced, its glue kernels and blocking receives kept); unchanged for nullopt.
// The one place the option takes effect: what is simulated, bounded or executed reads the
// framework value.
sim::Framework with_host_launch(sim::Framework framework, std::optional<Duration> host_launch);

// Parses --memory-margin (`value` empty: not given, nullopt); a size with a unit ("6GiB") or 0. A
// bare number is refused: it would be bytes ("--memory-margin 6" meant 6 GiB and kept 6 bytes).
Result<std::optional<Bytes>> parse_memory_margin(const std::string& value);

// Applies --moe-imbalance (`value` empty: not given) to `m`; errors name the option and value.
Status apply_moe_imbalance(models::ModelSpec& m, const std::string& value);

// Applies --moe-dispatcher (`value` empty: not given) to `m`; errors name the option and value.
Status apply_moe_dispatcher(models::ModelSpec& m, const std::string& value);

// The MoE options a run used, for --json output: {"imbalance": F, "dispatcher": "alltoall" |
// "deepep"}; null for a dense model.
Json moe_options_json(const models::ModelSpec& m);

// A one-line note when `gpus` spans more than one node without filling whole nodes of
// `gpus_per_node` ("" otherwise, and for a job inside one node): the last node is partly used,
// which a job scheduler may not give and the placement fills in order. `from_option`: the count
// came from --gpus (named so), not from the layout.
std::string partial_node_note(int64_t gpus, int gpus_per_node, const std::string& cluster,
                              bool from_option = true);

}  // namespace scaleplan::api
