// sim::Program: one training iteration as a per-rank DAG of operations.
//
// A Program lists, for each simulated rank, the operations it runs in one iteration: compute
// kernels, collectives on named groups, point-to-point sends and receives, and allocations and
// frees. Every op sits on one stream of its rank; a stream runs its ops one at a time in the order
// they were added (CUDA stream semantics). An op also waits for its dependencies, which are ops of
// the same rank added before it. Ranks meet only through matched ops: every op of one `match`
// instance (a collective's members, or one send and its receive) belongs to a different rank.
//
// The builder (sim/builder.h) produces Programs from a model and a layout; tests build them by
// hand. The engine (sim/engine.h) times them; the runtime executes them. Ops carry durations that
// the builder took from cost models, so that the engine never calls a model in its inner loop.
//
// What each op does is typed (OpPayload, in its label): a compute op the kernel shape it runs
// (GEMM, grouped expert GEMM, attention with its kernel, memory-bound op with its kind) in its
// dtype; a collective the collective and the kind of group it runs on, whose index and member
// global ranks the Program derives from the op's rank and the layout (group, members); a send or
// a receive the pipeline stage of its peer (peer); an allocation or a free the activations of its
// (chunk, micro-batch). The label's text is derived from the payload (payload_text). The builder
// types every op; hand-built test programs may leave payloads untyped (std::monostate).
// A program built with BuildOptions::merge_compute is for timing only: a merged op keeps its first
// kernel's label (merged_compute() says so); the runtime executes unmerged programs.
//
// Memory layout: ops are one flat array of 48-byte records, dependencies one flat array of op ids,
// and the cold data (names, payloads, shapes, FLOPs) lives in a separate label table that ops
// share by index. A Program is a value: immutable once built, safe to read from many threads at
// once (the group table that group() and members() read is built once, on first use, under
// std::call_once).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "core/comm.h"
#include "core/kernel_shapes.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"

