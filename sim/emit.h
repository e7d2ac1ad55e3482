// The program builder's inside, shared by the files that emit a program (not an interface: only
// sim/builder.cc and sim/emit_*.cc include it). build_program (sim/builder.h) constructs one
// ProgramBuilder per program; its work is cut by concern, one file each:
//   - sim/builder.cc: orchestration: the plan, the simulated ranks and their pass orders
//     (emit_rank), the op and match plumbing every emitter uses;
//   - sim/emit_timing.cc: operator-list ops and the pipeline transfer, timed once per build;
//   - sim/emit_chunks.cc: chunk assembly (each chunk's op lists) and the chain placing a list;
//   - sim/emit_pipeline.cc: one pass of a chunk: its start, its end, its sends and receives,
//     DualPipe's overlapped pairs;
//   - sim/emit_data_parallel.cc: DP gradient buckets, ZeRO-3's gathers and reduce-scatters, the
//     tied-embedding reduction and DualPipe's mirror sync;
//   - sim/emit_step.cc: the step: gradient norm, optimizer, ZeRO-1/2's parameter gather.
// What one rank's emission carries from pass to pass is a RankState value that emit_rank creates
// and hands to each emitter; ProgramBuilder's members are the build's (the plan, the timed lists,
// the labels, the match table), the same for every rank.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/operators.h"
#include "sim/builder.h"
#include "sim/match_table.h"
#include "sim/pass_plan.h"
#include "sim/schedule.h"

namespace scaleplan::sim::build {

inline constexpr OpId kNoOp = 0xFFFFFFFFu;

// An operator-list op, timed and ready to place.
struct Timed {
  OpKind kind = OpKind::kCompute;
  StreamKind stream = StreamKind::kCompute;
  CollectiveOp collective = CollectiveOp::kAllReduce;  // collectives only
  GroupKind group = GroupKind::kTp;
  Phase phase = Phase::kForward;
  Duration duration;
  Duration host;  // CPU time to issue it (HostIssue); 0: no host op
  int64_t bytes = 0;
  uint32_t label = 0;
  uint8_t link = 0;
  bool overlap_next = false;            // runs beside the next compute op (models::CommShape)
  bool spares_compute = false;          // does not slow compute (models::CommShape)
  bool skips_first_microbatch = false;  // models::Op::skips_first_microbatch
  int32_t comm = -1;  // a collective's CommShape (ProgramBuilder::comm_shapes_), else -1
};

// A pass of one chunk, split the way schedules need it.
struct ChunkOps {
  std::vector<Timed> forward;
  std::vector<Timed> backward;  // recompute + input gradients (+ weight gradients unless split)
  std::vector<Timed> weight;    // weight gradients when the schedule splits them (ZB-H1)
  Bytes saved;                  // activations one micro-batch of this chunk keeps
  std::vector<int64_t> layer_dense_params;  // per layer, in backward order: DP bucket contents
  std::vector<int64_t> layer_expert_params;
  // Per layer (backward order), the size of each of its tensors (this GPU's shard), dense and
  // expert together; filled only for FrameworkTiming::zero3_per_tensor_sync, which times one
  // collective per tensor.
  std::vector<std::vector<int64_t>> layer_tensor_params;
  int64_t embed_params = 0;  // the embedding (first chunk)
  int64_t head_params = 0;   // the final norm, the LM head and the MTP modules' dense part (last)
  int64_t extra_expert_params = 0;  // the MTP modules' experts (last chunk)
  // Dense parameters beyond the layers: what DP buckets and the step add to them.
  int64_t extra_dense_params() const { return embed_params + head_params; }
  // Their tensors' sizes, for zero3_per_tensor_sync like layer_tensor_params.
  std::vector<int64_t> embed_tensors, head_tensors;
  // Where the lists split into per-layer blocks (layers + 1 entries each), fixed when the chunk is
  // assembled: forward [embedding][layer 0]..[layer n-1][head], the start of each layer's block
  // and the end of the last; backward and weight [head][layer n-1]..[layer 0][embedding], the end
  // of the head's block and of each layer's.
  std::vector<size_t> forward_bounds, backward_bounds, weight_bounds;
};

// What the emission of one rank carries from pass to pass (emit_rank makes it; each emitter reads
// and updates it). Nothing of it outlives the rank.
struct RankState {
  int rank = 0;                // index in the program
  int64_t global = 0;          // global rank
  int stage = 0;               // pipeline stage
  OpId host_wait = kNoOp;      // a synchronizing op the next host op waits for
  OpId blocking_send = kNoOp;  // BuildOptions::blocking_p2p: a send the next pass waits for
  struct DeferredSend {
    bool fwd;
    int to;
    Pass pass;
  };
  std::vector<DeferredSend> deferred_sends;  // Pass::defer_send: sends of the previous pass
  // Last op of each pass of this rank, indexed by pass_index(chunk, micro-batch); kNoOp if none.
  std::vector<OpId> fwd_end, bwd_end, w_end;
  std::vector<OpId> dp_ops;  // gradient reductions the step waits for
  // Local chunks whose first forward has gathered their parameters (BuildOptions::param_gather).
  std::set<int> params_gathered;
  int64_t world_seq = 0;                           // world collectives issued (match keys)
  std::array<int64_t, kNumGroupKinds> coll_seq{};  // group collectives issued, per group kind
};

// The dependencies in `v` without kNoOp and duplicates, ascending, compacted to its front; no
// heap allocation. Callers give each source of a dependency its own slot of the array, so there
// is no count to overflow.
template <size_t N>
std::span<const OpId> unique_deps(std::array<OpId, N>& v) {
  size_t k = 0;
  for (size_t i = 0; i < N; ++i) {
    if (v[i] == kNoOp) continue;
    size_t j = k;  // insertion sort: a handful of entries
    while (j > 0 && v[j - 1] > v[i]) --j;
    if (j > 0 && v[j - 1] == v[i]) continue;
    const OpId x = v[i];
    for (size_t m = k; m > j; --m) v[m] = v[m - 1];
    v[j] = x;
    ++k;
  }
  return {v.data(), k};
}

class ProgramBuilder {
 public:
  ProgramBuilder(const BuildInputs& in, const BuildOptions& o, hw::LayoutPlacement placement)
      : in_(in), o_(o), l_(*in.layout), m_(*in.model), placement_(std::move(placement)) {}

