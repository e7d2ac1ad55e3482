// Plan files (planner::parse_plan, what `plan --emit json` writes): any text gives a PlanFile or
// an invalid-input error naming the key.
#include "export/exporters.h"
#include "fuzz/fuzz_util.h"

SCALEPLAN_FUZZ_TARGET(plan_file) {
  using namespace scaleplan;
  auto p = planner::parse_plan(fuzz::as_text(data, size), "plan.json");
  fuzz::check_contract(p.status(), "parse_plan");
  return 0;
}
