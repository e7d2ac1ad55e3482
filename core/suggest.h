// "Did you mean": the known name closest to what was typed, for errors that list names (model
// presets, cluster profiles, layout keys and values, subcommands). Pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace scaleplan {

// The candidate at the smallest edit distance (Levenshtein, case-insensitive) from `typed`, when
// that distance is small enough to be a slip: at most 2, and at most a third of the typed length
// (at least 1); ties go to the earlier candidate. A candidate that starts with `typed` (at least
// 3 characters: "llama3" for "llama3-8b") counts as a slip too.
std::optional<std::string> closest_name(std::string_view typed,
                                        const std::vector<std::string>& candidates);

// " (did you mean 'x'?)" or "".
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& candidates);

}  // namespace scaleplan
