#include "cli/sim_json.h"

#include <nlohmann/json.hpp>
#include <string>

#include "planner/prediction.h"
#include "planner/robustness.h"
#include "planner/training_cost.h"
#include "sim/simulate.h"

namespace scaleplan::cli {

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

namespace {

Json breakdown_json(const planner::Breakdown& b) {
  Json comm = Json::object();
  for (int k = 0; k < kNumCommClasses; ++k) {
    comm[std::string(to_string(static_cast<CommClass>(k)))] = b.exposed[k].to_seconds();
  }
  return {{"compute_s", b.compute.to_seconds()},
          {"recompute_s", b.recompute.to_seconds()},
          {"bubble_s", b.bubble.to_seconds()},
          {"exposed_comm_s", comm},
          {"other_s", b.other.to_seconds()}};
}

}  // namespace

Json prediction_json(const planner::Prediction& p, const planner::MemoryVerdict& m,
                     const std::optional<planner::TrainingCost>& cost) {
  Json j = {{"iteration_s", p.iteration.to_seconds()},
            {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
            {"mfu", p.mfu},
            {"peak_memory_bytes", m.peak.value()},
            {"memory_capacity_bytes", m.capacity.value()},
            {"headroom_bytes", m.headroom().value()},
            {"breakdown", breakdown_json(p.breakdown)}};
  if (cost) {
    j["time_to_train_s"] = cost->seconds;
    j["days_to_train"] = cost->days;
    j["gpu_hours"] = cost->gpu_hours;
    if (cost->cost) j["cost"] = *cost->cost;
  }
  return j;
}

}  // namespace scaleplan::cli
