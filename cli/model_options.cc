#include "cli/model_options.h"

#include <cstddef>
#include <stdexcept>

namespace scaleplan::cli {

Status apply_moe_imbalance(models::ModelSpec& m, const std::string& value) {
  if (value.empty()) return Status::ok();
  double f = 0;
  size_t used = 0;
  try {
    f = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size())
    return Status::invalid("--moe-imbalance: '" + value + "' is not a number");
  return models::set_moe_imbalance(m, f).with_context("--moe-imbalance " + value);
}

Status apply_moe_dispatcher(models::ModelSpec& m, const std::string& value) {
  if (value.empty()) return Status::ok();
  return models::set_moe_dispatcher(m, value).with_context("--moe-dispatcher");
}

}  // namespace scaleplan::cli
