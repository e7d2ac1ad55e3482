#include "runtime/backend.h"

#include "core/enum_names.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace scaleplan::runtime {

int64_t element_size(ElemType t) {
  switch (t) {
    case ElemType::kF32:
      return 4;
    case ElemType::kBf16:
      return 2;
    case ElemType::kI32:
      return 4;
    case ElemType::kFp8E4m3:
    case ElemType::kE8m0:
      return 1;
  }
  return 4;
}

constexpr std::string_view kElemTypeNames[] = {"f32", "bf16", "i32", "e4m3", "e8m0"};
static_assert(std::ssize(kElemTypeNames) == static_cast<int>(ElemType::kE8m0) + 1);

std::string_view to_string(ElemType t) { return name_in(kElemTypeNames, t); }

Buffer Buffer::slice(int64_t offset, int64_t n) const {
  Buffer b = *this;
  b.data = static_cast<char*>(data) + offset * element_size(type);
  b.count = n;
  return b;
}

bool has_act_operands(MemOp op) {
  switch (op) {
    case MemOp::kCrossEntropy:  // fp32 logits: torchtitan casts them first, Megatron's CE is fp32
    case MemOp::kMoeRouting:    // fp32 router probabilities
    case MemOp::kAdamW:         // fp32 master weights, gradients and moments
    case MemOp::kFill:          // fp32 gradient buffers
    case MemOp::kL2Norm:        // over fp32 gradients
      return false;
    default:
      return true;
  }
}

bool has_backward_form(MemOp op) {
  return op == MemOp::kRmsNorm || op == MemOp::kRope || op == MemOp::kSwiglu ||
         op == MemOp::kGelu || op == MemOp::kCast;
}

namespace {

// Bytes one call moves, each read and each write once (what a fused kernel moves): per element
// of rows × cols, per row, per column and per call, with the act operands `s` bytes each.
struct Footprint {
  double per_elem = 0, per_row = 0, per_col = 0, per_call = 0;
};
Footprint footprint(MemOp op, bool bwd, double s, int64_t top_k) {
  switch (op) {
    case MemOp::kRmsNorm:
      return {(bwd ? 3 : 2) * s, 0, 4};  // x, out (+ dy); w in f32
    case MemOp::kLayerNorm:
      return {2 * s, 0, 8};
    case MemOp::kRope:
      return {2 * s, 0, 0};  // the cos/sin cache is read from cache, not counted
    case MemOp::kSwiglu:
      return {(bwd ? 5 : 3) * s, 0, 0};  // fwd: gate, up -> out; bwd: gate, up, dy -> dgate, dup
    case MemOp::kGelu:
      return {(bwd ? 3 : 2) * s, 0, 0};
    case MemOp::kSoftmax:
    case MemOp::kCopy:
    case MemOp::kElementwise:
      return {2 * s, 0, 0};
    case MemOp::kCrossEntropy:
      return {8, 8, 0};  // logits, gradient; label and loss per row
    case MemOp::kEmbedding:
      return {2 * s, 4, 0};  // the table's rows read, out written; one id per row
    case MemOp::kMoeRouting:
      return {4, 8.0 * static_cast<double>(top_k), 0};
    case MemOp::kAdamW:
      return {28, 0, 0};  // read p, g, m, v; write p, m, v
    case MemOp::kAdd:
      return {3 * s, 0, 0};
    case MemOp::kCast:
      return {4 + s, 0, 0};  // the f32 side and the act side
    case MemOp::kFill:
      return {4, 0, 0};
    case MemOp::kL2Norm:
      return {4, 4, 0};
    case MemOp::kFp8CastTranspose:
      return {s + 2, 0, 0, 8};  // x; its e4m3 copy and transpose; the scale and the amax
    case MemOp::kFp8Cast:
      return {s + 1, 0, 0, 8};  // x; its e4m3 copy; the scale and the amax
    case MemOp::kAmax:
      return {s, 0, 0, 4};  // x; the amax
    case MemOp::kMxfp8Quantize:
      return {s + 2 + 2.0 / 32, 0, 0};  // x; two e4m3 copies; one E8M0 scale per 32 of each
  }
  return {2 * s, 0, 0};
}

}  // namespace

