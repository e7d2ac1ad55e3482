#include "cli/sweep_output.h"

#include <fmt/core.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "api/sweep.h"
#include "core/layout.h"
#include "core/units.h"

namespace scaleplan::cli {

std::string format_amount(double v) {
  return std::fabs(v) < 1000 ? fmt::format("{:.3g}", v) : format_count(v);
}

std::vector<std::string> sweep_csv_columns(const planner::Budget& budget) {
  std::vector<std::string> c = {"gpus",
                                "gbs",
                                "layout",
                                "iteration_s",
                                "tokens_per_s_per_gpu",
                                "mfu",
                                "peak_memory_bytes",
                                "memory_capacity_bytes"};
  if (budget.train_tokens > 0) {
    for (const char* k : {"time_to_train_s", "days_to_train", "gpu_hours"}) c.push_back(k);
    if (budget.gpu_hour_cost) c.push_back("cost");
  }
  for (const char* k : {"layout_change", "no_fit"}) c.push_back(k);
  return c;
}

void print_sweep_table(std::FILE* out, const std::vector<planner::SweepPoint>& points,
                       const planner::Budget& budget) {
  const bool with_time = budget.train_tokens > 0;
  const bool with_cost = with_time && budget.gpu_hour_cost.has_value();
  std::string head = fmt::format("  {:>7} {:>6} {:>11} {:>12} {:>6} {:>9}", "GPUs", "gbs",
                                 "iteration s", "tokens/s/GPU", "MFU", "peak GiB");
  if (with_time) head += fmt::format(" {:>8} {:>10}", "days", "GPU-hours");
  if (with_cost) head += fmt::format(" {:>10}", "cost");
  fmt::print(out, "{}  best layout\n", head);
  std::vector<const planner::SweepPoint*> changes;
  for (const planner::SweepPoint& p : points) {
    const bool changed = !p.layout_change.empty();
    if (changed) changes.push_back(&p);
    if (p.result.plans.empty()) {
      fmt::print(out, "  {:>7} {:>6}  nothing fits: {}\n", p.gpus, p.gbs, p.result.no_fit);
      continue;
    }
    const planner::RankedPlan& b = p.result.plans.front();
    std::string row = fmt::format(
        "{} {:>7} {:>6} {:>11.3f} {:>12.0f} {:>5.1f}% {:>9.2f}", changed ? '*' : ' ', p.gpus, p.gbs,
        b.prediction.iteration.to_seconds(), b.prediction.tokens_per_s_per_gpu,
        100 * b.prediction.mfu, to_gib(b.memory.allocated));
    if (with_time && p.cost)
      row += fmt::format(" {:>8} {:>10}", format_amount(p.cost->days),
                         format_amount(p.cost->gpu_hours));
    if (with_cost && p.cost && p.cost->cost)
      row += fmt::format(" {:>10}", format_amount(*p.cost->cost));
    fmt::print(out, "{}  {}\n", row, format_layout(b.layout));
  }
  for (const planner::SweepPoint& p : points)
    if (!p.result.budget_note.empty())
      fmt::print(out, "  at {} GPUs: {}\n", p.gpus, p.result.budget_note);
  if (!changes.empty()) {
    fmt::print(out, "* the best layout changes (besides dp):");
    for (const planner::SweepPoint* p : changes)
      fmt::print(out, "{} at {} GPUs {}", p == changes.front() ? "" : ";", p->gpus,
                 p->layout_change);
    fmt::print(out, "\n");
  }
}

void print_deadline(std::FILE* out, const planner::DeadlineResult& r, double deadline_s,
                    const planner::Budget& budget, int gpus_per_node) {
  const planner::SweepPoint* c = r.chosen();
  const std::string goal = fmt::format("{} tokens within {}", format_count(budget.train_tokens),
                                       planner::format_wall_time(deadline_s));
  if (r.met && c != nullptr && c->cost) {
    fmt::print(out, "deadline: {} GPUs ({} nodes) train {}: {}, {} GPU-hours", r.gpus,
               r.gpus / gpus_per_node, goal, planner::format_wall_time(c->cost->seconds),
               format_amount(c->cost->gpu_hours));
    if (c->cost->cost) fmt::print(out, ", cost {}", format_amount(*c->cost->cost));
    fmt::print(out,
               "\n  the smallest count tried that meets it; one node fewer misses "
               "(counts tried, in whole nodes):\n");
  } else if (c != nullptr && c->cost) {
    fmt::print(out,
               "deadline: not met: {} takes at least {} at the counts tried, the fastest at {} "
               "GPUs; raise --max-gpus or the deadline (counts tried):\n",
               goal, planner::format_wall_time(c->cost->seconds), r.gpus);
  } else {
    fmt::print(out, "deadline: not met: nothing fits at any count tried (counts tried):\n");
  }
  print_sweep_table(out, r.tried, budget);
  fmt::print(out, "\n");
}

}  // namespace scaleplan::cli
