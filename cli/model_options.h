// Help texts of the options shared by the subcommands that take a model (simulate, memory, plan,
// validate, sweep, run): described once in api/options.h, beside the functions that read them.
#pragma once

#include "api/options.h"

namespace scaleplan::cli {

using api::kFrameworkHelp;
using api::kHostLaunchHelp;
using api::kMoeDispatcherHelp;
using api::kMoeImbalanceHelp;

}  // namespace scaleplan::cli
