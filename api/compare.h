// `compare` as a library call: a predicted timeline (simulate --trace) beside a measured one (a
// PyTorch profiler trace per rank, or a trace in scaleplan's format): iteration time, time by op
// class and by stream, exposed communication, and, between two scaleplan traces, the op-for-op
// match (sim/compare.h).
//
// api::compare reads and compares the traces (errors name the option) and renders the side-by-side
// Perfetto trace when asked; write_files writes it (and the caller's HTML report) once everything
// is rendered, so that a failure leaves no file behind. CompareOutcome::to_json() is exactly
// `scaleplan compare --json`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/status.h"
#include "sim/compare.h"
#include "sim/recorded.h"

namespace scaleplan::api {

struct CompareRequest {
  std::string predicted;              // a simulate --trace file
  std::vector<std::string> measured;  // Kineto traces (one per rank) or directories, or a run trace
  std::string trace;  // write both timelines, rank beside rank, as one Perfetto trace here
  std::string html;   // the HTML report's path (rendered by the caller, written by write_files)
};

struct CompareOutcome {
  CompareRequest request;
  sim::RecordedTimeline predicted, measured;
  sim::Comparison comparison;
  // The rows of the comparison: by op class, memory-bound by kind, exposed comm, by stream.
  std::vector<sim::CompareRow> classes, mem_ops, exposed, lanes;
  std::string trace_content;  // with request.trace: the rendered comparison trace

  // Writes request.trace and, with request.html, `html` (atomically, the trace first).
  Status write_files(std::string_view html) const;

  // Exactly what `scaleplan compare --json` prints.
  Json to_json() const;
};

Result<CompareOutcome> compare(const CompareRequest& request);

}  // namespace scaleplan::api
