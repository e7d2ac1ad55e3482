// Host attention: flash-style blocking over query rows (FlashAttention, Dao et al. 2022, without
// the on-chip tiling): for each block of 64 queries, scores against the visible keys, a row softmax
// whose log-sum-exp is saved, and P·V. The backward recomputes P from the saved log-sum-exp instead
// of storing the q×kv scores, as FlashAttention's backward does.
#include <Eigen/Core>
#include <cmath>
#include <limits>

#include "runtime/host/host_kernels.h"

namespace scaleplan::runtime::host {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;
constexpr int64_t kBlock = 64;

struct Dims {
  int64_t b, h, kvh, q, kv, d, dv, group, offset;  // offset: token index of query 0
  float scale;
  int64_t window;  // keys a query sees at most (sliding window; with a causal mask); 0: no limit
};

Result<Dims> check(const AttentionArgs& a, bool backward) {
  const AttentionShape& s = a.shape;
  Dims x{s.batch,
         s.heads,
         s.kv_heads,
         s.q_len,
         s.kv_len,
         s.head_dim,
         s.v_head_dim ? s.v_head_dim : s.head_dim,
         0,
         0,
         a.scale,
         s.causal ? std::max<int64_t>(s.window, 0) : 0};
  const std::string op = backward ? "attention_backward" : "attention_forward";
  if (x.b <= 0 || x.h <= 0 || x.kvh <= 0 || x.q <= 0 || x.kv <= 0 || x.d <= 0 || x.dv <= 0) {
    return Status::invalid(
        op + ": batch, heads, kv_heads, q_len, kv_len and head dims must be positive");
  }
  if (x.h % x.kvh != 0) {
    return Status::invalid(op + ": heads=" + std::to_string(x.h) +
                           " is not a multiple of kv_heads=" + std::to_string(x.kvh));
  }
  x.group = x.h / x.kvh;
  x.offset = x.kv - x.q;
  if (x.scale == 0.0f) x.scale = 1.0f / std::sqrt(static_cast<float>(x.d));
  SP_RETURN_IF_ERROR(check_buffer(a.q, x.b * x.h * x.q * x.d, op + ": q"));
  SP_RETURN_IF_ERROR(check_buffer(a.k, x.b * x.kvh * x.kv * x.d, op + ": k"));
  SP_RETURN_IF_ERROR(check_buffer(a.v, x.b * x.kvh * x.kv * x.dv, op + ": v"));
  SP_RETURN_IF_ERROR(check_buffer(a.o, x.b * x.h * x.q * x.dv, op + ": o"));
  SP_RETURN_IF_ERROR(check_buffer(a.lse, x.b * x.h * x.q, op + ": lse"));
  if (backward) {
    SP_RETURN_IF_ERROR(check_buffer(a.d_o, x.b * x.h * x.q * x.dv, op + ": d_o"));
    SP_RETURN_IF_ERROR(check_buffer(a.dq, x.b * x.h * x.q * x.d, op + ": dq"));
    SP_RETURN_IF_ERROR(check_buffer(a.dk, x.b * x.kvh * x.kv * x.d, op + ": dk"));
    SP_RETURN_IF_ERROR(check_buffer(a.dv, x.b * x.kvh * x.kv * x.dv, op + ": dv"));
  }
  return x;
}

const float* at(const Buffer& buf, int64_t index, int64_t rows, int64_t cols) {
  return static_cast<const float*>(buf.data) + index * rows * cols;
}
float* at_mut(const Buffer& buf, int64_t index, int64_t rows, int64_t cols) {
  return static_cast<float*>(buf.data) + index * rows * cols;
}

// Keys visible to query row i: [first_visible(i), visible(i)).
int64_t visible(const Dims& x, bool causal, int64_t i) {
  if (!causal) return x.kv;
  return std::clamp<int64_t>(x.offset + i + 1, 0, x.kv);
}
int64_t first_visible(const Dims& x, bool causal, int64_t i) {
  if (!causal || x.window <= 0) return 0;
  return std::max<int64_t>(visible(x, causal, i) - x.window, 0);
}

}  // namespace

