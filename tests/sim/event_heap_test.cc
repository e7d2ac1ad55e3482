#include "sim/event_heap.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace scaleplan::sim {
namespace {

struct Item {
  EventKey key;
  int id;
};

EventKey key_of(uint64_t time, uint64_t seq) { return (static_cast<EventKey>(time) << 64) | seq; }

TEST(EventHeap, PopsInAscendingKeyOrderWhilePushesInterleave) {
  // The engine's use: distinct keys (time, seq) with many equal times, pushes between pops, and
  // every key pushed after a pop at or after the popped time (the clock never goes back). Whatever
  // the heap's shape, the pops must come out as the keys sorted, which a reference of every key
  // pushed so far, sorted, gives directly. Sizes 1 to ~300 cover heaps with full and partial last
  // levels.
  std::mt19937_64 rng(45);
  EventHeap<Item> heap;
  std::vector<EventKey> pending;  // the reference: every key pushed and not yet popped
  uint64_t seq = 0, now = 0;
  int popped = 0;
  for (int step = 0; step < 200000; ++step) {
    const bool push = heap.empty() || (rng() % 100) < (heap.size() < 300 ? 52u : 40u);
    if (push) {
      const uint64_t time = now + rng() % 8;  // few distinct times: ties broken by seq
      const EventKey k = key_of(time, seq++);
      heap.push({k, static_cast<int>(seq)});
      pending.push_back(k);
      continue;
    }
    const auto min = std::min_element(pending.begin(), pending.end());
    const Item top = heap.top();
    const Item got = heap.pop();
    ASSERT_EQ(top.key, got.key);
    ASSERT_EQ(got.key, *min) << "pop " << popped;
    pending.erase(min);
    now = static_cast<uint64_t>(got.key >> 64);
    ++popped;
  }
  EXPECT_GT(popped, 90000);
  EXPECT_EQ(heap.size(), pending.size());
}

TEST(EventHeap, DrainsEveryPermutationOfSmallSetsInOrder) {
  // Every order of pushing 1..7 distinct keys pops them ascending (sizes below, at and above one
  // full level of four children).
  for (int n = 1; n <= 7; ++n) {
    std::vector<int> perm(n);
    for (int i = 0; i < n; ++i) perm[i] = i;
    do {
      EventHeap<Item> heap;
      for (int v : perm)
        heap.push({key_of(static_cast<uint64_t>(v / 2), static_cast<uint64_t>(v)), v});
      for (int want = 0; want < n; ++want) ASSERT_EQ(heap.pop().id, want) << "n " << n;
      EXPECT_TRUE(heap.empty());
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

}  // namespace
}  // namespace scaleplan::sim
