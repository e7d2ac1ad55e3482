// sim::RecordedTimeline: GPU work read back from trace files, as classified slices per rank and
// lane, with the iterations the trace marks.
//
// Two formats are read:
//   - a PyTorch profiler (Kineto) Chrome trace, one file per rank (`.json` or `.json.gz`): every
//     GPU kernel, memcpy and memset becomes a slice on its CUDA stream's lane, classified by
//     kernel name (sim/op_class.h); iterations are the `ProfilerStep#N` annotations of the CPU
//     thread, and a kernel belongs to the step during which it was launched (its `correlation`
//     joins it to the cudaLaunchKernel call), as Holistic Trace Analysis assigns them;
//   - a scaleplan trace (`simulate --trace`, and `run --trace`, which writes the same format):
//     one process per rank, one thread per stream, the op's class in its args; one iteration,
//     from 0 to the last op's end of any rank.
// Times are integer picoseconds since the rank's earliest recorded event (Kineto) or since the
// iteration's start (scaleplan). A RecordedTimeline is a value; reading is a pure function of the
// files.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "sim/op_class.h"

namespace scaleplan::sim {

enum class TraceFormat : uint8_t { kScaleplan, kKineto };
std::string_view to_string(TraceFormat f);

struct RecordedSlice {
  Time start, end;
  uint32_t name = 0;  // index into RecordedTimeline::names
  uint16_t lane = 0;  // index into RecordedRank::lanes
  OpClass cls = OpClass::kOtherCompute;
  int32_t iteration = -1;  // index into RecordedRank::iterations; -1: outside every iteration
  // The operator that launched it, an index into RecordedTimeline::names: for Kineto the
  // innermost PyTorch op (the `cpu_op` whose External id the kernel carries) with its first two
  // input dtypes when recorded ("aten::copy_ (float, c10::BFloat16)"); for scaleplan the op's
  // name. -1: not known.
  int32_t op = -1;
  // The memory-bound kind (core/kernel_shapes.h MemOp) of a memory-bound or optimizer slice: from
  // the launching op (classify_aten_op) for Kineto, from the trace's args.mem_op for scaleplan;
  // -1: none or not known.
  int8_t mem_op = -1;
  // The op this slice is part of: an index into RecordedRank::ops (Kineto: the launching PyTorch
  // op, shared by all its kernels; scaleplan: the slice's own op). -1: not known.
  int32_t unit = -1;
};

// Which part of the step an op belongs to, for the op-for-op match (sim/op_match.h).
enum class StepPass : uint8_t { kForward, kBackward, kOptimizer, kOther };
std::string_view to_string(StepPass p);

// One op as the op-for-op match reads it. Kineto: an innermost PyTorch op that launched kernels
// (its External id), its pass from the ops around it on its CPU thread (inside an
// `autograd::engine::evaluate_function:` node: backward; inside an `Optimizer.` annotation:
// optimizer), its GEMM dims and elementwise bytes from record_shapes' "Input Dims" and "Input
// type". scaleplan: the Program op of one slice, its pass from args.phase, its micro-batch from
// args.microbatch, its dims and bytes from args.shape.
struct RecordedOp {
  uint32_t name = 0;  // index into RecordedTimeline::names: "aten::mm (c10::BFloat16, ...)" or
                      // the Program op's name
  StepPass pass = StepPass::kOther;
  int32_t microbatch = -1;  // scaleplan only (a Kineto trace does not say; op_match.h finds it)
  Time launch;              // Kineto: the op's start on its CPU thread; scaleplan: its start
  // GEMM dims where known (aten::mm [m,k]x[k,n], addmm, bmm, _scaled_mm; "m= n= k= batch="):
  // m, n, k, batch; all 0 when unknown or not a GEMM.
  std::array<int64_t, 4> gemm{};
  int64_t bytes = -1;  // bytes moved where known (scaleplan "bytes="); -1 unknown
};

struct RecordedLane {
  std::string name;  // "stream 7" (Kineto), "compute", "tp comm" (scaleplan)
  int64_t id = 0;    // CUDA stream id, or scaleplan's StreamKind
};

struct RecordedIteration {
  std::string name;  // "ProfilerStep#551", or "iteration"
  Time start, end;   // the annotation's span on the CPU (Kineto), or [0, last end] (scaleplan)
};

struct RecordedRank {
  int64_t rank = 0;   // global rank: Kineto's distributedInfo.rank, or scaleplan's process name
  std::string label;  // "rank 0 · stage 0", or the file name
  std::vector<RecordedLane> lanes;
  std::vector<RecordedSlice> slices;  // sorted by (lane, start)
  std::vector<RecordedIteration> iterations;
  std::vector<RecordedOp> ops;  // what RecordedSlice::unit indexes
  // Peak device memory in bytes, -1 where the trace does not record it: a scaleplan trace's
  // otherData.peak_memory_bytes (the memory model's allocated peak); for Kineto the largest
  // "Total Allocated" / "Total Reserved" of the CUDA `[memory]` events, which PyTorch writes
  // with profile_memory=True.
  int64_t peak_allocated = -1;
  int64_t peak_reserved = -1;
};

struct RecordedTimeline {
  TraceFormat format = TraceFormat::kScaleplan;
  std::string title;                // otherData.title of a scaleplan trace, or the first file
  std::string model, cluster;       // otherData.model / .cluster of a scaleplan trace
  std::vector<std::string> names;   // slice names, interned
  std::vector<RecordedRank> ranks;  // sorted by global rank
};

// Reads traces: each path is a file, or a directory whose *.json and *.json.gz files are read in
// name order. All must be of one format. A scaleplan trace holds every rank in one file; Kineto
// traces are one rank per file. Errors name the file and the field.
Result<RecordedTimeline> load_recorded(const std::vector<std::string>& paths);

// A trace file's text, inflated when its content is gzip (by its magic bytes, whatever its name:
// zlib's gzread passes other files through). Errors name the file.
Result<std::string> read_trace_text(const std::string& path);

// The same from text already read (tests; `source` names it in errors).
Result<RecordedTimeline> parse_scaleplan_trace(std::string_view text, const std::string& source);
// Appends one rank of a Kineto trace to `into` (format kKineto); `fallback_rank` when the trace
// has no distributedInfo.rank.
Status parse_kineto_trace(std::string_view text, const std::string& source, int64_t fallback_rank,
                          RecordedTimeline& into);

// One iteration of one rank, summed.
struct IterationSummary {
  std::string name;
  Duration wall;      // the iteration's span (ProfilerStep annotation, or the simulated makespan)
  Duration gpu_span;  // first GPU slice's start to the last one's end
  std::array<Duration, kNumOpClasses> time{};  // summed slice durations by class
  std::array<int64_t, kNumOpClasses> count{};  // slices by class
  // Communication while no compute kernel runs, by class; where several communication classes
  // run at once the instant is split equally among them (as sim/metrics.h), so the classes add
  // up to the exposed total.
  std::array<Duration, kNumOpClasses> exposed{};
  Duration compute_busy;            // union of compute slices
  std::vector<Duration> lane_time;  // summed slice durations by lane
  Duration exposed_total() const {
    Duration d;
    for (Duration x : exposed) d += x;
    return d;
  }
  // GPU span with neither a compute nor a communication kernel running: waits for the CPU to
  // launch, for other ranks, pipeline bubbles, memcpys alone.
  Duration idle() const { return gpu_span - compute_busy - exposed_total(); }
};

std::vector<IterationSummary> summarize(const RecordedRank& rank);

}  // namespace scaleplan::sim
