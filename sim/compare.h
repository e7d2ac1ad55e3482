// sim::Comparison: a predicted and a measured timeline side by side.
//
// Both sides are RecordedTimelines (sim/recorded.h): the prediction is a `simulate --trace` file;
// the measurement a PyTorch profiler (Kineto) trace per rank, or a trace in scaleplan's own format
// (`run --trace`). Each side is summarised per rank and iteration and averaged: the iteration
// time, summed time and count by op class, exposed communication by class, and time by lane.
// When both sides are scaleplan traces the ops are also matched one to one by (global rank, lane,
// name, occurrence of that name in the lane); against a Kineto trace they are matched by
// structure (sim/op_match.h: per micro-batch, pass and layer, GEMMs by shape, other ops by kind).
// Pure functions of their inputs.
#pragma once

#include <array>
#include <string>
#include <utility>
#include <vector>

#include "core/units.h"
#include "sim/op_match.h"
#include "sim/recorded.h"

namespace scaleplan::sim {

struct SideSummary {
  TraceFormat format = TraceFormat::kScaleplan;
  std::string title, model, cluster;
  int ranks = 0;
  int64_t samples = 0;  // (rank, iteration) pairs averaged: iterations with GPU work
  Duration iteration;   // mean iteration span (wall) over the samples
  Duration gpu_span;    // mean first-kernel-to-last-kernel span
  Duration idle;        // mean GPU idle (IterationSummary::idle)
  std::array<Duration, kNumOpClasses> time{};           // mean per rank and iteration
  std::array<double, kNumOpClasses> count{};            // mean per rank and iteration
  std::array<Duration, kNumOpClasses> exposed{};        // mean per rank and iteration
  std::vector<std::pair<std::string, Duration>> lanes;  // by lane name, mean per sample
  // Per rank that records it (RecordedRank::peak_allocated >= 0): (global rank, allocated peak,
  // reserved peak or -1), in rank order.
  struct Memory {
    int64_t rank = 0, allocated = -1, reserved = -1;
  };
  std::vector<Memory> memory;
  // Memory-bound and optimizer time by kind (core/kernel_shapes.h MemOp), mean per sample: the
  // Program's kind of each op, and for Kineto the kind of the PyTorch op that launched each
  // kernel (RecordedSlice::mem_op; kernels without a recorded op are left out).
  std::array<Duration, kNumMemOps> mem_time{};
  std::array<double, kNumMemOps> mem_count{};
  // Per class, the operators with the most time, mean per sample, largest first: for Kineto the
  // launching PyTorch op with its input dtypes (the kernel's name where no op was recorded), for
  // scaleplan the op's name.
  struct Named {
    std::string name;
    Duration time;
    double count = 0;
  };
  static constexpr size_t kTopOps = 8;
  std::array<std::vector<Named>, kNumOpClasses> top;
  Duration exposed_total() const {
    Duration d;
    for (Duration x : exposed) d += x;
    return d;
  }
};

SideSummary summarize_side(const RecordedTimeline& t);

// One op matched on both sides.
struct OpPair {
  int64_t rank = 0;  // global rank
  std::string lane, name;
  int occurrence = 0;  // n-th op of this name on this lane, from 0
  Duration predicted, measured;
  // Where the two slices are: rank index and slice index in each timeline.
  size_t p_rank = 0, p_slice = 0, m_rank = 0, m_slice = 0;
};

struct OpMatching {
  bool possible = false;      // a match was made (one of the two kinds below)
  bool by_structure = false;  // a Kineto trace: `structured` holds the match, `pairs` is empty
  std::string note;           // why not, or what was matched
  // Two scaleplan traces: ops one to one. By structure: predicted ops in groups, measured ops in
  // groups (structured.matched_measured), and those left on each side.
  int64_t matched = 0, predicted_only = 0, measured_only = 0;
  std::vector<OpPair> pairs;    // every match, in predicted order
  std::vector<size_t> largest;  // indices into `pairs`: the ten largest absolute errors
  StructuredMatch structured;
};

struct Comparison {
  SideSummary predicted, measured;
  OpMatching ops;
};

Comparison compare(const RecordedTimeline& predicted, const RecordedTimeline& measured);

// One row of a comparison table: a name with both sides' time (zero where a side has none).
struct CompareRow {
  std::string name;
  Duration predicted, measured;
  double predicted_count = 0, measured_count = 0;
  bool both = true;  // the name exists on both sides (a stream of a foreign trace does not)
  // (predicted - measured) / measured; NaN when nothing was measured or the name is one side's.
  double error() const;
};
// GPU op classes present on either side (host issue time left out: it is not GPU work).
std::vector<CompareRow> class_rows(const Comparison& c);
// Memory-bound and optimizer time by MemOp kind present on either side.
std::vector<CompareRow> mem_op_rows(const Comparison& c);
// Exposed communication by class, for the communication classes present on either side.
std::vector<CompareRow> exposed_rows(const Comparison& c);
// Time by lane name: the predicted lanes, then measured lanes of other names.
std::vector<CompareRow> stream_rows(const Comparison& c);
double relative_error(Duration predicted, Duration measured);

// One Chrome / Perfetto trace with each rank's predicted and measured timeline as neighbouring
// processes ("predicted · rank R", "measured · rank R"), the measured side shifted so that its
// first iteration starts at 0, and a flow arrow joining each matched op pair.
std::string comparison_trace(const RecordedTimeline& predicted, const RecordedTimeline& measured,
                             const Comparison& comparison);

}  // namespace scaleplan::sim
