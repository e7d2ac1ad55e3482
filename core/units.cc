#include "core/units.h"

#include <cctype>
#include <charconv>
#include <cstdio>
#include <string>

#include "core/json_util.h"

namespace scaleplan {
namespace {

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Splits "1.5 GiB" into (1.5, "GiB"). The number must be finite and non-negative.
Result<std::pair<double, std::string>> split_number(std::string_view text, std::string_view what) {
  const std::string s = trim(text);
  double v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr == s.data()) {
    return Status::invalid(std::string(what) + ": '" + text_brief(text) +
                           "' is not a number with a unit");
  }
  if (!std::isfinite(v) || v < 0) {
    return Status::invalid(std::string(what) + ": '" + text_brief(text) +
                           "' must be a non-negative finite number");
  }
  return std::make_pair(v, trim(std::string_view(ptr, s.data() + s.size() - ptr)));
}

// Multiplier of an SI or binary prefix at the start of `unit`; advances `rest` past it.
double prefix_multiplier(std::string_view unit, std::string_view* rest, bool* binary) {
  *binary = false;
  *rest = unit;
  if (unit.empty()) return 1;
  static constexpr struct {
    char c;
    double si;
    double bin;
  } kPrefixes[] = {{'K', 1e3, 1024.0},           {'k', 1e3, 1024.0},
                   {'M', 1e6, 1048576.0},        {'G', 1e9, 1073741824.0},
                   {'T', 1e12, 1099511627776.0}, {'P', 1e15, 1125899906842624.0}};
  for (const auto& p : kPrefixes) {
    if (unit[0] == p.c) {
      if (unit.size() > 1 && unit[1] == 'i') {
        *binary = true;
        *rest = unit.substr(2);
        return p.bin;
      }
      *rest = unit.substr(1);
      return p.si;
    }
  }
  return 1;
}

Status bad_unit(std::string_view what, std::string_view text, std::string_view expected) {
  return Status::invalid(std::string(what) + ": unknown unit in '" + text_brief(text) +
                         "' (expected " + std::string(expected) + ")");
}

Status out_of_range(std::string_view what, std::string_view text, std::string_view limit) {
  return Status::invalid(std::string(what) + ": '" + text_brief(text) + "' is " +
                         std::string(limit));
}

// A rate (bytes or FLOPs per second): 0, or within [kMinParsedRate, kMaxParsedRate].
Status check_rate(double v, std::string_view what, std::string_view text, const char* unit) {
  if (v == 0 || (v >= kMinParsedRate && v <= kMaxParsedRate)) return Status::ok();
  return out_of_range(what, text,
                      v < kMinParsedRate
                          ? std::string("below 0.1 ") + unit + ", the least a rate may be"
                          : std::string("above 1 Z") + unit + ", beyond any hardware");
}

std::string fmt_double(double v, int prec) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", prec, v);
  return buf;
}

}  // namespace

Result<Bytes> parse_bytes(std::string_view text, std::string_view what) {
  SP_ASSIGN_OR_RETURN(auto nu, split_number(text, what));
  auto [v, unit] = nu;
  std::string_view rest;
  bool binary;
  double mult = prefix_multiplier(unit, &rest, &binary);
  if (!(rest == "B" || (rest.empty() && unit.empty()))) {
    return bad_unit(what, text, "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB");
  }
  if (v * mult > static_cast<double>(kMaxParsedBytes))
    return out_of_range(what, text, "more than 1 EiB, beyond any memory or message");
  return Bytes(static_cast<int64_t>(std::llround(v * mult)));
}

Result<BytesPerSecond> parse_bandwidth(std::string_view text, std::string_view what) {
  SP_ASSIGN_OR_RETURN(auto nu, split_number(text, what));
  auto [v, unit] = nu;
  std::string_view rest;
  bool binary;
  double mult = prefix_multiplier(unit, &rest, &binary);
  double bytes_per_s;
  if (rest == "B/s" || rest == "Bps")
    bytes_per_s = v * mult;
  else if (rest == "b/s" || rest == "bps")
    bytes_per_s = v * mult / 8.0;
  else
    return bad_unit(what, text, "B/s or b/s with K/M/G/T prefixes, e.g. 900GB/s, 400Gb/s");
  SP_RETURN_IF_ERROR(check_rate(bytes_per_s, what, text, "B/s"));
  return BytesPerSecond(bytes_per_s);
}

