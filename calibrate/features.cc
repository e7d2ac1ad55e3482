#include "calibrate/features.h"

namespace scaleplan::calibrate {

std::vector<double> gemm_features(const GemmShape& s, const TileParams& t) {
  const int64_t tile = t.tile > 0 ? t.tile : 1, units = t.units > 0 ? t.units : 1;
  const int64_t tiles = ((s.m + tile - 1) / tile) * ((s.n + tile - 1) / tile) * s.batch;
  const int64_t waves = (tiles + units - 1) / units;
  const double padded = 2.0 * static_cast<double>(s.k) * static_cast<double>(tile * tile) *
                        static_cast<double>(waves * units);
  return {1.0, s.flops().value(), padded, static_cast<double>(s.bytes().value())};
}

std::vector<double> attention_features(const AttentionShape& s, bool backward) {
  const Flops f = backward ? s.backward_flops() : s.forward_flops();
  return {1.0, f.value(), static_cast<double>(s.bytes().value()),
          static_cast<double>(s.batch * s.heads * s.q_len)};
}

std::vector<double> memory_features(const MemoryBoundShape& s) {
  return {1.0, static_cast<double>(s.bytes.value()), s.flops.value()};
}

std::vector<double> collective_features(Bytes size) {
  return {1.0, static_cast<double>(size.value())};
}

}  // namespace scaleplan::calibrate
