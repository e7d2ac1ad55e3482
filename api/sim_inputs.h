// What one simulated (or executed) run is of, from the command line or from a plan file: the
// options `simulate` and `run` share.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "sim/framework.h"
#include "sim/trace.h"

namespace scaleplan::api {

// The options as given (empty / 0: not given).
struct SimInputOptions {
  std::string plan;  // --plan: a plan file that gives the model, cluster, seq, layout, framework
  std::string model, cluster, layout;
  std::string framework;       // --framework; empty: megatron
  std::string moe_imbalance;   // --moe-imbalance, empty: balanced
  std::string moe_dispatcher;  // --moe-dispatcher, empty: alltoall
  std::string host_launch;     // --host-launch, empty: the framework's own
  int64_t seq = 0, gpus = 0;
};

// What they resolve to.
struct SimInputs {
  models::ModelSpec model;
  std::string cluster_name;  // as given: a bundled name or a path
  hw::Cluster cluster;
  Layout layout;
  int64_t seq = 0, gpus = 0;
  std::string framework_name;
  sim::Framework framework;                // with the host launch cost applied (with_host_launch)
  std::optional<Duration> host_launch;     // as given, for the plan file and the trace
  std::optional<double> plan_iteration_s;  // what the plan predicted
};

// From --plan (the other options that a plan sets may then not be given) or from the options.
// Errors name the option (exit 2).
Result<SimInputs> sim_inputs(const SimInputOptions& o);

// What a trace says it is of (otherData): model, cluster, seq, layout as given and resolved,
// framework, so that a predicted and a measured trace of one run can be matched.
std::vector<sim::TraceOptions::Entry> run_metadata(const SimInputs& in);

}  // namespace scaleplan::api
