// Rank placement: which GPUs the parallel groups of a layout occupy, and what that means for
// their communication.
//
// Ranks are numbered 0..G-1 and rank r runs on GPU r % gpus_per_node of node r / gpus_per_node
// (torchrun/Slurm order). The dense grid decomposes a rank in Megatron-LM's order, first axis
// fastest: tp, cp, dp, pp by default ("tp-cp-dp-pp"; any permutation may be given). The expert
// grid is separate (Megatron-LM, DESIGN.md): inside each pipeline stage the tp·cp·dp ranks are
// re-divided as etp, ep, edp (etp fastest). The ZeRO group is dp·cp.
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

struct LayoutPlacement {
  int gpus = 0;
  int nodes = 0;
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

// Describes one group: nodes and domains it spans, members per node/domain, members per NIC.
// `concurrent_groups` is how many groups of its kind send over its busiest node's NICs at once.
GroupPlacement describe_group(const std::vector<int>& members, const Cluster& cluster,
                              int concurrent_groups = 1);

}  // namespace scaleplan::hw
