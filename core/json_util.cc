#include "core/json_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <random>

namespace scaleplan {
namespace {

std::string where(std::string_view ctx, std::string_view key) {
  return std::string(ctx) + ": " + std::string(key);
}

// A double as text that reads back to the same value ("1e+30", "0.25").
std::string number_text(double x) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", x);
  return buf;
}

// Looks a key up; nullptr when missing or null.
const Json* find(const Json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A field of one JSON type: the fallback where it is missing (an error without one), an error
// naming what it expected where it holds another type.
template <typename T>
Result<T> typed_field(const Json& obj, std::string_view key, std::string_view ctx,
                      const std::optional<T>& fallback, bool (Json::*is_type)() const noexcept,
                      std::string_view expected) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (!(v->*is_type)()) {
    return Status::invalid(where(ctx, key) + ": expected " + std::string(expected) + ", got " +
                           json_brief(*v));
  }
  return v->get<T>();
}

// `base_unit` ("B", "B/s", "FLOP/s") turns a bare number into the unit string parse() reads.
template <typename T, typename Parse>
Result<T> unit_field(const Json& obj, std::string_view key, std::string_view ctx,
                     std::optional<T> fallback, Parse parse, const char* base_unit) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (v->is_number()) {
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0) {
      return Status::invalid(where(ctx, key) + ": must be non-negative, got " + json_brief(*v));
    }
    // A bare number goes through the same range checks as the unit string that says it.
    return parse(number_text(x) + base_unit, where(ctx, key));
  }
  if (!v->is_string())
    return Status::invalid(where(ctx, key) + ": expected a string with a unit, got " +
                           json_brief(*v));
  auto r = parse(v->get<std::string>(), where(ctx, key));
  if (!r) return r.status();
  return *r;
}

}  // namespace

std::string text_brief(std::string_view text) {
  constexpr size_t kKeep = 60;
  if (text.size() <= kKeep) return std::string(text);
  // Cut at a UTF-8 character boundary, never inside a multi-byte sequence.
  size_t cut = kKeep;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "... (" + std::to_string(text.size()) + " characters)";
}

std::string json_brief(const Json& value) {
  // Depth is bounded by parse_json, so dump() cannot recurse too deep; large values are cut.
  return text_brief(value.dump(-1, ' ', false, Json::error_handler_t::replace));
}

Result<std::string> read_text_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the fstat below refuses it anyway.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    return Status::not_found(text_brief(path) + ": cannot open file (" + std::strerror(err) + ")");
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid(text_brief(path) + ": not a regular file");
  }
  if (st.st_size > kMaxInputFileBytes) {
    ::close(fd);
    return Status::invalid(text_brief(path) + ": " + std::to_string(st.st_size) +
                           " bytes, more than the " + std::to_string(kMaxInputFileBytes >> 20) +
                           " MiB any input of scaleplan needs");
  }
  std::string out;
  out.reserve(static_cast<size_t>(st.st_size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::invalid(text_brief(path) + ": read failed (" + std::strerror(err) + ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > kMaxInputFileBytes) {
      ::close(fd);
      return Status::invalid(text_brief(path) + ": grows while being read");
    }
  }
  ::close(fd);
  return out;
}

namespace {

// The deepest nesting of arrays and objects in JSON text (outside strings), stopping early once
// past `limit`: nlohmann's parser, dump() and destructor recurse once per level.
int json_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

}  // namespace

Result<Json> parse_json(std::string_view text, std::string_view what) {
  if (json_depth(text, kMaxJsonDepth) > kMaxJsonDepth) {
    return Status::invalid(std::string(what) + ": malformed JSON: nested deeper than " +
                           std::to_string(kMaxJsonDepth) + " levels");
  }
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    // parse_error (syntax), out_of_range 406 (a number beyond a double: 1e309) and the rest.
    std::string msg = e.what();
    // nlohmann's message starts with "[json.exception.parse_error.101] "; keep the useful part.
    auto p = msg.find("] ");
    if (p != std::string::npos) msg = msg.substr(p + 2);
    return Status::invalid(std::string(what) + ": malformed JSON: " + text_brief(msg));
  }
}

Result<Json> read_json_file(const std::string& path) {
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_json(text, path);
}

