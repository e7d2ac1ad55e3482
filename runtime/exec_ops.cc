#include "runtime/exec_ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

namespace scaleplan::runtime::exec {
namespace {

using sim::OpId;
using sim::OpKind;

constexpr int64_t kAlign = 256;
constexpr int64_t kSampleWords = 4;  // words of each block an asynchronous check copies
constexpr int64_t kStatesPatternWords = int64_t{1} << 22;  // 16 MiB of states drawn on the host

int64_t align_up(int64_t b) { return (b + kAlign - 1) / kAlign * kAlign; }

// Calls `call(offset, rows, cols)` for n words as the shapes the memory ops take: whole rows of
// kMemOpCols, then one shorter row for the rest.
template <typename Call>
Status by_rows(int64_t n, Call call) {
  if (n <= 0) return Status::ok();
  const int64_t cols = std::min(n, kMemOpCols), rows = n / cols, rest = n - rows * cols;
  SP_RETURN_IF_ERROR(call(int64_t{0}, rows, cols));
  if (rest > 0) SP_RETURN_IF_ERROR(call(rows * cols, int64_t{1}, rest));
  return Status::ok();
}

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
// The f32 whose two 16-bit halves are both bf16(v): a word that reads as ~v whether a kernel
// takes it as one f32 or as two bf16 elements.
float paired(float v) {
  const uint32_t h = to_bf16(v);
  return from_bits(h << 16 | h);
}

// Bytes of the operands a memory-bound op reads (x, y, w, b) and writes (out, out2, out_index),
// each in its type (memory_operands), and the ids it reads; AdamW's param and moments count as
// written.
struct MemNeeds {
  int64_t in = 0, out = 0, ids = 0;
};
int64_t bytes_of(const MemOperand& o) { return align_up(o.count * element_size(o.type)); }
MemNeeds mem_needs(const MemOpArgs& a) {
  const MemOperands o = memory_operands(a);
  MemNeeds m;
  if (a.op == MemOp::kAdamW) {
    m.in = bytes_of(o.y);
    m.out = bytes_of(o.x) + bytes_of(o.w) + bytes_of(o.b);
    return m;
  }
  m.in = bytes_of(o.x) + bytes_of(o.y) + bytes_of(o.w) + bytes_of(o.b);
  m.out = bytes_of(o.out) + bytes_of(o.out2) + bytes_of(o.out_index);
  m.ids = align_up(a.rows * 4);
  return m;
}

struct KernelNeeds {
  int64_t in = 0, out = 0, weights = 0;
};
KernelNeeds kernel_needs(const sim::KernelPayload& k, int64_t mt) {
  KernelNeeds n;
  if (const auto* g = std::get_if<GemmShape>(&k.shape)) {
    n.in = align_up(g->batch * g->m * g->k * mt);
    n.weights = g->batch * g->k * g->n * mt;
    n.out = align_up(g->batch * g->m * g->n * mt);
  } else if (const auto* a = std::get_if<AttentionShape>(&k.shape)) {
    const int64_t dv = a->v_head_dim ? a->v_head_dim : a->head_dim;
    const int64_t q = a->batch * a->heads * a->q_len, kv = a->batch * a->kv_heads * a->kv_len;
    const int64_t qb = align_up(q * a->head_dim * mt), kb = align_up(kv * a->head_dim * mt),
                  vb = align_up(kv * dv * mt), ob = align_up(q * dv * mt), lb = align_up(q * 4);
    if (k.kind == KernelKind::kAttentionFwd) {
      n.in = qb + kb + vb;
      n.out = ob + lb;
    } else {
      n.in = qb + kb + vb + ob + ob + lb;
      n.out = qb + kb + vb;
    }
  }
  return n;
}

}  // namespace

float check_value(int64_t global_rank, int64_t block, uint32_t seed, int group_size) {
  const uint64_t h = static_cast<uint64_t>(global_rank) * 5 + static_cast<uint64_t>(block) * 3 +
                     static_cast<uint64_t>(seed);
  if (group_size > 64) return static_cast<float>(static_cast<int>(h % 3) - 1);
  return static_cast<float>(static_cast<int>(h % 7) - 3);
}

struct RankOps::CommShape {
  Group group;
  CollectiveOp op = CollectiveOp::kAllReduce;
  OpKind kind = OpKind::kCollective;
  ElemType type = ElemType::kF32;
  int64_t words = 0;  // 4-byte words per block
  int send_blocks = 1, recv_blocks = 1, steps = 1;
  StreamKind stream = StreamKind::kCompute;
  int64_t count() const { return type == ElemType::kF32 ? words : 2 * words; }
};

RankOps::RankOps(const sim::Program& program, const Plan& plan, int rank, Backend& backend)
    : p_(program),
      plan_(plan),
      rank_(rank),
      global_(program.ranks()[static_cast<size_t>(rank)].global_rank),
      be_(backend) {}

RankOps::~RankOps() { release_all(); }

void RankOps::release_all() {
  for (Capture& c : captures_) be_.release(c.staging);
  captures_.clear();
  std::lock_guard lock(act_mu_);
  for (auto& [key, list] : activations_) {
    for (Buffer& b : list) be_.release_on(StreamKind::kCompute, b);
  }
  activations_.clear();
  act_live_ = 0;
  for (Buffer& b : owned_) be_.release(b);
  owned_.clear();
}

Result<RankOps::CommShape> RankOps::comm_shape(OpId id) const {
  const sim::Op& op = p_.op(id);
  CommShape s;
  s.kind = op.kind;
  s.stream = op.stream;
  s.group = groups_.at(static_cast<size_t>(plan_.split_of[id]));
  if (!s.group.member())
    return Status::internal(describe_op(p_, id) + ": this rank holds no communicator for it");
  int64_t unit = op.bytes;
  if (op.kind == OpKind::kCollective) {
    const auto& c = std::get<sim::CollectivePayload>(p_.payload(id));
    s.op = c.op;
    const int n = s.group.size;
    switch (c.op) {
      case CollectiveOp::kAllReduce:
        break;
      case CollectiveOp::kAllGather:
        unit = (op.bytes + n - 1) / n;
        s.recv_blocks = n;
        break;
      case CollectiveOp::kReduceScatter:
        unit = (op.bytes + n - 1) / n;
        s.send_blocks = n;
        break;
      case CollectiveOp::kAllToAll:
        unit = (op.bytes + n - 1) / n;
        s.send_blocks = s.recv_blocks = n;
        break;
      case CollectiveOp::kSendRecv:  // a ring pass: `steps` exchanges of the block
        s.steps = std::max(1, c.steps);
        unit = (op.bytes + s.steps - 1) / s.steps;
        break;
      default:
        return Status::internal(describe_op(p_, id) + ": the executor runs all_reduce, " +
                                "all_gather, reduce_scatter, alltoall and ring passes only");
    }
  }
  // f32 where the block is whole words, else bf16 (an even count: the block stays whole words).
  s.words = std::max<int64_t>(1, (unit + 3) / 4);
  s.type = unit % 4 == 0 ? ElemType::kF32 : ElemType::kBf16;
  return s;
}

// Where an op's send and receive data live. The data-parallel stream's collectives work in the
// static region where the full tensor they move is a model state of the layout's ZeRO stage, as
// Megatron-LM's DDP reduces its grad buffer and gathers its parameter buffer in place: gradient
// all-reduces (and the gradient norm), reduce-scatters of unsharded gradients (ZeRO <= 1),
// all-gathers of unsharded weights (ZeRO <= 2). Otherwise (ZeRO-2/3 gradient buckets, ZeRO-3
// layer gathers, and every other stream) the data is a transient: the stream's own send and
// receive buffers, as the memory model's communication buffers count them.
std::pair<void*, void*> RankOps::comm_data(const CommShape& s) const {
  const int i = static_cast<int>(s.stream);
  const int zero = p_.layout()->zero;
  const bool state = s.op == CollectiveOp::kAllReduce ||
                     (s.op == CollectiveOp::kReduceScatter && zero <= 1) ||
                     (s.op == CollectiveOp::kAllGather && zero <= 2);
  const int64_t send = s.send_blocks * s.words * 4;
  if (s.stream == StreamKind::kDp && s.kind == OpKind::kCollective && state &&
      align_up(send) + s.recv_blocks * s.words * 4 <= static_.bytes().value()) {
    return {static_.data, static_cast<char*>(static_.data) + align_up(send)};
  }
  return {send_[i].data, recv_[i].data};
}

// Memory-bound ops that work on the model states (the optimizer step's passes, and the weight
// gradients' accumulation and embedding update) run on the static region, where those states
// are, when their operands fit there. "Fit" allows kStatesSlack beyond the states' bytes: an op
// over every state is sized in whole rows of kMemOpCols (memory_args_for) and its operands are
// aligned one by one, so AdamW over all parameters (param, grad, m, v: the 16 B/param the states
// are) needs up to a row and four alignments more than the states. Without the slack such an op
// missed the region by those few bytes and took its operands from the workspace instead: the
// 30.8 GB workspace beside 30.8 GB of states measured on an H200 (measured/h200-2026-11-28).
// The static region is allocated with the slack (setup), so that these ops stay inside it.
constexpr int64_t kStatesSlack = 4 * (kMemOpCols * 4 + kAlign);

// A Program's memory-bound op as the call that moves its bytes: activations in the backend's
// activation type, but for the optimizer's and the split weight-gradient passes, which work on
// the fp32 states; the backward passes run the op's backward form where it has one (its input
// gradient; a cast's backward widens, as the gradient of autocast's weight cast does).
MemOpArgs RankOps::args_of(OpId id, const sim::KernelPayload& k) const {
  const sim::Phase ph = p_.op(id).phase;
  const bool states = ph == sim::Phase::kOptimizer || ph == sim::Phase::kBackwardWeight;
  return memory_args_for(std::get<MemoryBoundShape>(k.shape),
                         states ? ElemType::kF32 : be_.activation_type(),
                         ph == sim::Phase::kBackward || ph == sim::Phase::kBackwardInput);
}

bool RankOps::on_states(OpId id, const MemOpArgs& a) const {
  const sim::Phase ph = p_.op(id).phase;
  if (ph != sim::Phase::kOptimizer && ph != sim::Phase::kBackwardWeight) return false;
  const MemNeeds m = mem_needs(a);
  return static_.count > 0 && m.in + m.out <= static_.bytes().value();
}

Buffer RankOps::carve(const Buffer& region, int64_t* offset, int64_t count, ElemType type) const {
  Buffer b{static_cast<char*>(region.data) + *offset, count, type};
  *offset += align_up(count * element_size(type));
  return b;
}

Status RankOps::setup(std::vector<Group> groups) {
  groups_ = std::move(groups);
  const int64_t mt = element_size(be_.matmul_type());
  static_bytes_ = p_.ranks()[static_cast<size_t>(rank_)].static_memory;
  auto make = [&](int64_t bytes, Buffer* b) -> Status {
    if (bytes <= 0) return Status::ok();
    SP_ASSIGN_OR_RETURN(*b, be_.allocate((bytes + 3) / 4, ElemType::kF32));
    owned_.push_back(*b);
    return Status::ok();
  };
  SP_RETURN_IF_ERROR(
      make(static_bytes_.value() > 0 ? static_bytes_.value() + kStatesSlack : 0, &static_));
  int64_t in = 0, out = 0, ids = 0;
  int64_t send[kNumStreams] = {}, recv[kNumStreams] = {};
  // The GEMMs read their weights from the static region's start; AdamW on the states keeps its
  // second moment after its gradient, parameters and first moment (run_compute's carving).
  int64_t weights = 0, moments = static_bytes_.value();
  for (OpId id : plan_.rank_ops[static_cast<size_t>(rank_)]) {
    const sim::Op& op = p_.op(id);
    if (op.kind == OpKind::kCompute) {
      const auto* k = std::get_if<sim::KernelPayload>(&p_.payload(id));
      if (k == nullptr) continue;
      if (k->kind == KernelKind::kMemoryBound) {
        const MemOpArgs a = args_of(id, *k);
        const MemNeeds m = mem_needs(a);
        ids = std::max(ids, m.ids);
        if (!on_states(id, a)) {
          in = std::max(in, m.in);
          out = std::max(out, m.out);
        } else if (a.op == MemOp::kAdamW) {
          const MemOperands o = memory_operands(a);
          moments = std::min(moments, align_up(o.y.count * element_size(o.y.type)) +
                                          align_up(o.x.count * element_size(o.x.type)) +
                                          align_up(o.w.count * element_size(o.w.type)));
        }
      } else {
        const KernelNeeds n = kernel_needs(*k, mt);
        if (n.weights <= static_bytes_.value()) weights = std::max(weights, n.weights);
        in = std::max(in, n.in + (n.weights > static_bytes_.value() ? align_up(n.weights) : 0));
        out = std::max(out, n.out);
      }
    } else if (plan_.split_of[id] >= 0) {
      SP_ASSIGN_OR_RETURN(const CommShape s, comm_shape(id));
      if (comm_data(s).first == static_.data && static_.data != nullptr) continue;
      const int i = static_cast<int>(op.stream);
      const int64_t sb = s.send_blocks * s.words * 4, rb = s.recv_blocks * s.words * 4;
      if (op.kind != OpKind::kRecv) send[i] = std::max(send[i], sb);
      if (op.kind != OpKind::kSend) recv[i] = std::max(recv[i], rb);
    }
  }
  signed_words_ = std::min(weights, moments) / 4;
  int64_t workspace = 0;
  SP_RETURN_IF_ERROR(make(in, &in_));
  SP_RETURN_IF_ERROR(make(out, &out_));
  SP_RETURN_IF_ERROR(make(ids, &ids_));
  SP_RETURN_IF_ERROR(make(ids, &labels_));
  workspace += in + out + 2 * ids;
  for (int s = 0; s < kNumStreams; ++s) {
    SP_RETURN_IF_ERROR(make(send[s], &send_[s]));
    SP_RETURN_IF_ERROR(make(recv[s], &recv_[s]));
    workspace += send[s] + recv[s];
  }
  if (static_.count > 0) workspace += kStatesSlack;  // the executor's, not the model's states
  workspace_bytes_ = Bytes(workspace);
  // Inputs: small values in [-0.5, 0.5], each word two bf16 halves (see `paired`).
  if (in_.count > 0) {
    std::vector<uint32_t> words(static_cast<size_t>(in_.count));
    for (size_t i = 0; i < words.size(); ++i) {
      auto v = [](uint64_t k) {
        return static_cast<float>((k * 2654435761u >> 16) % 1001) / 1000.0f - 0.5f;
      };
      words[i] = static_cast<uint32_t>(to_bf16(v(2 * i))) << 16 | to_bf16(v(2 * i + 1));
    }
    SP_RETURN_IF_ERROR(be_.upload(in_, words.data()));
  }
  if (ids_.count > 0) {  // token ids 0, 1, 2, ...: each below the table's rows (= the op's rows)
    std::vector<int32_t> v(static_cast<size_t>(ids_.count));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(i);
    SP_RETURN_IF_ERROR(be_.upload(ids_, v.data()));
  }
  SP_RETURN_IF_ERROR(reset_states());
  return be_.synchronize();
}

// Weights and optimizer states, drawn from a hash of each word's index (splitmix64's finalizer),
// each word two bf16 halves (see `paired`), one block per part uploaded and copied over the rest
// of that part: the first `signed_words` (the GEMMs' weights) with random signs and magnitudes
// below 0.03, as trained weights have, the rest positive in [0.005, 0.015) (Adam's second moment
// must be >= 0). Not one constant: in isolation a GEMM over a constant operand draws less power
// and, under a power limit, runs 8% higher clock than over varied data (H200, 2026-11-30,
// examples/torch_reference/gemm_power.py; signed, uniform and normal operands agree within 2%).
// On that H200 `run`'s step ran at the same 1,965 MHz with one constant, varied and signed
// weights (docs/runtime.md, "What runs on a GPU"), so the data is realism here, not the reason
// `run` stays below the limit.
Status fill_states(Backend& be, const Buffer& states, int64_t signed_words) {
  if (states.count <= 0) return Status::ok();
  auto hash = [](uint64_t k) {  // uniform in [0, 1)
    k += 0x9e3779b97f4a7c15ull;
    k = (k ^ (k >> 30)) * 0xbf58476d1ce4e5b9ull;
    k = (k ^ (k >> 27)) * 0x94d049bb133111ebull;
    k ^= k >> 31;
    return static_cast<float>(k >> 40) / static_cast<float>(1u << 24);
  };
  // Part [from, from + n) from values v(i) of its own index i.
  auto part = [&](int64_t from, int64_t n, auto v) -> Status {
    if (n <= 0) return Status::ok();
    const int64_t block = std::min(n, kStatesPatternWords);
    std::vector<uint32_t> words(static_cast<size_t>(block));
    for (size_t i = 0; i < words.size(); ++i)
      words[i] = static_cast<uint32_t>(to_bf16(v(2 * i))) << 16 | to_bf16(v(2 * i + 1));
    SP_RETURN_IF_ERROR(be.upload(states.slice(from, block), words.data()));
    for (int64_t off = block; off < n; off += block) {
      SP_RETURN_IF_ERROR(
          by_rows(std::min(block, n - off), [&](int64_t at, int64_t rows, int64_t cols) {
            MemOpArgs a;
            a.op = MemOp::kCopy;
            a.stream = StreamKind::kCompute;
            a.rows = rows;
            a.cols = cols;
            a.x = states.slice(from + at, rows * cols);
            a.out = states.slice(from + off + at, rows * cols);
            return be.memory_op(a);
          }));
    }
    return Status::ok();
  };
  const int64_t s = std::clamp<int64_t>(signed_words, 0, states.count);
  SP_RETURN_IF_ERROR(part(0, s, [&](uint64_t k) { return 0.06f * (hash(k) - 0.5f); }));
  return part(s, states.count - s, [&](uint64_t k) { return 0.005f + 0.01f * hash(k); });
}

Status RankOps::reset_states() { return fill_states(be_, static_, signed_words_); }

Status RankOps::fill_block(StreamKind stream, const Buffer& words, float value, ElemType type) {
  return by_rows(words.count, [&](int64_t at, int64_t rows, int64_t cols) {
    MemOpArgs a;
    a.op = MemOp::kFill;
    a.stream = stream;
    a.rows = rows;
    a.cols = cols;
    a.p.value = type == ElemType::kF32 ? value : paired(value);
    a.out = Buffer{static_cast<char*>(words.data) + at * 4, rows * cols, ElemType::kF32};
    return be_.memory_op(a);
  });
}

Status RankOps::run(OpId id) {
  const sim::Op& op = p_.op(id);
  switch (op.kind) {
    case OpKind::kCompute:
      return run_compute(id);
    case OpKind::kCollective:
      return plan_.split_of[id] < 0 ? Status::ok() : run_collective(id, false);
    case OpKind::kSend:
    case OpKind::kRecv:
      return run_transfer(id, false);
    case OpKind::kAlloc: {
      SP_ASSIGN_OR_RETURN(Buffer b,
                          be_.allocate_on(op.stream, (op.bytes + 1) / 2, ElemType::kBf16));
      std::lock_guard lock(act_mu_);
      activations_[int64_t{op.chunk} << 32 | static_cast<uint16_t>(op.microbatch)].push_back(b);
      act_live_ += op.bytes;
      act_peak_.store(std::max(act_peak_.load(), act_live_));
      return Status::ok();
    }
    case OpKind::kFree: {
      std::lock_guard lock(act_mu_);
      auto it = activations_.find(int64_t{op.chunk} << 32 | static_cast<uint16_t>(op.microbatch));
      if (it == activations_.end() || it->second.empty())
        return Status::internal(describe_op(p_, id) + ": frees activations never allocated");
      Buffer b = it->second.front();
      it->second.erase(it->second.begin());
      be_.release_on(op.stream, b);
      act_live_ -= op.bytes;
      return Status::ok();
    }
    case OpKind::kHost:
      return Status::ok();  // the executor issues ops itself; a framework's host time is not run
  }
  return Status::ok();
}

Status RankOps::run_compute(OpId id) {
  const auto* k = std::get_if<sim::KernelPayload>(&p_.payload(id));
  if (k == nullptr) return Status::ok();  // pass starts, joins: no kernel
  const ElemType mt = be_.matmul_type();
  int64_t ip = 0, op = 0;
  if (const auto* g = std::get_if<GemmShape>(&k->shape)) {
    if (g->m <= 0 || g->n <= 0 || g->k <= 0 || g->batch <= 0) return Status::ok();
    GemmArgs a;
    a.shape = *g;
    // The backends have no NVFP4 GEMM: an fp4 GEMM runs as the fp8 one of its shape.
    if (a.shape.dtype == DType::kFp4) a.shape.dtype = DType::kFp8;
    // fp8 GEMMs run in cuBLASLt's TN form, the layout Transformer Engine casts its operands into
    // (B stored [n, k]; runtime/cuda/gemm.h). The operands are synthetic: the same bytes serve.
    a.trans_b = a.shape.dtype == DType::kFp8;
    a.a = carve(in_, &ip, g->batch * g->m * g->k, mt);
    const int64_t wn = g->batch * g->k * g->n;
    if (wn * element_size(mt) <= static_.bytes().value()) {
      a.b = Buffer{static_.data, wn, mt};  // the weights live in the static region
    } else {
      a.b = carve(in_, &ip, wn, mt);
    }
    a.c = carve(out_, &op, g->batch * g->m * g->n, mt);
    return be_.gemm(a);
  }
  if (const auto* s = std::get_if<AttentionShape>(&k->shape)) {
    AttentionArgs a;
    a.shape = *s;
    if (a.shape.v_head_dim == 0) a.shape.v_head_dim = s->head_dim;
    const int64_t dv = a.shape.v_head_dim;
    const int64_t q = s->batch * s->heads * s->q_len, kv = s->batch * s->kv_heads * s->kv_len;
    a.q = carve(in_, &ip, q * s->head_dim, mt);
    a.k = carve(in_, &ip, kv * s->head_dim, mt);
    a.v = carve(in_, &ip, kv * dv, mt);
    if (k->kind == KernelKind::kAttentionFwd) {
      a.o = carve(out_, &op, q * dv, mt);
      a.lse = carve(out_, &op, q, ElemType::kF32);
      return be_.attention_forward(a);
    }
    a.o = carve(in_, &ip, q * dv, mt);
    a.d_o = carve(in_, &ip, q * dv, mt);
    a.lse = carve(in_, &ip, q, ElemType::kF32);
    a.dq = carve(out_, &op, q * s->head_dim, mt);
    a.dk = carve(out_, &op, kv * s->head_dim, mt);
    a.dv = carve(out_, &op, kv * dv, mt);
    return be_.attention_backward(a);
  }
  MemOpArgs a = args_of(id, *k);
  const MemOperands o = memory_operands(a);
  // Inputs from `src`, results to `dst`: the input and output regions, or the static region for
  // an op on the model states (inputs and results then share it, as the states do).
  const bool states = on_states(id, a);
  const Buffer& src = states ? static_ : in_;
  const Buffer& dst = states ? static_ : out_;
  int64_t& dp = states ? ip : op;
  if (a.op == MemOp::kAdamW) {
    a.y = carve(src, &ip, o.y.count, o.y.type);
    a.x = carve(dst, &dp, o.x.count, o.x.type);
    a.w = carve(dst, &dp, o.w.count, o.w.type);
    a.b = carve(dst, &dp, o.b.count, o.b.type);
    return be_.memory_op(a);
  }
  a.x = carve(src, &ip, o.x.count, o.x.type);
  a.y = carve(src, &ip, o.y.count, o.y.type);
  a.w = carve(src, &ip, o.w.count, o.w.type);
  a.b = carve(src, &ip, o.b.count, o.b.type);
  a.index = Buffer{(a.op == MemOp::kCrossEntropy ? labels_ : ids_).data, a.rows, ElemType::kI32};
  a.out = carve(dst, &dp, o.out.count, o.out.type);
  a.out2 = carve(dst, &dp, o.out2.count, o.out2.type);
  a.out_index = carve(dst, &dp, o.out_index.count, o.out_index.type);
  return be_.memory_op(a);
}

Status RankOps::run_collective(OpId id, bool fill_only) {
  SP_ASSIGN_OR_RETURN(const CommShape s, comm_shape(id));
  const auto [send_data, recv_data] = comm_data(s);
  const Buffer send{send_data, s.send_blocks * s.count(), s.type};
  const Buffer recv{recv_data, s.recv_blocks * s.count(), s.type};
  const uint32_t seed = p_.op(id).match;
  if (fill_only) {
    const Buffer words{send_data, s.send_blocks * s.words, ElemType::kF32};
    for (int j = 0; j < s.send_blocks; ++j) {
      SP_RETURN_IF_ERROR(fill_block(s.stream, words.slice(j * s.words, s.words),
                                    check_value(global_, j, seed, s.group.size), s.type));
    }
    return Status::ok();
  }
  if (s.op == CollectiveOp::kSendRecv) {
    // Ring: each step forwards the block received in the step before (ring attention's K/V).
    const int n = s.group.size, me = s.group.rank;
    Buffer cur = send, other = recv;
    for (int step = 0; step < s.steps; ++step) {
      SP_RETURN_IF_ERROR(be_.exchange(
          s.group, {P2POp{true, cur, (me + 1) % n}, P2POp{false, other, (me + n - 1) % n}},
          s.stream));
      std::swap(cur, other);
    }
    return Status::ok();
  }
  CollectiveArgs a;
  a.op = s.op;
  a.send = send;
  a.recv = recv;
  a.count = s.count();
  a.stream = s.stream;
  return be_.collective(s.group, a);
}

Status RankOps::run_transfer(OpId id, bool fill_only) {
  SP_ASSIGN_OR_RETURN(const CommShape s, comm_shape(id));
  const bool sending = s.kind == OpKind::kSend;
  const auto [send_data, recv_data] = comm_data(s);
  const Buffer buf{sending ? send_data : recv_data, s.count(), s.type};
  if (fill_only) {
    if (!sending) return Status::ok();
    return fill_block(s.stream, Buffer{buf.data, s.words, ElemType::kF32},
                      check_value(global_, 0, p_.op(id).match, 2), s.type);
  }
  // The pair's communicator: group rank 0 sends, 1 receives.
  return be_.exchange(s.group, {P2POp{sending, buf, sending ? 1 : 0}}, s.stream);
}

Result<bool> RankOps::prepare_check(OpId id) {
  const sim::Op& op = p_.op(id);
  if (plan_.split_of[id] < 0) return false;
  if (op.kind == OpKind::kCollective) {
    SP_RETURN_IF_ERROR(run_collective(id, true));
    return true;
  }
  if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    SP_RETURN_IF_ERROR(run_transfer(id, true));
    return op.kind == OpKind::kRecv;
  }
  return false;
}

