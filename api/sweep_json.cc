// JSON of sweeps over GPU counts; contract in sweep_json.h.
#include "api/sweep_json.h"

#include <nlohmann/json.hpp>

#include "api/plan.h"
#include "core/layout.h"
#include "planner/training_cost.h"

namespace scaleplan::api {

Json sweep_point_json(const planner::SweepPoint& p) {
  Json j = {{"gpus", p.gpus}, {"gbs", p.gbs}};
  if (p.result.plans.empty()) {
    j["layout"] = nullptr;
  } else {
    const planner::RankedPlan& best = p.result.plans.front();
    j["layout"] = format_layout(best.layout);
    j.update(prediction_json(best.prediction, best.memory, p.cost));
  }
  j["layout_change"] = p.layout_change;
  j["no_fit"] = p.result.no_fit;
  j["candidates"] = p.result.candidates;
  j["fit"] = p.result.fit;
  j["simulated"] = p.result.simulated;
  j["not_simulated"] = p.result.not_simulated;  // left by --max-simulations
  j["budget_note"] = p.result.budget_note;
  j["search_s"] = p.result.search_s;
  return j;
}

Json deadline_json(const planner::DeadlineResult& r, double deadline_s,
                   const planner::Budget& budget, int gpus_per_node) {
  Json tried = Json::array();
  for (const planner::SweepPoint& p : r.tried) {
    Json t = sweep_point_json(p);
    t["meets_deadline"] = p.cost.has_value() && p.cost->seconds <= deadline_s;
    tried.push_back(t);
  }
  Json j = {{"deadline_s", deadline_s},
            {"deadline_days", deadline_s / planner::kSecondsPerDay},
            {"train_tokens", budget.train_tokens},
            {"met", r.met},
            {"gpus", r.gpus},
            {"nodes", gpus_per_node > 0 ? r.gpus / gpus_per_node : 0},
            {"tried", tried}};
  if (const planner::SweepPoint* c = r.chosen(); c != nullptr && c->cost) {
    j["time_to_train_s"] = c->cost->seconds;
    j["days_to_train"] = c->cost->days;
    j["gpu_hours"] = c->cost->gpu_hours;
    if (c->cost->cost) j["cost"] = *c->cost->cost;
  }
  return j;
}

}  // namespace scaleplan::api
