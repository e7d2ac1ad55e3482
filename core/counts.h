// Counts as people write them on a command line or in a layout string: "4096", "4k", "1.5k",
// "15T", "2e6".
//
// One function reads them all (the CLI's --seq, --gbs, --gpus, --train-tokens..., the layout's
// gbs), so that a suffix means the same wherever a count is taken. A suffix k, M, G or T scales by
// powers of 1024 for the counts that are powers of two by habit (sequence lengths "4k" = 4096,
// batch sizes, GPU counts: kBinary) and by powers of 1000 for budgets (tokens "15T" = 15·10^12,
// caps: kDecimal). The result must be a whole number; errors name `what` and the text. Pure and
// thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/status.h"

namespace scaleplan {

enum class CountSuffix {
  kBinary,   // k = 1024, M = 1024², G = 1024³, T = 1024⁴ (sequence lengths, batches, GPUs)
  kDecimal,  // k = 1e3, M = 1e6, G = 1e9, T = 1e12 (token budgets, caps)
};

// The largest count accepted (2^62): far above any real count, and its products with small
// factors stay within int64.
inline constexpr int64_t kMaxCount = int64_t{1} << 62;

// Reads a non-negative whole count: digits, an optional fraction or exponent, an optional suffix
// (k/K, M, G, T). "--seq: '4q' is not a count (digits with an optional k, M, G or T: 4k = 4096)".
Result<int64_t> parse_count(std::string_view text, std::string_view what,
                            CountSuffix suffix = CountSuffix::kBinary);

// What a suffix means for `suffix`, for help texts: "4k = 4096" or "15T = 15,000,000,000,000".
std::string count_example(CountSuffix suffix);

}  // namespace scaleplan