std::vector<float> RankOps::expected_blocks(OpId id, const CommShape& s) const {
  const uint32_t seed = p_.op(id).match;
  std::vector<float> e(static_cast<size_t>(s.recv_blocks), 0.0f);
  if (s.kind == OpKind::kRecv) {
    e[0] = check_value(p_.peer(id).value(), 0, seed, 2);
    return e;
  }
  const auto members = p_.members(p_.group(id).value());
  const int n = static_cast<int>(members.size()), me = s.group.rank;
  switch (s.op) {
    case CollectiveOp::kAllReduce:
      for (int m : members) e[0] += check_value(m, 0, seed, n);
      break;
    case CollectiveOp::kReduceScatter:
      for (int m : members) e[0] += check_value(m, me, seed, n);
      break;
    case CollectiveOp::kAllGather:
      for (int r = 0; r < n; ++r) e[static_cast<size_t>(r)] = check_value(members[r], 0, seed, n);
      break;
    case CollectiveOp::kAllToAll:
      for (int r = 0; r < n; ++r) e[static_cast<size_t>(r)] = check_value(members[r], me, seed, n);
      break;
    case CollectiveOp::kSendRecv:  // the block of the member `steps` back around the ring
      e[0] = check_value(members[static_cast<size_t>(((me - s.steps) % n + n) % n)], 0, seed, n);
      break;
    default:
      break;
  }
  return e;
}

