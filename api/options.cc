#include "api/options.h"

#include <cstddef>
#include <nlohmann/json.hpp>
#include <stdexcept>

namespace scaleplan::api {

Result<std::optional<Duration>> parse_host_launch(const std::string& value) {
  if (value.empty()) return std::optional<Duration>();
  if (value == "0") return std::optional<Duration>(Duration::zero());  // off: no unit needed
  SP_ASSIGN_OR_RETURN(const Duration d, parse_duration(value, "--host-launch"));
  if (d < Duration::zero())
    return Status::invalid("--host-launch: must not be negative, got '" + value + "'");
  return std::optional<Duration>(d);
}

sim::Framework with_host_launch(sim::Framework framework, std::optional<Duration> host_launch) {
  if (host_launch) framework.host = sim::framework_host_issue(framework, *host_launch);
  return framework;
}

Result<std::optional<Bytes>> parse_memory_margin(const std::string& value) {
  if (value.empty()) return std::optional<Bytes>();
  if (value.find_first_not_of("0123456789. ") == std::string::npos && value != "0")
    return Status::invalid("--memory-margin: '" + value +
                           "' has no unit; write it with one, e.g. " + value + "GiB");
  SP_ASSIGN_OR_RETURN(const Bytes b, parse_bytes(value, "--memory-margin"));
  return std::optional<Bytes>(b);
}

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

Json moe_options_json(const models::ModelSpec& m) {
  if (!m.moe) return nullptr;
  return {
      {"imbalance", m.moe->capacity_imbalance},
      {"dispatcher", m.moe->dispatcher == models::MoeDispatcher::kDeepEp ? "deepep" : "alltoall"}};
}

Status apply_moe_dispatcher(models::ModelSpec& m, const std::string& value) {
  if (value.empty()) return Status::ok();
  return models::set_moe_dispatcher(m, value).with_context("--moe-dispatcher");
}

std::string partial_node_note(int64_t gpus, int gpus_per_node, const std::string& cluster,
                              bool from_option) {
  // A job inside one node (one GPU, four of eight) shares no node with other groups: nothing to
  // say (every one-GPU simulate used to warn about a --gpus it was never given).
  if (gpus_per_node <= 0 || gpus <= gpus_per_node || gpus % gpus_per_node == 0) return "";
  return (from_option ? "--gpus " : "the layout's ") + std::to_string(gpus) +
         (from_option ? "" : " GPUs") + " is not a multiple of " + cluster + "'s " +
         std::to_string(gpus_per_node) + " GPUs per node: the last node runs " +
         std::to_string(gpus % gpus_per_node) +
         " of them, and the parallel groups are placed on the nodes in order";
}

}  // namespace scaleplan::api
