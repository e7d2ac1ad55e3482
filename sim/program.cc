#include "sim/program.h"

#include "core/enum_names.h"

#include <charconv>
#include <cstdio>
#include <limits>
#include <map>
#include <string>

#include "hw_profiles/placement.h"

namespace scaleplan::sim {

constexpr std::string_view kOpKindNames[] = {"compute", "collective", "send", "recv",
                                             "alloc",   "free",       "host"};
static_assert(std::ssize(kOpKindNames) == static_cast<int>(OpKind::kHost) + 1);

std::string_view to_string(OpKind k) { return name_in(kOpKindNames, k); }

constexpr std::string_view kPhaseNames[] = {
    "forward", "backward", "backward_input", "backward_weight", "recompute", "optimizer", "other"};
static_assert(std::ssize(kPhaseNames) == static_cast<int>(Phase::kOther) + 1);

std::string_view to_string(Phase p) { return name_in(kPhaseNames, p); }

void Program::clear() {
  ops_.clear();
  deps_.clear();
  ranks_.clear();
  labels_.clear();
  match_members_.clear();
  label_index_.clear();
  layout_.reset();
  merged_compute_ = false;
  overflow_ = Status::ok();
  groups_ = std::make_shared<GroupTable>();
}

int Program::add_rank(RankInfo info) {
  ranks_.push_back(info);
  return static_cast<int>(ranks_.size()) - 1;
}

namespace {

template <class... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <class... F>
Overloaded(F...) -> Overloaded<F...>;

// What of a payload its text does not show, for interning: two labels with the same name and text
// but different payloads must stay apart.
std::string payload_key(const OpPayload& p) {
  char buf[64];
  std::visit(
      Overloaded{
          [&](const std::monostate&) { buf[0] = '\0'; },
          [&](const KernelPayload& k) {
            const auto* b = std::get_if<MemoryBoundShape>(&k.shape);
            std::snprintf(buf, sizeof buf, "k%d:%d:%d", static_cast<int>(k.kind),
                          b ? static_cast<int>(b->op) : -1, static_cast<int>(k.shape.index()));
          },
          [&](const CollectivePayload& c) {
            std::snprintf(buf, sizeof buf, "c%d:%d", static_cast<int>(c.op),
                          static_cast<int>(c.group));
          },
          [&](const TransferPayload& t) { std::snprintf(buf, sizeof buf, "t%d", t.peer_stage); },
          [&](const ActivationsPayload&) { std::snprintf(buf, sizeof buf, "a"); },
          [&](const SyncPayload&) { std::snprintf(buf, sizeof buf, "s"); },
          [&](const HostPayload&) { std::snprintf(buf, sizeof buf, "h"); },
      },
      p);
  return buf;
}

}  // namespace

std::string payload_text(const OpPayload& p) {
  char buf[200];
  if (const auto* k = std::get_if<KernelPayload>(&p)) {
    if (const auto* g = std::get_if<GemmShape>(&k->shape)) {
      std::snprintf(buf, sizeof buf, "m=%lld n=%lld k=%lld batch=%lld dtype=%s", (long long)g->m,
                    (long long)g->n, (long long)g->k, (long long)g->batch,
                    std::string(to_string(g->dtype)).c_str());
      return buf;
    }
    if (const auto* a = std::get_if<AttentionShape>(&k->shape)) {
      std::snprintf(
          buf, sizeof buf,
          "b=%lld heads=%lld kv_heads=%lld q=%lld kv=%lld d=%lld dv=%lld causal=%d window=%lld "
          "kernel=%s",
          (long long)a->batch, (long long)a->heads, (long long)a->kv_heads, (long long)a->q_len,
          (long long)a->kv_len, (long long)a->head_dim, (long long)a->v_head_dim, a->causal ? 1 : 0,
          (long long)a->window, std::string(to_string(a->kernel)).c_str());
      return buf;
    }
    const auto& b = std::get<MemoryBoundShape>(k->shape);
    std::snprintf(buf, sizeof buf, "bytes=%lld op=%s", (long long)b.bytes.value(),
                  std::string(to_string(b.op)).c_str());
    return buf;
  }
  if (const auto* c = std::get_if<CollectivePayload>(&p)) {
    std::snprintf(buf, sizeof buf, "group=%s size=%d steps=%d",
                  std::string(to_string(c->group)).c_str(), c->size, c->steps);
    return buf;
  }
  return "";
}

namespace {

// "key=value" pairs of payload_text, in any order.
Result<std::map<std::string, std::string, std::less<>>> text_fields(std::string_view text) {
  std::map<std::string, std::string, std::less<>> f;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size()) break;
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view tok = text.substr(i, end - i);
    const size_t eq = tok.find('=');
    if (eq == std::string_view::npos || eq == 0)
      return Status::invalid("shape: expected key=value, got \"" + std::string(tok) + "\"");
    f[std::string(tok.substr(0, eq))] = std::string(tok.substr(eq + 1));
    i = end;
  }
  return f;
}

