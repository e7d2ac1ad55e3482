// The fields of the commands whose requests are described once (api/fields.h), by command name,
// for a binding that derives its keyword arguments from them (python/).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/status.h"

namespace scaleplan::api {

// The commands with a field table: "simulate", "sweep".
std::vector<std::string> described_commands();

// fields_json of `command`'s table over a default request; an unknown command is an error that
// lists the described ones.
Result<Json> command_fields(std::string_view command);

// The names the commands take besides files, for shell completion: the bundled model presets
// (--model), cluster profiles (--cluster) and validation sets (validate FILE, memory --validate).
struct BundledNames {
  std::vector<std::string> presets, profiles, validation_sets;
};
BundledNames bundled_names();

}  // namespace scaleplan::api
