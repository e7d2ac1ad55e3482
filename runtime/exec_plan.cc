#include "runtime/exec_plan.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace scaleplan::runtime::exec {
namespace {

using sim::OpId;
using sim::OpKind;

std::string ranks_text(std::span<const int> ranks) {
  std::string s;
  for (int r : ranks) {
    if (!s.empty()) s += ',';
    s += std::to_string(r);
  }
  return s;
}

std::string bytes_text(int64_t b) {
  char buf[32];
  if (b >= (1 << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  }
  return buf;
}

// The group of every global rank for `kind` (-1: none) and its position in it.
void group_index(const sim::Program& p, GroupKind kind, int gpus, std::vector<int>* color,
                 std::vector<int>* key) {
  color->assign(static_cast<size_t>(gpus), -1);
  key->assign(static_cast<size_t>(gpus), 0);
  for (int i = 0;; ++i) {
    const auto members = p.members({kind, i});
    if (members.empty()) break;
    for (size_t m = 0; m < members.size(); ++m) {
      (*color)[static_cast<size_t>(members[m])] = i;
      (*key)[static_cast<size_t>(members[m])] = static_cast<int>(m);
    }
  }
}

}  // namespace

std::string describe_op(const sim::Program& p, OpId id) {
  const sim::Op& op = p.op(id);
  std::string s = p.label(id).name + " (op " + std::to_string(id) + ", ";
  if (op.kind == OpKind::kCollective) {
    s += std::string(to_string(op.collective)) + " of " + bytes_text(op.bytes);
    if (auto g = p.group(id); g.is_ok()) {
      s += " over " + std::string(to_string(g->kind)) + " group " + std::to_string(g->index) +
           ": global ranks " + ranks_text(p.members(*g));
    }
  } else if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
    s += std::string(op.kind == OpKind::kSend ? "send of " : "receive of ") + bytes_text(op.bytes);
    if (auto peer = p.peer(id); peer.is_ok())
      s += (op.kind == OpKind::kSend ? " to global rank " : " from global rank ") +
           std::to_string(*peer);
  } else {
    s += std::string(to_string(op.kind)) + " on " + std::string(to_string(op.stream));
  }
  return s + ")";
}