MemOperands memory_operands(const MemOpArgs& a) {
  const int64_t n = a.rows * a.cols;
  const ElemType f = ElemType::kF32, t = has_act_operands(a.op) ? a.storage : f;
  const bool bwd = a.backward && has_backward_form(a.op);
  MemOperands o;
  switch (a.op) {
    case MemOp::kRmsNorm:
      o.x = {n, t};
      o.w = {a.cols, f};
      o.out = {n, t};
      if (bwd) o.y = {n, t};
      break;
    case MemOp::kLayerNorm:
      o.x = {n, t};
      o.w = o.b = {a.cols, f};
      o.out = {n, t};
      break;
    case MemOp::kSwiglu:
      o.x = {2 * n, t};
      o.out = {bwd ? 2 * n : n, t};
      if (bwd) o.y = {n, t};
      break;
    case MemOp::kGelu:
      o.x = o.out = {n, t};
      if (bwd) o.y = {n, t};
      break;
    case MemOp::kRope:
    case MemOp::kSoftmax:
    case MemOp::kCopy:
    case MemOp::kElementwise:
      o.x = o.out = {n, t};
      break;
    case MemOp::kCrossEntropy:
      o.x = o.out2 = {n, f};
      o.index = {a.rows, ElemType::kI32};
      o.out = {a.rows, f};
      break;
    case MemOp::kEmbedding:
      o.index = {a.rows, ElemType::kI32};
      o.w = {a.p.vocab * a.cols, t};
      o.out = {n, t};
      break;
    case MemOp::kMoeRouting:
      o.x = {n, f};
      o.out = {a.rows * a.p.top_k, f};
      o.out_index = {a.rows * a.p.top_k, ElemType::kI32};
      break;
    case MemOp::kAdamW:
      o.x = o.y = o.w = o.b = {n, f};
      break;
    case MemOp::kAdd:
      o.x = o.y = o.out = {n, t};
      break;
    case MemOp::kCast:
      o.x = {n, bwd ? t : f};
      o.out = {n, bwd ? f : t};
      break;
    case MemOp::kFill:
      o.out = {n, f};
      break;
    case MemOp::kL2Norm:
      o.x = {n, f};
      o.out = {a.rows, f};
      break;
    case MemOp::kFp8CastTranspose:
      o.x = {n, t};
      o.w = o.b = {1, f};
      o.out = o.out2 = {n, ElemType::kFp8E4m3};
      break;
    case MemOp::kFp8Cast:
      o.x = {n, t};
      o.w = o.b = {1, f};
      o.out = {n, ElemType::kFp8E4m3};
      break;
    case MemOp::kAmax:
      o.x = {n, t};
      o.out = {1, f};
      break;
    case MemOp::kMxfp8Quantize:
      o.x = {n, t};
      o.out = o.out2 = {n, ElemType::kFp8E4m3};
      o.w = {a.rows * ((a.cols + 31) / 32), ElemType::kE8m0};
      o.b = {(a.rows + 31) / 32 * a.cols, ElemType::kE8m0};
      break;
  }
  return o;
}

