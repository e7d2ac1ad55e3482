#include "core/json_util.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace scaleplan {
namespace {

std::string where(std::string_view ctx, std::string_view key) {
  return std::string(ctx) + ": " + std::string(key);
}

// Looks a key up; nullptr when missing or null.
const Json* find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

template <typename T, typename Parse>
Result<T> unit_field(const Json& obj, std::string_view key, std::string_view ctx,
                     std::optional<T> fallback, Parse parse, double base_scale) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (v->is_number()) {
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) {
      return Status::invalid(where(ctx, key) + ": must be non-negative, got " + v->dump());
    }
    return T(static_cast<typename T::rep>(x * base_scale));
  }
  if (!v->is_string())
    return Status::invalid(where(ctx, key) + ": expected a string with a unit, got " + v->dump());
  auto r = parse(v->get<std::string>(), where(ctx, key));
  if (!r) return r.status();
  return *r;
}

}  // namespace

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::not_found(path + ": cannot open file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<Json> parse_json(std::string_view text, std::string_view what) {
  try {
    return Json::parse(text);
  } catch (const Json::parse_error& e) {
    std::string msg = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] "; keep the useful part.
    auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    return Status::invalid(std::string(what) + ": malformed JSON: " + msg);
  }
}

Result<Json> read_json_file(const std::string& path) {
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_json(text, path);
}

Status write_file_atomic(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::invalid(path + ": cannot write (cannot create " + tmp + ")");
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return Status::internal(path + ": write failed");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status::invalid(path + ": cannot rename the temporary file into place");
  }
  return Status::ok();
}

bool json_has(const Json& obj, std::string_view key) { return find(obj, key) != nullptr; }

Result<int64_t> json_int(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<int64_t> fallback, bool positive) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  int64_t out = 0;
  if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
    out = static_cast<int64_t>(v->get<double>());
  } else {
    return Status::invalid(where(ctx, key) + ": expected an integer, got " + v->dump());
  }
  if (positive && out <= 0)
    return Status::invalid(where(ctx, key) + ": must be positive, got " + v->dump());
  if (!positive && out < 0)
    return Status::invalid(where(ctx, key) + ": must not be negative, got " + v->dump());
  return out;
}

Result<double> json_number(const Json& obj, std::string_view key, std::string_view ctx,
                           std::optional<double> fallback) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (!v->is_number())
    return Status::invalid(where(ctx, key) + ": expected a number, got " + v->dump());
  double x = v->get<double>();
  if (!std::isfinite(x)) return Status::invalid(where(ctx, key) + ": not finite");
  return x;
}

Result<bool> json_bool(const Json& obj, std::string_view key, std::string_view ctx,
                       std::optional<bool> fallback) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (!v->is_boolean())
    return Status::invalid(where(ctx, key) + ": expected true or false, got " + v->dump());
  return v->get<bool>();
}

Result<std::string> json_string(const Json& obj, std::string_view key, std::string_view ctx,
                                std::optional<std::string> fallback) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (!v->is_string())
    return Status::invalid(where(ctx, key) + ": expected a string, got " + v->dump());
  return v->get<std::string>();
}

Result<Bytes> json_bytes(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<Bytes> fallback) {
  return unit_field<Bytes>(obj, key, ctx, fallback, parse_bytes, 1.0);
}
Result<BytesPerSecond> json_bandwidth(const Json& obj, std::string_view key, std::string_view ctx,
                                      std::optional<BytesPerSecond> fallback) {
  return unit_field<BytesPerSecond>(obj, key, ctx, fallback, parse_bandwidth, 1.0);
}
Result<Duration> json_duration(const Json& obj, std::string_view key, std::string_view ctx,
                               std::optional<Duration> fallback) {
  const Json* v = find(obj, key);
  if (v && v->is_number()) {
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0)
      return Status::invalid(where(ctx, key) + ": must be non-negative");
    return Duration::seconds(x);
  }
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (!v->is_string())
    return Status::invalid(where(ctx, key) + ": expected a duration like \"2us\", got " +
                           v->dump());
  return parse_duration(v->get<std::string>(), where(ctx, key));
}
Result<FlopsPerSecond> json_flop_rate(const Json& obj, std::string_view key, std::string_view ctx,
                                      std::optional<FlopsPerSecond> fallback) {
  return unit_field<FlopsPerSecond>(obj, key, ctx, fallback, parse_flop_rate, 1.0);
}

}  // namespace scaleplan
