// Shapes of the compute kernels one training iteration runs, as plain data.
//
// The operator list (models/operators.h) produces these; the cost models (calibrate/) time them;
// the runtime (runtime/) executes them. They live in core because all three meet here and none of
// them may depend on another's folder (DESIGN.md: dependencies point down).
//
// FLOP and byte counts are derived here, once: a GEMM of (m, n, k) is 2·m·n·k FLOPs per batch
// element; a causal attention forward does half of the 4·b·h·q·kv·d of the full one (QK^T and PV).
#pragma once

#include <cstdint>
#include <string_view>

#include "core/layout.h"
#include "core/units.h"

namespace scaleplan {

enum class KernelKind {
  kGemm,          // dense matmul, C[m,n] = A[m,k] · B[k,n], `batch` of them
  kAttentionFwd,  // fused (flash) attention forward
  kAttentionBwd,  // fused (flash) attention backward (dQ, dK, dV)
  kMemoryBound,   // norms, activations, RoPE, residual adds, softmax, embedding, optimizer:
                  // bytes-bound
};
std::string_view to_string(KernelKind k);

struct GemmShape {
  int64_t m = 0, n = 0, k = 0;
  int64_t batch = 1;  // independent GEMMs of this shape (grouped expert GEMMs)
  DType dtype = DType::kBf16;
  // SMs the GEMM leaves to a kernel beside it for its whole duration: Transformer Engine's
  // userbuffers overlap with set_sm_margin launches the GEMM on sm_count - num_sm SMs (cuBLASLt's
  // CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET; models::apply_tp_comm_overlap). 0: every SM.
  int sm_margin = 0;
  Flops flops() const {
    return Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) *
                 static_cast<double>(batch));
  }
  // Bytes read and written once each: A, B, C in the element size of dtype (bf16 2, fp8 1, fp4
  // 9/16 with its E4M3 scale per 16; C in bf16).
  Bytes bytes() const;
};

// How the attention core runs: FlashAttention-2 (the flash-attn package, or PyTorch SDPA's flash
// backend) or cuDNN's fused attention (Transformer Engine's FusedAttention, PyTorch SDPA's cuDNN
// backend), both one fused kernel that stores no s×s tensor (Dao et al. 2022); or kUnfused, what
// Megatron-LM ran before flash attention (its 2021-2022 papers): a batched QK^T GEMM, the fused
// scale-mask-softmax kernel, attention dropout and a batched PV GEMM, with the b·a·s² scores,
// probabilities and dropout mask in HBM (megatron/model/transformer.py ParallelAttention,
// FusedScaleMaskSoftmax; the 5·a·s/h term of Korthikanti et al. 2022 counts exactly these
// tensors). Which one a framework runs depends on the GPU (sim/framework.h); a cost model that
// times a fused kernel of its own may ignore the difference between the two fused ones.
enum class AttentionKernel : uint8_t { kFlash2, kCudnn, kUnfused };
std::string_view to_string(AttentionKernel k);  // "flash2", "cudnn", "unfused"

struct AttentionShape {
  int64_t batch = 0;       // micro-batch sequences
  int64_t heads = 0;       // query heads on this rank
  int64_t kv_heads = 0;    // key/value heads on this rank
  int64_t q_len = 0;       // query tokens on this rank
  int64_t kv_len = 0;      // key/value tokens attended to
  int64_t head_dim = 0;    // qk head dim
  int64_t v_head_dim = 0;  // value head dim (differs from head_dim for MLA)
  bool causal = true;
  AttentionKernel kernel = AttentionKernel::kFlash2;
  // Sliding-window attention (with `causal`): each query sees at most `window` keys, itself and
  // the window - 1 before it. 0: no limit.
  int64_t window = 0;
  // Fraction of the q×kv score matrix computed: 1 for full attention, ~1/2 for a causal square,
  // about window/kv under a sliding window shorter than kv.
  double mask_fraction() const;
  Flops forward_flops() const;   // 2·b·h·q·kv·(d + dv) · mask_fraction
  Flops backward_flops() const;  // 2.5 × forward (recomputes scores: QK^T, dV, dP, dQ, dK)
  Bytes bytes() const;           // Q, K, V, O read/written once, bf16
};

