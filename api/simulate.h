// `simulate` as a library call: one simulated iteration of a model under a layout on a cluster:
// time, tokens/s, MFU/HFU, per-rank breakdown, peak memory, optionally a Perfetto trace and the
// "how sure" re-simulations on perturbed profiles.
//
// SimulateRequest holds the options of `scaleplan simulate` as values; api::simulate does what the
// command does except printing (it writes the trace to `trace` when given) and returns a
// SimulateOutcome whose to_json() is exactly `scaleplan simulate --json`. Errors name the option.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "api/callbacks.h"
#include "api/fields.h"
#include "api/sim_inputs.h"
#include "core/json_util.h"
#include "core/status.h"
#include "planner/robustness.h"
#include "sim/simulate.h"

namespace scaleplan::api {

struct SimulateRequest {
  SimInputOptions inputs;  // --plan, or --model, --cluster, --seq, --layout, ...
  std::string trace;       // write a Chrome/Perfetto trace here; empty: none
  // Write the Program as Chakra execution traces into this existing directory (sim/chakra.h);
  // empty: none.
  std::string emit_chakra;
  std::string attention;  // flash, cudnn, unfused; empty: the framework's own
  // torchtitan's torch.compile: its compile.components ("model", "loss", "model,loss"); empty:
  // off, torchtitan's default (models::set_compile_components).
  std::string compile;
  // Transformer Engine's fp8 recipe (Megatron-core --fp8-recipe, models::Fp8Recipe): delayed,
  // tensorwise, mxfp8, nvfp4; empty: delayed, Megatron-core's default. dtype=fp8 under megatron
  // only.
  std::string fp8_recipe;
  bool all_ranks = false, how_sure = false, tp_comm_overlap = false;
};

// One iteration per perturbation of the profile (planner/robustness.h), one rank per stage: how
// far the prediction moves when one resource is as far off as the model's component checks.
struct HowSure {
  std::vector<std::pair<planner::Perturbation, Duration>> iterations;
  Duration min, max;
};

struct SimulateOutcome {
  SimulateRequest request;
  SimInputs inputs;  // what the options resolved to
  sim::SimulationResult result;
  bool tp_comm_overlap = false;
  std::string compile;       // the compile.components simulated; empty: eager
  std::string fp8_recipe;    // the fp8 recipe given (--fp8-recipe); empty: the default
  Duration host_per_launch;  // the host cost per launch the run used
  std::optional<HowSure> how_sure;
  // With emit_chakra: the files written (one per simulated rank, then the group file) and the
  // Program's op and dependency counts that they hold.
  std::vector<std::string> chakra_files;
  size_t chakra_ops = 0, chakra_deps = 0;

  // Exactly what `scaleplan simulate --json` prints.
  Json to_json() const;
};

// `simulate --chakra DIR --cluster C`: Chakra execution traces (one per rank, sim/chakra.h) timed
// as a Program: compute nodes with their durations, communication with the scaleplan.* durations
// a scaleplan-written trace carries, else by the cluster's collective model; the engine with the
// cluster's compute-under-communication slowdown.
struct ChakraSimulateOutcome {
  std::string dir, cluster;
  int ranks = 0;
  size_t ops = 0;
  Duration iteration;
  Json to_json() const;
};
Result<ChakraSimulateOutcome> simulate_chakra(const std::string& dir, const std::string& cluster);

// The fields of a simulate request (api/fields.h), bound to `request`: the command line's options
// and the keys a binding passes, in the order --help lists them.
std::vector<Field> simulate_fields(SimulateRequest& request);

// Progress: the phase that starts, for --all-ranks runs of thousands of GPUs (seconds).
Result<SimulateOutcome> simulate(const SimulateRequest& request,
                                 const Callbacks<std::string_view>& callbacks = {});

}  // namespace scaleplan::api
