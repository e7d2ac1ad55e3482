// Launchers of the cuda backend's own kernels, one .cu file per family:
//   attention.cu     flash-style attention forward and backward (bf16 in, fp32 accumulation):
//                    the reference kernels, the GPU tests' oracle (LaunchOptions)
//   attention_softmax.cu  scale-mask-softmax of the unfused attention core (forward, backward)
//   norms.cu         RMSNorm forward and backward, LayerNorm (one block per row)
//   activations.cu   SwiGLU and GELU forward and backward, RoPE from a cos/sin cache
//   softmax_xent.cu  row softmax, fused softmax + cross-entropy loss and gradient
//   embedding.cu     embedding lookup
//   moe_routing.cu   softmax + top-k routing
//   adamw.cu         fused AdamW step
//   elementwise.cu   copy, casts, fill, scale, residual add, per-row sum of squares
// vec.cuh holds their 128-bit loads and stores (bf16 or f32 storage, fp32 math).
// Each launcher validates nothing (runtime/cuda/cuda_backend.cc checks shapes and buffers first),
// launches on `stream` and returns cudaGetLastError() so that a bad launch configuration is
// reported against the op that caused it. Pointers are device pointers; `bf16` operands are
// __nv_bfloat16 passed as void*, so that this header needs no CUDA math headers.
#pragma once

#include <cuda_runtime_api.h>
#include <vector_types.h>

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

// The memory-bound ops (runtime/backend.h MemOp). Activations are stored as `Storage` (bf16 as
// the frameworks keep them, or f32), math is fp32, and every pass moves 16 bytes per access where
// its pointers are aligned (runtime/cuda/vec.cuh). Weights of the norms are f32.
enum class Storage : uint8_t { kF32, kBf16 };

cudaError_t rmsnorm(Storage t, const void* x, const float* w, void* out, int64_t rows, int64_t cols,
                    float eps, cudaStream_t stream);
// dx from x and dy (the input gradient; dw is not formed).
cudaError_t rmsnorm_backward(Storage t, const void* x, const float* w, const void* dy, void* dx,
                             int64_t rows, int64_t cols, float eps, cudaStream_t stream);
cudaError_t layernorm(Storage t, const void* x, const float* w, const float* b, void* out,
                      int64_t rows, int64_t cols, float eps, cudaStream_t stream);
// x is rows × 2·cols (gate | up); out rows × cols. Backward: dx rows × 2·cols from x and dy.
cudaError_t swiglu(Storage t, const void* x, void* out, int64_t rows, int64_t cols,
                   cudaStream_t stream);
cudaError_t swiglu_backward(Storage t, const void* x, const void* dy, void* dx, int64_t rows,
                            int64_t cols, cudaStream_t stream);
cudaError_t gelu(Storage t, const void* x, void* out, int64_t n, cudaStream_t stream);
cudaError_t gelu_backward(Storage t, const void* x, const void* dy, void* dx, int64_t n,
                          cudaStream_t stream);
// RoPE's cos/sin cache: seq_len × head_dim/2 (cos, sin) pairs of pos·theta^(-2i/head_dim), fp32,
// built once per shape as torchtitan's precompute_freqs_cis and Transformer Engine's
// RotaryPositionEmbedding do. rope() rotates the (2i, 2i+1) pairs of every head of each row by
// its position's angles (pos = row % seq_len), backward by their negatives.
cudaError_t rope_cache(float2* cache, int64_t seq_len, int64_t head_dim, float theta,
                       cudaStream_t stream);
cudaError_t rope(Storage t, const void* x, void* out, const float2* cache, int64_t rows,
                 int64_t cols, int64_t head_dim, int64_t seq_len, bool backward,
                 cudaStream_t stream);
cudaError_t add(Storage t, const void* x, const void* y, void* out, int64_t n, cudaStream_t stream);
cudaError_t softmax(Storage t, const void* x, void* out, int64_t rows, int64_t cols,
                    cudaStream_t stream);
// fp32 logits (torchtitan casts them before the loss; Megatron's vocab-parallel cross-entropy
// runs in fp32): loss per row and the gradient of the mean loss.
cudaError_t cross_entropy(const float* logits, const int32_t* labels, float* loss, float* dlogits,
                          int64_t rows, int64_t cols, cudaStream_t stream);
cudaError_t embedding(Storage t, const int32_t* ids, const void* table, void* out, int64_t rows,
                      int64_t cols, cudaStream_t stream);
cudaError_t moe_routing(const float* logits, float* weights, int32_t* experts, int64_t rows,
                        int64_t num_experts, int64_t top_k, cudaStream_t stream);
cudaError_t adamw(float* param, const float* grad, float* m, float* v, int64_t n, float lr,
                  float beta1, float beta2, float weight_decay, int64_t step, cudaStream_t stream);
// copy: `bytes` bytes. cast: from -> to (f32 -> bf16, bf16 -> f32; f32 -> f32 rounds through
// bf16, the value a bf16 copy holds). fill: f32 value. scale: out = s·x. sum_squares: out[r] =
// sum over row r of x² (f32).
cudaError_t copy(const void* x, void* out, int64_t bytes, cudaStream_t stream);
cudaError_t cast(Storage from, Storage to, const void* x, void* out, int64_t n,
                 cudaStream_t stream);
cudaError_t fill(float* out, int64_t n, float value, cudaStream_t stream);
cudaError_t scale(Storage t, const void* x, void* out, int64_t n, float s, cudaStream_t stream);
cudaError_t sum_squares(const float* x, float* out, int64_t rows, int64_t cols,
                        cudaStream_t stream);

}  // namespace scaleplan::runtime::cuda
