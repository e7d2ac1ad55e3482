// `memory` as a library call: per-GPU memory of every pipeline stage of a layout, by category,
// and whether it fits (models/memory.h; docs/memory-model.md).
//
// api::memory validates the request (errors name the option) and returns a MemoryOutcome whose
// to_json() is exactly `scaleplan memory --json`; api::memory_validate compares the memory model
// with the measured runs of a validation record file (validate/validation.h, the rules `validate`
// uses too), its outcome's to_json() exactly `scaleplan memory --validate FILE --json`.
#pragma once

#include <cstdint>
#include <string>

#include "core/framework.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "core/status.h"
#include "models/memory.h"
#include "validate/validation.h"

namespace scaleplan::api {

struct MemoryRequest {
  std::string model;       // preset name or HF config.json path
  std::string cluster;     // its GPU's memory; or gpu_memory
  std::string gpu_memory;  // e.g. "80GiB", instead of a cluster
  std::string layout;      // layout string
  int64_t seq = -1;        // -1: not given
  int64_t gpus = 0;        // 0: from the layout (dp=1 when neither gives it)
  std::string framework = "megatron";
  std::string moe_imbalance;  // empty: balanced
  std::string margin = "0";   // memory kept free on purpose
};

struct MemoryOutcome {
  std::string model;  // its name
  Layout layout;      // resolved
  FrameworkId framework = FrameworkId::kMegatron;
  int64_t seq = 0;
  models::MemoryResult result;

  // Exactly what `scaleplan memory --json` prints.
  Json to_json() const;
};

Result<MemoryOutcome> memory(const MemoryRequest& request);

struct MemoryValidateRequest {
  std::string file;       // validation record file or bundled set (dev_runs, dev_runs_2026)
  std::string framework;  // only records whose framework contains this (e.g. nanotron); empty: all
};

struct MemoryValidateOutcome {
  MemoryValidateRequest request;
  planner::MemoryValidation validation;

  // Exactly what `scaleplan memory --validate FILE --json` prints.
  Json to_json() const;
};

// Records whose cluster profile does not load are skipped (validate_memory says why).
Result<MemoryValidateOutcome> memory_validate(const MemoryValidateRequest& request);

}  // namespace scaleplan::api
