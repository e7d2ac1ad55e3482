// `validate` as a library call: re-simulate every record of a validation file (schema in
// shared/validation/README.md) and compare predicted with measured step time, throughput or MFU,
// peak memory and out-of-memory verdicts (the rules and statistics of validate/validation.h).
//
// api::validate validates the request (errors name the option) and returns a ValidateOutcome
// whose to_json() is exactly `scaleplan validate --json`. Records run in parallel; the outcome is
// in file order and does not depend on the thread count. The outcome's rows point into its
// records, so it moves but does not copy.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "core/json_util.h"
#include "core/status.h"
#include "validate/validation.h"

namespace scaleplan::api {

struct ValidateRequest {
  std::string file;  // validation records (JSON array)
  int threads = 0;   // 0: all cores
  // "NAME=PROFILE": simulate the records of cluster NAME on PROFILE (a bundled name or a path),
  // e.g. a calibrated profile of the cluster the records ran on.
  std::vector<std::string> profiles;
  // Which records to run: ids matching `match` (ECMAScript regex, searched anywhere in the id)
  // and, when given, belonging to one of the `groups` sets. Empty: every record.
  std::string match;
  std::vector<std::string> groups;
  // Simulate every record with these framework conventions (sim::framework) instead of the ones
  // its framework and publication date imply (validate/validation.h); empty: per record.
  std::string framework;
  // Also simulate each timed record on the five perturbed profiles of planner/robustness.h and
  // report whether its measurement lies within their range.
  bool how_sure = false;
  // Every record's host issue model at this cost per kernel or collective (its framework's glue
  // kernels and blocking receives kept); empty: each framework's own.
  std::string host_launch;
};

struct ValidateProgress {
  size_t done = 0, total = 0;
};

struct ValidateOutcome {
  ValidateOutcome() = default;
  ValidateOutcome(ValidateOutcome&&) = default;
  ValidateOutcome& operator=(ValidateOutcome&&) = default;
  ValidateOutcome(const ValidateOutcome&) = delete;
  ValidateOutcome& operator=(const ValidateOutcome&) = delete;

  ValidateRequest request;
  size_t file_records = 0;                           // in the file, before the selection
  std::vector<planner::RunRecord> records;           // the selected ones
  std::map<std::string, std::string> substitutions;  // NAME -> PROFILE
  std::optional<Duration> host_launch;
  std::vector<planner::RecordPrediction> rows;  // one per record, pointing into `records`
  planner::ValidationSummary summary;

  // Exactly what `scaleplan validate --json` prints.
  Json to_json() const;
};

// Progress: records simulated so far, every 50 ms while records remain.
Result<ValidateOutcome> validate(const ValidateRequest& request,
                                 const Callbacks<ValidateProgress>& callbacks = {});

// The metric a row is compared on ("step_time", ...; empty when none).
std::string metric_name(const planner::RecordPrediction& r);

}  // namespace scaleplan::api