Result<Duration> parse_duration(std::string_view text, std::string_view what) {
  SP_ASSIGN_OR_RETURN(auto nu, split_number(text, what));
  auto [v, unit] = nu;
  double scale;
  if (unit == "s")
    scale = 1;
  else if (unit == "ms")
    scale = 1e-3;
  else if (unit == "us" || unit == "µs")
    scale = 1e-6;
  else if (unit == "ns")
    scale = 1e-9;
  else if (unit == "ps")
    scale = 1e-12;
  else
    return bad_unit(what, text, "s, ms, us, ns");
  if (v * scale > kMaxParsedSeconds)
    return out_of_range(what, text, "longer than an hour, beyond any latency or kernel");
  return Duration::seconds(v * scale);
}

Result<FlopsPerSecond> parse_flop_rate(std::string_view text, std::string_view what) {
  SP_ASSIGN_OR_RETURN(auto nu, split_number(text, what));
  auto [v, unit] = nu;
  std::string_view rest;
  bool binary;
  double mult = prefix_multiplier(unit, &rest, &binary);
  if (!binary && (rest == "FLOP/s" || rest == "FLOPS" || rest == "flop/s")) {
    SP_RETURN_IF_ERROR(check_rate(v * mult, what, text, "FLOP/s"));
    return FlopsPerSecond(v * mult);
  }
  return bad_unit(what, text, "FLOP/s with K/M/G/T/P prefixes, e.g. 989TFLOP/s");
}

std::string format_bytes(Bytes b) {
  const double v = static_cast<double>(b.value());
  const double a = std::fabs(v);
  if (a >= 1099511627776.0) return fmt_double(v / 1099511627776.0, 2) + " TiB";
  if (a >= 1073741824.0) return fmt_double(v / 1073741824.0, 2) + " GiB";
  if (a >= 1048576.0) return fmt_double(v / 1048576.0, 2) + " MiB";
  if (a >= 1024.0) return fmt_double(v / 1024.0, 2) + " KiB";
  return fmt_double(v, 0) + " B";
}

std::string format_bandwidth(BytesPerSecond bw) {
  const double v = bw.value();
  if (v >= 1e12) return fmt_double(v / 1e12, 2) + " TB/s";
  if (v >= 1e9) return fmt_double(v / 1e9, 1) + " GB/s";
  if (v >= 1e6) return fmt_double(v / 1e6, 1) + " MB/s";
  return fmt_double(v, 0) + " B/s";
}

std::string format_duration(Duration d) {
  const double s = d.to_seconds();
  const double a = std::fabs(s);
  if (a >= 1) return fmt_double(s, 3) + " s";
  if (a >= 1e-3) return fmt_double(s * 1e3, 3) + " ms";
  if (a >= 1e-6) return fmt_double(s * 1e6, 3) + " us";
  return fmt_double(s * 1e9, 1) + " ns";
}

std::string format_flop_rate(FlopsPerSecond r) {
  const double v = r.value();
  if (v >= 1e15) return fmt_double(v / 1e15, 3) + " PFLOP/s";
  if (v >= 1e12) return fmt_double(v / 1e12, 1) + " TFLOP/s";
  return fmt_double(v / 1e9, 1) + " GFLOP/s";
}

std::string format_count(double n) {
  const double a = std::fabs(n);
  if (a >= 1e12) return fmt_double(n / 1e12, 2) + "T";
  if (a >= 1e9) return fmt_double(n / 1e9, 2) + "B";
  if (a >= 1e6) return fmt_double(n / 1e6, 2) + "M";
  if (a >= 1e3) return fmt_double(n / 1e3, 2) + "K";
  return fmt_double(n, 0);
}

}  // namespace scaleplan
