#include "sim/comm_points.h"

#include <algorithm>

namespace scaleplan::sim {

hw::GroupKind group_kind(models::CommGroup g) {
  switch (g) {
    case models::CommGroup::kTp:
      return hw::GroupKind::kTp;
    case models::CommGroup::kCp:
      return hw::GroupKind::kCp;
    case models::CommGroup::kEp:
      return hw::GroupKind::kEp;
    case models::CommGroup::kEtp:
      return hw::GroupKind::kEtp;
    case models::CommGroup::kDp:
      return hw::GroupKind::kDpCp;
    case models::CommGroup::kPp:
      return hw::GroupKind::kPp;
  }
  return hw::GroupKind::kTp;
}

hw::CollectiveOp hw_op(models::CommKind k) {
  switch (k) {
    case models::CommKind::kAllReduce:
      return hw::CollectiveOp::kAllReduce;
    case models::CommKind::kAllGather:
      return hw::CollectiveOp::kAllGather;
    case models::CommKind::kReduceScatter:
      return hw::CollectiveOp::kReduceScatter;
    case models::CommKind::kAllToAll:
      return hw::CollectiveOp::kAllToAll;
    case models::CommKind::kSendRecv:
      return hw::CollectiveOp::kSendRecv;
  }
  return hw::CollectiveOp::kAllReduce;
}

Duration comm_time(const hw::CollectiveModel& cm, const models::CommShape& c,
                   const hw::GroupPlacement& g) {
  if (c.kind == models::CommKind::kAllToAll && c.dedup_top_k > 0) {
    const double share = models::deepep_network_share(std::max(1, g.domains), c.dedup_top_k,
                                                      c.route_groups, c.route_group_topk);
    return cm.estimate_deduplicated_all_to_all(c.bytes, g, share).time * c.steps;
  }
  return cm.estimate(hw_op(c.kind), c.bytes, g).time * c.steps;
}

}  // namespace scaleplan::sim
