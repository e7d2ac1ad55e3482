#include "sim/op_class.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <string>
#include <variant>

namespace scaleplan::sim {
namespace {

constexpr std::array<std::string_view, kNumOpClasses> kNames = {
    "gemm",      "attention_fwd", "attention_bwd", "memory_bound",   "optimizer",
    "other",     "all_reduce",    "all_gather",    "reduce_scatter", "all_to_all",
    "send_recv", "broadcast",     "other_comm",    "memcpy",         "host"};

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

bool has(const std::string& s, std::string_view token) {
  return s.find(token) != std::string::npos;
}

template <size_t N>
bool has_any(const std::string& s, const std::array<std::string_view, N>& tokens) {
  return std::any_of(tokens.begin(), tokens.end(), [&](std::string_view t) { return has(s, t); });
}

// NCCL kernels are named ncclKernel_<Op>_<algo>_<proto>_<redop>_<type> (NCCL <= 2.18) or
// ncclDevKernel_<Op>_<redop>_<type>_<algo>_<proto> (2.19 on): NCCL src/device/generate.py. The
// operation is the first word after the prefix.
std::optional<OpClass> nccl_class(std::string_view name) {
  for (std::string_view prefix : {"ncclKernel_", "ncclDevKernel_"}) {
    const size_t at = name.find(prefix);
    if (at == std::string_view::npos) continue;
    std::string_view rest = name.substr(at + prefix.size());
    rest = rest.substr(0, rest.find_first_of("_("));
    if (rest == "AllReduce") return OpClass::kAllReduce;
    if (rest == "AllGather") return OpClass::kAllGather;
    if (rest == "ReduceScatter") return OpClass::kReduceScatter;
    if (rest == "SendRecv" || rest == "Send" || rest == "Recv") return OpClass::kSendRecv;
    if (rest == "Broadcast") return OpClass::kBroadcast;
    if (rest == "AllToAll" || rest == "AlltoAll") return OpClass::kAllToAll;
    return OpClass::kOtherComm;
  }
  return std::nullopt;
}

}  // namespace

std::string_view to_string(OpClass c) { return kNames[static_cast<size_t>(c)]; }

std::optional<OpClass> parse_op_class(std::string_view s) {
  for (int i = 0; i < kNumOpClasses; ++i)
    if (kNames[static_cast<size_t>(i)] == s) return static_cast<OpClass>(i);
  return std::nullopt;
}

// The rules, in order (docs/compare.md lists each with the kernels it was written against):
//   1. NCCL kernels by operation;
//   2. fused attention: FlashAttention-2 (flash_fwd_*, flash_bwd_*; PyTorch SDPA vendors it as
//      pytorch_flash::), FlashAttention-3 (flash::FlashAttnFwdSm90 / FlashAttnBwdSm90), xformers /
//      SDPA memory-efficient (fmha_cutlassF / fmha_cutlassB), cuDNN SDPA (..._sdpa_..._fprop /
//      _bprop); backward when the name says bwd, bprop, cutlassB or Bwd;
//   3. optimizer: fused and foreach optimizers run as multi_tensor_apply_kernel (PyTorch
//      aten/src/ATen/native/cuda/MultiTensorApply.cuh), Apex/Megatron as multi_tensor_adam /
//      AdamFunctor, gradient clipping's norm as LpNormFunctor / l2norm;
//   4. GEMM: gemm / gemv anywhere (cuBLAS ampere_sgemm_*, sm90_xmma_gemm_*, CUTLASS
//      cutlass_80_tensorop_*gemm*, cuDNN implicit_gemm, cuBLASLt splitKreduce), nvjet_* (cuBLAS on
//      Hopper and later), Triton templates triton_tem_fused_*mm*, and the rest of CUTLASS, xmma
//      and cuDNN's scudnn kernels (convolutions run as implicit GEMMs);
//   5. memory-bound: PyTorch's elementwise / reduce / norm / softmax / copy / cat / index /
//      embedding / dropout kernels, Inductor's triton_poi_ / triton_red_ / triton_per_, cub
//      scans and sorts, cuDNN batch norm and layout transforms;
//   6. anything else: other.
MemPath memory_path_of_kernel(std::string_view kernel_name, std::string_view aten_op) {
  if (kernel_name.find("unrolled_elementwise_kernel") != std::string_view::npos)
    return MemPath::kCastLoop;
  if (kernel_name.find("at::native::elementwise_kernel<") != std::string_view::npos)
    return aten_op == "aten::copy_" ? MemPath::kStridedCopy : MemPath::kStrided;
  return MemPath::kVectorized;
}

OpClass classify_kernel(std::string_view kernel_name) {
  if (auto c = nccl_class(kernel_name)) return *c;
  const std::string n = lower(kernel_name);
  static constexpr std::array<std::string_view, 6> kAttention = {
      "flash_fwd", "flash_bwd", "flashattn", "fmha_cutlass", "_sdpa_", "fused_attn"};
  if (has_any(n, kAttention) || (has(n, "fmha") && !has(n, "gemm"))) {
    static constexpr std::array<std::string_view, 4> kBackward = {"bwd", "bprop", "cutlassb",
                                                                  "backward"};
    return has_any(n, kBackward) ? OpClass::kAttentionBwd : OpClass::kAttentionFwd;
  }
  static constexpr std::array<std::string_view, 6> kOptimizer = {
      "multi_tensor_apply", "adamfunctor",   "multi_tensor_adam",
      "fused_adam",         "lpnormfunctor", "l2norm"};
  if (has_any(n, kOptimizer)) return OpClass::kOptimizer;
  static constexpr std::array<std::string_view, 9> kGemm = {
      "gemm", "gemv", "nvjet", "splitkreduce", "cublas", "triton_tem", "cutlass", "scudnn", "xmma"};
  if (has_any(n, kGemm)) return OpClass::kGemm;
  static constexpr std::array<std::string_view, 24> kMemoryBound = {
      "elementwise", "reduce_kernel", "norm",          "softmax",    "copy",       "catarray",
      "index",       "embedding",     "dropout",       "triton_poi", "triton_red", "triton_per",
      "cub::",       "fill",          "bn_fw",         "bn_bw",      "nchwtonhwc", "nhwctonchw",
      "rope",        "rotary",        "cross_entropy", "gelu",       "silu",       "swiglu"};
  if (has_any(n, kMemoryBound) || n.rfind("triton_", 0) == 0) return OpClass::kMemoryBound;
  return OpClass::kOtherCompute;
}

MemOp classify_aten_op(std::string_view aten_op, std::string_view in0, std::string_view in1) {
  // "aten::copy_" -> "copy_"; user-level names ("AddBackward0") keep theirs.
  std::string_view op = aten_op;
  if (op.substr(0, 6) == "aten::") op.remove_prefix(6);
  auto is = [&](std::initializer_list<std::string_view> names) {
    for (std::string_view n : names)
      if (op == n) return true;
    return false;
  };
  auto has = [&](std::string_view part) { return op.find(part) != std::string_view::npos; };
  const bool complex = in0.find("complex") != std::string_view::npos ||
                       in1.find("complex") != std::string_view::npos;
  if (is({"copy_", "_to_copy", "to", "_copy_from", "_copy_from_and_resize"}))
    return !in0.empty() && !in1.empty() && in0 != in1 ? MemOp::kCast : MemOp::kCopy;
  if (is({"cat", "index", "index_select", "gather", "scatter", "scatter_add_", "index_put_",
          "clone", "contiguous", "sum", "expand"}))
    return MemOp::kCopy;
  if (has("adam") || has("_foreach_mul") || has("_foreach_add")) return MemOp::kAdamW;
  if (has("_foreach_norm") || has("linalg_vector_norm")) return MemOp::kL2Norm;
  if (has("rms_norm")) return MemOp::kRmsNorm;
  if (has("layer_norm")) return MemOp::kLayerNorm;
  if (has("log_softmax") || has("nll_loss") || has("cross_entropy")) return MemOp::kCrossEntropy;
  if (has("softmax")) return MemOp::kSoftmax;
  if (has("embedding")) return MemOp::kEmbedding;
  if (is({"fill_", "zero_", "zeros", "zeros_like", "ones", "full"})) return MemOp::kFill;
  if (complex || has("view_as_real") || has("view_as_complex")) return MemOp::kRope;
  if (has("silu") || has("swiglu")) return MemOp::kSwiglu;
  if (has("gelu")) return MemOp::kGelu;
  if (is({"mul", "mul_"})) return MemOp::kSwiglu;  // the gated product (bf16 real inputs)
  if (is({"add", "add_", "sub", "sub_"})) return MemOp::kAdd;
  return MemOp::kElementwise;
}

OpClass classify_op(const Program& program, OpId id) {
  const Op& op = program.op(id);
  if (op.kind == OpKind::kHost) return OpClass::kHost;
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) return OpClass::kSendRecv;
  if (op.kind == OpKind::kCollective) {
    switch (op.collective) {
      case CollectiveOp::kAllReduce:
        return OpClass::kAllReduce;
      case CollectiveOp::kAllGather:
        return OpClass::kAllGather;
      case CollectiveOp::kReduceScatter:
        return OpClass::kReduceScatter;
      case CollectiveOp::kAllToAll:
        return OpClass::kAllToAll;
      case CollectiveOp::kSendRecv:
        return OpClass::kSendRecv;
      case CollectiveOp::kBroadcast:
        return OpClass::kBroadcast;
      default:
        return OpClass::kOtherComm;
    }
  }
  if (op.kind != OpKind::kCompute) return OpClass::kOtherCompute;
  if (op.phase == Phase::kOptimizer) return OpClass::kOptimizer;
  // The kernel the op runs, from its typed payload (hand-built programs may leave it untyped).
  const auto* k = std::get_if<KernelPayload>(&program.label(id).payload);
  if (k == nullptr) return OpClass::kOtherCompute;
  switch (k->kind) {
    case KernelKind::kGemm:
      return OpClass::kGemm;
    case KernelKind::kAttentionFwd:
      return OpClass::kAttentionFwd;
    case KernelKind::kAttentionBwd:
      return OpClass::kAttentionBwd;
    case KernelKind::kMemoryBound:
      return OpClass::kMemoryBound;
  }
  return OpClass::kOtherCompute;
}

}  // namespace scaleplan::sim