Status attention_forward(const AttentionArgs& a) {
  SP_ASSIGN_OR_RETURN(const Dims x, check(a, false));
  const bool causal = a.shape.causal;
  RowMat s;
  for (int64_t bi = 0; bi < x.b; ++bi) {
    for (int64_t hi = 0; hi < x.h; ++hi) {
      const int64_t qh = bi * x.h + hi, kh = bi * x.kvh + hi / x.group;
      ConstMap q(at(a.q, qh, x.q, x.d), x.q, x.d);
      ConstMap k(at(a.k, kh, x.kv, x.d), x.kv, x.d);
      ConstMap v(at(a.v, kh, x.kv, x.dv), x.kv, x.dv);
      Map o(at_mut(a.o, qh, x.q, x.dv), x.q, x.dv);
      float* lse = at_mut(a.lse, qh, x.q, 1);
      for (int64_t i0 = 0; i0 < x.q; i0 += kBlock) {
        const int64_t rows = std::min(kBlock, x.q - i0);
        // The block's keys: from the first row's first visible key to the last row's last.
        const int64_t lo = first_visible(x, causal, i0);
        const int64_t keys = visible(x, causal, i0 + rows - 1) - lo;
        if (keys <= 0) {
          o.middleRows(i0, rows).setZero();
          for (int64_t r = 0; r < rows; ++r) lse[i0 + r] = -std::numeric_limits<float>::infinity();
          continue;
        }
        s.noalias() = x.scale * (q.middleRows(i0, rows) * k.middleRows(lo, keys).transpose());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t begin = first_visible(x, causal, i0 + r) - lo;
          const int64_t n = visible(x, causal, i0 + r) - lo - begin;
          if (n <= 0) {
            s.row(r).setZero();
            lse[i0 + r] = -std::numeric_limits<float>::infinity();
            continue;
          }
          auto seen = s.row(r).segment(begin, n);
          const float m = seen.maxCoeff();
          seen = (seen.array() - m).exp();
          s.row(r).head(begin).setZero();
          s.row(r).tail(keys - begin - n).setZero();
          const float l = seen.sum();
          s.row(r) /= l;
          lse[i0 + r] = m + std::log(l);
        }
        o.middleRows(i0, rows).noalias() = s * v.middleRows(lo, keys);
      }
    }
  }
  return Status::ok();
}

Status attention_backward(const AttentionArgs& a) {
  SP_ASSIGN_OR_RETURN(const Dims x, check(a, true));
  const bool causal = a.shape.causal;
  std::fill_n(static_cast<float*>(a.dk.data), x.b * x.kvh * x.kv * x.d, 0.0f);
  std::fill_n(static_cast<float*>(a.dv.data), x.b * x.kvh * x.kv * x.dv, 0.0f);
  RowMat p, dp;
  Eigen::VectorXf dsum;
  for (int64_t bi = 0; bi < x.b; ++bi) {
    for (int64_t hi = 0; hi < x.h; ++hi) {
      const int64_t qh = bi * x.h + hi, kh = bi * x.kvh + hi / x.group;
      ConstMap q(at(a.q, qh, x.q, x.d), x.q, x.d);
      ConstMap k(at(a.k, kh, x.kv, x.d), x.kv, x.d);
      ConstMap v(at(a.v, kh, x.kv, x.dv), x.kv, x.dv);
      ConstMap o(at(a.o, qh, x.q, x.dv), x.q, x.dv);
      ConstMap d_o(at(a.d_o, qh, x.q, x.dv), x.q, x.dv);
      const float* lse = at(a.lse, qh, x.q, 1);
      Map dq(at_mut(a.dq, qh, x.q, x.d), x.q, x.d);
      Map dk(at_mut(a.dk, kh, x.kv, x.d), x.kv, x.d);
      Map dv(at_mut(a.dv, kh, x.kv, x.dv), x.kv, x.dv);
      for (int64_t i0 = 0; i0 < x.q; i0 += kBlock) {
        const int64_t rows = std::min(kBlock, x.q - i0);
        const int64_t lo = first_visible(x, causal, i0);
        const int64_t keys = visible(x, causal, i0 + rows - 1) - lo;
        if (keys <= 0) {
          dq.middleRows(i0, rows).setZero();
          continue;
        }
        // P = exp(scale·Q·K^T - lse), recomputed; D_i = rowsum(dO ∘ O) (FlashAttention-2 eq. for
        // dS).
        p.noalias() = x.scale * (q.middleRows(i0, rows) * k.middleRows(lo, keys).transpose());
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t begin = first_visible(x, causal, i0 + r) - lo;
          const int64_t n = std::max<int64_t>(visible(x, causal, i0 + r) - lo - begin, 0);
          p.row(r).segment(begin, n) = (p.row(r).segment(begin, n).array() - lse[i0 + r]).exp();
          p.row(r).head(begin).setZero();
          p.row(r).tail(keys - begin - n).setZero();
        }
        dv.middleRows(lo, keys).noalias() += p.transpose() * d_o.middleRows(i0, rows);
        dp.noalias() = d_o.middleRows(i0, rows) * v.middleRows(lo, keys).transpose();
        dsum = (d_o.middleRows(i0, rows).array() * o.middleRows(i0, rows).array()).rowwise().sum();
        p.array() *= (dp.colwise() - dsum).array();  // p now holds dS
        dq.middleRows(i0, rows).noalias() = x.scale * (p * k.middleRows(lo, keys));
        dk.middleRows(lo, keys).noalias() += x.scale * (p.transpose() * q.middleRows(i0, rows));
      }
    }
  }
  return Status::ok();
}

}  // namespace scaleplan::runtime::host
