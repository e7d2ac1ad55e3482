// Host GEMM: Eigen's blocked, vectorized matrix product on row-major f32 maps.
#include <Eigen/Core>

#include "runtime/host/host_kernels.h"

namespace scaleplan::runtime::host {

Status check_buffer(const Buffer& b, int64_t count, std::string_view what, ElemType type) {
  if (b.data == nullptr && count > 0)
    return Status::invalid(std::string(what) + ": buffer missing");
  if (b.type != type) {
    return Status::invalid(std::string(what) + ": element type " + std::string(to_string(b.type)) +
                           ", expected " + std::string(to_string(type)) +
                           " (the host backend computes in f32)");
  }
  if (b.count < count) {
    return Status::invalid(std::string(what) + ": buffer holds " + std::to_string(b.count) +
                           " elements, needs " + std::to_string(count));
  }
  return Status::ok();
}

namespace {
using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;

template <typename A, typename B>
void product(const A& a, const B& b, float alpha, float beta, Map& c) {
  if (beta == 0.0f) {
    c.noalias() = alpha * (a * b);  // beta 0 must not read C (it may hold NaN garbage)
  } else {
    c = beta * c;
    c.noalias() += alpha * (a * b);
  }
}
}  // namespace

Status gemm(const GemmArgs& g) {
  const GemmShape& s = g.shape;
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) {
    return Status::invalid("gemm: m, n, k and batch must be positive, got m=" +
                           std::to_string(s.m) + " n=" + std::to_string(s.n) +
                           " k=" + std::to_string(s.k) + " batch=" + std::to_string(s.batch));
  }
  SP_RETURN_IF_ERROR(check_buffer(g.a, s.batch * s.m * s.k, "gemm: a"));
  SP_RETURN_IF_ERROR(check_buffer(g.b, s.batch * s.k * s.n, "gemm: b"));
  SP_RETURN_IF_ERROR(check_buffer(g.c, s.batch * s.m * s.n, "gemm: c"));
  for (int64_t i = 0; i < s.batch; ++i) {
    const float* pa = static_cast<const float*>(g.a.data) + i * s.m * s.k;
    const float* pb = static_cast<const float*>(g.b.data) + i * s.k * s.n;
    Map c(static_cast<float*>(g.c.data) + i * s.m * s.n, s.m, s.n);
    ConstMap a(pa, g.trans_a ? s.k : s.m, g.trans_a ? s.m : s.k);
    ConstMap b(pb, g.trans_b ? s.n : s.k, g.trans_b ? s.k : s.n);
    if (!g.trans_a && !g.trans_b) product(a, b, g.alpha, g.beta, c);
    if (!g.trans_a && g.trans_b) product(a, b.transpose(), g.alpha, g.beta, c);
    if (g.trans_a && !g.trans_b) product(a.transpose(), b, g.alpha, g.beta, c);
    if (g.trans_a && g.trans_b) product(a.transpose(), b.transpose(), g.alpha, g.beta, c);
  }
  return Status::ok();
}

}  // namespace scaleplan::runtime::host
