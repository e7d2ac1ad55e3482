// Closest-name suggestions; contract in suggest.h.
#include "core/suggest.h"

#include <algorithm>
#include <cctype>

namespace scaleplan {
namespace {

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = prev[j - 1] + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool starts_with_ci(std::string_view s, std::string_view prefix) {
  if (prefix.size() > s.size()) return false;
  for (size_t i = 0; i < prefix.size(); ++i)
    if (lower(s[i]) != lower(prefix[i])) return false;
  return true;
}

}  // namespace

std::optional<std::string> closest_name(std::string_view typed,
                                        const std::vector<std::string>& candidates) {
  if (typed.empty()) return std::nullopt;
  const size_t limit = std::max<size_t>(1, std::min<size_t>(2, typed.size() / 3));
  std::optional<std::string> best;
  size_t best_d = limit + 1;
  for (const std::string& c : candidates) {
    if (c == typed) continue;
    size_t d = edit_distance(typed, c);
    if (d > limit && typed.size() >= 3 && starts_with_ci(c, typed)) d = limit;
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates) {
  auto c = closest_name(typed, candidates);
  return c ? " (did you mean '" + *c + "'?)" : "";
}

}  // namespace scaleplan