Result<int64_t> text_int(const std::map<std::string, std::string, std::less<>>& f,
                         std::string_view key, std::optional<int64_t> fallback = std::nullopt) {
  const auto it = f.find(key);
  if (it == f.end()) {
    if (fallback) return *fallback;
    return Status::invalid("shape: " + std::string(key) + ": missing");
  }
  int64_t v = 0;
  const char* b = it->second.data();
  const char* e = b + it->second.size();
  const auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || v < 0)
    return Status::invalid("shape: " + std::string(key) +
                           ": expected a non-negative integer, got \"" + it->second + "\"");
  return v;
}

}  // namespace

Result<KernelPayload> parse_kernel_text(KernelKind kind, std::string_view text) {
  SP_ASSIGN_OR_RETURN(const auto f, text_fields(text));
  KernelPayload k;
  k.kind = kind;
  switch (kind) {
    case KernelKind::kGemm: {
      GemmShape g;
      SP_ASSIGN_OR_RETURN(g.m, text_int(f, "m"));
      SP_ASSIGN_OR_RETURN(g.n, text_int(f, "n"));
      SP_ASSIGN_OR_RETURN(g.k, text_int(f, "k"));
      SP_ASSIGN_OR_RETURN(g.batch, text_int(f, "batch", 1));
      if (const auto it = f.find("dtype"); it != f.end()) {
        SP_ASSIGN_OR_RETURN(g.dtype, parse_dtype(it->second));
      }
      k.shape = g;
      return k;
    }
    case KernelKind::kAttentionFwd:
    case KernelKind::kAttentionBwd: {
      AttentionShape a;
      SP_ASSIGN_OR_RETURN(a.batch, text_int(f, "b"));
      SP_ASSIGN_OR_RETURN(a.heads, text_int(f, "heads"));
      SP_ASSIGN_OR_RETURN(a.kv_heads, text_int(f, "kv_heads"));
      SP_ASSIGN_OR_RETURN(a.q_len, text_int(f, "q"));
      SP_ASSIGN_OR_RETURN(a.kv_len, text_int(f, "kv"));
      SP_ASSIGN_OR_RETURN(a.head_dim, text_int(f, "d"));
      // Traces written before dv, causal and window were printed: the defaults of the shape.
      SP_ASSIGN_OR_RETURN(a.v_head_dim, text_int(f, "dv", a.head_dim));
      SP_ASSIGN_OR_RETURN(const int64_t causal, text_int(f, "causal", 1));
      a.causal = causal != 0;
      SP_ASSIGN_OR_RETURN(a.window, text_int(f, "window", 0));
      const auto it = f.find("kernel");
      if (it == f.end()) return Status::invalid("shape: kernel: missing");
      bool found = false;
      for (AttentionKernel ak :
           {AttentionKernel::kFlash2, AttentionKernel::kCudnn, AttentionKernel::kUnfused}) {
        if (to_string(ak) == it->second) {
          a.kernel = ak;
          found = true;
        }
      }
      if (!found)
        return Status::invalid("shape: kernel: expected flash2, cudnn or unfused, got \"" +
                               it->second + "\"");
      k.shape = a;
      return k;
    }
    case KernelKind::kMemoryBound: {
      MemoryBoundShape m;
      SP_ASSIGN_OR_RETURN(const int64_t bytes, text_int(f, "bytes"));
      m.bytes = Bytes(bytes);
      const auto it = f.find("op");
      if (it == f.end()) return Status::invalid("shape: op: missing (a trace older than refit)");
      bool found = false;
      for (int i = 0; i < kNumMemOps; ++i) {
        if (to_string(static_cast<MemOp>(i)) == it->second) {
          m.op = static_cast<MemOp>(i);
          found = true;
        }
      }
      if (!found)
        return Status::invalid("shape: op: not a memory-bound op: \"" + it->second + "\"");
      k.shape = m;
      return k;
    }
  }
  return Status::invalid("shape: unknown kernel kind");
}

Flops payload_flops(const OpPayload& p) {
  const auto* k = std::get_if<KernelPayload>(&p);
  if (k == nullptr) return Flops(0);
  if (const auto* g = std::get_if<GemmShape>(&k->shape)) return g->flops();
  if (const auto* a = std::get_if<AttentionShape>(&k->shape))
    return k->kind == KernelKind::kAttentionBwd ? a->backward_flops() : a->forward_flops();
  return std::get<MemoryBoundShape>(k->shape).flops;
}