namespace scaleplan::sim {

using OpId = uint32_t;
inline constexpr uint32_t kNoMatch = 0xFFFFFFFFu;

enum class OpKind : uint8_t {
  kCompute,     // a kernel on this GPU
  kCollective,  // one member of a collective: starts when every member has arrived
  kSend,        // point-to-point send: starts when it is reached (eager, as NCCL's buffered send)
  kRecv,        // completes when its matching send has finished and it has been reached
  kAlloc,       // takes `bytes` of device memory; zero duration
  kFree,        // returns `bytes`; zero duration
  kHost,        // CPU time of the rank's issuing thread (framework dispatch of the ops after it);
                // runs on StreamKind::kHost, never slowed by communication, not GPU work
};
std::string_view to_string(OpKind k);

// Streams (StreamKind), collectives (CollectiveOp) and the breakdown's communication classes
// (CommClass) are core/comm.h's.

// What part of training an op belongs to; the metrics and the trace use it.
enum class Phase : uint8_t {
  kForward,
  kBackward,        // input and weight gradients together
  kBackwardInput,   // input gradient only (zero-bubble schedules)
  kBackwardWeight,  // weight gradient only (zero-bubble schedules)
  kRecompute,       // forward work run again before the backward
  kOptimizer,       // gradient norm, optimizer step, parameter gathers after it
  kOther,
};
std::string_view to_string(Phase p);

// A compute kernel: what it computes and its shape (core/kernel_shapes.h). A GEMM with batch > 1
// is a grouped GEMM (the experts of one rank); an attention shape names its kernel (fused or
// unfused); a memory-bound shape its op kind.
struct KernelPayload {
  KernelKind kind = KernelKind::kMemoryBound;
  std::variant<GemmShape, AttentionShape, MemoryBoundShape> shape;
};
// A collective on a group of the layout: `size` members (1: nothing to communicate, as at tp=1),
// `steps` repetitions of the per-rank buffer (CP's ring passes); Op::bytes is the buffer times
// `steps`. The group's index and members: Program::group and Program::members.
struct CollectivePayload {
  CollectiveOp op = CollectiveOp::kAllReduce;
  GroupKind group = GroupKind::kTp;
  int size = 1;
  int steps = 1;
};
// A pipeline send or receive: the peer is stage `peer_stage` of the rank's pipeline (Program::peer
// gives its global rank); Op::bytes is the message.
struct TransferPayload {
  int peer_stage = 0;
};
// An allocation or a free of the activations that micro-batch Op::microbatch of local chunk
// Op::chunk keeps for its backward, Op::bytes of them.
struct ActivationsPayload {};
// A no-time op that joins dependencies (a pass's start, the join after an overlapped transfer).
struct SyncPayload {};
// CPU time of the rank's issuing thread (OpKind::kHost).
struct HostPayload {};
using OpPayload = std::variant<std::monostate, KernelPayload, CollectivePayload, TransferPayload,
                               ActivationsPayload, SyncPayload, HostPayload>;
// The label text of a payload: "m=8192 n=1536 k=4096 batch=1 dtype=bf16" for a GEMM, "b=1 heads=8
// ... causal=1 window=0 kernel=cudnn" for attention, "bytes=N op=rmsnorm" for a memory-bound op,
// "group=tp size=8 steps=1" for a collective, empty otherwise. It names every field of the shape,
// so that parse_kernel_text reads a measured trace's ops back as typed shapes (`refit`).
// parse_kernel_text: the KernelPayload of `kind` from payload_text's text; errors name the key.
std::string payload_text(const OpPayload& p);
Result<KernelPayload> parse_kernel_text(KernelKind kind, std::string_view text);
// The FLOPs a kernel payload executes: the GEMM's, the attention forward's or backward's, the
// memory-bound op's; 0 for everything else.
Flops payload_flops(const OpPayload& p);

// Cold, shared description of an op, for the runtime, the trace and reports.
struct OpLabel {
  std::string name;   // "L3.attn.qkv", "dp.reduce_scatter.bucket2"
  std::string shape;  // payload_text(payload) ("m=8192 n=1536 k=4096"), or empty
  Flops flops;        // FLOPs the op executes, as the operator list counts them (0 for comm)
  OpPayload payload;  // what the op does; monostate only in hand-built programs
};

// A group of the layout: its kind and its index among the groups of that kind
// (hw::group_members order: by first rank).
struct GroupRef {
  GroupKind kind = GroupKind::kTp;
  int index = 0;
  bool operator==(const GroupRef&) const = default;
};

struct Op {
  Duration duration{};     // time alone at full speed (collective: once all members arrived)
  int64_t bytes = 0;       // message bytes (comm) or allocation size (alloc/free)
  uint32_t first_dep = 0;  // index into Program::deps()
  uint32_t num_deps = 0;
  uint32_t match = kNoMatch;  // collective or send/recv instance
  uint32_t label = 0;         // index into Program::labels()
  uint16_t rank = 0;          // index of the simulated rank in this program
  int16_t microbatch = -1;    // -1 when not tied to a micro-batch
  OpKind kind = OpKind::kCompute;
  StreamKind stream = StreamKind::kCompute;
  Phase phase = Phase::kOther;
  CollectiveOp collective = CollectiveOp::kAllReduce;  // comm ops only (kSendRecv: send, recv)
  uint8_t link = 0;   // shared link of this rank the transfer crosses: 0 = none (not shared)
  uint8_t chunk = 0;  // model chunk (virtual pipeline stage) on this rank
  // A transfer that takes no SMs from this rank's compute (models::CommShape::spares_compute):
  // the engine does not slow compute while it runs.
  bool spares_compute = false;
  uint8_t pad_ = 0;
  bool is_comm() const {
    return kind == OpKind::kCollective || kind == OpKind::kSend || kind == OpKind::kRecv;
  }
};
static_assert(sizeof(Op) == 48, "Op is a compact 48-byte record");

// A simulated rank: which global rank it stands for and which pipeline stage it runs.
struct RankInfo {
  int64_t global_rank = 0;
  int stage = 0;
  int64_t represents = 1;  // how many symmetric ranks this one stands for
  Bytes static_memory{};   // resident for the whole iteration (weights, gradients, optimizer)
};

// What a new op is; `deps` are ops of the same rank added earlier.
struct OpSpec {
  OpKind kind = OpKind::kCompute;
  StreamKind stream = StreamKind::kCompute;
  Phase phase = Phase::kOther;
  Duration duration{};
  int64_t bytes = 0;
  uint32_t match = kNoMatch;
  uint32_t label = 0;
  CollectiveOp collective = CollectiveOp::kAllReduce;  // comm ops only
  uint8_t link = 0;
  bool spares_compute = false;  // Op::spares_compute
  int microbatch = -1;
  int chunk = 0;
};

class Program {
 public:
  Program() = default;

