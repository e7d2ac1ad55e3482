#include "core/comm.h"

#include "core/enum_names.h"

#include <cctype>
#include <string>

namespace scaleplan {

constexpr std::string_view kCollectiveOpNames[] = {
    "all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast",
    "reduce",     "gather",     "scatter",        "barrier",  "sendrecv"};
static_assert(std::ssize(kCollectiveOpNames) == kNumCollectiveOps);

std::string_view to_string(CollectiveOp op) { return name_in(kCollectiveOpNames, op); }

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

constexpr std::string_view kGroupKindNames[] = {
    "tp", "cp", "dp", "pp", "ep", "etp", "edp", "dp_cp", "embedding", "pp_mirror", "world"};
static_assert(std::ssize(kGroupKindNames) == static_cast<int>(GroupKind::kWorld) + 1);

std::string_view to_string(GroupKind k) { return name_in(kGroupKindNames, k); }

constexpr std::string_view kStreamKindNames[] = {"compute", "tp comm", "dp comm", "pp send",
                                                 "pp recv", "cp comm", "ep comm", "host"};
static_assert(std::ssize(kStreamKindNames) == kNumStreams);

std::string_view to_string(StreamKind s) { return name_in(kStreamKindNames, s); }

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

constexpr std::string_view kCommClassNames[] = {"tp", "dp", "pp", "cp", "ep"};
static_assert(std::ssize(kCommClassNames) == kNumCommClasses);

std::string_view to_string(CommClass k) { return name_in(kCommClassNames, k); }

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
