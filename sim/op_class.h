// sim::OpClass: what kind of GPU work an op or a profiled kernel is, the unit of comparison
// between a prediction and a measurement when there is no op-for-op match.
//
// The classes follow the breakdown users read in a profile: GEMMs, fused attention forward and
// backward, memory-bound kernels (elementwise, norms, softmax, copies), the optimizer step, each
// NCCL collective, device memory copies, and CPU issue time (scaleplan's host ops, never GPU
// work). `classify_kernel` maps a CUDA kernel name from a PyTorch profiler (Kineto) trace to a
// class; `classify_op` maps an op of a scaleplan Program. The kernel-name rules and their sources
// are listed in docs/compare.md; they are pure functions, safe from any thread.
#pragma once

#include <optional>
#include <string_view>

#include "core/kernel_shapes.h"
#include "sim/program.h"

namespace scaleplan::sim {

enum class OpClass : uint8_t {
  kGemm,          // cuBLAS/cuBLASLt, CUTLASS, nvjet, cuDNN implicit GEMM, GEMV
  kAttentionFwd,  // fused attention forward: FlashAttention, PyTorch SDPA, cuDNN SDPA, xformers
  kAttentionBwd,  // fused attention backward (dQ, dK, dV and its pre/post-processing)
  kMemoryBound,   // elementwise, reductions, norms, softmax, copies, Triton pointwise/reduction
  kOptimizer,     // optimizer step (fused/foreach Adam, multi-tensor apply, gradient norm)
  kOtherCompute,  // a kernel none of the rules names
  kAllReduce,     // NCCL collectives by operation
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kSendRecv,  // NCCL send/recv (PyTorch's all_to_all and pipeline p2p run as SendRecv)
  kBroadcast,
  kOtherComm,  // NCCL Reduce, Gather, Scatter, ...
  kMemcpy,     // device memcpy / memset (Kineto gpu_memcpy, gpu_memset)
  kHost,       // CPU time of the issuing thread (scaleplan host ops)
  kCount,
};
inline constexpr int kNumOpClasses = static_cast<int>(OpClass::kCount);

std::string_view to_string(OpClass c);
std::optional<OpClass> parse_op_class(std::string_view s);

inline bool is_comm(OpClass c) { return c >= OpClass::kAllReduce && c <= OpClass::kOtherComm; }
// GPU compute kernels: the time that hides communication (exposed communication is communication
// while none of these runs).
inline bool is_compute(OpClass c) { return c <= OpClass::kOtherCompute; }

// The class of a CUDA kernel by its (demangled) name, as Kineto records it.
OpClass classify_kernel(std::string_view kernel_name);

// The Program's memory-bound kind (core/kernel_shapes.h MemOp) of a kernel that PyTorch operator
// `aten_op` launched (the op a Kineto trace ties to the kernel through its External id), whose
// first two inputs have dtypes `in0` and `in1` (record_shapes' "Input type"; empty where not
// recorded): a copy between dtypes is a cast, within one a copy; add/sub (residual adds,
// autograd's gradient accumulation) add; RMSNorm and LayerNorm; RoPE's complex multiply;
// activations (SiLU, GELU and the gated product); softmax and the loss (log_softmax, nll_loss);
// fills (the zeroed gradients of nll_loss and embedding backward); the embedding; the optimizer's
// Adam and norms; anything else elementwise. The rules and the trace they were written against:
// docs/compare.md.
MemOp classify_aten_op(std::string_view aten_op, std::string_view in0, std::string_view in1);

// The implementation (core/kernel_shapes.h MemPath) of an element-wise kernel that PyTorch
// operator `aten_op` launched, from its (demangled) kernel name, by the launchers of
// aten/src/ATen/native/cuda/CUDALoops.cuh (gpu_kernel_impl, gpu_kernel_impl_nocast):
// unrolled_elementwise_kernel is the contiguous loop with dynamic casting (LoadWithCast /
// StoreWithCast: a bf16 -> fp32 copy_ through direct_copy_kernel_cuda, an fp32 + bf16 add) ->
// kCastLoop; the legacy at::native::elementwise_kernel<128, ...> is the non-contiguous loop ->
// kStridedCopy under aten::copy_ (an expanded tensor made contiguous: repeat_kv), kStrided
// otherwise (RoPE's broadcast complex product); anything else (vectorized_elementwise_kernel,
// bfloat16_copy_kernel_cuda's fp32 -> bf16 copy, fused kernels) -> kVectorized.
MemPath memory_path_of_kernel(std::string_view kernel_name, std::string_view aten_op);

// The class of op `id` of a scaleplan Program: communication by its collective, host ops as
// kHost, compute by the kernel of its typed payload and optimizer by phase.
OpClass classify_op(const Program& program, OpId id);

}  // namespace scaleplan::sim
