// PlacementCache: hw::place_layout of resolved layouts on one cluster, computed once per parallel
// grid (tp, cp, pp, dp, ep, etp) and rank placement (place) and kept, so that the lower bound
// (sim/iteration_bound.h) and the simulations it admits (sim::SimulateOptions::placement,
// BuildInputs::placement) read one placement instead of each computing its own. The placement
// depends on the grid and place alone: layouts that differ in schedule, vpp, ZeRO, recompute or the
// batch share an entry.
//
// Thread-safe (a mutex guards the map; entries are never erased, so the pointers it returns stay
// valid while the cache lives); not copyable. The cluster must outlive it.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/layout.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/placement.h"

namespace scaleplan::sim {

class PlacementCache {
 public:
  explicit PlacementCache(const hw::Cluster* cluster) : cluster_(cluster) {}
  PlacementCache(const PlacementCache&) = delete;
  PlacementCache& operator=(const PlacementCache&) = delete;

  // hw::place_layout(layout, cluster) of a resolved layout; errors are place_layout's.
  Result<const hw::LayoutPlacement*> get(const Layout& layout) const;

 private:
  using Grid = std::tuple<int, int, int, int, int, int, Placement>;  // tp, cp, pp, dp, ep, etp
  const hw::Cluster* cluster_;
  mutable std::mutex mu_;
  mutable std::map<Grid, std::unique_ptr<const hw::LayoutPlacement>> placements_;
};

}  // namespace scaleplan::sim