// What a memory-bound kernel computes: the norms, activations and other ops of a layer, and the
// copies (layout copies, permutes, repeat_kv, flattening), casts (dtype conversions), the fp8
// quantization of a GEMM operand as each Transformer Engine recipe runs it (kFp8CastTranspose:
// the cast-transpose, bf16 in, e4m3 copy and its transpose out, amax raised; kFp8Cast: the same
// without the transpose, which Blackwell's fp8 GEMMs do not need; kAmax: current scaling's amax
// pass before its cast; kMxfp8Quantize: MXFP8's row-wise and column-wise e4m3 copies with one
// E8M0 scale per 32 elements each; runtime/backend.h), fills (zeroing a gradient
// buffer), the gradient norm's L2 reduction, and other element-wise passes (scaling, the extra
// passes of unfused or composite kernels) the operator list also runs. The runtime's backends
// implement every one (their buffers are described in runtime/backend.h).
enum class MemOp : uint8_t {
  kRmsNorm,
  kLayerNorm,
  kRope,
  kSwiglu,
  kGelu,
  kSoftmax,
  kCrossEntropy,
  kEmbedding,
  kMoeRouting,
  kAdamW,
  kAdd,
  kCopy,
  kCast,
  kFill,
  kL2Norm,
  kElementwise,
  kFp8CastTranspose,
  kFp8Cast,
  kAmax,
  kMxfp8Quantize,
};
inline constexpr int kNumMemOps = 20;
// "rmsnorm", "layernorm", "rope", "swiglu", "gelu", "softmax", "cross_entropy", "embedding",
// "moe_routing", "adamw", "add", "copy", "cast", "fill", "l2norm", "elementwise",
// "fp8_cast_transpose", "fp8_cast", "amax", "mxfp8_quantize".
std::string_view to_string(MemOp op);

// How a memory-bound kernel reaches memory, which sets the fraction of HBM peak it sustains
// (hw::MemoryPathEfficiency; docs/simulator.md, "Memory-bound kernels by implementation").
// PyTorch's eager element-wise loops (aten/src/ATen/native/cuda/CUDALoops.cuh, gpu_kernel_impl)
// take the vectorized path only when the functor's argument types match the tensors' dtypes;
// otherwise (`needs_dynamic_casting`) a contiguous operand goes through the unrolled loop with
// per-element LoadWithCast / StoreWithCast. Other frameworks' fused kernels are kVectorized.
enum class MemPath : uint8_t {
  kVectorized,   // vectorized_elementwise_kernel and fused kernels: e_mem
  kCastLoop,     // unrolled_elementwise_kernel with dynamic casting: bf16 -> fp32 copies, fp32+bf16
  kRowNorm,      // PyTorch's _fused_rms_norm: one reduction per row, forward and backward
  kMultiTensor,  // multi_tensor_apply (PyTorch's fused AdamW)
  // torchtitan's other eager kernels, each its own implementation (docs/simulator.md):
  kStrided,      // legacy elementwise_kernel<128, 2>, a broadcast operand: RoPE's complex product
  kStridedCopy,  // elementwise_kernel<128, 4> copying an expanded (stride-0) tensor: repeat_kv
  kReduce,       // reduce_kernel summing over a dimension: repeat_kv's backward
  kSegmentSum,   // embedding_dense_backward: index sort, compute_grad_weight, sum_and_scatter
};

struct MemoryBoundShape {
  Bytes bytes;                          // bytes read plus written
  Flops flops;                          // usually negligible; counted for HFU
  MemOp op = MemOp::kElementwise;       // what it computes (cost models time the bytes alone)
  MemPath path = MemPath::kVectorized;  // the kernel's implementation (sets its efficiency)
};

}  // namespace scaleplan
