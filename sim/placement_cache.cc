#include "sim/placement_cache.h"

#include <utility>

namespace scaleplan::sim {

Result<const hw::LayoutPlacement*> PlacementCache::get(const Layout& l) const {
  const Grid key{l.tp, l.cp, l.pp, l.dp_degree(), l.ep, l.etp, l.placement()};
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = placements_.find(key); it != placements_.end()) return it->second.get();
  }
  // Computed outside the lock; equal results, the first stored wins.
  SP_ASSIGN_OR_RETURN(hw::LayoutPlacement pl, hw::place_layout(l, *cluster_));
  auto fresh = std::make_unique<const hw::LayoutPlacement>(std::move(pl));
  std::lock_guard<std::mutex> lock(mu_);
  return placements_.try_emplace(key, std::move(fresh)).first->second.get();
}

}  // namespace scaleplan::sim