  Result<Program> build();

 private:
  // --- orchestration (sim/builder.cc) -----------------------------------------------------------
  uint32_t match_for(RankState& rs, GroupKind g, bool world = false);
  uint32_t p2p_match(RankState& rs, int dir, int g, int mb);
  OpId add(RankState& rs, const Timed& t, int mb, int chunk, OpId a, OpId b = kNoOp);
  OpId issue(RankState& rs, Duration cost, Phase phase, int mb, int chunk);
  Status emit_rank(int rank, int64_t global, int stage);

  // --- timing (sim/emit_timing.cc) --------------------------------------------------------------
  AttentionShape with_kernel(AttentionShape a) const;
  OpPayload payload_of(const models::Op& op) const;
  Result<Timed> time_op(const models::Op& op, int chunks = 1);
  int launches(const models::Op& op) const;
  Status time_layers();
  void add_grad_accumulation(std::vector<models::Op>& ops, int64_t params) const;
  void add_autocast_stream(std::vector<models::Op>& ops, int64_t layer, size_t at) const;
  static void add_autocast(std::vector<models::Op>& ops, int64_t cast_params, int64_t params);
  Status split(const std::vector<models::Op>& ops, ChunkOps* out);
  void charge_stage(ChunkOps& c, int stage);
  Status time_boundaries();
  Duration collective_time(CollectiveOp op, int64_t bytes, GroupKind g) const;
  Duration per_tensor_time(CollectiveOp op, const std::vector<int64_t>& tensors, int bytes_per,
                           GroupKind g) const;
  Timed copy_op(const std::string& name, int64_t bytes, int64_t launches, Phase phase);

  // --- chunk assembly and chains (sim/emit_chunks.cc) -------------------------------------------
  Status build_chunk(int g, int first_layer, int layers);
  OpId chain(RankState& rs, const std::vector<Timed>& ops, size_t begin, size_t end, OpId prev,
             int mb, int chunk);
  static int merge_class(Phase p);
  uint32_t join_label();

  // --- pipeline (sim/emit_pipeline.cc) ----------------------------------------------------------
  OpId emit_pass(RankState& rs, const Pass& p, OpId prev, bool send_out = true);
  bool reduces(const Pass& p) const;
  OpId begin_pass(RankState& rs, const Pass& p, int g, OpId prev);
  void finish_pass(RankState& rs, const Pass& p, int g, OpId end, bool send_out);
  OpId emit_pair(RankState& rs, const Pass& f, const Pass& b, OpId prev);
  void emit_send(RankState& rs, bool fwd, int to, const Pass& p, OpId end);