// The words that hold a checked op's result: the receive buffer, or for a ring with an even
// number of steps the send buffer (the two alternate).
Buffer RankOps::result_words(const CommShape& s) const {
  const bool in_send =
      s.op == CollectiveOp::kSendRecv && s.kind == OpKind::kCollective && s.steps % 2 == 0;
  const auto [send_data, recv_data] = comm_data(s);
  return Buffer{in_send ? send_data : recv_data, s.recv_blocks * s.words, ElemType::kF32};
}

Status RankOps::check_now(OpId id) {
  SP_ASSIGN_OR_RETURN(const CommShape s, comm_shape(id));
  const Buffer words = result_words(s);
  std::vector<uint32_t> got(static_cast<size_t>(words.count));
  SP_RETURN_IF_ERROR(be_.download(words, got.data()));
  SP_RETURN_IF_ERROR(compare(id, got, s.words, 0, expected_blocks(id, s), s.type));
  checked_.fetch_add(1);
  return Status::ok();
}

Status RankOps::capture(OpId id) {
  SP_ASSIGN_OR_RETURN(const CommShape s, comm_shape(id));
  const Buffer words = result_words(s);
  const int64_t per = std::min(s.words, kSampleWords);
  Capture c{id, {}, per};
  SP_ASSIGN_OR_RETURN(c.staging, be_.allocate(s.recv_blocks * per, ElemType::kF32));
  for (int j = 0; j < s.recv_blocks; ++j) {
    MemOpArgs a;
    a.op = MemOp::kCopy;
    a.stream = s.stream;
    a.rows = 1;
    a.cols = per;
    a.x = words.slice(j * s.words, per);
    a.out = c.staging.slice(j * per, per);
    SP_RETURN_IF_ERROR(be_.memory_op(a));
  }
  captures_.push_back(c);
  return Status::ok();
}

