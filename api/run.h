// `run` as a library call: execute a layout's Program for real (runtime/executor.h) on the host or
// the cuda backend, one process or one per rank under mpirun, beside what the simulator predicts
// for the same layout on the same profile: iteration time (median and spread), tokens/s, MFU, time
// per op class, and peak memory per rank and stage; optionally the measured timeline as a trace in
// simulate --trace's format.
//
// api::run validates the request (errors name the option) and returns a RunOutcome whose to_json()
// is exactly `scaleplan run --json` (self-describing: inputs, steps, and every op's predicted and
// measured times, so that a later comparison can match op for op). Under MPI only the process of
// world rank 0 reports: the others get an outcome with reporter false, and hear no callback.
#pragma once

#include <string>
#include <vector>

#include "api/callbacks.h"
#include "api/sim_inputs.h"
#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "models/memory.h"
#include "runtime/executor.h"
#include "sim/metrics.h"
#include "sim/simulate.h"

namespace scaleplan::api {

// The default time-based warm-up on a GPU: GH100 under its 700 W limit settles its SM clock
// within about a second of full load (docs/hw_profiles.md, "GH100 under its 700 W limit"); 5 s
// leaves room.
inline constexpr double kCudaWarmupSeconds = 5.0;

struct RunRequest {
  SimInputOptions inputs;  // --plan, or --model, --cluster, --seq, --layout, ...
  // host (CPU threads, or one process per rank under mpirun) or cuda (one rank per GPU, or per
  // process under mpirun).
  std::string backend = "host";
  std::string trace;  // write the measured timeline here; empty: none
  int steps = 5;      // timed steps
  int warmup = 1;     // untimed steps before them (the first checks every collective)
  // Then untimed steps until this many seconds have passed since the first began (the power
  // limit's clock settles: runtime::ExecuteOptions::warmup_seconds); < 0: the backend's
  // default, kCudaWarmupSeconds on cuda and 0 on host.
  double warmup_s = -1;
  double timeout_s = 120;  // a collective or receive waiting longer for its peers fails
  int inject_stall = -1;   // testing: this global rank never arrives at its first communication
};

// The execution's progress: kExecuting once, from the calling thread, when the Program starts;
// then kStep after each step (done of total, warm-up included), from the executor.
struct RunProgress {
  enum Phase { kExecuting, kStep } phase = kExecuting;
  int done = 0, total = 0;
};

struct RunOutcome {
  RunRequest request;
  bool reporter = false;  // this process reports; the rest is empty otherwise
  SimInputs inputs;
  sim::SimulationResult prediction;  // every rank, with its Program
  runtime::ExecutionResult execution;
  std::string calibrated_backend;  // which backend calibrated the profile; "" when none
  std::vector<sim::ClassTimes> classes;
  double measured_s = 0, min_s = 0, max_s = 0;  // the median, fastest and slowest timed step
  double tokens_per_s = 0, mfu = 0;             // measured
  int64_t checked = 0;                          // collectives and transfers checked

  // Exactly what `scaleplan run --json` prints.
  Json to_json() const;
};

// predicted / measured - 1 (0 when nothing was measured).
double run_error(double predicted, double measured);

// The memory model's terms of one stage that compare with what the executor allocated up front.
Bytes model_states(const models::StageMemory& s);

// Notes: the prediction's profile was not calibrated on this backend, a layout the memory model
// says does not fit (cuda), the size of the run as it starts.
Result<RunOutcome> run(const RunRequest& request, const Callbacks<RunProgress>& callbacks = {});

}  // namespace scaleplan::api
