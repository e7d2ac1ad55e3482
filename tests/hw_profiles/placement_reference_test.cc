// place_layout against a reference built from the definitions alone (hw_profiles/placement.h):
// each group's members found by decomposing every rank into its grid coordinates, mapped to GPUs
// by RankMap::gpu, described one by one with describe_group, the concurrency counted per node
// over the groups that leave their domain, the worst group the first with the largest (domains,
// concurrent groups, NIC sharing, nodes), per stage among the groups whose first rank lies in it.
// place_layout describes translated groups once per period of the map and skips what cannot
// change; these grids cover linear and packed maps on nodes of 8 and NVL72 racks, Megatron's
// order and one with pp not outermost (the expert grid taken in rank order).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <vector>

#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"

namespace scaleplan::hw {
namespace {

using Groups = std::vector<std::vector<int>>;

// The groups of `kind` by brute force: a rank's coordinates in `order` (first axis fastest); two
// ranks share a group when they differ only along the kind's axes. Expert kinds: within a stage
// (equal pp coordinate) the stage's ranks in ascending order, re-divided etp, ep, edp (etp first).
Groups reference_groups(const Layout& l, GroupKind kind, const std::vector<std::string>& order) {
  const int dp = *l.dp;
  auto size_of = [&](const std::string& a) {
    return a == "tp" ? l.tp : a == "cp" ? l.cp : a == "dp" ? dp : l.pp;
  };
  const int total = l.tp * l.cp * dp * l.pp;
  auto coord = [&](int r, const std::string& axis) {
    int stride = 1;
    for (const auto& a : order) {
      if (a == axis) return (r / stride) % size_of(a);
      stride *= size_of(a);
    }
    return -1;
  };
  std::map<std::vector<int>, std::vector<int>> by_key;
  const bool expert = kind == GroupKind::kEp || kind == GroupKind::kEtp || kind == GroupKind::kEdp;
  std::vector<int> seen_in_stage(static_cast<size_t>(l.pp), 0);
  for (int r = 0; r < total; ++r) {
    std::vector<int> key;
    if (!expert) {
      for (const auto& a : order) {
        const bool varies = (a == "tp" && kind == GroupKind::kTp) ||
                            (a == "cp" && (kind == GroupKind::kCp || kind == GroupKind::kDpCp)) ||
                            (a == "dp" && (kind == GroupKind::kDp || kind == GroupKind::kDpCp)) ||
                            (a == "pp" && kind == GroupKind::kPp);
        key.push_back(varies ? 0 : coord(r, a));
      }
    } else {
      const int stage = coord(r, "pp");
      const int j = seen_in_stage[static_cast<size_t>(stage)]++;  // index among the stage's ranks
      const int etp = j % l.etp, ep = (j / l.etp) % l.ep, edp = j / (l.etp * l.ep);
      key = {stage, kind == GroupKind::kEtp ? 0 : etp, kind == GroupKind::kEp ? 0 : ep,
             kind == GroupKind::kEdp ? 0 : edp};
    }
    by_key[key].push_back(r);
  }
  Groups out;
  for (auto& [k, members] : by_key) out.push_back(members);
  std::sort(out.begin(), out.end());
  return out;
}

auto key(const GroupPlacement& p) {
  return std::make_tuple(p.domains, p.concurrent_groups, p.nic_sharing, p.nodes);
}

void expect_same_as_reference(Layout l, const Cluster& c, Placement place,
                              const std::string& order = "tp-cp-dp-pp") {
  l.place = place;
  PlacementOptions o;
  o.order = order;
  std::vector<std::string> axes;
  for (size_t b = 0, e; b < order.size(); b = e + 1) {
    e = order.find('-', b);
    if (e == std::string::npos) e = order.size();
    axes.push_back(order.substr(b, e - b));
  }
  SCOPED_TRACE(testing::Message() << "tp" << l.tp << " cp" << l.cp << " dp" << *l.dp << " pp"
                                  << l.pp << " ep" << l.ep << " etp" << l.etp << " on " << c.name
                                  << (place == Placement::kPacked ? " packed " : " linear ")
                                  << order);
  const auto placed = place_layout(l, c, o);
  ASSERT_TRUE(placed.is_ok()) << placed.status().message();
  const RankMap map = *rank_map(l, c, o);
  const int total = l.tp * l.cp * *l.dp * l.pp;
  for (int k = 0; k < kNumPlacedGroupKinds; ++k) {
    const auto kind = static_cast<GroupKind>(k);
    SCOPED_TRACE(to_string(kind));
    const Groups groups = reference_groups(l, kind, axes);
    if (groups.front().size() == 1) {
      EXPECT_EQ((*placed)[kind], describe_group({0}, c, 1));
      continue;
    }
    EXPECT_EQ(*group_members(l, kind, o), groups);
    std::vector<std::vector<int>> gpus;
    std::vector<GroupPlacement> desc;
    std::map<int, int> leaving;  // node -> groups leaving their domain with a member on it
    for (const auto& g : groups) {
      std::vector<int> on;
      for (int r : g) on.push_back(map.gpu(r));
      desc.push_back(describe_group(on, c, 1));
      std::vector<int> nodes;
      for (int gpu : on) nodes.push_back(gpu / c.gpus_per_node);
      nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
      if (desc.back().domains > 1) {
        for (int n : nodes) ++leaving[n];
      }
      gpus.push_back(std::move(on));
    }
    GroupPlacement worst;
    std::map<int, GroupPlacement> stage_worst;
    int pp_stride = 1;
    for (const auto& a : axes) {
      if (a == "pp") break;
      pp_stride *= a == "tp" ? l.tp : a == "cp" ? l.cp : *l.dp;
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      for (int gpu : gpus[i]) {
        desc[i].concurrent_groups =
            std::max(desc[i].concurrent_groups, leaving[gpu / c.gpus_per_node]);
      }
      if (i == 0 || key(desc[i]) > key(worst)) worst = desc[i];
      const int stage = (groups[i][0] / pp_stride) % l.pp;
      if (!stage_worst.count(stage) || key(desc[i]) > key(stage_worst[stage]))
        stage_worst[stage] = desc[i];
    }
    EXPECT_EQ((*placed)[kind], worst);
    if (kind == GroupKind::kPp) continue;
    for (int s = 0; s < l.pp; ++s) EXPECT_EQ(placed->at(kind, s), stage_worst.at(s)) << s;
  }
  EXPECT_EQ(placed->nodes, map.gpu(total - 1) / c.gpus_per_node + 1);
}

Layout grid(int tp, int cp, int dp, int pp, int ep = 1, int etp = 1) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.pp = pp;
  l.ep = ep;
  l.etp = etp;
  return l;
}

TEST(Placement, TranslatedGroupsMatchTheReferenceOnNodesOf8) {
  const Cluster c = *load_cluster("dgx-h100");
  for (Placement place : {Placement::kLinear, Placement::kPacked}) {
    expect_same_as_reference(grid(8, 1, 64, 32), c, place);  // the 405B plan's 16,384 GPUs
    expect_same_as_reference(grid(4, 2, 8, 4, 4), c, place);
    expect_same_as_reference(grid(2, 1, 6, 3, 2), c, place);  // groups across node boundaries
    expect_same_as_reference(grid(2, 1, 6, 3, 2), c, place, "tp-pp-dp-cp");
    expect_same_as_reference(grid(1, 1, 24, 2, 4, 2), c, place, "dp-tp-pp-cp");
  }
  Cluster four_nics = c;
  four_nics.network.nics_per_node = 4;
  expect_same_as_reference(grid(2, 3, 4, 2, 3), four_nics, Placement::kLinear);
}

TEST(Placement, TranslatedGroupsMatchTheReferenceOnNvl72) {
  const Cluster c = *load_cluster("gb200-nvl72");
  for (Placement place : {Placement::kLinear, Placement::kPacked}) {
    expect_same_as_reference(grid(1, 1, 64, 9, 16), c, place);  // stages straddling racks
    expect_same_as_reference(grid(1, 1, 64, 4, 64), c, place);  // packed: 64 ranks per rack
    expect_same_as_reference(grid(2, 1, 24, 3, 8), c, place);
    expect_same_as_reference(grid(8, 1, 5, 7), c, place);
    expect_same_as_reference(grid(4, 2, 4, 5, 2, 2), c, place, "tp-dp-pp-cp");
  }
}

}  // namespace
}  // namespace scaleplan::hw
