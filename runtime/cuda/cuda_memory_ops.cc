#include "runtime/cuda/cuda_memory_ops.h"

#include <array>
#include <utility>

#include "runtime/cuda/check.h"
#include "runtime/cuda/fp8_cast.h"
#include "runtime/cuda/fp8_quantize.h"
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {

Status check(const Buffer& b, int64_t count, ElemType type, const std::string& what) {
  if (b.data == nullptr && count > 0) return Status::invalid(what + ": buffer missing");
  if (b.type != type) {
    return Status::invalid(what + ": element type " + std::string(to_string(b.type)) +
                           ", expected " + std::string(to_string(type)));
  }
  if (b.count < count) {
    return Status::invalid(what + ": buffer holds " + std::to_string(b.count) +
                           " elements, needs " + std::to_string(count));
  }
  return Status::ok();
}

namespace {

Storage storage(ElemType t) { return t == ElemType::kBf16 ? Storage::kBf16 : Storage::kF32; }

Status check_operands(const MemOpArgs& a, const std::string& op) {
  const MemOperands o = memory_operands(a);
  const std::array<std::tuple<const Buffer*, const MemOperand*, const char*>, 8> list{{
      {&a.x, &o.x, "x"},
      {&a.y, &o.y, "y"},
      {&a.w, &o.w, "w"},
      {&a.b, &o.b, "b"},
      {&a.index, &o.index, "index"},
      {&a.out, &o.out, "out"},
      {&a.out2, &o.out2, "out2"},
      {&a.out_index, &o.out_index, "out_index"},
  }};
  for (const auto& [buffer, need, name] : list) {
    if (need->count > 0)
      SP_RETURN_IF_ERROR(check(*buffer, need->count, need->type, op + ": " + name));
  }
  return Status::ok();
}

}  // namespace

Result<const float2*> MemoryOps::rope_table(int64_t seq_len, int64_t head_dim, float theta,
                                            cudaStream_t stream) {
  const auto key = std::make_tuple(seq_len, head_dim, theta);
  auto it = rope_tables_.find(key);
  if (it == rope_tables_.end()) {
    SP_ASSIGN_OR_RETURN(Buffer b, allocate_(seq_len * head_dim, ElemType::kF32));  // float2 pairs
    SP_CUDA_CHECK("rope",
                  rope_cache(static_cast<float2*>(b.data), seq_len, head_dim, theta, stream));
    it = rope_tables_.emplace(key, b).first;
  }
  return static_cast<const float2*>(it->second.data);
}

Status MemoryOps::run(const MemOpArgs& a, cudaStream_t s) {
  const std::string op(to_string(a.op));
  if (a.rows <= 0 || a.cols <= 0) return Status::invalid(op + ": rows and cols must be positive");
  if (a.storage == ElemType::kI32) return Status::invalid(op + ": storage must be f32 or bf16");
  if (a.op == MemOp::kMoeRouting && (a.p.top_k <= 0 || a.p.top_k > a.cols || a.p.top_k > 16)) {
    return Status::invalid(op + ": top_k " + std::to_string(a.p.top_k) +
                           " outside 1..min(16, experts)");
  }
  if (a.op == MemOp::kAdamW && a.p.step < 1) return Status::invalid(op + ": step must be >= 1");
  const int64_t hd = a.p.head_dim ? a.p.head_dim : a.cols;
  if (a.op == MemOp::kRope && (hd % 2 != 0 || a.cols % hd != 0))
    return Status::invalid(op + ": head_dim must be even and divide cols");
  SP_RETURN_IF_ERROR(check_operands(a, op));
  const int64_t R = a.rows, C = a.cols, n = R * C;
  const Storage t = storage(has_act_operands(a.op) ? a.storage : ElemType::kF32);
  const bool bwd = a.backward && has_backward_form(a.op);
  auto F = [](const Buffer& b) { return static_cast<float*>(b.data); };
  auto I = [](const Buffer& b) { return static_cast<int32_t*>(b.data); };
  cudaError_t e = cudaSuccess;
  switch (a.op) {
    case MemOp::kRmsNorm:
      e = bwd ? rmsnorm_backward(t, a.x.data, F(a.w), a.y.data, a.out.data, R, C, a.p.eps, s)
              : rmsnorm(t, a.x.data, F(a.w), a.out.data, R, C, a.p.eps, s);
      break;
    case MemOp::kLayerNorm:
      e = layernorm(t, a.x.data, F(a.w), F(a.b), a.out.data, R, C, a.p.eps, s);
      break;
    case MemOp::kRope: {
      const int64_t seq = a.p.seq_len ? a.p.seq_len : R;
      SP_ASSIGN_OR_RETURN(const float2* table, rope_table(seq, hd, a.p.theta, s));
      e = rope(t, a.x.data, a.out.data, table, R, C, hd, seq, bwd, s);
      break;
    }
    case MemOp::kSwiglu:
      e = bwd ? swiglu_backward(t, a.x.data, a.y.data, a.out.data, R, C, s)
              : swiglu(t, a.x.data, a.out.data, R, C, s);
      break;
    case MemOp::kGelu:
      e = bwd ? gelu_backward(t, a.x.data, a.y.data, a.out.data, n, s)
              : gelu(t, a.x.data, a.out.data, n, s);
      break;
    case MemOp::kSoftmax:
      e = softmax(t, a.x.data, a.out.data, R, C, s);
      break;
    case MemOp::kCrossEntropy:
      e = cross_entropy(F(a.x), I(a.index), F(a.out), F(a.out2), R, C, s);
      break;
    case MemOp::kEmbedding:
      e = embedding(t, I(a.index), a.w.data, a.out.data, R, C, s);
      break;
    case MemOp::kMoeRouting:
      e = moe_routing(F(a.x), F(a.out), I(a.out_index), R, C, a.p.top_k, s);
      break;
    case MemOp::kAdamW:
      e = adamw(F(a.x), F(a.y), F(a.w), F(a.b), n, a.p.lr, a.p.beta1, a.p.beta2, a.p.weight_decay,
                a.p.step, s);
      break;
    case MemOp::kAdd:
      e = add(t, a.x.data, a.y.data, a.out.data, n, s);
      break;
    case MemOp::kCopy:
      e = copy(a.x.data, a.out.data, n * element_size(a.storage), s);
      break;
    case MemOp::kCast:
      e = cast(storage(a.x.type), storage(a.out.type), a.x.data, a.out.data, n, s);
      break;
    case MemOp::kFill:
      e = fill(F(a.out), n, a.p.value, s);
      break;
    case MemOp::kL2Norm:
      e = sum_squares(F(a.x), F(a.out), R, C, s);
      break;
    case MemOp::kElementwise:
      e = scale(t, a.x.data, a.out.data, n, a.p.scale, s);
      break;
    case MemOp::kFp8CastTranspose:
      e = fp8_cast_transpose(t, a.x.data, a.out.data, a.out2.data, F(a.w), F(a.b), R, C, s);
      break;
    case MemOp::kFp8Cast:
      e = fp8_cast(t, a.x.data, a.out.data, F(a.w), F(a.b), n, s);
      break;
    case MemOp::kAmax:
      e = fp8_amax(t, a.x.data, F(a.out), n, s);
      break;
    case MemOp::kMxfp8Quantize:
      e = mxfp8_quantize(t, a.x.data, a.out.data, a.out2.data, a.w.data, a.b.data, R, C, s);
      break;
  }
  SP_CUDA_CHECK(op, e);
  return Status::ok();
}

}  // namespace scaleplan::runtime::cuda
