// The names of an enum as one table, indexed by the enum's value, in the order the enum
// declares its values: `to_string` and the enum's parser read the same table, rather than a
// switch that spells each name and a parser that spells them again. Each table sits beside a
// static_assert that it has one name per value.
#pragma once

#include <cstddef>
#include <iterator>  // std::ssize, for the tables' static_asserts
#include <optional>
#include <string_view>

namespace scaleplan {

// The name of `value` in `names`, "?" where the table has no entry for it (a kCount value).
template <typename E, size_t N>
constexpr std::string_view name_in(const std::string_view (&names)[N], E value) {
  const auto i = static_cast<size_t>(value);
  return i < N ? names[i] : "?";
}

// The value named exactly `name` in `names`, nullopt where none is.
template <typename E, size_t N>
constexpr std::optional<E> value_in(const std::string_view (&names)[N], std::string_view name) {
  for (size_t i = 0; i < N; ++i) {
    if (names[i] == name) return static_cast<E>(i);
  }
  return std::nullopt;
}

}  // namespace scaleplan
