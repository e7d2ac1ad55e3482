#include "api/sim_json.h"

#include <nlohmann/json.hpp>
#include <string>

#include "planner/robustness.h"
#include "sim/simulate.h"

namespace scaleplan::api {

Json stage_breakdown_json(const sim::StageResult& s) {
  const auto& b = s.breakdown;
  Json comm = Json::object();
  Json hidden = Json::object();
  for (int k = 0; k < kNumCommClasses; ++k) {
    const std::string name(to_string(static_cast<CommClass>(k)));
    comm[name] = b.exposed_comm[k].to_seconds();
    hidden[name] = b.overlapped_comm[k].to_seconds();
  }
  return {{"stage", s.stage},
          {"global_rank", s.global_rank},
          {"compute", b.compute.to_seconds()},
          {"recompute", b.recompute.to_seconds()},
          {"comm", comm},
          {"comm_overlapped", hidden},
          {"bubble", b.bubble.to_seconds()},
          {"idle", b.idle.to_seconds()},
          {"total", b.total.to_seconds()},
          {"peak_memory_bytes", s.peak_memory.value()}};
}

Json perturbation_json(const planner::Perturbation& p) {
  return {{"name", p.name},
          {"kernel_time", p.kernel_time},
          {"nvlink_bandwidth", p.nvlink_bandwidth},
          {"network_bandwidth", p.network_bandwidth},
          {"latency", p.latency}};
}

}  // namespace scaleplan::api
