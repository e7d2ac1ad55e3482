// Strong unit types: bytes, FLOPs, bandwidths, rates, and simulated time.
//
// Every quantity carries its unit in its type, so that the only way to get a transfer time is
// `Bytes / BytesPerSecond -> Duration` and the only way to get a compute time is
// `Flops / FlopsPerSecond -> Duration`. Byte counts are exact integers (int64: up to 8 EiB);
// FLOP counts and rates are doubles (an iteration of a 405B model is ~1e22 FLOPs, beyond int64).
// Simulated time is an integer number of picosecond ticks (int64: ~106 days), so that the
// discrete-event engine is exact and deterministic: no accumulated floating-point drift, no ties
// broken by rounding. See SimGrid's chrono.hpp and abseil's time.h for why time deserves a type.
//
// Integer quantities saturate instead of wrapping: a sum or a scaled value beyond int64 stays at
// the largest (or smallest) value, which callers detect (sim::simulate refuses an iteration past
// the clock's range, kMaxSimulatedSeconds) rather than reading a wrapped, negative time.
//
// All types are trivially copyable values; all functions are pure and thread-safe.
#pragma once

#include <cmath>
#include <compare>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "core/status.h"

namespace scaleplan {

// A value of one unit (CRTP: arithmetic returns the derived type). Same-unit values add and
// compare; scaling by a plain number keeps the unit; the ratio of two same-unit values is a double.
template <typename Derived, typename Rep>
class Quantity {
 public:
  using rep = Rep;
  constexpr Quantity() = default;
  constexpr explicit Quantity(Rep v) : v_(v) {}
  constexpr Rep value() const { return v_; }

  friend constexpr auto operator<=>(const Quantity&, const Quantity&) = default;
  constexpr Derived operator+(Derived o) const { return Derived(add(v_, o.value())); }
  constexpr Derived operator-(Derived o) const { return Derived(sub(v_, o.value())); }
  constexpr Derived operator-() const { return Derived(sub(Rep{}, v_)); }
  constexpr Derived& operator+=(Derived o) {
    v_ = add(v_, o.value());
    return self();
  }
  constexpr Derived& operator-=(Derived o) {
    v_ = sub(v_, o.value());
    return self();
  }
  constexpr double operator/(Derived o) const {
    return static_cast<double>(v_) / static_cast<double>(o.value());
  }
  // Scaling by a number. For integer reps a floating factor rounds to the nearest unit.
  template <typename N>
  requires std::is_arithmetic_v<N>
  constexpr Derived operator*(N k) const { return Derived(scale(v_, k)); }
  template <typename N>
  requires std::is_arithmetic_v<N>
  constexpr Derived operator/(N k) const {
    if constexpr (std::is_integral_v<Rep> && std::is_integral_v<N>) {
      return Derived(v_ / static_cast<Rep>(k));
    } else {
      return Derived(scale(v_, 1.0 / static_cast<double>(k)));
    }
  }
  template <typename N>
  requires std::is_arithmetic_v<N>
  friend constexpr Derived operator*(N k, Derived q) { return q * k; }

 private:
  constexpr Derived& self() { return static_cast<Derived&>(*this); }
  static constexpr Rep add(Rep a, Rep b) {
    if constexpr (std::is_integral_v<Rep>) {
      Rep r{};
      if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kMax : kMin;
      return r;
    } else {
      return a + b;
    }
  }
  static constexpr Rep sub(Rep a, Rep b) {
    if constexpr (std::is_integral_v<Rep>) {
      Rep r{};
      if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kMax : kMin;
      return r;
    } else {
      return a - b;
    }
  }
  template <typename N>
  static constexpr Rep scale(Rep v, N k) {
    if constexpr (std::is_integral_v<Rep> && std::is_integral_v<N>) {
      Rep r{};
      if (__builtin_mul_overflow(v, static_cast<Rep>(k), &r))
        return (v < 0) != (static_cast<Rep>(k) < 0) ? kMin : kMax;
      return r;
    } else if constexpr (std::is_integral_v<Rep>) {
      return from_double(static_cast<double>(v) * static_cast<double>(k));
    } else {
      return v * static_cast<Rep>(k);
    }
  }

 public:
  static constexpr Rep kMax = std::numeric_limits<Rep>::max();
  static constexpr Rep kMin = std::numeric_limits<Rep>::lowest();
  // A double rounded to the nearest Rep, saturating at the range (NaN: the maximum).
  static constexpr Rep from_double(double x) {
    if constexpr (std::is_integral_v<Rep>) {
      if (!(x < 9.2e18)) return kMax;  // NaN and +inf too
      if (x < -9.2e18) return kMin;
      return static_cast<Rep>(std::llround(x));
    } else {
      return static_cast<Rep>(x);
    }
  }

