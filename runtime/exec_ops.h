// How the executor runs one op of a sim::Program on a Backend (internal to runtime/).
//
// RankOps holds one rank's memory and turns each op's typed payload into a backend call:
//  - compute: a GEMM at its GemmShape, attention forward/backward at its AttentionShape, a
//    memory-bound op as memory_args_for(its MemoryBoundShape) (the op kind, moving the bytes the
//    simulator timed; activations in the backend's activation_type, the optimizer's and weight
//    gradients' passes in f32 over the states, the input-gradient pass in the op's backward form);
//    operands come from a read-only input region (small values, so that no kernel meets inf or NaN
//    however often it runs), results go to an output region, weights are read from the static
//    region and the optimizer step updates it;
//  - collectives: the Program's collective over the op's communicator, moving the op's bytes as
//    the collective model counts them (runtime/backend.h collective_size); a CP ring pass is
//    `steps` exchanges with the ring neighbours, each forwarding the block received before;
//  - transfers: a send or a receive on the pair's communicator;
//  - allocations and frees: stream-ordered allocations of the bytes the Program states;
//  - everything else (pass starts, joins, host issue): nothing.
// Memory: the static region is the rank's RankInfo::static_memory (weights, gradients, optimizer
// states as the memory model sizes them), the input, output and id regions are sized for the
// rank's largest op, and each communication stream has a send and a receive buffer sized for its
// largest op. All come from Backend::allocate, so the backend's memory_stats sees them.
//
// Checks (the first step): before a collective or a transfer each block of the send buffer is
// filled with a small integer that names its sender, block and op (check_value); afterwards the
// receive buffer must hold, block by block, what the collective's definition gives for those
// inputs: all-reduce the sum over the members, all-gather block r = member r's, reduce-scatter
// the sum of every member's block `me`, all-to-all block r = member r's block `me`, a ring pass
// the block of the member `steps` back, a receive the sender's. Sums of such integers are exact in
// f32 and bf16, so the comparison is exact. A synchronous backend (host) compares every element
// right after the op; an asynchronous one (cuda) copies a few words of each block on the compute
// stream (ordered after the op by events) and compares them after the step.
//
// Thread-safety: run() may be called for ops of different streams at once (host); setup and
// verify_captured from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/backend.h"
#include "runtime/exec_plan.h"
#include "sim/program.h"

namespace scaleplan::runtime::exec {

// The integer a sender writes into block `block` of its send buffer for the op matched as `seed`:
// in [-3, 3] (in [-1, 1] for groups of more than 64, so that sums stay exact in bf16).
float check_value(int64_t global_rank, int64_t block, uint32_t seed, int group_size);

// Fills `states` (f32 words) with the executor's weights and optimizer states, each word two bf16
// halves drawn from a hash of the word's index within a block of 4 Mi words, the block repeated
// over the rest of its part: the first `signed_words` (the GEMMs' weights, which the executor
// reads from the region's start) with random signs, magnitudes below 0.03; the rest positive in
// [0.005, 0.015) (Adam's second moment must be). Varied, as training's are, so that GEMMs draw
// training's power: exec_ops.cc says why.
Status fill_states(Backend& be, const Buffer& states, int64_t signed_words = 0);

class RankOps {
 public:
  RankOps(const sim::Program& program, const Plan& plan, int rank, Backend& backend);
  ~RankOps();
  RankOps(const RankOps&) = delete;
  RankOps& operator=(const RankOps&) = delete;

  // Allocates and initialises the rank's memory; `groups[s]` is this rank's handle of plan split s.
  Status setup(std::vector<Group> groups);

  // Before op `id` on the check step: fills its send blocks (on the op's stream for a synchronous
  // backend, on the compute stream otherwise). Returns whether the op is checked.
  Result<bool> prepare_check(sim::OpId id);
  // Runs op `id` (enqueues it, on an asynchronous backend).
  Status run(sim::OpId id);
  // Refills the static region (weights, gradients, optimizer states) with its initial values:
  // after the check step, whose patterns go through the gradients and weights.
  Status reset_states();
  // After a checked op: compares its receive buffer now (synchronous backend) or copies samples
  // of it on the compute stream (asynchronous: verify_captured compares them after the step).
  Status check_now(sim::OpId id);
  Status capture(sim::OpId id);
  Status verify_captured();

  int64_t checked() const { return checked_.load(); }
  Bytes static_bytes() const { return static_bytes_; }
  Bytes workspace_bytes() const { return workspace_bytes_; }
  Bytes activation_peak() const { return Bytes(act_peak_.load()); }
  // Releases what is still allocated (activations left by a failed step included).
  void release_all();

 private:
  struct CommShape;  // element type, count and blocks of one communication op
  Result<CommShape> comm_shape(sim::OpId id) const;
  std::pair<void*, void*> comm_data(const CommShape& s) const;
  Buffer result_words(const CommShape& s) const;
  MemOpArgs args_of(sim::OpId id, const sim::KernelPayload& k) const;
  bool on_states(sim::OpId id, const MemOpArgs& a) const;
  Status run_compute(sim::OpId id);
  Status run_collective(sim::OpId id, bool fill_only);
  Status run_transfer(sim::OpId id, bool fill_only);
  // Fills f32 words with `value` (kF32) or with two bf16 halves of it (kBf16).
  Status fill_block(StreamKind stream, const Buffer& words, float value, ElemType type);
  Status compare(sim::OpId id, const std::vector<uint32_t>& got, int64_t words_per_block,
                 int64_t block_offset_words, const std::vector<float>& expected,
                 ElemType type) const;
  std::vector<float> expected_blocks(sim::OpId id, const CommShape& s) const;
  Buffer carve(const Buffer& region, int64_t* offset_bytes, int64_t count, ElemType type) const;

  const sim::Program& p_;
  const Plan& plan_;
  int rank_;
  int64_t global_;
  Backend& be_;
  std::vector<Group> groups_;
  Buffer static_, in_, out_, ids_, labels_;
  Buffer send_[kNumStreams], recv_[kNumStreams];
  Bytes static_bytes_, workspace_bytes_;
  int64_t signed_words_ = 0;  // the static region's first words, the GEMMs' weights: fill_states
  std::mutex act_mu_;
  std::unordered_map<int64_t, std::vector<Buffer>> activations_;  // (chunk, micro-batch) -> held
  int64_t act_live_ = 0;
  std::atomic<int64_t> act_peak_{0};
  std::atomic<int64_t> checked_{0};
  // Asynchronous checks: sampled words of each checked op's receive buffer.
  struct Capture {
    sim::OpId op;
    Buffer staging;  // f32 words
    int64_t words_per_block;
  };
  std::vector<Capture> captures_;
  std::vector<Buffer> owned_;  // everything setup allocated
};

}  // namespace scaleplan::runtime::exec
