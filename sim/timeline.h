// sim::Timeline: when each op of a Program ran.
//
// Produced by the engine (predicted) or by the runtime (measured) for one Program; indexed by OpId.
// For every op, ready <= start <= end:
//   ready  when it reached the head of its stream with its dependencies done (for a collective:
//          its own arrival; for a receive: when it was posted),
//   start  when it began to work (a collective: when the last member arrived; a receive: when the
//          matching send's transfer began, or its own ready time if later),
//   end    when it finished; the next op of its stream cannot start before.
// Ops of one stream never overlap, so every stream is a properly nested lane in a trace.
#pragma once

#include <vector>

#include "core/units.h"
#include "sim/program.h"

namespace scaleplan::sim {

struct Timeline {
  std::vector<Time> ready;
  std::vector<Time> start;
  std::vector<Time> end;
  std::vector<Bytes> peak_memory;  // per simulated rank: static memory plus the allocations' peak
  Time makespan;                   // the last op's end: the iteration time
  uint64_t events = 0;             // events the engine processed (for benchmarks)
};

}  // namespace scaleplan::sim
