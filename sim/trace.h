// Chrome Trace Event / Perfetto JSON of a simulated (or measured) Timeline.
//
// Layout (ecosystem.md §3): one process per simulated rank ("rank R · stage S"), one thread per
// stream ("compute", "tp comm", ...), both named and ordered with `M` metadata events
// (process_name, process_sort_index, thread_name, thread_sort_index). Every op with a nonzero
// duration is one complete (`X`) event; its args carry the phase, the op class (sim/op_class.h:
// gemm, attention_fwd, all_reduce, ...; what `compare` sums by), micro-batch, model chunk, and
// where they apply the shape, FLOPs, bytes and collective, and the op's id in the Program (`op`),
// which is the same in a predicted and a measured trace of one Program. Allocations are a `C`
// counter track of allocated bytes per rank. Every pipeline send has a flow arrow (`s`, `f` with
// `bp: e`) from its slice to the receive's, or to the first slice waiting for an instant receive.
// Times are microseconds printed exactly from integer picoseconds (six decimals), so that slices of
// one lane that touch in the simulation touch in the file and the same timeline gives the same
// bytes.
//
// Ops of one stream never overlap (timeline.h), so every lane nests as Perfetto requires.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/program.h"
#include "sim/timeline.h"

namespace scaleplan::sim {

struct TraceOptions {
  std::string title;  // written as otherData.title, e.g. the layout string
  // otherData.generator: "scaleplan simulate" (predicted) or "scaleplan run" (measured).
  std::string generator = "scaleplan simulate";
  // More otherData entries, in order (model, cluster, layout, seq, ...: what makes the trace
  // self-describing, so that a predicted and a measured trace can be matched). `raw` values are
  // written as they are (numbers, JSON), the others as strings.
  struct Entry {
    std::string key, value;
    bool raw = false;
  };
  std::vector<Entry> metadata;
  // Per simulated rank (the process ids), the memory model's allocated peak in bytes: written as
  // otherData.peak_memory_bytes when given, for `compare` to set beside a measured peak.
  std::vector<int64_t> peak_memory_bytes;
};

std::string chrome_trace(const Program& program, const Timeline& timeline,
                         const TraceOptions& options = {});

}  // namespace scaleplan::sim
