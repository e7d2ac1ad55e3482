// Breakdown of an iteration's time on each simulated rank.
//
// Every instant of a rank's iteration [0, makespan) falls in exactly one class, so the classes add
// up to the iteration time:
//   compute        the compute stream runs a kernel (stretched by interference if any);
//   exposed comm   the compute stream is idle while a transfer of this rank runs; when transfers of
//                  several kinds run at once the instant is split equally among them;
//   bubble         (pipelines only) the compute stream is idle with no transfer running, before the
//                  last forward/backward compute op of the whole pipeline ends: waiting for a
//                  neighbouring stage;
//   idle           everything else: waiting at the end for other stages, the optimizer of others.
// Communication hidden under compute is reported separately (overlapped comm), per kind.
#pragma once

#include <array>
#include <span>
#include <string>
#include <vector>

#include "core/units.h"
#include "sim/program.h"
#include "sim/timeline.h"

namespace scaleplan::sim {

struct RankBreakdown {
  Duration compute;
  std::array<Duration, kNumCommClasses> exposed_comm{};     // indexed by CommClass
  std::array<Duration, kNumCommClasses> overlapped_comm{};  // transfer time hidden under compute
  Duration bubble;
  Duration idle;
  Duration recompute;  // part of `compute` spent on recomputation
  Duration total;      // the makespan
  Duration exposed_comm_total() const {
    Duration d;
    for (Duration x : exposed_comm) d += x;
    return d;
  }
};

std::vector<RankBreakdown> breakdown(const Program& program, const Timeline& timeline);

// The class an op's time is compared under when a prediction meets a measurement of the same
// Program: sim::classify_op's class (sim/op_class.h: "gemm", "attention_fwd", "memory_bound",
// "optimizer", ...), a collective's with its group ("all_reduce tp", "reduce_scatter dp_cp"),
// "pp send", "pp recv"; empty for ops that do no work (pass starts, joins, allocations, host
// issue).
std::string op_class(const Program& program, OpId id);

// Per class: how many ops, and the sums of their predicted and measured durations over every rank.
struct ClassTimes {
  std::string name;
  int64_t ops = 0;
  Duration predicted, measured;
};
// `predicted` and `measured` hold a duration per op (end - start); classes in order of first op.
std::vector<ClassTimes> times_by_class(const Program& program, std::span<const Duration> predicted,
                                       std::span<const Duration> measured);

}  // namespace scaleplan::sim