Status RankOps::verify_captured() {
  Status st;
  for (Capture& c : captures_) {
    if (st.is_ok()) {
      std::vector<uint32_t> got(static_cast<size_t>(c.staging.count));
      st = be_.download(c.staging, got.data());
      if (st.is_ok()) {
        auto s = comm_shape(c.op);
        st = s.is_ok()
                 ? compare(c.op, got, c.words_per_block, 0, expected_blocks(c.op, *s), s->type)
                 : s.status();
      }
      if (st.is_ok()) checked_.fetch_add(1);
    }
    be_.release(c.staging);
  }
  captures_.clear();
  return st;
}

Status RankOps::compare(OpId id, const std::vector<uint32_t>& got, int64_t words_per_block, int64_t,
                        const std::vector<float>& expected, ElemType type) const {
  for (size_t j = 0; j < expected.size(); ++j) {
    const float e = expected[j];
    for (int64_t w = 0; w < words_per_block; ++w) {
      const size_t at = j * static_cast<size_t>(words_per_block) + static_cast<size_t>(w);
      if (at >= got.size()) break;
      const uint32_t word = got[at];
      bool ok;
      float value;
      if (type == ElemType::kF32) {
        value = from_bits(word);
        ok = value == e;
      } else {
        const uint32_t h = to_bf16(e);
        ok = (word >> 16) == h && (word & 0xffffu) == h;
        value = from_bits(word & 0xffff0000u);
        if ((word >> 16) == h) value = from_bits(word << 16);
      }
      if (!ok) {
        return Status::internal("collective check failed: " + describe_op(p_, id) +
                                " on global rank " + std::to_string(global_) + ": block " +
                                std::to_string(j) + " word " + std::to_string(w) + " holds " +
                                std::to_string(value) + ", its definition gives " +
                                std::to_string(e));
      }
    }
  }
  return Status::ok();
}

}  // namespace scaleplan::runtime::exec