 private:
  Rep v_{};
};

#define SP_QUANTITY_(Name, Rep)          \
  struct Name : Quantity<Name, Rep> {    \
    using Quantity<Name, Rep>::Quantity; \
  }
SP_QUANTITY_(Bytes, int64_t);
SP_QUANTITY_(Flops, double);
SP_QUANTITY_(BytesPerSecond, double);
SP_QUANTITY_(FlopsPerSecond, double);
#undef SP_QUANTITY_

constexpr Bytes operator""_B(unsigned long long v) { return Bytes(static_cast<int64_t>(v)); }
constexpr Bytes operator""_KiB(unsigned long long v) {
  return Bytes(static_cast<int64_t>(v) << 10);
}
constexpr Bytes operator""_MiB(unsigned long long v) {
  return Bytes(static_cast<int64_t>(v) << 20);
}
constexpr Bytes operator""_GiB(unsigned long long v) {
  return Bytes(static_cast<int64_t>(v) << 30);
}

// Simulated time span: integer picoseconds.
class Duration : public Quantity<Duration, int64_t> {
 public:
  static constexpr int64_t kTicksPerSecond = 1'000'000'000'000;  // 1 tick = 1 ps
  using Quantity<Duration, int64_t>::Quantity;
  static constexpr Duration ticks(int64_t t) { return Duration(t); }
  static constexpr Duration zero() { return ticks(0); }
  static constexpr Duration infinite() { return ticks(std::numeric_limits<int64_t>::max()); }
  // Saturates at ±infinite() beyond the clock's range (~106 days).
  static Duration seconds(double s) {
    return ticks(from_double(s * static_cast<double>(kTicksPerSecond)));
  }
  static Duration microseconds(double us) { return seconds(us * 1e-6); }
  static Duration nanoseconds(double ns) { return seconds(ns * 1e-9); }
  constexpr int64_t count() const { return value(); }
  constexpr double to_seconds() const {
    return static_cast<double>(value()) / static_cast<double>(kTicksPerSecond);
  }
  constexpr double to_microseconds() const { return to_seconds() * 1e6; }
};

// A point on the simulated clock: the Duration since the start of the iteration.
class Time {
 public:
  constexpr Time() = default;
  static constexpr Time zero() { return Time(); }
  static constexpr Time at(Duration since_start) {
    Time t;
    t.since_ = since_start;
    return t;
  }
  constexpr Duration since_start() const { return since_; }
  constexpr auto operator<=>(const Time&) const = default;
  constexpr Time operator+(Duration d) const { return at(since_ + d); }
  constexpr Time& operator+=(Duration d) {
    since_ += d;
    return *this;
  }
  constexpr Duration operator-(Time o) const { return since_ - o.since_; }
  constexpr double to_seconds() const { return since_.to_seconds(); }

 private:
  Duration since_;
};

inline Duration operator/(Bytes b, BytesPerSecond bw) {
  return Duration::seconds(static_cast<double>(b.value()) / bw.value());
}
inline Duration operator/(Flops f, FlopsPerSecond r) {
  return Duration::seconds(f.value() / r.value());
}
inline BytesPerSecond operator/(Bytes b, Duration d) {
  return BytesPerSecond(static_cast<double>(b.value()) / d.to_seconds());
}
inline FlopsPerSecond operator/(Flops f, Duration d) {
  return FlopsPerSecond(f.value() / d.to_seconds());
}
inline double to_gib(Bytes b) {
  return static_cast<double>(b.value()) / static_cast<double>((1_GiB).value());
}

// Parsing of unit strings, as written in profiles and on the command line. Each returns an
// invalid-input Status naming `what` (e.g. "gpu.memory") and the offending text.
//   bytes:      "80GiB", "80 GB", "512MiB", "4096" (plain bytes), "1.5TiB"; K/M/G/T/P with B (SI,
//               powers of 1000) or iB (powers of 1024). "8GB" is 8e9 bytes.
//   bandwidth:  "900GB/s", "400Gb/s" (bits), "25GiB/s", "3.35TB/s"
//   duration:   "2us", "1.5 ms", "800ns", "3s", "2µs"
//   flop rate:  "989TFLOP/s", "989 TFLOPS", "1.979PFLOP/s"
//
// Values outside what any cluster or model has are refused, naming the limit
// (docs/reliability.md, "Bounded work"): sizes above kMaxParsedBytes, bandwidths and FLOP rates
// outside [kMinParsedRate, kMaxParsedRate] (0 is allowed: "none"), durations above
// kMaxParsedSeconds. Beyond them the integer types would overflow, or times would.
inline constexpr int64_t kMaxParsedBytes = int64_t{1} << 60;  // 1 EiB
inline constexpr double kMinParsedRate = 0.1;      // 0.1 B/s; times beyond the clock saturate
inline constexpr double kMaxParsedRate = 1e21;     // 1 ZB/s, 1 ZFLOP/s
inline constexpr double kMaxParsedSeconds = 3600;  // one hour
Result<Bytes> parse_bytes(std::string_view text, std::string_view what);
Result<BytesPerSecond> parse_bandwidth(std::string_view text, std::string_view what);
Result<Duration> parse_duration(std::string_view text, std::string_view what);
Result<FlopsPerSecond> parse_flop_rate(std::string_view text, std::string_view what);

// Human formatting: "74.50 GiB", "900.0 GB/s", "1.234 ms", "989.0 TFLOP/s".
std::string format_bytes(Bytes b);
std::string format_bandwidth(BytesPerSecond bw);
std::string format_duration(Duration d);
std::string format_flop_rate(FlopsPerSecond r);
std::string format_count(double n);  // 8.03B, 46.7M, 1.2T

}  // namespace scaleplan
