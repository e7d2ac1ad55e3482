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

// Reads and parses a JSON file; errors name the path and the parse position.
Result<Json> read_json_file(const std::string& path);
// Parses JSON text; `what` names the source in errors.
Result<Json> parse_json(std::string_view text, std::string_view what);

// Writes `content` to `path` atomically: a temporary file beside it, then rename. A failed write
// leaves no partial file behind.
Status write_file_atomic(const std::string& path, std::string_view content);
Result<std::string> read_text_file(const std::string& path);

// Getters. `ctx` prefixes errors ("file.json" or "file.json: gpu"). With a default, a missing key
// (or JSON null) gives the default; without one it is an error. Integers must be whole and positive
// where `positive` is set.
Result<int64_t> json_int(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<int64_t> fallback = std::nullopt, bool positive = true);
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
