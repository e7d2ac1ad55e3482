// The scale options of `sweep` and `plan` (planner/sweep.h, planner/training_cost.h): GPU count
// ranges ("256:4096", "256:4096:x4", "256:1024:+256", "256,384,512"), wall-clock deadlines ("60d",
// "1.5w") and GPU-hour prices. Any text gives a bounded, ascending, distinct list of positive
// counts, a positive finite number of seconds, a finite non-negative price, or an invalid-input
// error naming the option.
#include <cmath>

#include "core/layout.h"
#include "fuzz/fuzz_util.h"
#include "planner/sweep.h"
#include "planner/training_cost.h"

SCALEPLAN_FUZZ_TARGET(sweep_args) {
  using namespace scaleplan;
  const std::string_view text = fuzz::as_text(data, size);
  if (auto g = planner::parse_gpu_counts(text, "--gpus"); g) {
    if (g->empty() || static_cast<int64_t>(g->size()) > planner::kMaxSweepPoints)
      fuzz::broken("parse_gpu_counts", "empty or more points than the bound");
    for (size_t i = 0; i < g->size(); ++i) {
      if ((*g)[i] <= 0 || (*g)[i] > kMaxGpus)
        fuzz::broken("parse_gpu_counts", "count out of range");
      if (i > 0 && (*g)[i] <= (*g)[i - 1])
        fuzz::broken("parse_gpu_counts", "not ascending and distinct");
    }
  } else {
    fuzz::check_contract(g.status(), "parse_gpu_counts");
  }
  if (auto s = planner::parse_wall_time(text, "--deadline"); s) {
    if (!(*s > 0) || !std::isfinite(*s)) fuzz::broken("parse_wall_time", "not positive and finite");
    (void)planner::format_wall_time(*s);
  } else {
    fuzz::check_contract(s.status(), "parse_wall_time");
  }
  if (auto c = planner::check_budget_options(1e12, text); c) {
    if (*c && (!(**c >= 0) || !std::isfinite(**c)))
      fuzz::broken("check_budget_options", "negative or not finite price");
  } else {
    fuzz::check_contract(c.status(), "check_budget_options");
  }
  return 0;
}
