// The list operations and the op constructors shared by models/operators*.cc (operators_detail.h).
#include <algorithm>
#include <cmath>
#include <utility>

#include "models/operators.h"
#include "models/operators_detail.h"

namespace scaleplan::models {
namespace detail {

LocalWeight local_weight(const TensorEntry& t, const ModelSpec& m, const Layout& l) {
  const int64_t split = t.expert ? std::max(l.etp, 1) : std::max(l.tp, 1);
  LocalWeight w{t.shape[0], t.shape[1], t.expert ? ceil_div(t.count, std::max(l.ep, 1)) : t.count};
  switch (t.tp_split) {
    case TpSplit::kReplicated:
      break;
    case TpSplit::kColumn:
    case TpSplit::kVocab:
      w.out = ceil_div(w.out, split);
      break;
    case TpSplit::kRow:
      w.in = ceil_div(w.in, split);
      break;
    case TpSplit::kKvColumn: {
      const int64_t kv = std::max<int64_t>(m.num_kv_heads, 1);
      w.out = kv >= split ? ceil_div(w.out, split) : w.out / kv;
      break;
    }
  }
  return w;
}

// "self_attn.q_proj.weight" -> "attn.q"; "mlp.experts.down_proj.weight" -> "moe.expert.down".
std::string op_name(std::string_view tensor) {
  std::string s(tensor);
  auto replace = [&](std::string_view from, std::string_view to) {
    if (auto p = s.find(from); p != std::string::npos) s.replace(p, from.size(), to);
  };
  replace(".weight", "");
  replace("_proj", "");
  replace("self_attn.", "attn.");
  replace("mlp.experts.", "moe.expert.");
  replace("mlp.shared_experts.", "moe.shared.");
  if (s == "mlp.gate" && tensor.starts_with("mlp.gate.")) s = "moe.router";
  return s;
}

Op make_op(std::string name, Pass pass, OpKind kind) {
  Op op;
  op.name = std::move(name);
  op.pass = pass;
  op.kind = kind;
  return op;
}

Op gemm(std::string name, Pass pass, int64_t m, int64_t n, int64_t k, int64_t batch, DType dt,
        Bytes saved) {
  Op op = make_op(std::move(name), pass, OpKind::kGemm);
  GemmShape g{m, n, k, batch, dt};
  op.flops = g.flops();
  op.shape = g;
  op.saved = saved;
  return op;
}

// A memory-bound kernel computing `kind` (core/kernel_shapes.h MemOp) over `bytes` read plus
// written.
Op memory_bound(MemOp kind, std::string name, Pass pass, int64_t bytes, Bytes saved) {
  Op op = make_op(std::move(name), pass, OpKind::kMemoryBound);
  op.shape = MemoryBoundShape{Bytes(bytes), Flops(0), kind};
  op.saved = saved;
  return op;
}

Op on_path(Op op, MemPath path) {
  if (auto* s = std::get_if<MemoryBoundShape>(&op.shape)) s->path = path;
  return op;
}

// The memory-bound kind of the model's norms and of its FFN activation.
MemOp norm_op(const ModelSpec& m) {
  return m.norm == NormKind::kLayerNorm ? MemOp::kLayerNorm : MemOp::kRmsNorm;
}
MemOp act_op(const ModelSpec& m) {
  switch (m.ffn_kind) {
    case FfnKind::kSwiGlu:
      return MemOp::kSwiglu;
    case FfnKind::kGelu:
      return MemOp::kGelu;
    default:
      return MemOp::kElementwise;  // ReLU, squared ReLU
  }
}

Op comm(std::string name, Pass pass, CollectiveOp kind, GroupKind group, int size, int64_t bytes,
        int steps) {
  Op op = make_op(std::move(name), pass, OpKind::kComm);
  op.shape = CommShape{kind, group, size, Bytes(bytes), steps};
  return op;
}

Status insert_at(std::vector<Op>& ops, std::string_view anchor, Pass pass, Op op, bool before) {
  for (size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].name == anchor && ops[i].pass == pass) {
      ops.insert(ops.begin() + static_cast<long>(before ? i : i + 1), std::move(op));
      return Status::ok();
    }
  }
  return Status::invalid("operator list: no op '" + std::string(anchor) + "' in pass " +
                         std::string(to_string(pass)) + " to insert '" + op.name + "' at");
}

}  // namespace detail

double deepep_network_share(int nodes, int top_k, int route_groups, int route_group_topk) {
  if (nodes <= 1 || top_k <= 0) return 0;
  const double n = nodes;
  const double m =
      route_groups == nodes && route_group_topk > 0 ? std::min(route_group_topk, nodes) : n;
  const double reached = m * (1.0 - std::pow(1.0 - 1.0 / m, top_k));
  return reached * (n - 1.0) / n / static_cast<double>(top_k);
}

std::string_view to_string(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "forward";
    case Pass::kBackwardInput:
      return "backward-input";
    case Pass::kBackwardWeight:
      return "backward-weight";
    case Pass::kRecompute:
      return "recompute";
    case Pass::kOptimizer:
      return "optimizer";
  }
  return "?";
}

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::kGemm:
      return "gemm";
    case OpKind::kAttentionFwd:
      return "attention_fwd";
    case OpKind::kAttentionBwd:
      return "attention_bwd";
    case OpKind::kMemoryBound:
      return "memory_bound";
    case OpKind::kComm:
      return "comm";
  }
  return "?";
}

TokenCounts token_counts(const Layout& l, int64_t seq_len) {
  TokenCounts t;
  t.seqs = l.mbs;
  t.gemm = static_cast<int64_t>(l.mbs) * seq_len / std::max(l.cp, 1);
  t.sp = (l.tp > 1 && l.sequence_parallel()) ? t.gemm / l.tp : t.gemm;
  return t;
}

void append_in_pass_order(std::vector<Op>& first, std::vector<Op> then) {
  // Each op goes to `out` once, so it is moved rather than copied: the lists are rebuilt for every
  // operator-list key a search meets (their names are strings; issue 45).
  std::vector<Op> out;
  out.reserve(first.size() + then.size());
  for (auto* part : {&first, &then})
    for (Op& op : *part)
      if (op.pass == Pass::kForward) out.push_back(std::move(op));
  for (auto* part : {&then, &first})
    for (Op& op : *part)
      if (op.pass != Pass::kForward) out.push_back(std::move(op));
  first = std::move(out);
}

Flops total_flops(const std::vector<Op>& ops, Pass pass) {
  Flops f(0);
  for (const Op& op : ops) {
    if (op.pass == pass) f += op.flops;
  }
  return f;
}

Bytes total_saved(const std::vector<Op>& ops) {
  Bytes b(0);
  for (const Op& op : ops) b += op.saved;
  return b;
}

OperatorListKey operator_list_key(const Layout& l) {
  return {l.tp,
          l.cp * 4 + static_cast<int>(l.cp_comm_type()),
          l.ep,
          l.etp,
          l.mbs,
          static_cast<int>(l.recompute) * 256 + l.recompute_module_set(),
          l.sequence_parallel(),
          static_cast<int>(l.dtype) * 2 + static_cast<int>(l.act_cache)};
}

}  // namespace scaleplan::models