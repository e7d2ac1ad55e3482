#include "runtime/cuda/unfused_attention.h"

#include "runtime/cuda/check.h"

namespace scaleplan::runtime::cuda {
namespace {

// One batched GEMM over the (sequence, K/V head) pairs: row-major, packed strides (gemm.h).
Status gemm(LtGemm& lt, int64_t m, int64_t n, int64_t k, int64_t batch, bool ta, bool tb,
            const void* a, const void* b, void* c, cudaStream_t stream) {
  GemmArgs g;
  g.shape = GemmShape{m, n, k, batch};
  g.trans_a = ta;
  g.trans_b = tb;
  g.a = Buffer{const_cast<void*>(a), batch * m * k, ElemType::kBf16};
  g.b = Buffer{const_cast<void*>(b), batch * k * n, ElemType::kBf16};
  g.c = Buffer{c, batch * m * n, ElemType::kBf16};
  return lt.run(g, stream);
}

SoftmaxRows rows_of(const AttentionDims& d) {
  return SoftmaxRows{d.batch * d.heads * d.q_len, d.q_len, d.kv_len, d.causal, d.window, d.scale};
}

}  // namespace

UnfusedAttention::~UnfusedAttention() {
  if (workspace_) cudaFree(workspace_);
}

Status UnfusedAttention::reserve(int64_t bytes) {
  if (bytes <= bytes_) return Status::ok();
  if (workspace_) SP_CUDA_CHECK("attention", cudaFree(workspace_));
  workspace_ = nullptr;
  bytes_ = 0;
  SP_CUDA_CHECK("attention", cudaMalloc(&workspace_, static_cast<size_t>(bytes)));
  bytes_ = bytes;
  return Status::ok();
}

Status UnfusedAttention::forward(const AttentionDims& d, const void* q, const void* k,
                                 const void* v, void* o, float* lse, cudaStream_t stream) {
  const int64_t group = d.heads / d.kv_heads, batch = d.batch * d.kv_heads;
  const int64_t m = group * d.q_len, scores = d.batch * d.heads * d.q_len * d.kv_len;
  SP_RETURN_IF_ERROR(reserve(2 * scores * 2));
  void* s = workspace_;
  // S = Q K^T per (sequence, K/V head); P = softmax(scale · S, masked) in place; O = P V.
  SP_RETURN_IF_ERROR(gemm(gemm_, m, d.kv_len, d.head_dim, batch, false, true, q, k, s, stream));
  SP_CUDA_CHECK("attention_forward", masked_softmax(s, s, lse, rows_of(d), stream));
  return gemm(gemm_, m, d.v_head_dim, d.kv_len, batch, false, false, s, v, o, stream);
}

Status UnfusedAttention::backward(const AttentionDims& d, const void* q, const void* k,
                                  const void* v, const float* lse, const void* d_o, void* dq,
                                  void* dk, void* dv, cudaStream_t stream) {
  const int64_t group = d.heads / d.kv_heads, batch = d.batch * d.kv_heads;
  const int64_t m = group * d.q_len, scores = d.batch * d.heads * d.q_len * d.kv_len;
  SP_RETURN_IF_ERROR(reserve(2 * scores * 2));
  void* p = workspace_;
  void* dp = static_cast<char*>(workspace_) + scores * 2;
  // P recomputed from S and the LSE; dV = P^T dO (summed over the group); dP = dO V^T;
  // dS = scale · P ∘ (dP − rowsum(P ∘ dP)) in place; dQ = dS K; dK = dS^T Q.
  SP_RETURN_IF_ERROR(gemm(gemm_, m, d.kv_len, d.head_dim, batch, false, true, q, k, p, stream));
  SP_CUDA_CHECK("attention_backward", softmax_from_lse(p, lse, p, rows_of(d), stream));
  SP_RETURN_IF_ERROR(
      gemm(gemm_, d.kv_len, d.v_head_dim, m, batch, true, false, p, d_o, dv, stream));
  SP_RETURN_IF_ERROR(
      gemm(gemm_, m, d.kv_len, d.v_head_dim, batch, false, true, d_o, v, dp, stream));
  SP_CUDA_CHECK("attention_backward", softmax_backward(p, dp, dp, rows_of(d), stream));
  SP_RETURN_IF_ERROR(gemm(gemm_, m, d.head_dim, d.kv_len, batch, false, false, dp, k, dq, stream));
  return gemm(gemm_, d.kv_len, d.head_dim, m, batch, true, false, dp, q, dk, stream);
}

}  // namespace scaleplan::runtime::cuda
