// runtime::execute: a sim::Program run for real, on the host or the cuda backend, one process or
// many (DESIGN.md "Data flow": the simulator and the runtime consume the same Program).
//
// The Program must hold every rank of its layout (sim::BuildOptions::all_ranks) and every kernel
// (not merged). Each process runs the ranks it owns (runtime/launch.h: every rank as a thread of
// this process, or one rank per process under mpirun/srun) and executes each of its ops once per
// step through its Backend (runtime/exec_ops.h says how each payload becomes a backend call):
//  - streams and dependencies as the Program states them. A backend whose streams may be driven
//    concurrently (host) gets one thread per stream, each running its stream's ops in order once
//    their dependencies have ended, so that a rank's communication proceeds while its compute
//    runs; an asynchronous backend (cuda) gets every op enqueued in program order on its stream,
//    with an event wait for each dependency on another stream;
//  - communicators from the Program's groups (runtime/exec_plan.h), split once before the steps;
//  - `warmup` untimed steps, then `steps` timed ones, a world barrier before each. The first step
//    checks every collective and every transfer against its definition (exec_ops.h); the timed
//    steps do not check.
// Every op's start and end are recorded (a steady clock on host, CUDA events on cuda), relative
// to the rank's step start; world rank 0 gathers every rank's records through the backend's own
// collectives and assembles the measured Timeline of the median step in the Program's op ids
// (ready as recorded; a collective starts when its last member is ready, a receive when both it
// and its send are), so that it reads like the simulator's.
//
// Failures are errors, not hangs: a collective or a receive that waits longer than
// LaunchOptions::timeout for its peers ends the rank with a message naming the op, the rank and
// the group; a failing rank aborts the others (in process: the backend's abort; under MPI the
// process ends without finalizing, which takes the job down).
//
// Thread-safety: execute may be called from one thread at a time per process (it owns the
// launch).
#pragma once

#include <functional>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "runtime/launch.h"
#include "sim/program.h"
#include "sim/timeline.h"

namespace scaleplan::runtime {

struct ExecuteOptions {
  int warmup = 1;  // untimed steps (the first of all steps checks the collectives)
  int steps = 3;   // timed steps, >= 1
  // After the `warmup` steps (at least one), more untimed steps until this many seconds have
  // passed since the first began: a GPU under its power limit lowers its clock only after a
  // second or so of load (the H200's 8192^3 GEMMs of 2026-11-28: 693-700 TFLOP/s in the first
  // second, 669-683 after; docs/hw_profiles.md), so steps timed sooner could run faster than
  // training's steady state. Every rank runs the same count, the largest any rank's own clock
  // asks for. 0: none.
  double warmup_seconds = 0;
  bool check = true;
  // Called on the reporting process (world rank 0) after each step with the steps done and the
  // total; may be empty.
  std::function<void(int done, int total)> progress;
  // Fault injection, for tests of the failure path: this global rank stops before its first
  // communication of the first step and never arrives (-1: none).
  int stall_rank = -1;
};

// What one rank measured (world rank 0 holds every rank's).
struct RankMeasurement {
  int64_t global_rank = 0;
  int stage = 0;
  Bytes peak;           // the backend's high-water mark over the timed steps (memory_stats)
  Bytes static_memory;  // weights, gradients, optimizer states: RankInfo::static_memory
  Bytes activations;    // peak of the Program's live activation allocations
  Bytes workspace;      // operand regions and communication buffers of the executor
  int64_t checked = 0;  // collectives and receives checked on the first step
};

struct ExecutionResult {
  // Whether this process reports (holds world rank 0): under MPI the other processes get an
  // otherwise empty result.
  bool reporter = false;
  std::string backend, device;
  int processes = 1;
  std::vector<Duration> iterations;    // per timed step: the last op's end, over every rank
  int median_step = 0;                 // index into iterations of the median step
  int warmup_steps = 0;                // untimed steps run: ExecuteOptions::warmup and those its
                                       // warmup_seconds added
  sim::Timeline timeline;              // the median step, indexed by OpId
  std::vector<Duration> op_median;     // per op: its median duration (end - start) over the steps
  std::vector<uint32_t> runs;          // per op: times it ran, over all steps
  std::vector<RankMeasurement> ranks;  // per Program rank
};

Result<ExecutionResult> execute(const sim::Program& program, const LaunchOptions& launch,
                                const ExecuteOptions& options = {});

}  // namespace scaleplan::runtime
