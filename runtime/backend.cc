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
  }
  return 4;
}

constexpr std::string_view kElemTypeNames[] = {"f32", "bf16", "i32"};
static_assert(std::ssize(kElemTypeNames) == static_cast<int>(ElemType::kI32) + 1);

std::string_view to_string(ElemType t) { return name_in(kElemTypeNames, t); }

Buffer Buffer::slice(int64_t offset, int64_t n) const {
  Buffer b = *this;
  b.data = static_cast<char*>(data) + offset * element_size(type);
  b.count = n;
  return b;
}

MemoryBoundShape memory_shape(const MemOpArgs& a) {
  // Elements touched, counting each read and each write once (what a fused kernel moves), and
  // FLOP-equivalents per element where a special function (exp, tanh, sin, cos, sqrt) counts as
  // kSpecial: on a GPU these ops are bandwidth-bound whatever the count, but on a CPU core the
  // special functions dominate, and the fitted model can only see that through this count.
  constexpr double kSpecial = 20;
  const double n = static_cast<double>(a.rows) * static_cast<double>(a.cols);
  const double rows = static_cast<double>(a.rows);
  double elems = 0, flops = 0;
  switch (a.op) {
    case MemOp::kRmsNorm:
      elems = 2 * n + a.cols;
      flops = 4 * n + kSpecial * rows;
      break;
    case MemOp::kLayerNorm:
      elems = 2 * n + 2 * a.cols;
      flops = 7 * n + kSpecial * rows;
      break;
    case MemOp::kRope:
      elems = 2 * n;
      flops = (3 + kSpecial) * n;
      break;  // sin and cos per pair
    case MemOp::kSwiglu:
      elems = 3 * n;
      flops = (4 + kSpecial) * n;
      break;
    case MemOp::kGelu:
      elems = 2 * n;
      flops = (8 + kSpecial) * n;
      break;
    case MemOp::kSoftmax:
      elems = 2 * n;
      flops = (4 + kSpecial) * n;
      break;
    case MemOp::kCrossEntropy:
      elems = 2 * n + 2 * rows;
      flops = (5 + kSpecial) * n;
      break;
    case MemOp::kEmbedding:
      elems = 2 * n + rows;
      flops = 0;
      break;
    case MemOp::kMoeRouting:
      elems = n + 2 * rows * static_cast<double>(a.p.top_k);
      flops = (6 + kSpecial) * n;
      break;
    case MemOp::kAdamW:
      elems = 7 * n;
      flops = (15 + kSpecial) * n;
      break;  // read p, g, m, v; write p, m, v
    case MemOp::kAdd:
      elems = 3 * n;
      flops = n;
      break;
    case MemOp::kCopy:
    case MemOp::kCast:
      elems = 2 * n;
      break;
    case MemOp::kFill:
      elems = n;
      break;
    case MemOp::kL2Norm:
      elems = n + rows;
      flops = 2 * n;
      break;
    case MemOp::kElementwise:
      elems = 2 * n;
      flops = n;
      break;
  }
  return MemoryBoundShape{Bytes(static_cast<int64_t>(elems * 4)), Flops(flops), a.op};
}

MemOpArgs memory_args_for(const MemoryBoundShape& shape) {
  // memory_shape counts elems = per_elem·rows·cols + per_row·rows + per_col·cols, 4 bytes each.
  double per_elem = 2, per_row = 0, per_col = 0;
  MemOpArgs a;
  a.op = shape.op;
  switch (shape.op) {
    case MemOp::kRmsNorm:
      per_col = 1;
      break;
    case MemOp::kLayerNorm:
      per_col = 2;
      break;
    case MemOp::kSwiglu:
    case MemOp::kAdd:
      per_elem = 3;
      break;
    case MemOp::kCrossEntropy:
      per_row = 2;
      break;
    case MemOp::kEmbedding:
      per_row = 1;
      break;
    case MemOp::kMoeRouting:
      a.p.top_k = 2;
      per_elem = 1;
      per_row = 2.0 * static_cast<double>(a.p.top_k);
      break;
    case MemOp::kAdamW:
      per_elem = 7;
      break;
    case MemOp::kFill:
      per_elem = 1;
      break;
    case MemOp::kL2Norm:
      per_elem = 1;
      per_row = 1;
      break;
    case MemOp::kRope:
    case MemOp::kGelu:
    case MemOp::kSoftmax:
    case MemOp::kCopy:
    case MemOp::kCast:
    case MemOp::kElementwise:
      break;
  }
  const double elems = std::max(0.0, static_cast<double>(shape.bytes.value()) / 4.0);
  int64_t cols = std::clamp<int64_t>(static_cast<int64_t>(elems / per_elem), 1, kMemOpCols);
  if (shape.op == MemOp::kMoeRouting) cols = 8;                                   // experts
  if (shape.op == MemOp::kRope) cols = std::max<int64_t>(2, cols & ~int64_t{1});  // pairs
  const double row = per_elem * static_cast<double>(cols) + per_row;
  a.cols = cols;
  a.rows = std::max<int64_t>(1, std::llround((elems - per_col * static_cast<double>(cols)) / row));
  if (shape.op == MemOp::kRope) a.p.head_dim = cols % 64 == 0 ? 64 : cols;
  if (shape.op == MemOp::kEmbedding) a.p.vocab = a.rows;
  return a;
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