  // --- data parallel and ZeRO (sim/emit_data_parallel.cc) ---------------------------------------
  void reduce_buckets(RankState& rs, const std::vector<int64_t>& dense,
                      const std::vector<int64_t>& expert, int64_t extra, int64_t extra_expert,
                      const std::vector<OpId>& after_layer, OpId last, int chunk,
                      bool one_bucket = false, const std::vector<int64_t>* tensors = nullptr);
  hw::GroupPlacement pipeline_pair() const;
  void tied_embedding_reduce(RankState& rs, OpId after);
  OpId gather_layer(RankState& rs, int64_t params, const std::vector<int64_t>* tensors, OpId after,
                    int mb, int chunk, Phase phase, GroupKind group = GroupKind::kDpCp);
  OpId emit_with_buckets(RankState& rs, const ChunkOps& c, const std::vector<Timed>& ops,
                         const std::vector<size_t>& bounds, OpId start, int mb, int chunk);
  std::vector<int64_t> zero_flatten_buckets(const ChunkOps& c) const;
  OpId emit_zero3(RankState& rs, int g, const std::vector<Timed>& ops, OpId start, int mb,
                  int chunk, bool fwd, ParamGather when = ParamGather::kFirstForward);
  void emit_mirror_sync(RankState& rs);

  // --- the step (sim/emit_step.cc) --------------------------------------------------------------
  Status emit_step(RankState& rs, OpId prev);
  int64_t optimizer_shard(int stage) const;
  std::vector<models::Op> optimizer_ops(int stage) const;

  // --- the step's SM clock (sim/emit_clock.cc) --------------------------------------------------
  void apply_step_clock();
  int64_t nanotron_param_tensors(int stage) const;

  // The plan's chunk-to-stage map (PassPlan, from core/layout.h): chunks per rank, the global
  // chunk a rank's local chunk is, and the stage a global chunk runs on.
  int local_chunks() const { return plan_.local_chunks; }
  int global_chunk(int c, int stage) const { return plan_.global_chunk(stage, c); }
  int stage_of(int g) const { return plan_.chunks[static_cast<size_t>(g)].stage; }
  // Whether data between neighbouring global chunks g and h crosses ranks (a send and a receive);
  // in a V, rank pp-1 passes chunk pp-1's output to chunk pp itself.
  bool remote(int g, int h) const { return plan_.remote(g, h); }
  // Whether global chunk g holds the embedding (first) or the LM head (last) of its pipeline.
  bool first_chunk(int g) const { return plan_.chunks[static_cast<size_t>(g)].embedding; }
  bool last_chunk(int g) const { return plan_.chunks[static_cast<size_t>(g)].head; }
  // Whether data flows between global chunks g and h (the same pipeline, h in range).
  bool connected(int g, int h) const { return plan_.connected(g, h); }
  // The last micro-batch that local chunk c runs.
  int last_microbatch(int c) const { return plan_.last_microbatch(c); }

  const BuildInputs& in_;
  const BuildOptions& o_;
  const Layout& l_;
  const models::ModelSpec& m_;
  hw::LayoutPlacement placement_;
  Program prog_;
  PassPlan plan_;
  OperatorLists lists_;
  std::optional<models::AutocastParams> autocast_;  // models::runs_autocast
  std::vector<models::CommShape> comm_shapes_;      // the collectives time_op timed (Timed::comm)
  bool split_weight_ = false;
  // Per ModelSpec::layer_kind: routed experts or not, sliding-window attention or not.
  ChunkOps layer_ops_[models::ModelSpec::kLayerKinds];
  Bytes layer_saved_[models::ModelSpec::kLayerKinds];
  std::vector<ChunkOps> chunks_;
  int64_t p2p_bytes_ = 0;
  std::optional<Timed> p2p_gather_;  // the TP all-gather after each receive (p2p_scatter_gather)
  Duration p2p_time_;
  uint8_t p2p_link_ = 0;
  bool dualpipe_ = false;             // Schedule::kDualPipe: two chunks per rank, one per direction
  std::vector<Timed> pair_ops_;       // emit_pair's backward list (input and weight parts)
  std::vector<uint32_t> p2p_labels_;  // "pp.p2p" per peer stage
  uint32_t start_label_ = 0, act_label_ = 0;
  uint32_t join_label_ = kNoMatch, host_label_ = kNoMatch;
  std::map<std::tuple<std::string, int, CollectiveOp>, uint32_t> bucket_labels_;  // reduce_buckets
  // "zero3.all_gather" per group kind (dense over dp_cp, experts over edp).
  uint32_t zero3_labels_[kNumGroupKinds] = {kNoMatch, kNoMatch, kNoMatch, kNoMatch,
                                            kNoMatch, kNoMatch, kNoMatch, kNoMatch,
                                            kNoMatch, kNoMatch, kNoMatch};
  // A pass's index in RankState's fwd_end, bwd_end and w_end.
  size_t pass_index(int g, int mb) const {
    return static_cast<size_t>(g) * static_cast<size_t>(l_.num_microbatches()) +
           static_cast<size_t>(mb);
  }
  MatchTable matches_;
  std::vector<int> group_of_[kNumGroupKinds];
  int group_size_[kNumGroupKinds] = {};  // with all_ranks: members of each kind's groups
};

}  // namespace scaleplan::sim::build
