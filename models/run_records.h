// The records of a validation file (validation/README.md has the schema), checked before
// anything reads them: validate/validation.h parses them for `validate` and `memory --validate`.
#pragma once

#include <cstddef>
#include <string_view>

#include "core/json_util.h"
#include "core/status.h"

namespace scaleplan::models {

// Checks the fields of every record of `records` (a JSON array of objects) against the schema of
// validation/README.md before anything reads them: `model` an object; `id` a string of at
// most kMaxRecordIdChars characters; `source`, `framework`, `cluster`, `layout`, `notes` strings;
// `gpus` and `seq_len` positive integers (within the bounds of layout.h and ModelSpec); `measured`
// an object whose `status` is "ok", "oom" or "failed" and whose metrics are numbers or null;
// `incomplete`, `no_profile` and `measured.timing_valid` true or false. The first violation is an
// invalid-input error naming the file, the record and the field: "runs.json: records[3]:
// measured: mfu: expected a number, got \"high\"". `validate` and `memory --validate` run it
// first, so that what follows may read the records without further checks.
inline constexpr size_t kMaxRecordIdChars = 256;
Status check_records(const Json& records, std::string_view file);

}  // namespace scaleplan::models
