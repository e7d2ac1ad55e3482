// The vocabulary of communication and execution that every folder shares: which collective runs,
// on which kind of parallel group, on which stream of a rank, and which class of communication the
// breakdown counts it in. One enum per concept, so that the operator list (models), the collective
// model and the placement (hw_profiles), the Program (sim), the planner's predictions and the
// runtime's backends speak of the same values and never translate between copies.
//
// The names are the ones users meet elsewhere: collectives by their nccl-tests names
// ("all_reduce", "alltoall", "sendrecv"), groups by their layout keys ("tp", "dp_cp").
#pragma once

#include <cstdint>
#include <string_view>

#include "core/status.h"

namespace scaleplan {

// A collective (or point-to-point) operation. The nccl-tests set: the collective model times every
// one, the runtime's backends run every one, the Program uses the first four and kSendRecv.
enum class CollectiveOp : uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
  kBroadcast,
  kReduce,
  kGather,
  kScatter,
  kBarrier,
  kSendRecv
};
inline constexpr int kNumCollectiveOps = 10;
// nccl-tests names: "all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
// "reduce", "gather", "scatter", "barrier", "sendrecv".
std::string_view to_string(CollectiveOp op);
// Accepts the nccl-tests names, with or without "_perf", and "allreduce"-style spellings; "p2p",
// "send" and "recv" are kSendRecv. The error lists the names.
Result<CollectiveOp> parse_collective_op(std::string_view text);

// A kind of parallel group of a layout. The dense grid's groups (tp, cp, dp, pp), the expert
// grid's (ep, etp, and edp: the expert data-parallel group that ZeRO shards the experts over),
// and dp_cp, the data-parallel group of ZeRO and of the gradient reduction, which spans dp·cp
// (hw_profiles/placement.h places them; the operator list's DP communication runs on kDpCp).
// The last three are the other groups a Program's collectives run on: kEmbedding, the first and
// the last stage of one pipeline, which sum the gradients of the word embedding both hold
// (Megatron-LM's embedding group); kPpMirror, ranks s and pp-1-s of one pipeline, which hold the
// two copies of DualPipe's stages; kWorld, every rank (the gradient norm).
enum class GroupKind : uint8_t {
  kTp,
  kCp,
  kDp,
  kPp,
  kEp,
  kEtp,
  kEdp,
  kDpCp,
  kEmbedding,
  kPpMirror,
  kWorld
};
// The kinds a layout's placement describes (hw::LayoutPlacement holds one per kind): kTp..kDpCp.
inline constexpr int kNumPlacedGroupKinds = 8;
inline constexpr int kNumGroupKinds = 11;
// "tp", "cp", "dp", "pp", "ep", "etp", "edp", "dp_cp", "embedding", "pp_mirror", "world".
std::string_view to_string(GroupKind k);

// The streams of one rank. Communication of different kinds runs on separate streams, as in
// Megatron-LM and torchtitan, so that it overlaps compute and itself: TP all-reduces sit on the
// critical path while DP reductions overlap the backward, so they must not queue behind each other.
enum class StreamKind : uint8_t {
  kCompute,  // kernels
  kTp,       // tensor/sequence (and expert-tensor) parallel all-reduce, all-gather, reduce-scatter
  kDp,       // data parallel / ZeRO gradient reduction and parameter gathers
  kPpSend,   // pipeline sends
  kPpRecv,   // pipeline receives
  kCp,       // context parallel K/V exchange
  kEp,       // expert parallel all-to-all
  kHost,     // the CPU thread that issues this rank's kernels and collectives
  kCount,
};
inline constexpr int kNumStreams = static_cast<int>(StreamKind::kCount);
// "compute", "tp comm", "dp comm", "pp send", "pp recv", "cp comm", "ep comm", "host".
std::string_view to_string(StreamKind s);

// The stream a group's communication runs on: tensor and expert-tensor parallel on kTp, context
// parallel on kCp, expert parallel on kEp, pipeline on kPpSend; the data-parallel groups (dp,
// dp_cp, edp) and the embedding, mirror and world groups on kDp.
StreamKind stream_of(GroupKind g);

// The classes of communication an iteration's breakdown reports (sim/metrics.h, the planner's
// predictions): pipeline sends and receives count as one class.
enum class CommClass : uint8_t { kTp, kDp, kPp, kCp, kEp, kCount };
inline constexpr int kNumCommClasses = static_cast<int>(CommClass::kCount);
std::string_view to_string(CommClass k);  // "tp", "dp", "pp", "cp", "ep"
// The class of a communication stream (kCompute and kHost map to kTp; callers check first that
// the op communicates).
CommClass comm_class_of(StreamKind s);

}  // namespace scaleplan
