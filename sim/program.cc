#include "sim/program.h"

#include <cstdio>
#include <string>

namespace scaleplan::sim {

std::string_view to_string(OpKind k) {
  switch (k) {
    case OpKind::kCompute:
      return "compute";
    case OpKind::kCollective:
      return "collective";
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kAlloc:
      return "alloc";
    case OpKind::kFree:
      return "free";
    case OpKind::kHost:
      return "host";
  }
  return "?";
}

std::string_view to_string(Phase p) {
  switch (p) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kBackwardInput:
      return "backward_input";
    case Phase::kBackwardWeight:
      return "backward_weight";
    case Phase::kRecompute:
      return "recompute";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kOther:
      return "other";
  }
  return "?";
}

int Program::add_rank(RankInfo info) {
  ranks_.push_back(info);
  return static_cast<int>(ranks_.size()) - 1;
}

uint32_t Program::add_label(OpLabel label) {
  char flops[32];
  std::snprintf(flops, sizeof flops, "%.17g", label.flops.value());
  std::string key = label.name;
  key.push_back('\0');
  key += label.shape;
  key.push_back('\0');
  key += flops;
  auto [it, inserted] =
      label_index_.try_emplace(std::move(key), static_cast<uint32_t>(labels_.size()));
  if (inserted) labels_.push_back(std::move(label));
  return it->second;
}

uint32_t Program::add_match(int members) {
  match_members_.push_back(static_cast<uint16_t>(members));
  return static_cast<uint32_t>(match_members_.size()) - 1;
}

OpId Program::add_op(int rank, const OpSpec& spec, std::span<const OpId> deps) {
  Op op;
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
  op.chunk = static_cast<uint8_t>(spec.chunk);
  deps_.insert(deps_.end(), deps.begin(), deps.end());
  ops_.push_back(op);
  return static_cast<OpId>(ops_.size()) - 1;
}

Status Program::validate() const {
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
