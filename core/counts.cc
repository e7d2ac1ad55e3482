// Count parsing; contract in counts.h.
#include "core/counts.h"

#include <charconv>
#include <cmath>

namespace scaleplan {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

Status not_a_count(std::string_view what, std::string_view text, CountSuffix suffix,
                   std::string_view why = "") {
  std::string shown(text.substr(0, 40));
  if (text.size() > 40) shown += "...";
  return Status::invalid(std::string(what) + ": '" + shown + "' " +
                         (why.empty() ? "is not a count (digits with an optional k, M, G or T: " +
                                            count_example(suffix) + ")"
                                      : std::string(why)));
}

}  // namespace

std::string count_example(CountSuffix suffix) {
  return suffix == CountSuffix::kBinary ? "4k = 4096" : "15T = 15,000,000,000,000";
}

Result<int64_t> parse_count(std::string_view raw, std::string_view what, CountSuffix suffix) {
  const std::string_view text = trim(raw);
  if (text.empty()) return not_a_count(what, raw, suffix);
  if (text.front() == '-') return not_a_count(what, raw, suffix, "must not be negative");
  // A plain integer is read exactly (no detour through a double).
  int64_t exact = 0;
  if (auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), exact);
      ec == std::errc() && p == text.data() + text.size()) {
    if (exact > kMaxCount) return not_a_count(what, raw, suffix, "is beyond any count");
    return exact;
  }
  double v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p == text.data() || !std::isfinite(v))
    return not_a_count(what, raw, suffix);
  std::string_view rest =
      trim(std::string_view(p, static_cast<size_t>(text.data() + text.size() - p)));
  double scale = 1;
  if (!rest.empty()) {
    const double k = suffix == CountSuffix::kBinary ? 1024.0 : 1000.0;
    if (rest == "k" || rest == "K") {
      scale = k;
    } else if (rest == "M") {
      scale = k * k;
    } else if (rest == "G") {
      scale = k * k * k;
    } else if (rest == "T") {
      scale = k * k * k * k;
    } else {
      return not_a_count(what, raw, suffix);
    }
  }
  const double n = v * scale;
  if (n > static_cast<double>(kMaxCount))
    return not_a_count(what, raw, suffix, "is beyond any count");
  const double whole = std::round(n);
  if (std::abs(n - whole) > 1e-9 * std::max(1.0, whole))
    return not_a_count(what, raw, suffix, "is not a whole number (" + std::to_string(n) + ")");
  return static_cast<int64_t>(whole);
}

}  // namespace scaleplan