uint32_t Program::add_label(OpLabel label) {
  char flops[32];
  std::snprintf(flops, sizeof flops, "%.17g", label.flops.value());
  std::string key = label.name;
  key.push_back('\0');
  key += label.shape;
  key.push_back('\0');
  key += flops;
  key.push_back('\0');
  key += payload_key(label.payload);
  auto [it, inserted] =
      label_index_.try_emplace(std::move(key), static_cast<uint32_t>(labels_.size()));
  if (inserted) labels_.push_back(std::move(label));
  return it->second;
}

uint32_t Program::add_label(std::string name, OpPayload payload, Flops flops) {
  std::string shape = payload_text(payload);
  return add_label(OpLabel{std::move(name), std::move(shape), flops, std::move(payload)});
}

Result<const Program::GroupTable*> Program::group_table() const {
  if (!layout_) return Status::internal("program: no layout, so no groups");
  GroupTable* t = groups_.get();
  std::call_once(t->built, [&] {
    const int gpus = layout_->gpus();
    for (int k = 0; k < kNumGroupKinds; ++k) {
      auto groups = hw::group_members(*layout_, static_cast<GroupKind>(k));
      if (!groups) {
        t->status = groups.status();
        return;
      }
      t->index_of[k].assign(static_cast<size_t>(gpus), -1);
      for (size_t i = 0; i < groups->size(); ++i) {
        for (int r : (*groups)[i]) t->index_of[k][static_cast<size_t>(r)] = static_cast<int>(i);
      }
      t->members[k] = std::move(*groups);
    }
  });
  if (!t->status.is_ok()) return t->status;
  return t;
}

Result<GroupRef> Program::group(OpId id) const {
  const auto* c = std::get_if<CollectivePayload>(&payload(id));
  if (c == nullptr) return Status::internal("op " + std::to_string(id) + " is not a collective");
  SP_ASSIGN_OR_RETURN(const GroupTable* t, group_table());
  const int64_t global = ranks_[ops_[id].rank].global_rank;
  const auto& of = t->index_of[static_cast<int>(c->group)];
  if (global < 0 || static_cast<size_t>(global) >= of.size())
    return Status::internal("op " + std::to_string(id) + ": rank outside the layout");
  return GroupRef{c->group, of[static_cast<size_t>(global)]};
}

std::span<const int> Program::members(GroupRef g) const {
  auto t = group_table();
  if (!t) return {};
  const auto& groups = (*t)->members[static_cast<int>(g.kind)];
  if (g.index < 0 || static_cast<size_t>(g.index) >= groups.size()) return {};
  return groups[static_cast<size_t>(g.index)];
}

Result<int64_t> Program::peer(OpId id) const {
  const auto* x = std::get_if<TransferPayload>(&payload(id));
  if (x == nullptr) return Status::internal("op " + std::to_string(id) + " is not a transfer");
  SP_ASSIGN_OR_RETURN(const GroupTable* t, group_table());
  const int64_t global = ranks_[ops_[id].rank].global_rank;
  const auto k = static_cast<int>(GroupKind::kPp);
  const auto& pipe =
      t->members[k][static_cast<size_t>(t->index_of[k][static_cast<size_t>(global)])];
  if (x->peer_stage < 0 || static_cast<size_t>(x->peer_stage) >= pipe.size())
    return Status::internal("op " + std::to_string(id) + ": peer stage out of range");
  return pipe[static_cast<size_t>(x->peer_stage)];
}

uint32_t Program::add_match(int members) {
  if (members < 1 || members > std::numeric_limits<uint16_t>::max()) {
    note_overflow("a collective of " + std::to_string(members) + " members; a program holds 1 to " +
                  std::to_string(std::numeric_limits<uint16_t>::max()));
  } else if (match_members_.size() >= kNoMatch) {
    note_overflow("more than " + std::to_string(kNoMatch - 1) + " collective instances");
  }
  match_members_.push_back(static_cast<uint16_t>(members));
  return static_cast<uint32_t>(match_members_.size()) - 1;
}

void Program::note_overflow(std::string what) {
  if (overflow_.is_ok()) overflow_ = Status::invalid("program: " + std::move(what));
}

