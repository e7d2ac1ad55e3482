// Model options shared by the subcommands that take a model (simulate, memory, plan).
#pragma once

#include <string>

#include "core/json_util.h"
#include "core/status.h"
#include "models/model_spec.h"

namespace scaleplan::cli {

inline constexpr const char* kMoeImbalanceHelp =
    "MoE load imbalance: max/mean tokens per expert-parallel rank (>= 1; default 1, balanced). "
    "The busiest rank's expert GEMMs and all-to-alls set the pace";

inline constexpr const char* kMoeDispatcherHelp =
    "MoE token dispatcher: alltoall (default; every token copy crosses the all-to-all) or deepep "
    "(across nodes a token crosses the network once per destination node)";

// Applies --moe-imbalance (`value` empty: not given) to `m`; errors name the option and value.
Status apply_moe_imbalance(models::ModelSpec& m, const std::string& value);

// Applies --moe-dispatcher (`value` empty: not given) to `m`; errors name the option and value.
Status apply_moe_dispatcher(models::ModelSpec& m, const std::string& value);

// The MoE options a run used, for --json output: {"imbalance": F, "dispatcher": "alltoall" |
// "deepep"}; null for a dense model.
Json moe_options_json(const models::ModelSpec& m);

}  // namespace scaleplan::cli
