// Host memory-bound ops: plain loops over rows, f32, the formulas of runtime/backend.h's MemOp.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "runtime/host/bf16.h"
#include "runtime/host/fp8.h"
#include "runtime/host/host_kernels.h"

namespace scaleplan::runtime::host {
namespace {

const float* in(const Buffer& b) { return static_cast<const float*>(b.data); }
float* out(const Buffer& b) { return static_cast<float*>(b.data); }

// GELU, tanh approximation (Hendrycks & Gimpel 2016), as GPT-2 and llm.c use, and its derivative.
constexpr float kGeluC = 0.7978845608f;  // sqrt(2/pi)
float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + std::tanh(kGeluC * (x + 0.044715f * x * x * x)));
}
float gelu_tanh_grad(float x) {
  const float t = std::tanh(kGeluC * (x + 0.044715f * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kGeluC * (1.0f + 3 * 0.044715f * x * x);
}
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void softmax_row(const float* x, float* y, int64_t n) {
  const float m = *std::max_element(x, x + n);
  float l = 0;
  for (int64_t j = 0; j < n; ++j) l += (y[j] = std::exp(x[j] - m));
  for (int64_t j = 0; j < n; ++j) y[j] /= l;
}

}  // namespace

Status memory_op(const MemOpArgs& a) {
  const std::string op(to_string(a.op));
  if (a.rows <= 0 || a.cols <= 0) {
    return Status::invalid(op + ": rows and cols must be positive, got " + std::to_string(a.rows) +
                           " x " + std::to_string(a.cols));
  }
  if (has_act_operands(a.op) && a.storage != ElemType::kF32) {
    return Status::invalid(op + ": the host backend stores activations in f32, not " +
                           std::string(to_string(a.storage)));
  }
  const int64_t R = a.rows, C = a.cols, n = R * C;
  const MemOpParams& p = a.p;
  const bool bwd = a.backward && has_backward_form(a.op);
  switch (a.op) {
    case MemOp::kRmsNorm: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.w, C, op + ": w"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      if (bwd) SP_RETURN_IF_ERROR(check_buffer(a.y, n, op + ": y (dy)"));
      for (int64_t r = 0; r < R; ++r) {
        const float* x = in(a.x) + r * C;
        float ss = 0;
        for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
        const float inv = 1.0f / std::sqrt(ss / static_cast<float>(C) + p.eps);
        if (!bwd) {
          for (int64_t c = 0; c < C; ++c) out(a.out)[r * C + c] = x[c] * inv * in(a.w)[c];
          continue;
        }
        // y = x·inv·w with inv = (mean(x²) + eps)^-1/2: dx = inv·w·dy - x·inv³·mean(x·w·dy).
        const float* dy = in(a.y) + r * C;
        float dot = 0;
        for (int64_t c = 0; c < C; ++c) dot += x[c] * in(a.w)[c] * dy[c];
        const float k = inv * inv * inv * dot / static_cast<float>(C);
        for (int64_t c = 0; c < C; ++c) out(a.out)[r * C + c] = inv * in(a.w)[c] * dy[c] - x[c] * k;
      }
      return Status::ok();
    }
    case MemOp::kLayerNorm: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.w, C, op + ": w"));
      SP_RETURN_IF_ERROR(check_buffer(a.b, C, op + ": b"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      for (int64_t r = 0; r < R; ++r) {
        const float* x = in(a.x) + r * C;
        const float mean = std::accumulate(x, x + C, 0.0f) / static_cast<float>(C);
        float var = 0;
        for (int64_t c = 0; c < C; ++c) var += (x[c] - mean) * (x[c] - mean);
        const float inv = 1.0f / std::sqrt(var / static_cast<float>(C) + p.eps);
        for (int64_t c = 0; c < C; ++c) {
          out(a.out)[r * C + c] = (x[c] - mean) * inv * in(a.w)[c] + in(a.b)[c];
        }
      }
      return Status::ok();
    }
    case MemOp::kRope: {
      const int64_t hd = p.head_dim ? p.head_dim : C;
      const int64_t seq = p.seq_len ? p.seq_len : R;
      if (hd % 2 != 0 || C % hd != 0) {
        return Status::invalid(op + ": head_dim " + std::to_string(hd) +
                               " must be even and divide cols " + std::to_string(C));
      }
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      std::vector<float> inv_freq(hd / 2);
      for (int64_t i = 0; i < hd / 2; ++i) {
        inv_freq[i] = std::pow(p.theta, -2.0f * static_cast<float>(i) / static_cast<float>(hd));
      }
      for (int64_t r = 0; r < R; ++r) {
        const float pos = static_cast<float>(r % seq);
        for (int64_t c = 0; c < C; c += 2) {
          const float angle = pos * inv_freq[(c % hd) / 2];
          // The backward rotates the gradient back: by -angle.
          const float cs = std::cos(angle), sn = bwd ? -std::sin(angle) : std::sin(angle);
          const float x0 = in(a.x)[r * C + c], x1 = in(a.x)[r * C + c + 1];
          out(a.out)[r * C + c] = x0 * cs - x1 * sn;
          out(a.out)[r * C + c + 1] = x0 * sn + x1 * cs;
        }
      }
      return Status::ok();
    }
    case MemOp::kSwiglu: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, 2 * n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, bwd ? 2 * n : n, op + ": out"));
      if (bwd) SP_RETURN_IF_ERROR(check_buffer(a.y, n, op + ": y (dy)"));
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = 0; c < C; ++c) {
          const float g = in(a.x)[r * 2 * C + c], u = in(a.x)[r * 2 * C + C + c];
          const float sg = sigmoid(g);
          if (!bwd) {
            out(a.out)[r * C + c] = g * sg * u;
            continue;
          }
          // d(silu(g)·u)/dg = u·sg·(1 + g·(1 - sg)); d/du = silu(g).
          const float dy = in(a.y)[r * C + c];
          out(a.out)[r * 2 * C + c] = dy * u * sg * (1.0f + g * (1.0f - sg));
          out(a.out)[r * 2 * C + C + c] = dy * g * sg;
        }
      }
      return Status::ok();
    }
    case MemOp::kGelu: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      if (bwd) SP_RETURN_IF_ERROR(check_buffer(a.y, n, op + ": y (dy)"));
      for (int64_t i = 0; i < n; ++i) {
        out(a.out)[i] = bwd ? gelu_tanh_grad(in(a.x)[i]) * in(a.y)[i] : gelu_tanh(in(a.x)[i]);
      }
      return Status::ok();
    }
    case MemOp::kSoftmax: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      for (int64_t r = 0; r < R; ++r) softmax_row(in(a.x) + r * C, out(a.out) + r * C, C);
      return Status::ok();
    }
    case MemOp::kCrossEntropy: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.index, R, op + ": index", ElemType::kI32));
      SP_RETURN_IF_ERROR(check_buffer(a.out, R, op + ": out"));
      SP_RETURN_IF_ERROR(check_buffer(a.out2, n, op + ": out2"));
      const int32_t* labels = static_cast<const int32_t*>(a.index.data);
      for (int64_t r = 0; r < R; ++r) {
        if (labels[r] < 0 || labels[r] >= C) {
          return Status::invalid(op + ": label " + std::to_string(labels[r]) + " of row " +
                                 std::to_string(r) + " outside vocab " + std::to_string(C));
        }
        float* g = out(a.out2) + r * C;
        softmax_row(in(a.x) + r * C, g, C);
        out(a.out)[r] = -std::log(std::max(g[labels[r]], 1e-30f));
        g[labels[r]] -= 1.0f;
        for (int64_t c = 0; c < C; ++c) g[c] /= static_cast<float>(R);  // gradient of the mean
      }
      return Status::ok();
    }
    case MemOp::kEmbedding: {
      SP_RETURN_IF_ERROR(check_buffer(a.index, R, op + ": index", ElemType::kI32));
      SP_RETURN_IF_ERROR(check_buffer(a.w, p.vocab * C, op + ": w"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      const int32_t* ids = static_cast<const int32_t*>(a.index.data);
      for (int64_t r = 0; r < R; ++r) {
        if (ids[r] < 0 || ids[r] >= p.vocab) {
          return Status::invalid(op + ": token id " + std::to_string(ids[r]) + " outside vocab " +
                                 std::to_string(p.vocab));
        }
        std::copy_n(in(a.w) + ids[r] * C, C, out(a.out) + r * C);
      }
      return Status::ok();
    }
    case MemOp::kMoeRouting: {
      const int64_t k = p.top_k;
      if (k <= 0 || k > C) {
        return Status::invalid(op + ": top_k " + std::to_string(k) + " outside 1.." +
                               std::to_string(C));
      }
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, R * k, op + ": out"));
      SP_RETURN_IF_ERROR(check_buffer(a.out_index, R * k, op + ": out_index", ElemType::kI32));
      std::vector<float> prob(C);
      std::vector<int32_t> order(C);
      for (int64_t r = 0; r < R; ++r) {
        softmax_row(in(a.x) + r * C, prob.data(), C);
        std::iota(order.begin(), order.end(), 0);
        // Ties go to the lower expert id, so that every backend picks the same experts.
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t i, int32_t j) {
          return prob[i] > prob[j] || (prob[i] == prob[j] && i < j);
        });
        float total = 0;
        for (int64_t j = 0; j < k; ++j) total += prob[order[j]];
        for (int64_t j = 0; j < k; ++j) {
          out(a.out)[r * k + j] = prob[order[j]] / total;
          static_cast<int32_t*>(a.out_index.data)[r * k + j] = order[j];
        }
      }
      return Status::ok();
    }
    case MemOp::kAdamW: {
      if (p.step < 1) return Status::invalid(op + ": step must be >= 1");
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x (param)"));
      SP_RETURN_IF_ERROR(check_buffer(a.y, n, op + ": y (grad)"));
      SP_RETURN_IF_ERROR(check_buffer(a.w, n, op + ": w (m)"));
      SP_RETURN_IF_ERROR(check_buffer(a.b, n, op + ": b (v)"));
      // AdamW (Loshchilov & Hutter 2019): decoupled weight decay, bias-corrected moments.
      const float c1 = 1.0f - std::pow(p.beta1, static_cast<float>(p.step));
      const float c2 = 1.0f - std::pow(p.beta2, static_cast<float>(p.step));
      constexpr float kEps = 1e-8f;
      for (int64_t i = 0; i < n; ++i) {
        const float g = in(a.y)[i];
        float& m = out(a.w)[i];
        float& v = out(a.b)[i];
        m = p.beta1 * m + (1 - p.beta1) * g;
        v = p.beta2 * v + (1 - p.beta2) * g * g;
        float& w = out(a.x)[i];
        w -= p.lr * ((m / c1) / (std::sqrt(v / c2) + kEps) + p.weight_decay * w);
      }
      return Status::ok();
    }
    case MemOp::kAdd: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.y, n, op + ": y"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      for (int64_t i = 0; i < n; ++i) out(a.out)[i] = in(a.x)[i] + in(a.y)[i];
      return Status::ok();
    }
    case MemOp::kCopy: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      std::copy_n(in(a.x), n, out(a.out));
      return Status::ok();
    }
    case MemOp::kCast: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      if (bwd) {  // widening: exact
        SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
        std::copy_n(in(a.x), n, out(a.out));
        return Status::ok();
      }
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out", a.out.type));
      if (a.out.type == ElemType::kBf16) {
        auto* o = static_cast<uint16_t*>(a.out.data);
        for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16(in(a.x)[i]);
      } else if (a.out.type == ElemType::kF32) {
        for (int64_t i = 0; i < n; ++i) out(a.out)[i] = bf16_to_float(float_to_bf16(in(a.x)[i]));
      } else {
        return Status::invalid(op + ": out must be f32 or bf16");
      }
      return Status::ok();
    }
    case MemOp::kFill: {
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      std::fill_n(out(a.out), n, p.value);
      return Status::ok();
    }
    case MemOp::kL2Norm: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, R, op + ": out"));
      for (int64_t r = 0; r < R; ++r) {
        const float* x = in(a.x) + r * C;
        float ss = 0;
        for (int64_t c = 0; c < C; ++c) ss += x[c] * x[c];
        out(a.out)[r] = ss;
      }
      return Status::ok();
    }
    case MemOp::kElementwise: {
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out"));
      for (int64_t i = 0; i < n; ++i) out(a.out)[i] = p.scale * in(a.x)[i];
      return Status::ok();
    }
    case MemOp::kFp8CastTranspose: {
      // The oracle of runtime/cuda/fp8_cast.cu: out[r, c] = out2[c, r] = e4m3(x[r, c] · scale),
      // amax = max(amax, |x|) over the unscaled x (Transformer Engine's cast_transpose.cu:163-165).
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.w, 1, op + ": w (scale)"));
      SP_RETURN_IF_ERROR(check_buffer(a.b, 1, op + ": b (amax)"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out", ElemType::kFp8E4m3));
      SP_RETURN_IF_ERROR(check_buffer(a.out2, n, op + ": out2 (transpose)", ElemType::kFp8E4m3));
      const float scale = in(a.w)[0];
      float amax = in(a.b)[0];
      auto* o = static_cast<uint8_t*>(a.out.data);
      auto* t = static_cast<uint8_t*>(a.out2.data);
      for (int64_t r = 0; r < R; ++r) {
        for (int64_t c = 0; c < C; ++c) {
          const float x = in(a.x)[r * C + c];
          amax = std::fmax(amax, std::fabs(x));
          o[r * C + c] = t[c * R + r] = float_to_e4m3(x * scale);
        }
      }
      out(a.b)[0] = amax;
      return Status::ok();
    }
    case MemOp::kFp8Cast: {
      // kFp8CastTranspose without the transpose (Transformer Engine's Float8Quantizer and
      // Float8CurrentScalingQuantizer on Blackwell: quantizer.cpp:375, with_transpose false).
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.w, 1, op + ": w (scale)"));
      SP_RETURN_IF_ERROR(check_buffer(a.b, 1, op + ": b (amax)"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out", ElemType::kFp8E4m3));
      const float scale = in(a.w)[0];
      float amax = in(a.b)[0];
      auto* o = static_cast<uint8_t*>(a.out.data);
      for (int64_t i = 0; i < n; ++i) {
        amax = std::fmax(amax, std::fabs(in(a.x)[i]));
        o[i] = float_to_e4m3(in(a.x)[i] * scale);
      }
      out(a.b)[0] = amax;
      return Status::ok();
    }
    case MemOp::kAmax: {
      // Current scaling's amax pass (nvte_compute_amax_with_config, quantizer.cpp:1009-1012):
      // the amax is overwritten, not accumulated.
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, 1, op + ": out (amax)"));
      float amax = 0;
      for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(in(a.x)[i]));
      out(a.out)[0] = amax;
      return Status::ok();
    }
    case MemOp::kMxfp8Quantize: {
      const int64_t B = 32, row_blocks = (C + B - 1) / B, col_blocks = (R + B - 1) / B;
      SP_RETURN_IF_ERROR(check_buffer(a.x, n, op + ": x"));
      SP_RETURN_IF_ERROR(check_buffer(a.out, n, op + ": out (row-wise)", ElemType::kFp8E4m3));
      SP_RETURN_IF_ERROR(check_buffer(a.out2, n, op + ": out2 (column-wise)", ElemType::kFp8E4m3));
      SP_RETURN_IF_ERROR(
          check_buffer(a.w, R * row_blocks, op + ": w (row scales)", ElemType::kE8m0));
      SP_RETURN_IF_ERROR(
          check_buffer(a.b, col_blocks * C, op + ": b (column scales)", ElemType::kE8m0));
      // One block of `len` elements `stride` apart: its E8M0 scale, then each element divided by
      // it (an exact power of two) and rounded to e4m3.
      auto block = [&](int64_t first, int64_t stride, int64_t len, uint8_t* q, uint8_t* e) {
        float amax = 0;
        for (int64_t k = 0; k < len; ++k)
          amax = std::fmax(amax, std::fabs(in(a.x)[first + k * stride]));
        *e = float_to_e8m0_up(amax / kE4m3Max);
        const float inv = 1.0f / e8m0_to_float(*e);
        for (int64_t k = 0; k < len; ++k)
          q[first + k * stride] = float_to_e4m3(in(a.x)[first + k * stride] * inv);
      };
      auto* rq = static_cast<uint8_t*>(a.out.data);
      auto* cq = static_cast<uint8_t*>(a.out2.data);
      auto* rs = static_cast<uint8_t*>(a.w.data);
      auto* cs = static_cast<uint8_t*>(a.b.data);
      for (int64_t r = 0; r < R; ++r)
        for (int64_t j = 0; j < row_blocks; ++j)
          block(r * C + j * B, 1, std::min(B, C - j * B), rq, rs + r * row_blocks + j);
      for (int64_t i = 0; i < col_blocks; ++i)
        for (int64_t c = 0; c < C; ++c)
          block(i * B * C + c, C, std::min(B, R - i * B), cq, cs + i * C + c);
      return Status::ok();
    }
  }
  return Status::invalid("memory_op: unknown op");
}

}  // namespace scaleplan::runtime::host
