#include "sim/comm_points.h"

#include <algorithm>

namespace scaleplan::sim {

Duration comm_time(const hw::CollectiveModel& cm, const models::CommShape& c,
                   const hw::GroupPlacement& g) {
  if (c.kind == CollectiveOp::kAllToAll && c.dedup_top_k > 0) {
    const double share = models::deepep_network_share(std::max(1, g.domains), c.dedup_top_k,
                                                      c.route_groups, c.route_group_topk);
    return cm.estimate_deduplicated_all_to_all(c.bytes, g, share).time * c.steps;
  }
  return cm.estimate(c.kind, c.bytes, g).time * c.steps;
}

}  // namespace scaleplan::sim
