// Launchers of the cuda backend's own kernels, one .cu file per family:
//   attention.cu     flash-style attention forward and backward (bf16 in, fp32 accumulation):
//                    the reference kernels, the GPU tests' oracle (LaunchOptions)
//   attention_softmax.cu  scale-mask-softmax of the unfused attention core (forward, backward)
//   norms.cu         RMSNorm, LayerNorm (one block per row)
//   activations.cu   SwiGLU, GELU, RoPE, residual add (elementwise, grid-stride)
//   softmax_xent.cu  row softmax, fused softmax + cross-entropy loss and gradient
//   embedding.cu     embedding lookup
//   moe_routing.cu   softmax + top-k routing
//   adamw.cu         fused AdamW step
//   elementwise.cu   copy, cast to bf16, fill, scale, per-row sum of squares
// Each launcher validates nothing (runtime/cuda/cuda_backend.cc checks shapes and buffers first),
// launches on `stream` and returns cudaGetLastError() so that a bad launch configuration is
// reported against the op that caused it. Pointers are device pointers; `bf16` operands are
// __nv_bfloat16 passed as void*, so that this header needs no CUDA math headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace scaleplan::runtime::cuda {

struct AttentionDims {
  int64_t batch, heads, kv_heads, q_len, kv_len, head_dim, v_head_dim;
  bool causal;
  float scale;
  int64_t window;  // with causal: keys a query sees at most (sliding window); 0: no limit
};
// The largest head dimension the attention kernels take (their per-thread accumulators).
inline constexpr int64_t kMaxHeadDim = 256;

cudaError_t attention_forward(const AttentionDims& d, const void* q, const void* k, const void* v,
                              void* o, float* lse, cudaStream_t stream);
// Writes dq, dk, dv; `workspace` holds batch·heads·q_len floats (the rowsum(dO∘O) terms).
cudaError_t attention_backward(const AttentionDims& d, const void* q, const void* k, const void* v,
                               const void* o, const float* lse, const void* d_o, void* dq, void* dk,
                               void* dv, float* workspace, cudaStream_t stream);

// The unfused attention core's softmax (attention_softmax.cu): `rows` = b·h·q_len rows of
// `kv_len` bf16 scores (the QK^T GEMM's output), scaled, masked (causal bottom-right, window) and
// normalized in fp32; probabilities written as bf16, the row's log-sum-exp as f32.
struct SoftmaxRows {
  int64_t rows, q_len, kv_len;
  bool causal;
  int64_t window;  // with causal: keys a query sees at most; 0: no limit
  float scale;
};
cudaError_t masked_softmax(const void* scores, void* probs, float* lse, const SoftmaxRows& r,
                           cudaStream_t stream);
// The backward's P recomputed from the scores and the saved LSE.
cudaError_t softmax_from_lse(const void* scores, const float* lse, void* probs,
                             const SoftmaxRows& r, cudaStream_t stream);
// dS = scale · P ∘ (dP − rowsum(P ∘ dP)), in place of the scores' gradient.
cudaError_t softmax_backward(const void* probs, const void* dprobs, void* dscores,
                             const SoftmaxRows& r, cudaStream_t stream);

cudaError_t rmsnorm(const float* x, const float* w, float* out, int64_t rows, int64_t cols,
                    float eps, cudaStream_t stream);
cudaError_t layernorm(const float* x, const float* w, const float* b, float* out, int64_t rows,
                      int64_t cols, float eps, cudaStream_t stream);
cudaError_t swiglu(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t gelu(const float* x, float* out, int64_t n, cudaStream_t stream);
cudaError_t rope(const float* x, float* out, int64_t rows, int64_t cols, int64_t head_dim,
                 int64_t seq_len, float theta, cudaStream_t stream);
cudaError_t add(const float* x, const float* y, float* out, int64_t n, cudaStream_t stream);
cudaError_t softmax(const float* x, float* out, int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t cross_entropy(const float* logits, const int32_t* labels, float* loss, float* dlogits,
                          int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t embedding(const int32_t* ids, const float* table, float* out, int64_t rows,
                      int64_t cols, cudaStream_t stream);
cudaError_t moe_routing(const float* logits, float* weights, int32_t* experts, int64_t rows,
                        int64_t num_experts, int64_t top_k, cudaStream_t stream);
cudaError_t adamw(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float weight_decay, int64_t step, cudaStream_t stream);
// out = x (f32); out = bf16(x) (as bf16 when out_bf16, else rounded and kept f32); out = value;
// out = s·x; out[r] = sum over the row of x².
cudaError_t copy(const float* x, float* out, int64_t n, cudaStream_t stream);
cudaError_t cast_bf16(const float* x, void* out, bool out_bf16, int64_t n, cudaStream_t stream);
cudaError_t fill(float* out, int64_t n, float value, cudaStream_t stream);
cudaError_t scale(const float* x, float* out, int64_t n, float s, cudaStream_t stream);
cudaError_t sum_squares(const float* x, float* out, int64_t rows, int64_t cols,
                        cudaStream_t stream);

}  // namespace scaleplan::runtime::cuda
