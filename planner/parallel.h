// parallel_for: the one way the library runs independent work on threads (the planner's search
// phases, its robustness check, sweep's points, validate's records).
//
// parallel_for(n, options, body) calls body(i) once for every i in [0, n) on up to
// `options.threads` worker threads, which take the indices in chunks of `options.chunk` in
// increasing order. The calling thread runs no body: it waits and calls `options.tick` every
// `options.interval` (and once more when the work is done), which is where progress is reported.
// Each body should write only the slot of its own index, so that the results do not depend on
// the thread count or the interleaving.
//
// Exception policy (one for every caller): the first exception a body throws (a bug,
// std::bad_alloc), or the first failure to start a thread, wins; no worker takes another index
// after it, the others finish the index they are on, all are joined, and parallel_for returns it
// as an internal error on the calling thread ("<options.item> <i>: <what>"). An exception never
// escapes a thread (which would abort the process). An exception `tick` throws is the caller's
// own: the workers stop taking indices, are joined, and it is rethrown. Errors a body expects (a
// Result) are the body's to record in its slot; a body that must stop the others does so by
// returning early on a flag it shares with them.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "core/status.h"

namespace scaleplan::planner {

struct ParallelOptions {
  int threads = 0;    // workers; 0: std::thread::hardware_concurrency(); at least 1, at most n
  int64_t chunk = 1;  // indices a worker takes at a time
  std::function<void()> tick;  // called on the calling thread while it waits
  std::chrono::milliseconds interval{100};
  std::string item = "item";  // what an index is, for the error message ("record")
};

// The worker count `threads` stands for: std::thread::hardware_concurrency() (at least 1) when 0.
int resolve_threads(int threads);

[[nodiscard]] Status parallel_for(int64_t n, const ParallelOptions& options,
                                  const std::function<void(int64_t)>& body);

}  // namespace scaleplan::planner
