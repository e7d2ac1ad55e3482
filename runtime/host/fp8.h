// FP8 E4M3 <-> float for the host backend, as the OCP 8-bit Floating Point Specification (OFP8,
// rev. 1.0, 2023, §4.1 table 1) defines it: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits;
// normals (1 + m/8)·2^(e-7) for e in 1..15, subnormals (m/8)·2^-6, no infinities, S.1111.111 is
// NaN, so the largest finite value is S.1111.110 = 448. Conversion to e4m3 rounds to nearest
// even and saturates (§5: "saturating" conversion): values beyond 448, and infinities, become
// ±448, NaN becomes the canonical 0x7f whatever its sign. This is CUDA's __nv_cvt_float_to_fp8(x,
// __NV_SATFINITE, __NV_E4M3) (cuda_fp8.hpp), the cast Transformer Engine's fp8 kernels use
// (transformer_engine/common/utils.cuh, `OType(in * scale)` with OType fp8e4m3).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace scaleplan::runtime::host {

inline constexpr float kE4m3Max = 448.0f;

inline float e4m3_to_float(uint8_t v) {
  const int exponent = (v >> 3) & 0xf, mantissa = v & 7;
  const float sign = (v & 0x80) ? -1.0f : 1.0f;
  if (exponent == 0xf && mantissa == 7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // (m/8)·2^-6
  return sign * std::ldexp(static_cast<float>(8 + mantissa), exponent - 10);      // (8+m)·2^(e-10)
}

inline uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a == 0.0f) return sign;
  // The value's binade, 2^-6 at least (the subnormals share the smallest normal's quantum);
  // 3 mantissa bits make the quantum 2^(e-3). Dividing by a power of two is exact, and
  // nearbyint rounds half to even in the default rounding mode.
  int e = std::ilogb(a);
  if (e < -6) e = -6;
  const float q = std::nearbyint(std::ldexp(a, 3 - e));  // in [0, 16]
  if (std::isinf(a) || e > 8 || std::ldexp(q, e - 3) > kE4m3Max) return sign | 0x7e;
  if (q == 0) return sign;
  if (q < 8) return sign | static_cast<uint8_t>(q);  // subnormal (e = -6, exponent field 0)
  // q == 16: rounded up into the next binade, whose mantissa is 0.
  const int exponent = q == 16 ? e + 1 : e;
  const int mantissa = q == 16 ? 0 : static_cast<int>(q) - 8;
  return sign | static_cast<uint8_t>((exponent + 7) << 3 | mantissa);
}

// E8M0, the MX block scale (OCP Microscaling Formats v1.0, §5.4.1): an 8-bit biased exponent,
// 2^(e - 127), 0xff NaN, no sign, no zero.
inline float e8m0_to_float(uint8_t e) {
  return e == 0xff ? std::nanf("") : std::ldexp(1.0f, static_cast<int>(e) - 127);
}

// The E8M0 exponent of `v` >= 0 rounded up to the next power of two, saturating at 2^127 (0xfe):
// Transformer Engine's float_to_e8m0 (common/util/ptx_arch_spec.cuh:72-103 at d0067d0, the
// portable path of `cvt.rp.satfinite.ue8m0x2.f32`), which quantize_mxfp8 applies to a block's
// amax / 448 so that the block's largest value lands at or below e4m3's 448. Values at or below
// 2^-127 keep exponent 0, as TE's rule does.
inline uint8_t float_to_e8m0_up(float v) {
  if (std::isnan(v)) return 0xff;
  if (std::isinf(v)) return 0xfe;
  if (v == 0.0f) return 0;
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  uint32_t exponent = u >> 23;
  const uint32_t mantissa = u & 0x7fffff;
  if (mantissa > 0 && exponent != 0xfe && !(exponent == 0 && mantissa <= 0x400000)) ++exponent;
  return static_cast<uint8_t>(exponent);
}

}  // namespace scaleplan::runtime::host
