// parallel_for (planner/parallel.h): every index once whatever the thread count, and its one
// exception policy. Suite names say "Thread" so that the TSan build runs them.
#include "planner/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

namespace scaleplan::planner {
namespace {

TEST(ParallelForThreads, EveryIndexRunsOnceOnAnyThreadCountAndChunk) {
  for (int threads : {1, 2, 7}) {
    for (int64_t chunk : {1, 3, 64}) {
      std::vector<int> hits(1000, 0);  // each slot written by the body of its index only
      ParallelOptions o;
      o.threads = threads;
      o.chunk = chunk;
      ASSERT_TRUE(parallel_for(1000, o, [&](int64_t i) { ++hits[static_cast<size_t>(i)]; }));
      for (int h : hits) EXPECT_EQ(h, 1) << threads << " threads, chunk " << chunk;
    }
  }
  // Nothing to do: no body runs, no error.
  EXPECT_TRUE(parallel_for(0, {}, [](int64_t) { FAIL(); }));
}

TEST(ParallelForThreads, FirstExceptionIsReturnedAndStopsTheOtherIndices) {
  // One worker taking one index at a time: index 10 throws, so 0..10 ran and no later index is
  // taken.
  std::atomic<int64_t> ran{0};
  ParallelOptions o;
  o.threads = 1;
  o.item = "record";
  const Status s = parallel_for(100, o, [&](int64_t i) {
    ++ran;
    if (i == 10) throw std::runtime_error("boom");
  });
  ASSERT_FALSE(s);
  EXPECT_EQ(s.code(), Status::Code::kInternal);
  EXPECT_NE(s.message().find("record 10: boom"), std::string::npos) << s.message();
  EXPECT_EQ(ran.load(), 11);
  // On several workers the error still comes back, on this thread, rather than aborting.
  o.threads = 4;
  const Status many = parallel_for(1000, o, [&](int64_t i) {
    if (i % 7 == 3) throw std::runtime_error("bad index");
  });
  ASSERT_FALSE(many);
  EXPECT_NE(many.message().find("bad index"), std::string::npos) << many.message();
}

TEST(ParallelForThreads, TickRunsOnTheCallersThreadAndItsExceptionIsRethrownAfterTheJoin) {
  std::atomic<bool> release{false};
  std::atomic<int64_t> ran{0};
  ParallelOptions o;
  o.threads = 2;
  o.interval = std::chrono::milliseconds(1);
  o.tick = [&] {
    release = true;
    throw std::runtime_error("interrupted");
  };
  // Each body waits for the first tick, so the tick surely runs while the workers do; after it
  // throws no further index is taken: the two in flight, and the few taken in the instant
  // between the tick's release and its throw, finish; never the 1000. Each body takes 5 ms
  // after the release, so that a caller thread descheduled between the release and the throw
  // on a loaded machine (the CI's two cores) cannot let the workers run 100 of them (500 ms).
  EXPECT_THROW((void)parallel_for(1000, o,
                                  [&](int64_t) {
                                    while (!release.load()) std::this_thread::yield();
                                    ++ran;
                                    std::this_thread::sleep_for(std::chrono::milliseconds(5));
                                  }),
               std::runtime_error);
  EXPECT_LT(ran.load(), 100);
}

}  // namespace
}  // namespace scaleplan::planner
