// The fields of the described commands; contract in describe.h.
#include "api/describe.h"

#include <nlohmann/json.hpp>

#include "api/simulate.h"
#include "api/sweep.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "validate/validation.h"

namespace scaleplan::api {

std::vector<std::string> described_commands() { return {"simulate", "sweep"}; }

Result<Json> command_fields(std::string_view command) {
  if (command == "simulate") {
    SimulateRequest r;
    return fields_json(simulate_fields(r));
  }
  if (command == "sweep") {
    SweepRequest r;
    return fields_json(sweep_fields(r));
  }
  std::string list;
  for (const std::string& c : described_commands()) list += (list.empty() ? "" : ", ") + c;
  return Status::invalid("command '" + std::string(command) + "' has no field table (" + list +
                         " have)");
}

BundledNames bundled_names() {
  return {models::preset_names(), hw::bundled_cluster_names(), planner::validation_set_names()};
}

}  // namespace scaleplan::api
