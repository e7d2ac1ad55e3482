// Rank placement: which GPUs the parallel groups of a layout occupy, and what that means for
// their communication.
//
// Ranks are numbered 0..G-1. Which GPU a rank runs on is the layout's `place` (core/layout.h,
// RankMap below): with place=linear rank r runs on GPU r % gpus_per_node of node r /
// gpus_per_node (torchrun/Slurm order); with place=packed each NVLink domain takes only a whole
// number of the layout's innermost groups (docs/simulator.md, "Rank placement"). The dense grid
// decomposes a rank in Megatron-LM's order, first axis fastest: tp, cp, dp, pp by default
// ("tp-cp-dp-pp"; any permutation may be given). The expert grid is separate (Megatron-LM,
// DESIGN.md): inside each pipeline stage the tp·cp·dp ranks are re-divided as etp, ep, edp (etp
// fastest). The ZeRO group is dp·cp.
//
// For each group kind the placement reports a representative group (the worst one: most NVLink
// domains, then most groups sharing its NICs) as a GroupPlacement for the cost model, and on
// request the member lists of every group. Pure functions of their inputs; thread-safe.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "core/comm.h"
#include "core/layout.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::hw {

// Group kinds are core/comm.h's GroupKind.

struct PlacementOptions {
  std::string order = "tp-cp-dp-pp";        // dense grid, fastest first (Megatron's default)
  std::string expert_order = "etp-ep-edp";  // expert grid inside a stage, fastest first
};

// Where job ranks run: NVLink domain d holds ranks d·per_domain .. (d+1)·per_domain-1 on its first
// per_domain GPUs, so rank r runs on cluster GPU (r / per_domain)·gpus_per_domain + r % per_domain
// (node = GPU / gpus_per_node, domain = GPU / gpus_per_domain). per_domain = gpus_per_domain is
// place=linear. Increasing in the rank, so a group's members keep their order as GPUs.
struct RankMap {
  int per_domain = 8;       // ranks each NVLink domain holds
  int gpus_per_domain = 8;  // the cluster's
  int gpus_per_node = 8;    // the cluster's
  int gpu(int rank) const { return rank / per_domain * gpus_per_domain + rank % per_domain; }
  // NVLink domains `ranks` ranks occupy.
  int domains(int ranks) const { return (ranks + per_domain - 1) / per_domain; }
  bool linear() const { return per_domain == gpus_per_domain; }
  // Slurm's --segment for this map (nodes per domain, each segment inside one domain): 0 where
  // the map is linear (no segment needed).
  int segment_nodes() const { return linear() ? 0 : per_domain / gpus_per_node; }
  bool operator==(const RankMap&) const = default;
};

// The map of `layout.placement()` for a resolved layout. place=packed: u is the largest block of
// consecutive ranks that holds whole groups of the innermost grid axes (a prefix product of the
// dense order, or within a stage etp, etp·ep when pp is outermost) and fits a domain; a domain
// holds a multiple of lcm(u, gpus_per_node) ranks (whole groups on whole nodes, as a Slurm
// segment is whole nodes), the largest at most gpus_per_domain that divides the job's ranks (equal
// segments), else the largest that fits (the last domain partly used). Where no multiple fits a
// domain, or it is all of one, packed coincides with linear.
Result<RankMap> rank_map(const Layout& layout, const Cluster& cluster,
                         const PlacementOptions& options = {});

// The rank placements worth comparing for a resolved layout that leaves `place` open: linear, and
// packed where its map differs and it occupies no more NVLink domains than linear does (a job of
// G GPUs holds ceil(G / gpus_per_domain) domains; packing into more would need GPUs it was not
// given). The planner simulates each and keeps the faster (docs/planner.md, "Rank placement").
Result<std::vector<Placement>> distinct_placements(const Layout& layout, const Cluster& cluster);

struct LayoutPlacement {
  int gpus = 0;   // ranks of the job
  int nodes = 0;  // nodes it occupies (partly used ones included)
  RankMap map;    // where each rank runs
  std::array<GroupPlacement, kNumPlacedGroupKinds> groups;  // the grid's kinds, kTp..kDpCp
  // Per pipeline stage, the worst group of each kind among the groups inside that stage (every
  // kind but kPp: a TP, CP, DP, expert or ZeRO group never leaves its stage), so that each stage
  // is charged for its own groups' placement. On an NVL72 a stage of 64 ranks can lie in one rack
  // while the next straddles two; charging every stage with the straddling one's all-to-all made
  // stage 0's 8x slower than `collective` says (issue 44). Empty when every stage's equals
  // `groups` (the common case: stages aligned with nodes).
  std::vector<std::array<GroupPlacement, kNumPlacedGroupKinds>> stages;
  const GroupPlacement& operator[](GroupKind k) const { return groups.at(static_cast<int>(k)); }
  // Stage `stage`'s group of kind `k` (the layout-wide worst where there are no per-stage ones).
  const GroupPlacement& at(GroupKind k, int stage) const {
    if (stages.empty() || stage < 0 || static_cast<size_t>(stage) >= stages.size())
      return (*this)[k];
    return stages[static_cast<size_t>(stage)].at(static_cast<int>(k));
  }
};

// GroupPlacement of every kind for a resolved layout (dp set). Errors name the bad order string.
Result<LayoutPlacement> place_layout(const Layout& layout, const Cluster& cluster,
                                     const PlacementOptions& options = {});

// Member ranks of every group of `kind`, each list ascending; groups ordered by their first rank.
// Besides the grid's kinds: kEmbedding, the first and last stage of each pipeline (one rank at
// pp = 1); kPpMirror, stages s and pp-1-s of each pipeline (the middle stage alone at an odd pp);
// kWorld, every rank.
Result<std::vector<std::vector<int>>> group_members(const Layout& layout, GroupKind kind,
                                                    const PlacementOptions& options = {});

// Describes one group of cluster GPUs (RankMap::gpu of its ranks; the ranks themselves with
// place=linear): nodes and domains it spans, members per node/domain, members per NIC.
// `concurrent_groups` is how many groups of its kind send over its busiest node's NICs at once.
GroupPlacement describe_group(const std::vector<int>& members, const Cluster& cluster,
                              int concurrent_groups = 1);

}  // namespace scaleplan::hw
