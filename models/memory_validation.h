// Checking the memory model against published runs (validation records, see
// /work/shared/validation/README.md for the schema) — the library half of `scaleplan memory
// --validate FILE` and of the later `scaleplan validate`.
//
// For each usable record (measured.status "ok" with a peak, or "oom"; not "failed", not
// "incomplete"; framework matching the filter) it rebuilds the model from the record's config,
// resolves its layout on its GPU count, estimates the memory with the framework's conventions
// (framework_memory) and compares:
//  - allocated: the framework's measured quantity. nanotron's "Mem Alloc" is
//    torch.cuda.max_memory_allocated() of global rank 0 (first stage, first TP rank) since the
//    last torch.cuda.reset_peak_memory_stats(); nanotron's log_memory() makes that call right
//    after train_batch_iter in the first five steps and log_throughput() reads the peak at step 4
//    (src/nanotron/trainer.py training_step / train_step_logs, src/nanotron/logging/base.py), so
//    the window is the gradient sync + optimizer step: the stage-0 `step_peak`. Other frameworks:
//    the stage-0 allocated peak `total`.
//  - reserved: max_memory_reserved of rank 0 against the stage-0 `reserved` estimate (the reset
//    does not shrink what the caching allocator holds, so this is the peak of the whole run).
//  - out of memory: an "oom" row is called right when the layout does not fit (any stage); an
//    "ok" row is a false OOM call when the model says it does not fit.
// nanotron places pipeline blocks by cumulative compute cost (nanotron_chunk_layers), which the
// records' layout strings do not spell out; the validation applies that rule to nanotron rows.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"

namespace scaleplan::models {

struct MemoryRecordCheck {
  std::string id;
  std::string status;  // measured.status: "ok" or "oom"
  std::string layout;
  bool predicted_fits = false;
  double predicted_allocated_gib = 0;      // comparable with measured.peak_memory_gib
  double predicted_reserved_gib = 0;       // comparable with measured.peak_reserved_gib
  double predicted_peak_reserved_gib = 0;  // over all stages (what decides fits)
  std::optional<double> measured_allocated_gib;
  std::optional<double> measured_reserved_gib;
};

struct MemoryValidation {
  std::vector<MemoryRecordCheck> rows;
  int skipped = 0;  // failed / incomplete / other framework / unusable records
  std::vector<std::string> skip_reasons;  // "id: why" for records that could not be evaluated
  // |predicted − measured| / measured over rows with a measurement.
  int allocated_compared = 0;
  double allocated_median_error = 0, allocated_worst_error = 0;
  std::string allocated_worst_id;
  int reserved_compared = 0;
  double reserved_median_error = 0, reserved_worst_error = 0;
  std::string reserved_worst_id;
  int oom_rows = 0, oom_called_oom = 0;  // OOM rows and how many the model says do not fit
  int ok_rows = 0, ok_called_oom = 0;    // rows that ran and how many the model calls OOM
};

// Checks the fields of every record of `records` (a JSON array of objects) against the schema of
// shared/validation/README.md before anything reads them: `model` an object; `id` a string of at
// most kMaxRecordIdChars characters; `source`, `framework`, `cluster`, `layout`, `notes` strings;
// `gpus` and `seq_len` positive integers (within the bounds of layout.h and ModelSpec); `measured`
// an object whose `status` is "ok", "oom" or "failed" and whose metrics are numbers or null;
// `incomplete`, `no_profile` and `measured.timing_valid` true or false. The first violation is an
// invalid-input error naming the file, the record and the field: "runs.json: records[3]:
// measured: mfu: expected a number, got \"high\"". `validate` and `memory --validate` run it
// first, so that what follows may read the records without further checks.
inline constexpr size_t kMaxRecordIdChars = 256;
Status check_records(const Json& records, std::string_view file);

// GPU memory of a named cluster (the CLI passes hw::load_cluster; models/ may not depend on
// hw_profiles).
using GpuMemoryLookup = std::function<Result<Bytes>(const std::string& cluster)>;

// Validates every record of `records` (a JSON array) whose framework contains `framework_filter`
// (case-insensitive; empty: all frameworks the memory model knows).
Result<MemoryValidation> validate_memory(const Json& records, const GpuMemoryLookup& gpu_memory,
                                         std::string_view framework_filter);

// nanotron's pipeline split (src/nanotron/trainer.py _init_model): blocks [embedding, L decoder
// layers, final norm, LM head] with costs 0, 4·a·d·h + 3·f·h each, 0, V·h; block i goes to the
// current rank, which advances once the cumulative cost exceeds rank·total/pp. Layers per stage.
std::vector<int> nanotron_chunk_layers(const ModelSpec& m, int pp);

}  // namespace scaleplan::models
