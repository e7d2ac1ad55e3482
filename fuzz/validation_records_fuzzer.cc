// Validation records (the schema of shared/validation/README.md, read by `validate` and `memory
// --validate`): any text gives records that are checked field by field (models::check_records) and
// evaluated by the memory validation, or an invalid-input error naming the record and the field.
#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "fuzz/fuzz_util.h"
#include "models/memory_validation.h"

SCALEPLAN_FUZZ_TARGET(validation_records) {
  using namespace scaleplan;
  auto j = parse_json(fuzz::as_text(data, size), "records.json");
  fuzz::check_contract(j.status(), "parse_json");
  if (!j) return 0;
  Status checked = models::check_records(*j, "records.json");
  fuzz::check_contract(checked, "check_records");
  if (!checked) return 0;
  auto gpu_memory = [](const std::string& cluster) -> Result<Bytes> {
    if (cluster == "dgx-h100") return 80_GiB;
    return Status::invalid("unknown cluster " + cluster);
  };
  auto v = models::validate_memory(*j, gpu_memory, "");
  fuzz::check_contract(v.status(), "validate_memory");
  return 0;
}
