// JSON helpers shared by every loader (HF config.json, hardware profiles, plans, validation
// records).
//
// Each getter reads one key of an object and, on a missing or mistyped value, returns an
// invalid-input Status that names the context and the key: "llama.json: hidden_size: missing".
// Only nlohmann's forward declarations are included here, to keep this header light.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "core/status.h"
#include "core/units.h"

namespace scaleplan {

using Json = nlohmann::json;

// Limits on what the readers accept (docs/reliability.md): every input file scaleplan reads is a
// few megabytes at most (the largest, a validation file, is ~3 MB), and no schema nests deeper
// than a handful of levels. Deeper nesting would overflow the stack in recursive JSON code.
inline constexpr int64_t kMaxInputFileBytes = int64_t{256} << 20;  // 256 MiB
inline constexpr int kMaxJsonDepth = 128;

// Reads and parses a JSON file; errors name the path and the parse position.
Result<Json> read_json_file(const std::string& path);
// Parses JSON text; `what` names the source in errors. Text nested deeper than kMaxJsonDepth and
// numbers beyond the range of a double are invalid input.
Result<Json> parse_json(std::string_view text, std::string_view what);

// Writes `content` to `path` atomically: a new temporary file beside it (created exclusively, never
// through a symbolic link), flushed to disk, then renamed over `path`, and the directory synced, so
// that a crash or kill leaves either the old file or the new one, whole. A `path` that exists and
// is not a regular file (a device, a FIFO, a symbolic link, a directory) is refused. A failed write
// leaves no partial file behind.
Status write_file_atomic(const std::string& path, std::string_view content);
// Reads a regular file of at most kMaxInputFileBytes; a device, FIFO or directory is invalid input
// (reading /dev/zero or a FIFO would never end).
Result<std::string> read_text_file(const std::string& path);

// A JSON value as it may appear in an error message: its compact text, cut to about 60 characters
// ("\"aaaa…\" (100000 characters)") so that a message never echoes a whole input.
std::string json_brief(const Json& value);
// The same for a piece of text (a layout, a unit string, a command-line value).
std::string text_brief(std::string_view text);

// Getters. `ctx` prefixes errors ("file.json" or "file.json: gpu"). With a default, a missing key
// (or JSON null) gives the default; without one it is an error. Integers must be whole, positive
// where `positive` is set, and at most `max` (by default the largest `int`, so that no caller's
// narrowing to int can wrap around); each error quotes the value.
Result<int64_t> json_int(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<int64_t> fallback = std::nullopt, bool positive = true,
                         int64_t max = 2147483647);
Result<double> json_number(const Json& obj, std::string_view key, std::string_view ctx,
                           std::optional<double> fallback = std::nullopt);
Result<bool> json_bool(const Json& obj, std::string_view key, std::string_view ctx,
                       std::optional<bool> fallback = std::nullopt);
Result<std::string> json_string(const Json& obj, std::string_view key, std::string_view ctx,
                                std::optional<std::string> fallback = std::nullopt);
// Unit-string fields: a string with a unit ("900GB/s") or a bare number in the base unit.
Result<Bytes> json_bytes(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<Bytes> fallback = std::nullopt);
Result<BytesPerSecond> json_bandwidth(const Json& obj, std::string_view key, std::string_view ctx,
                                      std::optional<BytesPerSecond> fallback = std::nullopt);
Result<Duration> json_duration(const Json& obj, std::string_view key, std::string_view ctx,
                               std::optional<Duration> fallback = std::nullopt);
Result<FlopsPerSecond> json_flop_rate(const Json& obj, std::string_view key, std::string_view ctx,
                                      std::optional<FlopsPerSecond> fallback = std::nullopt);
bool json_has(const Json& obj, std::string_view key);

}  // namespace scaleplan
