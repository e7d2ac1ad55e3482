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

namespace scaleplan::api {

// Parses --host-launch (`value` empty: not given, nullopt; sim::framework_host_issue applies it);
// errors name the option and value.
Result<std::optional<Duration>> parse_host_launch(const std::string& value);

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
