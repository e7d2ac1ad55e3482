// Validation records (the schema of validation/README.md, read by `validate` and `memory
// --validate`): any text gives records that are checked field by field (models::check_records,
// through planner::parse_run_records) and evaluated by the memory validation, or an invalid-input
// error naming the record and the field.
#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "fuzz/fuzz_util.h"
#include "hw_profiles/cluster.h"
#include "validate/validation.h"

SCALEPLAN_FUZZ_TARGET(validation_records) {
  using namespace scaleplan;
  static const planner::ClusterSet clusters = [] {
    auto c = hw::load_cluster("dgx-h100");
    if (!c) fuzz::broken("bundled dgx-h100", c.status().message());
    return planner::ClusterSet{{"dgx-h100", *c}};
  }();
  auto j = parse_json(fuzz::as_text(data, size), "records.json");
  fuzz::check_contract(j.status(), "parse_json");
  if (!j) return 0;
  auto records = planner::parse_run_records(*j, "records.json");
  fuzz::check_contract(records.status(), "parse_run_records");
  if (!records) return 0;
  (void)planner::validate_memory(*records, clusters, "");
  return 0;
}
