// Chunked<T>: a sequence kept in the parts it was produced in, in order: element i is the i-th
// over the parts. A search produces its candidates and their results part by part of the space on
// every worker (planner::SpaceWalk); joining millions of them into one array took about a second
// on one thread while the other cores waited (issue 45). Indexing finds the part by a binary
// search over the parts' first indices; for_each walks them in order without it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace scaleplan::planner {

template <class T>
class Chunked {
 public:
  // Appends `part` after the elements already held (an empty part adds nothing).
  void append(std::vector<T>&& part) {
    if (part.empty()) return;
    first_.push_back(size_);
    size_ += part.size();
    parts_.push_back(std::move(part));
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

  T& operator[](size_t i) {
    const auto [p, j] = locate(i);
    return parts_[p][j];
  }
  const T& operator[](size_t i) const {
    const auto [p, j] = locate(i);
    return parts_[p][j];
  }

  // f(i, element) for every element, in order.
  template <class F>
  void for_each(F&& f) {
    for (size_t p = 0; p < parts_.size(); ++p)
      for (size_t j = 0; j < parts_[p].size(); ++j) f(first_[p] + j, parts_[p][j]);
  }
  template <class F>
  void for_each(F&& f) const {
    for (size_t p = 0; p < parts_.size(); ++p)
      for (size_t j = 0; j < parts_[p].size(); ++j) f(first_[p] + j, parts_[p][j]);
  }

  // The elements in one array.
  std::vector<T> to_vector() const {
    std::vector<T> out;
    out.reserve(size_);
    for (const std::vector<T>& p : parts_) out.insert(out.end(), p.begin(), p.end());
    return out;
  }

 private:
  // The part holding element i, and its place there.
  std::pair<size_t, size_t> locate(size_t i) const {
    const size_t p =
        static_cast<size_t>(std::upper_bound(first_.begin(), first_.end(), i) - first_.begin()) - 1;
    return {p, i - first_[p]};
  }

  std::vector<std::vector<T>> parts_;
  std::vector<size_t> first_;  // the index of each part's first element
  size_t size_ = 0;
};

}  // namespace scaleplan::planner
