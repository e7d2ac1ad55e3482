// How the operator list's communication points (models/operators.h) are timed on the cluster's
// placed groups (hw_profiles/). The program builder and the planner's lower bound both time
// communication through this function, so they cannot disagree on it.
#pragma once

#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "models/operators.h"

namespace scaleplan::sim {

// One communication point on its placed group, all of its `steps`: the collective model's
// estimate, DeepEP's deduplicated all-to-all where the point carries it (CommShape::dedup_top_k,
// its network share from models::deepep_network_share over the group's nodes).
Duration comm_time(const hw::CollectiveModel& cm, const models::CommShape& c,
                   const hw::GroupPlacement& g);

}  // namespace scaleplan::sim