namespace {

Status write_error(const std::string& path, const std::string& what, int err) {
  return Status::invalid(text_brief(path) + ": cannot write (" + what + ": " + std::strerror(err) +
                         ")");
}

// Writes all of `content` to `fd`, retrying short writes and interrupts.
bool write_all(int fd, std::string_view content) {
  while (!content.empty()) {
    const ssize_t n = ::write(fd, content.data(), content.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    content.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

Status write_file_atomic(const std::string& path, std::string_view content) {
  if (path.empty()) return Status::invalid("output file: empty path");
  // The target may be a regular file (replaced) or absent; anything else is refused, so that a
  // rename can never replace a device, a FIFO or a symbolic link (`--trace /dev/null` as root).
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    return Status::invalid(text_brief(path) + ": exists and is not a regular file (" +
                           (S_ISLNK(st.st_mode)   ? "a symbolic link"
                            : S_ISDIR(st.st_mode) ? "a directory"
                                                  : "a device, FIFO or socket") +
                           "); choose another output path");
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  // A hidden temporary name no one can guess or pre-create: O_EXCL fails on anything already
  // there (a planted file or symbolic link) instead of following it.
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof suffix, ".%d.%08x", static_cast<int>(::getpid()), rd());
    tmp = (slash == std::string::npos ? "" : path.substr(0, slash + 1)) + "." + base +
          ".scaleplan-tmp" + suffix;
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST)
      return write_error(path, "cannot create a file in " + dir, errno);
  }
  if (fd < 0) return write_error(path, "cannot create a temporary file", EEXIST);
  // fsync before the rename: after a crash the new name never points at unwritten data.
  if (!write_all(fd, content) || ::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    return write_error(path, "write failed", err);
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return write_error(path, "write failed", err);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return write_error(path, "cannot rename the temporary file into place", err);
  }
  // Sync the directory so that the rename itself survives a crash (best effort: some file
  // systems refuse fsync on a directory).
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
  return Status::ok();
}

bool json_has(const Json& obj, std::string_view key) { return find(obj, key) != nullptr; }

Result<int64_t> json_int(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<int64_t> fallback, bool positive, int64_t max) {
  const Json* v = find(obj, key);
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  int64_t out = 0;
  const std::string too_large = where(ctx, key) + ": " + json_brief(*v) +
                                " is too large (at most " + std::to_string(max) + ")";
  if (v->is_number_unsigned()) {
    if (v->get<uint64_t>() > static_cast<uint64_t>(max)) return Status::invalid(too_large);
    out = static_cast<int64_t>(v->get<uint64_t>());
  } else if (v->is_number_integer()) {
    out = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()) {
    const double x = v->get<double>();
    // Compare as doubles before converting: a double beyond int64 is undefined to convert.
    if (x > static_cast<double>(max)) return Status::invalid(too_large);
    if (x < -9.2e18)
      return Status::invalid(where(ctx, key) + ": must be positive, got " + json_brief(*v));
    out = static_cast<int64_t>(x);
  } else {
    return Status::invalid(where(ctx, key) + ": expected an integer, got " + json_brief(*v));
  }
  if (positive && out <= 0)
    return Status::invalid(where(ctx, key) + ": must be positive, got " + json_brief(*v));
  if (!positive && out < 0)
    return Status::invalid(where(ctx, key) + ": must not be negative, got " + json_brief(*v));
  if (out > max) return Status::invalid(too_large);
  return out;
}

Result<double> json_number(const Json& obj, std::string_view key, std::string_view ctx,
                           std::optional<double> fallback) {
  Result<double> x = typed_field<double>(obj, key, ctx, fallback, &Json::is_number, "a number");
  if (x.is_ok() && json_has(obj, key) && !std::isfinite(*x)) {
    return Status::invalid(where(ctx, key) + ": not finite, got " + json_brief(*find(obj, key)));
  }
  return x;
}

Result<bool> json_bool(const Json& obj, std::string_view key, std::string_view ctx,
                       std::optional<bool> fallback) {
  return typed_field<bool>(obj, key, ctx, fallback, &Json::is_boolean, "true or false");
}

Result<std::string> json_string(const Json& obj, std::string_view key, std::string_view ctx,
                                std::optional<std::string> fallback) {
  return typed_field<std::string>(obj, key, ctx, fallback, &Json::is_string, "a string");
}

Result<Bytes> json_bytes(const Json& obj, std::string_view key, std::string_view ctx,
                         std::optional<Bytes> fallback) {
  return unit_field<Bytes>(obj, key, ctx, fallback, parse_bytes, "B");
}
Result<BytesPerSecond> json_bandwidth(const Json& obj, std::string_view key, std::string_view ctx,
                                      std::optional<BytesPerSecond> fallback) {
  return unit_field<BytesPerSecond>(obj, key, ctx, fallback, parse_bandwidth, "B/s");
}
Result<Duration> json_duration(const Json& obj, std::string_view key, std::string_view ctx,
                               std::optional<Duration> fallback) {
  const Json* v = find(obj, key);
  if (v && v->is_number()) {
    double x = v->get<double>();
    if (!std::isfinite(x) || x < 0)
      return Status::invalid(where(ctx, key) + ": must be non-negative, got " + json_brief(*v));
    // A bare number of seconds goes through the range checks of a duration string.
    return parse_duration(number_text(x) + "s", where(ctx, key));
  }
  if (!v) {
    if (fallback) return *fallback;
    return Status::invalid(where(ctx, key) + ": missing");
  }
  if (!v->is_string())
    return Status::invalid(where(ctx, key) + ": expected a duration like \"2us\", got " +
                           json_brief(*v));
  return parse_duration(v->get<std::string>(), where(ctx, key));
}
Result<FlopsPerSecond> json_flop_rate(const Json& obj, std::string_view key, std::string_view ctx,
                                      std::optional<FlopsPerSecond> fallback) {
  return unit_field<FlopsPerSecond>(obj, key, ctx, fallback, parse_flop_rate, "FLOP/s");
}

}  // namespace scaleplan
