// How the executor maps an all-ranks sim::Program onto communicators and streams (internal to
// runtime/; runtime/executor.h is the interface).
//
// Communicators: one per (group kind, stream) that a collective of the Program runs on, each split
// from the world so that every group of that kind becomes one communicator (members ordered by
// global rank, as Program::members lists them); and one per directed pipeline pair (sender ->
// receiver) and direction of the data (activations forward, gradients backward: a V-shaped
// schedule sends both over one pair), so that every communicator is driven by exactly one stream
// on each member: that stream issues its ops in program order, which is the order NCCL and MPI
// match them in. The pairs are split in rounds in which no rank appears twice. Every process makes
// every split, in the same order (a split is collective over the world).
//
// make_plan also checks what the engine takes for granted but a real transport does not: every
// member of a communicator issues the same ops in the same order, and every transfer of a pair and
// direction is received in the order it was sent. A Program that breaks either would deadlock or
// mismatch on NCCL; the error names the op.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/comm.h"
#include "core/status.h"
#include "sim/program.h"

namespace scaleplan::runtime::exec {

struct Split {
  std::string what;        // "tp on tp comm", "pp 0->1"
  std::vector<int> color;  // per global rank; -1: not a member
  std::vector<int> key;    // per global rank
  GroupKind kind = GroupKind::kWorld;
  bool pair = false;  // a directed pipeline pair: group rank 0 sends, 1 receives
};

struct Plan {
  int world = 0;
  std::vector<int> rank_of_global;  // global rank -> Program rank
  std::vector<Split> splits;
  // Per op: the split whose communicator it runs on; -1 for ops that communicate nothing
  // (compute, allocations, collectives of one member).
  std::vector<int32_t> split_of;
  // Per op: its index among its rank's ops (program order).
  std::vector<uint32_t> local_index;
  // Per Program rank: its ops in program order, and per stream in stream order.
  std::vector<std::vector<sim::OpId>> rank_ops;
  std::vector<std::array<std::vector<sim::OpId>, kNumStreams>> stream_ops;
};

// The plan of `program`, which must hold every rank of its layout (BuildOptions::all_ranks), one
// Program rank per global rank, unmerged compute.
Result<Plan> make_plan(const sim::Program& program);

// "L3.attn.tp.all_reduce (op 812, all_reduce of 2.0 MiB over tp group 1: global ranks 2,3)": what
// an error message says about an op.
std::string describe_op(const sim::Program& program, sim::OpId id);

}  // namespace scaleplan::runtime::exec
