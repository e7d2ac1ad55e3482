// The keys of the layout string as one table (DESIGN.md, "Layout string"): parse_layout and
// format_layout (core/layout.h) read it, and so do layout_value and --fix
// (planner/search_space.h), so that a key is added in one place. Immutable; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/layout.h"
#include "core/status.h"

namespace scaleplan {

// One row per key of the layout string, in DESIGN.md's order: the one description of the keys
// that parse_layout, format_layout, layout_value and --fix (planner/search_space.h) read, so that
// a key is added in one place.
struct LayoutKey {
  std::string_view name;
  // Sets the key's field from its text; errors name the key and the value.
  Status (*parse)(Layout& layout, std::string_view value);
  // The key's value in a resolved layout, canonical: defaults applied ("" for an unset dp or
  // gbs; "none" for an unset pp_first or pp_last and for no recomputed modules).
  std::string (*value)(const Layout& layout);
  // The value as the layout holds it, as format_layout writes it; nullopt where format_layout
  // leaves the key out (unset; pp_embedding and pp_loss when off). Null: always written, as
  // `value`.
  std::optional<std::string> (*given)(const Layout& layout);
};
std::span<const LayoutKey> layout_key_table();
// The row of `name`, or nullptr for a key the layout string does not have.
const LayoutKey* find_layout_key(std::string_view name);
// LayoutKey::value of `key` ("" for unknown keys).
std::string layout_value(const Layout& layout, std::string_view key);
// LayoutKey::given of `key` (its value where the row has no `given`); nullopt for unknown keys.
std::optional<std::string> layout_given(const Layout& layout, std::string_view key);

}  // namespace scaleplan
