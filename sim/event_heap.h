// sim::EventHeap: the engine's pending events (sim/engine.cc), a 4-ary min-heap on a 128-bit key.
//
// E is a small record with a member `key` (EventKey); the engine's keys are (time << 64 |
// sequence number) and so distinct, which makes the order of pops the ascending order of the keys
// whatever the heap's inner arrangement. Half as deep as a binary heap, a node's four children
// share a cache line or two; the engine pops about one event per op and holds tens to a few hundred
// at once. A value; not thread-safe.
#pragma once

#include <cstddef>
#include <vector>

namespace scaleplan::sim {

using EventKey = unsigned __int128;

template <class E>
class EventHeap {
 public:
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }
  const E& top() const { return v_.front(); }
  void reserve(size_t n) { v_.reserve(n); }
  void push(const E& e) {
    v_.push_back(e);
    rise(v_.size() - 1, e);
  }
  // The event of the smallest key, removed. Not on an empty heap.
  E pop() {
    const E top = v_.front();
    const E last = v_.back();
    v_.pop_back();
    const size_t n = v_.size();
    if (n == 0) return top;
    // Floyd's bottom-up pop: the hole at the root moves down to a leaf along the smaller child,
    // without comparing `last` on the way (a branch that goes either way, which cost more than the
    // comparisons), then `last` rises from there; it came from the bottom, so it rarely rises far.
    size_t i = 0;
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t m;
      if (first + 4 <= n) {  // all four children: two pairs, then their winners
        const size_t a = v_[first + 1].key < v_[first].key ? first + 1 : first;
        const size_t b = v_[first + 3].key < v_[first + 2].key ? first + 3 : first + 2;
        m = v_[b].key < v_[a].key ? b : a;
      } else {
        m = first;
        for (size_t c = first + 1; c < n; ++c) m = v_[c].key < v_[m].key ? c : m;
      }
      v_[i] = v_[m];
      i = m;
    }
    rise(i, last);
    return top;
  }

 private:
  // Places `e` at the hole `i` or above it: parents with larger keys move down into the hole.
  void rise(size_t i, const E& e) {
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (v_[parent].key <= e.key) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }

  std::vector<E> v_;
};

}  // namespace scaleplan::sim