MemoryBoundShape memory_shape(const MemOpArgs& a) {
  // FLOP-equivalents per element where a special function (exp, tanh, sin, cos, sqrt) counts as
  // kSpecial: on a GPU these ops are bandwidth-bound whatever the count, but on a CPU core the
  // special functions dominate, and the fitted model can only see that through this count.
  constexpr double kSpecial = 20;
  const double n = static_cast<double>(a.rows) * static_cast<double>(a.cols);
  const double rows = static_cast<double>(a.rows);
  double flops = 0;
  switch (a.op) {
    case MemOp::kRmsNorm:
      flops = 4 * n + kSpecial * rows;
      break;
    case MemOp::kLayerNorm:
      flops = 7 * n + kSpecial * rows;
      break;
    case MemOp::kRope:
      flops = (3 + kSpecial) * n;
      break;  // sin and cos per pair
    case MemOp::kSwiglu:
      flops = (4 + kSpecial) * n;
      break;
    case MemOp::kGelu:
      flops = (8 + kSpecial) * n;
      break;
    case MemOp::kSoftmax:
      flops = (4 + kSpecial) * n;
      break;
    case MemOp::kCrossEntropy:
      flops = (5 + kSpecial) * n;
      break;
    case MemOp::kMoeRouting:
      flops = (6 + kSpecial) * n;
      break;
    case MemOp::kAdamW:
      flops = (15 + kSpecial) * n;
      break;
    case MemOp::kAdd:
    case MemOp::kElementwise:
      flops = n;
      break;
    case MemOp::kL2Norm:
      flops = 2 * n;
      break;
    case MemOp::kEmbedding:
    case MemOp::kCopy:
    case MemOp::kCast:
    case MemOp::kFill:
      break;
    case MemOp::kFp8CastTranspose:
    case MemOp::kFp8Cast:
      flops = (2 + kSpecial) * n;  // scale, |x| max; the host's e4m3 rounding (ilogb, ldexp)
      break;
    case MemOp::kAmax:
      flops = n;
      break;
    case MemOp::kMxfp8Quantize:
      flops = 2 * (2 + kSpecial) * n;  // two copies: block max, scale, e4m3 rounding
      break;
  }
  const double s =
      static_cast<double>(element_size(has_act_operands(a.op) ? a.storage : ElemType::kF32));
  const Footprint fp = footprint(a.op, a.backward && has_backward_form(a.op), s, a.p.top_k);
  double bytes =
      fp.per_elem * n + fp.per_row * rows + fp.per_col * static_cast<double>(a.cols) + fp.per_call;
  // MXFP8's scales count whole blocks, a last short one included (memory_operands): exact here,
  // the footprint's 2/32 B per element where rows and cols are multiples of 32 (the inverse).
  if (a.op == MemOp::kMxfp8Quantize) {
    const MemOperands o = memory_operands(a);
    bytes = (s + 2) * n + static_cast<double>(o.w.count + o.b.count);
  }
  return MemoryBoundShape{Bytes(static_cast<int64_t>(bytes)), Flops(flops), a.op};
}

MemOpArgs memory_args_for(const MemoryBoundShape& shape, ElemType storage, bool backward) {
  MemOpArgs a;
  a.op = shape.op;
  a.storage = has_act_operands(shape.op) ? storage : ElemType::kF32;
  a.backward = backward && has_backward_form(shape.op);
  if (shape.op == MemOp::kMoeRouting) a.p.top_k = 2;
  const Footprint fp =
      footprint(a.op, a.backward, static_cast<double>(element_size(a.storage)), a.p.top_k);
  const double bytes = std::max(0.0, static_cast<double>(shape.bytes.value()));
  int64_t cols = std::clamp<int64_t>(static_cast<int64_t>(bytes / fp.per_elem), 1, kMemOpCols);
  if (shape.op == MemOp::kMoeRouting) cols = 8;                                   // experts
  if (shape.op == MemOp::kRope) cols = std::max<int64_t>(2, cols & ~int64_t{1});  // pairs
  const double row = fp.per_elem * static_cast<double>(cols) + fp.per_row;
  a.cols = cols;
  a.rows = std::max<int64_t>(
      1, std::llround((bytes - fp.per_col * static_cast<double>(cols) - fp.per_call) / row));
  if (shape.op == MemOp::kRope) a.p.head_dim = cols % 64 == 0 ? 64 : cols;
  if (shape.op == MemOp::kEmbedding) a.p.vocab = a.rows;
  return a;
}

Status check_collective_type(const CollectiveArgs& a) {
  const ElemType t = a.send.data ? a.send.type : a.recv.type;
  const bool reduces = a.op == CollectiveOp::kAllReduce || a.op == CollectiveOp::kReduceScatter ||
                       a.op == CollectiveOp::kReduce;
  if ((t == ElemType::kFp8E4m3 || t == ElemType::kE8m0) && reduces) {
    return Status::invalid(std::string(to_string(a.op)) + ": " + std::string(to_string(t)) +
                           " buffers are moved, not reduced (reduce in bf16 or f32)");
  }
  return Status::ok();
}

Bytes collective_size(const CollectiveArgs& a, int n) {
  const int64_t e = element_size(a.send.valid() && a.send.data ? a.send.type : a.recv.type);
  switch (a.op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
      return Bytes(a.count * e);
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kGather:
    case CollectiveOp::kScatter:
      return Bytes(a.count * n * e);
    case CollectiveOp::kSendRecv:  // not a collective: rejected by collective()
    case CollectiveOp::kBarrier:
      return Bytes(0);
  }
  return Bytes(0);
}

}  // namespace scaleplan::runtime