Result<Plan> make_plan(const sim::Program& p) {
  if (!p.layout()) return Status::internal("executor: the program has no layout, so no groups");
  if (p.merged_compute()) {
    return Status::internal(
        "executor: the program's compute runs were merged (BuildOptions::merge_compute); build "
        "it unmerged to execute it");
  }
  Plan plan;
  const int gpus = p.layout()->gpus();
  plan.world = gpus;
  if (p.num_ranks() != gpus) {
    return Status::internal("executor: the program simulates " + std::to_string(p.num_ranks()) +
                            " of the layout's " + std::to_string(gpus) +
                            " ranks; build it with every rank (all_ranks)");
  }
  plan.rank_of_global.assign(static_cast<size_t>(gpus), -1);
  for (int r = 0; r < p.num_ranks(); ++r) {
    const sim::RankInfo& info = p.ranks()[static_cast<size_t>(r)];
    if (info.global_rank < 0 || info.global_rank >= gpus ||
        plan.rank_of_global[static_cast<size_t>(info.global_rank)] >= 0 || info.represents != 1) {
      return Status::internal("executor: program rank " + std::to_string(r) +
                              " is not one distinct global rank of the layout");
    }
    plan.rank_of_global[static_cast<size_t>(info.global_rank)] = r;
  }
  const size_t n = p.num_ops();
  plan.local_index.assign(n, 0);
  plan.split_of.assign(n, -1);
  plan.rank_ops.resize(static_cast<size_t>(p.num_ranks()));
  plan.stream_ops.resize(static_cast<size_t>(p.num_ranks()));
  for (OpId i = 0; i < n; ++i) {
    const sim::Op& op = p.op(i);
    auto& ops = plan.rank_ops[op.rank];
    plan.local_index[i] = static_cast<uint32_t>(ops.size());
    ops.push_back(i);
    plan.stream_ops[op.rank][static_cast<int>(op.stream)].push_back(i);
  }

  // Collectives: one split per (kind, stream).
  std::map<std::pair<int, int>, int> split_for;  // (kind, stream) -> split
  std::vector<std::pair<OpId, int>> coll_ops;    // (op, group index)
  for (OpId i = 0; i < n; ++i) {
    const sim::Op& op = p.op(i);
    if (op.kind != OpKind::kCollective) continue;
    const auto* c = std::get_if<sim::CollectivePayload>(&p.payload(i));
    if (c == nullptr)
      return Status::internal("executor: " + describe_op(p, i) + " has no collective payload");
    SP_ASSIGN_OR_RETURN(const sim::GroupRef g, p.group(i));
    const auto members = p.members(g);
    if (g.index < 0 || members.empty()) {
      return Status::internal("executor: " + describe_op(p, i) + ": its rank is in no " +
                              std::string(to_string(g.kind)) + " group");
    }
    if (static_cast<int>(members.size()) != c->size) {
      return Status::internal("executor: " + describe_op(p, i) + ": the payload says " +
                              std::to_string(c->size) + " members, the layout's group has " +
                              std::to_string(members.size()));
    }
    if (members.size() <= 1) continue;
    split_for.try_emplace({static_cast<int>(g.kind), static_cast<int>(op.stream)}, -1);
    coll_ops.push_back({i, g.index});
  }
  for (auto& [key, index] : split_for) {
    Split s;
    s.kind = static_cast<GroupKind>(key.first);
    s.what = std::string(to_string(s.kind)) + " on " +
             std::string(to_string(static_cast<StreamKind>(key.second)));
    group_index(p, s.kind, gpus, &s.color, &s.key);
    index = static_cast<int>(plan.splits.size());
    plan.splits.push_back(std::move(s));
  }
  for (const auto& [i, g] : coll_ops) {
    const sim::Op& op = p.op(i);
    const auto* c = std::get_if<sim::CollectivePayload>(&p.payload(i));
    plan.split_of[i] = split_for.at({static_cast<int>(c->group), static_cast<int>(op.stream)});
  }
  // Every member of a communicator issues the same collectives in the same order: per (split,
  // group), the match ids each member meets in stream order.
  std::map<std::pair<int, int>, std::map<int, std::vector<std::pair<uint32_t, OpId>>>> seq;
  for (int r = 0; r < p.num_ranks(); ++r) {
    for (const auto& stream : plan.stream_ops[static_cast<size_t>(r)]) {
      for (OpId i : stream) {
        if (plan.split_of[i] < 0 || p.op(i).kind != OpKind::kCollective) continue;
        const int s = plan.split_of[i];
        const int g =
            plan.splits[static_cast<size_t>(s)]
                .color[static_cast<size_t>(p.ranks()[static_cast<size_t>(r)].global_rank)];
        seq[{s, g}][r].push_back({p.op(i).match, i});
      }
    }
  }
  for (const auto& [sg, by_rank] : seq) {
    const auto& [first_rank, first] = *by_rank.begin();
    for (const auto& [r, list] : by_rank) {
      for (size_t k = 0; k < std::max(list.size(), first.size()); ++k) {
        if (k < list.size() && k < first.size() && list[k].first == first[k].first) continue;
        const OpId here = k < list.size() ? list[k].second : first[k].second;
        return Status::internal(
            "executor: the members of " + plan.splits[static_cast<size_t>(sg.first)].what +
            " group " + std::to_string(sg.second) + " issue their collectives in different " +
            "orders (NCCL would hang): collective " + std::to_string(k) + " of global rank " +
            std::to_string(p.ranks()[static_cast<size_t>(r)].global_rank) + " is " +
            describe_op(p, here) + ", of global rank " +
            std::to_string(p.ranks()[static_cast<size_t>(first_rank)].global_rank) + " " +
            (k < first.size() ? describe_op(p, first[k].second) : std::string("none")));
      }
    }
  }

  // Transfers: one communicator per directed pair and direction of the data (activations
  // forward, gradients backward: the phase of the send), each received in the order sent. A
  // V-shaped schedule sends both over one pair (rank 0 runs chunks 0 and 2·pp−1) in an order its
  // receiver need not share across the two, but each direction is in micro-batch order.
  using Channel = std::tuple<int, int, int>;  // (from, to, phase)
  std::map<uint32_t, int> phase_of_match;     // a transfer's channel is its send's phase
  for (OpId i = 0; i < n; ++i) {
    if (p.op(i).kind == OpKind::kSend)
      phase_of_match[p.op(i).match] = static_cast<int>(p.op(i).phase);
  }
  std::map<Channel, std::vector<std::pair<uint32_t, OpId>>> sends, recvs;
  for (int r = 0; r < p.num_ranks(); ++r) {
    const int me = static_cast<int>(p.ranks()[static_cast<size_t>(r)].global_rank);
    for (const auto& stream : plan.stream_ops[static_cast<size_t>(r)]) {
      for (OpId i : stream) {
        const sim::Op& op = p.op(i);
        if (op.kind != OpKind::kSend && op.kind != OpKind::kRecv) continue;
        SP_ASSIGN_OR_RETURN(const int64_t peer, p.peer(i));
        if (peer == me)
          return Status::internal("executor: " + describe_op(p, i) + " exchanges with itself");
        const auto phase = phase_of_match.find(op.match);
        if (phase == phase_of_match.end())
          return Status::internal("executor: " + describe_op(p, i) + " has no matching send");
        if (op.kind == OpKind::kSend) {
          sends[{me, static_cast<int>(peer), phase->second}].push_back({op.match, i});
        } else {
          recvs[{static_cast<int>(peer), me, phase->second}].push_back({op.match, i});
        }
      }
    }
  }
  std::set<Channel> channels;
  for (const auto& [ch, list] : sends) channels.insert(ch);
  for (const auto& [ch, list] : recvs) channels.insert(ch);
  std::vector<std::vector<Channel>> rounds;
  std::vector<std::set<int>> busy;
  std::map<Channel, int> round_of;
  for (const auto& ch : channels) {
    const auto [from, to, phase] = ch;
    const auto& s = sends[ch];
    const auto& r = recvs[ch];
    for (size_t k = 0; k < std::max(s.size(), r.size()); ++k) {
      if (k < s.size() && k < r.size() && s[k].first == r[k].first) continue;
      return Status::internal(
          "executor: the " + std::string(to_string(static_cast<sim::Phase>(phase))) +
          " transfers from global rank " + std::to_string(from) + " to " + std::to_string(to) +
          " are not received in the order they are sent (NCCL and MPI deliver in order): "
          "transfer " +
          std::to_string(k) + " is sent as " +
          (k < s.size() ? describe_op(p, s[k].second) : std::string("nothing")) +
          " and received as " +
          (k < r.size() ? describe_op(p, r[k].second) : std::string("nothing")));
    }
    size_t round = 0;
    while (round < rounds.size() && (busy[round].count(from) || busy[round].count(to))) ++round;
    if (round == rounds.size()) {
      rounds.emplace_back();
      busy.emplace_back();
    }
    rounds[round].push_back(ch);
    busy[round].insert(from);
    busy[round].insert(to);
    round_of[ch] = static_cast<int>(round);
  }
  const int first_pair_split = static_cast<int>(plan.splits.size());
  for (const auto& round : rounds) {
    Split s;
    s.pair = true;
    s.kind = GroupKind::kPp;
    s.color.assign(static_cast<size_t>(gpus), -1);
    s.key.assign(static_cast<size_t>(gpus), 0);
    for (size_t k = 0; k < round.size(); ++k) {
      const auto [from, to, phase] = round[k];
      s.color[static_cast<size_t>(from)] = s.color[static_cast<size_t>(to)] = static_cast<int>(k);
      s.key[static_cast<size_t>(to)] = 1;
      s.what += s.what.empty() ? "pp " : ", ";
      s.what += std::to_string(from) + "->" + std::to_string(to) + " " +
                std::string(to_string(static_cast<sim::Phase>(phase)));
    }
    plan.splits.push_back(std::move(s));
  }
  for (const auto* side : {&sends, &recvs}) {
    for (const auto& [ch, list] : *side) {
      for (const auto& [match, i] : list) plan.split_of[i] = first_pair_split + round_of.at(ch);
    }
  }
  return plan;
}

}  // namespace scaleplan::runtime::exec
