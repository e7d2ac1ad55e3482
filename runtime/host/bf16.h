// bfloat16 <-> float for the host backend: bf16 is the top half of an IEEE float; conversion to
// bf16 rounds to nearest even, as CUDA's __float2bfloat16 does.
#pragma once

#include <cstdint>
#include <cstring>

namespace scaleplan::runtime::host {

inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u && (bits & 0x7fffffu)) return 0x7fc0;  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace scaleplan::runtime::host