  // Adds a simulated rank; returns its index.
  int add_rank(RankInfo info);
  // Interns a label (equal labels share one entry); returns its index.
  uint32_t add_label(OpLabel label);
  // Interns a typed label: its shape text derived from the payload (payload_text).
  uint32_t add_label(std::string name, OpPayload payload, Flops flops = Flops(0));
  // The resolved layout whose groups the collectives run on and whose pipelines the transfers
  // cross (the builder sets it); group(), members() and peer() need it.
  void set_layout(const Layout& layout) {
    layout_ = layout;
    groups_ = std::make_shared<GroupTable>();
  }
  // Marks a program whose compute runs were merged (BuildOptions::merge_compute).
  void set_merged_compute(bool merged) { merged_compute_ = merged; }
  // A new match instance of `members` ops (a collective's group size in this program, or 2 for a
  // send/recv pair); returns its id.
  uint32_t add_match(int members);
  // Adds an op on `rank`. Dependencies must be earlier ops of the same rank. Returns its id.
  OpId add_op(int rank, const OpSpec& spec, std::span<const OpId> deps = {});
  OpId add_op(int rank, const OpSpec& spec, std::initializer_list<OpId> deps) {
    return add_op(rank, spec, std::span<const OpId>(deps.begin(), deps.size()));
  }

  // Checks the invariants the engine relies on: every value add_op and add_match were given fits
  // the compact record (rank 0..65535, micro-batch -1..32767, chunk 0..255, a match of 1..65535
  // members, fewer than 2^32 - 1 ops, dependencies and matches; the first one that did not is the
  // error, an invalid-input one naming the value), deps earlier and on the same rank, every match
  // instance with exactly its declared members on distinct ranks, sends paired with receives, frees
  // not exceeding allocations per rank. The error names the op.
  Status validate() const;

  int num_ranks() const { return static_cast<int>(ranks_.size()); }
  size_t num_ops() const { return ops_.size(); }
  const std::vector<Op>& ops() const { return ops_; }
  const Op& op(OpId id) const { return ops_[id]; }
  std::span<const OpId> deps(OpId id) const {
    return {deps_.data() + ops_[id].first_dep, ops_[id].num_deps};
  }
  const std::vector<OpId>& all_deps() const { return deps_; }
  const std::vector<RankInfo>& ranks() const { return ranks_; }
  const std::vector<OpLabel>& labels() const { return labels_; }
  const OpLabel& label(OpId id) const { return labels_[ops_[id].label]; }
  const std::vector<uint16_t>& match_members() const { return match_members_; }
  const OpPayload& payload(OpId id) const { return label(id).payload; }
  const std::optional<Layout>& layout() const { return layout_; }
  bool merged_compute() const { return merged_compute_; }

  // The group a collective op runs on: its payload's kind, and the index of the group of that
  // kind that holds the op's rank. An error for an op without a CollectivePayload or a program
  // without a layout.
  Result<GroupRef> group(OpId id) const;
  // The global ranks of a group, ascending (hw::group_members). Empty for an index out of range.
  std::span<const int> members(GroupRef g) const;
  // The global rank a send or a receive exchanges with: stage peer_stage of the op's rank's
  // pipeline. An error for another op or a program without a layout.
  Result<int64_t> peer(OpId id) const;

  void reserve(size_t ops, size_t deps) {
    ops_.reserve(ops);
    deps_.reserve(deps);
  }
  // Empties the program into a default-constructed one's state but keeps the memory of its
  // arrays, for a builder that reuses a finished program's storage (SimulationScratch): a new
  // program of similar size then writes over pages already mapped instead of faulting in fresh
  // ones (0.2 GB per 405B plan).
  void clear();

 private:
  std::vector<Op> ops_;
  std::vector<OpId> deps_;
  std::vector<RankInfo> ranks_;
  std::vector<OpLabel> labels_;
  std::vector<uint16_t> match_members_;
  std::unordered_map<std::string, uint32_t> label_index_;  // interning key -> label
  std::optional<Layout> layout_;
  bool merged_compute_ = false;
  // The first value add_op or add_match could not store (validate() reports it).
  Status overflow_;
  void note_overflow(std::string what);
  // Members of every group of every kind and the group of each global rank, built from layout_ on
  // first use (hw::group_members), once for every copy of this program.
  struct GroupTable {
    std::once_flag built;
    Status status;
    std::vector<std::vector<int>> members[kNumGroupKinds];  // [kind][index]: global ranks
    std::vector<int> index_of[kNumGroupKinds];              // [kind][global rank]: group index
  };
  std::shared_ptr<GroupTable> groups_ = std::make_shared<GroupTable>();
  Result<const GroupTable*> group_table() const;
};

}  // namespace scaleplan::sim
