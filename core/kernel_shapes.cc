#include "core/kernel_shapes.h"

#include "core/enum_names.h"

namespace scaleplan {

constexpr std::string_view kKernelKindNames[] = {"gemm", "attention_fwd", "attention_bwd",
                                                 "memory_bound"};
static_assert(std::ssize(kKernelKindNames) == static_cast<int>(KernelKind::kMemoryBound) + 1);

std::string_view to_string(KernelKind k) { return name_in(kKernelKindNames, k); }

constexpr std::string_view kAttentionKernelNames[] = {"flash2", "cudnn", "unfused"};
static_assert(std::ssize(kAttentionKernelNames) == static_cast<int>(AttentionKernel::kUnfused) + 1);

std::string_view to_string(AttentionKernel k) { return name_in(kAttentionKernelNames, k); }

constexpr std::string_view kMemOpNames[] = {"rmsnorm",
                                            "layernorm",
                                            "rope",
                                            "swiglu",
                                            "gelu",
                                            "softmax",
                                            "cross_entropy",
                                            "embedding",
                                            "moe_routing",
                                            "adamw",
                                            "add",
                                            "copy",
                                            "cast",
                                            "fill",
                                            "l2norm",
                                            "elementwise",
                                            "fp8_cast_transpose",
                                            "fp8_cast",
                                            "amax",
                                            "mxfp8_quantize"};
static_assert(std::ssize(kMemOpNames) == kNumMemOps);

std::string_view to_string(MemOp op) { return name_in(kMemOpNames, op); }

Bytes GemmShape::bytes() const {
  // Sixteenths of a byte per operand element: bf16 32, fp8 16, NVFP4 9 (an e2m1 half byte and
  // one E4M3 scale per 16 elements).
  const int64_t in16 = dtype == DType::kFp8 ? 16 : dtype == DType::kFp4 ? 9 : 32;
  return Bytes(batch * (in16 * (m * k + k * n) / 16 + 2 * m * n));
}

double AttentionShape::mask_fraction() const {
  if (!causal) return 1.0;
  // A causal mask over a square q×q block keeps q(q+1)/2 of q² entries; when the queries are the
  // last q of kv keys (kv ≥ q), it keeps (kv - q)·q + q(q+1)/2 of q·kv.
  const double q = static_cast<double>(q_len), kv = static_cast<double>(kv_len);
  if (q <= 0 || kv <= 0) return 0;
  if (window > 0 && window < kv_len && kv >= q) {
    // Query t (1-based position among the kv tokens, the last q) sees min(window, t) keys:
    // the sum of min(w, t) over t = kv - q + 1 .. kv.
    const double w = static_cast<double>(window), lo = kv - q + 1, hi = kv;
    double kept = 0;
    if (hi <= w) {
      kept = (lo + hi) * (hi - lo + 1) / 2;
    } else if (lo >= w) {
      kept = w * (hi - lo + 1);
    } else {
      kept = (lo + w) * (w - lo + 1) / 2 + w * (hi - w);
    }
    return kept / (q * kv);
  }
  if (kv >= q) return ((kv - q) * q + q * (q + 1) / 2) / (q * kv);
  return 0.5;
}

Flops AttentionShape::forward_flops() const {
  const double d = static_cast<double>(head_dim),
               dv = static_cast<double>(v_head_dim ? v_head_dim : head_dim);
  return Flops(2.0 * static_cast<double>(batch) * static_cast<double>(heads) *
               static_cast<double>(q_len) * static_cast<double>(kv_len) * (d + dv) *
               mask_fraction());
}

Flops AttentionShape::backward_flops() const { return forward_flops() * 2.5; }

Bytes AttentionShape::bytes() const {
  const int64_t dv = v_head_dim ? v_head_dim : head_dim;
  const int64_t q = batch * heads * q_len * (head_dim + dv);       // Q in, O out
  const int64_t kv = batch * kv_heads * kv_len * (head_dim + dv);  // K, V in
  return Bytes(2 * (q + kv));
}

}  // namespace scaleplan
