// The unfused attention core (calibrate/cost_model.h) as a sum of its kernels, each timed by the
// caller's `gemm` (a GemmShape) or `pass` (a memory-bound kernel moving the given bytes). Shared by
// the default KernelCostModel composition and the roofline's; included by those two only.
#pragma once

#include <cstdint>

#include "core/kernel_shapes.h"
#include "core/units.h"

namespace scaleplan::calibrate {

// `pass(bytes)` times one memory-bound kernel that moves `bytes` in total (its bytes per score
// element times the score count).
template <typename Gemm, typename Pass>
Duration unfused_core(const AttentionShape& a, bool backward, Gemm gemm, Pass pass) {
  const int64_t batch = a.batch * a.heads, sq = a.q_len, sk = a.kv_len, d = a.head_dim;
  const int64_t dv = a.v_head_dim > 0 ? a.v_head_dim : d;
  auto g = [&](int64_t m, int64_t n, int64_t k) {
    return gemm(GemmShape{m, n, k, batch, DType::kBf16});
  };
  const int64_t scores = batch * sq * sk;
  // Forward: QK^T writes the scores (2 B each), the softmax reads and writes them (4), dropout
  // reads them and writes the output and its 1-byte mask (5), PV reads them (2).
  if (!backward) return g(sq, sk, d) + pass(4 * scores) + pass(5 * scores) + g(sq, dv, sk);
  // Backward: dP = dO·V^T, dV = P^T·dO, the dropout backward (grad and mask in, grad out: 5), the
  // softmax backward (y and dy in, dx out: 6), dQ = dS·K, dK = dS^T·Q.
  return g(sq, sk, dv) + g(sk, dv, sq) + pass(5 * scores) + pass(6 * scores) + g(sq, d, sk) +
         g(sk, d, sq);
}

}  // namespace scaleplan::calibrate
