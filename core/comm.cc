#include "core/comm.h"

#include <cctype>
#include <string>

namespace scaleplan {

std::string_view to_string(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce:
      return "all_reduce";
    case CollectiveOp::kAllGather:
      return "all_gather";
    case CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case CollectiveOp::kAllToAll:
      return "alltoall";
    case CollectiveOp::kBroadcast:
      return "broadcast";
    case CollectiveOp::kReduce:
      return "reduce";
    case CollectiveOp::kGather:
      return "gather";
    case CollectiveOp::kScatter:
      return "scatter";
    case CollectiveOp::kBarrier:
      return "barrier";
    case CollectiveOp::kSendRecv:
      return "sendrecv";
  }
  return "?";
}

Result<CollectiveOp> parse_collective_op(std::string_view text) {
  std::string s;
  for (char ch : text) {
    if (ch != '_' && ch != '-')
      s += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  }
  if (s.ends_with("perf")) s.resize(s.size() - 4);
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    auto op = static_cast<CollectiveOp>(i);
    std::string name;
    for (char ch : to_string(op)) {
      if (ch != '_') name += ch;
    }
    if (s == name) return op;
  }
  if (s == "p2p" || s == "send" || s == "recv") return CollectiveOp::kSendRecv;
  return Status::invalid(
      "op: '" + std::string(text) +
      "' is not one of all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, "
      "gather, scatter, barrier, sendrecv");
}

std::string_view to_string(GroupKind k) {
  switch (k) {
    case GroupKind::kTp:
      return "tp";
    case GroupKind::kCp:
      return "cp";
    case GroupKind::kDp:
      return "dp";
    case GroupKind::kPp:
      return "pp";
    case GroupKind::kEp:
      return "ep";
    case GroupKind::kEtp:
      return "etp";
    case GroupKind::kEdp:
      return "edp";
    case GroupKind::kDpCp:
      return "dp_cp";
    case GroupKind::kEmbedding:
      return "embedding";
    case GroupKind::kPpMirror:
      return "pp_mirror";
    case GroupKind::kWorld:
      return "world";
  }
  return "?";
}

std::string_view to_string(StreamKind s) {
  switch (s) {
    case StreamKind::kCompute:
      return "compute";
    case StreamKind::kTp:
      return "tp comm";
    case StreamKind::kDp:
      return "dp comm";
    case StreamKind::kPpSend:
      return "pp send";
    case StreamKind::kPpRecv:
      return "pp recv";
    case StreamKind::kCp:
      return "cp comm";
    case StreamKind::kEp:
      return "ep comm";
    case StreamKind::kHost:
      return "host";
    case StreamKind::kCount:
      break;
  }
  return "?";
}

StreamKind stream_of(GroupKind g) {
  switch (g) {
    case GroupKind::kTp:
    case GroupKind::kEtp:
      return StreamKind::kTp;
    case GroupKind::kCp:
      return StreamKind::kCp;
    case GroupKind::kEp:
      return StreamKind::kEp;
    case GroupKind::kPp:
      return StreamKind::kPpSend;
    default:
      return StreamKind::kDp;
  }
}

std::string_view to_string(CommClass k) {
  switch (k) {
    case CommClass::kTp:
      return "tp";
    case CommClass::kDp:
      return "dp";
    case CommClass::kPp:
      return "pp";
    case CommClass::kCp:
      return "cp";
    case CommClass::kEp:
      return "ep";
    case CommClass::kCount:
      break;
  }
  return "?";
}

CommClass comm_class_of(StreamKind s) {
  switch (s) {
    case StreamKind::kDp:
      return CommClass::kDp;
    case StreamKind::kPpSend:
    case StreamKind::kPpRecv:
      return CommClass::kPp;
    case StreamKind::kCp:
      return CommClass::kCp;
    case StreamKind::kEp:
      return CommClass::kEp;
    default:
      return CommClass::kTp;
  }
}

}  // namespace scaleplan