OpId Program::add_op(int rank, const OpSpec& spec, std::span<const OpId> deps) {
  // The compact record's narrow fields (Op): a value they cannot hold is an error validate()
  // reports, never a silently wrapped rank, micro-batch or chunk.
  if (rank < 0 || rank > std::numeric_limits<uint16_t>::max()) {
    note_overflow("rank " + std::to_string(rank) + " out of the 0.." +
                  std::to_string(std::numeric_limits<uint16_t>::max()) + " a program holds");
  }
  if (spec.microbatch < -1 || spec.microbatch > std::numeric_limits<int16_t>::max()) {
    note_overflow("micro-batch " + std::to_string(spec.microbatch) + " out of the 0.." +
                  std::to_string(std::numeric_limits<int16_t>::max()) + " a program holds");
  }
  if (spec.chunk < 0 || spec.chunk > std::numeric_limits<uint8_t>::max()) {
    note_overflow("model chunk " + std::to_string(spec.chunk) + " out of the 0.." +
                  std::to_string(std::numeric_limits<uint8_t>::max()) + " a program holds");
  }
  if (ops_.size() >= kNoMatch || deps_.size() + deps.size() >= kNoMatch) {
    note_overflow("more than " + std::to_string(kNoMatch - 1) + " ops or dependencies");
  }
  // Written in place: a record assembled on the stack field by field and then copied in 16-byte
  // moves stalled on every op (a wide load of narrow stores just made cannot be forwarded from
  // the store buffer; a third of the 405B plan's program build).
  Op& op = ops_.emplace_back();
  op.duration = spec.duration;
  op.bytes = spec.bytes;
  op.first_dep = static_cast<uint32_t>(deps_.size());
  op.num_deps = static_cast<uint32_t>(deps.size());
  op.match = spec.match;
  op.label = spec.label;
  op.rank = static_cast<uint16_t>(rank);
  op.microbatch = static_cast<int16_t>(spec.microbatch);
  op.kind = spec.kind;
  op.stream = spec.stream;
  op.phase = spec.phase;
  op.collective = spec.collective;
  op.link = spec.link;
  op.spares_compute = spec.spares_compute;
  op.chunk = static_cast<uint8_t>(spec.chunk);
  for (OpId d : deps) deps_.push_back(d);  // a handful: no call to memmove
  return static_cast<OpId>(ops_.size()) - 1;
}

Status Program::validate() const {
  if (!overflow_.is_ok()) return overflow_;
  auto where = [&](size_t i) {
    return "op " + std::to_string(i) + " (" + labels_.at(ops_[i].label).name + ", rank " +
           std::to_string(ops_[i].rank) + ")";
  };
  std::vector<int> seen(match_members_.size(), 0);
  std::vector<int> sends(match_members_.size(), 0);
  std::vector<int> last_rank(match_members_.size(), -1);
  std::vector<int64_t> memory(ranks_.size(), 0);
  for (size_t i = 0; i < ops_.size(); ++i) {
    const Op& op = ops_[i];
    if (op.rank >= ranks_.size()) return Status::internal(where(i) + ": rank out of range");
    if (op.label >= labels_.size()) return Status::internal(where(i) + ": label out of range");
    if (op.duration < Duration::zero()) return Status::internal(where(i) + ": negative duration");
    for (OpId d : deps(static_cast<OpId>(i))) {
      if (d >= i)
        return Status::internal(where(i) + ": depends on a later op " + std::to_string(d));
      if (ops_[d].rank != op.rank) {
        return Status::internal(where(i) + ": depends on op " + std::to_string(d) +
                                " of another rank");
      }
    }
    const bool matched =
        op.kind == OpKind::kCollective || op.kind == OpKind::kSend || op.kind == OpKind::kRecv;
    if (matched) {
      if (op.match >= match_members_.size())
        return Status::internal(where(i) + ": missing match instance");
      ++seen[op.match];
      if (op.kind == OpKind::kSend) ++sends[op.match];
      // Members of one instance are added rank by rank; a repeated rank is a builder bug.
      if (last_rank[op.match] == op.rank)
        return Status::internal(where(i) + ": two members on one rank");
      last_rank[op.match] = op.rank;
    }
    if (op.kind == OpKind::kAlloc) memory[op.rank] += op.bytes;
    if (op.kind == OpKind::kFree) {
      memory[op.rank] -= op.bytes;
      if (memory[op.rank] < 0)
        return Status::internal(where(i) + ": frees more than was allocated");
    }
  }
  for (size_t m = 0; m < match_members_.size(); ++m) {
    if (seen[m] != match_members_[m]) {
      return Status::internal("match " + std::to_string(m) + ": " + std::to_string(seen[m]) +
                              " members, declared " + std::to_string(match_members_[m]));
    }
    if (sends[m] > 1)
      return Status::internal("match " + std::to_string(m) + ": more than one send");
    if (sends[m] == 1 && match_members_[m] != 2) {
      return Status::internal("match " + std::to_string(m) +
                              ": a send pairs with exactly one receive");
    }
  }
  return Status::ok();
}

}  // namespace scaleplan::sim
