// Rank placement in Megatron's order, derived by hand.
#include "hw_profiles/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "hw_profiles/collectives.h"

namespace scaleplan::hw {
namespace {

Layout layout(int tp, int cp, int dp, int pp, int ep = 1, int etp = 1) {
  Layout l;
  l.tp = tp;
  l.cp = cp;
  l.dp = dp;
  l.pp = pp;
  l.ep = ep;
  l.etp = etp;
  return l;
}

Cluster h100() { return *load_cluster("dgx-h100"); }

TEST(Placement, Tp8Dp2OnTwoNodes) {
  // tp fastest: TP groups are ranks 0-7 (node 0) and 8-15 (node 1); DP groups pair rank i with i+8,
  // one member per node, and all 8 DP groups leave each node at once, one per NIC.
  const Layout l = layout(8, 1, 2, 1);
  auto tp = group_members(l, GroupKind::kTp);
  ASSERT_TRUE(tp.is_ok());
  ASSERT_EQ(tp->size(), 2u);
  EXPECT_EQ((*tp)[0], (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  auto dp = *group_members(l, GroupKind::kDp);
  ASSERT_EQ(dp.size(), 8u);
  EXPECT_EQ(dp[3], (std::vector<int>{3, 11}));
  auto p = place_layout(l, h100());
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ(p->nodes, 2);
  const auto& gtp = (*p)[GroupKind::kTp];
  EXPECT_TRUE(gtp.in_nvlink_domain);
  EXPECT_EQ(gtp.ranks_per_node, 8);
  const auto& gdp = (*p)[GroupKind::kDp];
  EXPECT_FALSE(gdp.in_nvlink_domain);
  EXPECT_EQ(gdp.nodes, 2);
  EXPECT_EQ(gdp.ranks_per_node, 1);
  EXPECT_EQ(gdp.nic_sharing, 1);
  EXPECT_EQ(gdp.concurrent_groups, 8);
}

TEST(Placement, AllFourAxes) {
  // tp=2,cp=2,dp=2,pp=2: rank = tp + 2·cp + 4·dp + 8·pp. Rank 0's CP group is {0,2}, DP {0,4},
  // PP {0,8} (crosses to node 1), the ZeRO dp·cp group {0,2,4,6}.
  const Layout l = layout(2, 2, 2, 2);
  EXPECT_EQ((*group_members(l, GroupKind::kCp))[0], (std::vector<int>{0, 2}));
  EXPECT_EQ((*group_members(l, GroupKind::kDp))[0], (std::vector<int>{0, 4}));
  EXPECT_EQ((*group_members(l, GroupKind::kPp))[0], (std::vector<int>{0, 8}));
  EXPECT_EQ((*group_members(l, GroupKind::kDpCp))[0], (std::vector<int>{0, 2, 4, 6}));
  auto p = *place_layout(l, h100());
  EXPECT_FALSE(p[GroupKind::kPp].in_nvlink_domain);
  EXPECT_TRUE(p[GroupKind::kDpCp].in_nvlink_domain);
}

TEST(Placement, CustomOrder) {
  // order dp-tp-cp-pp puts dp fastest: rank 0's DP group with dp=4 is {0,1,2,3}, TP is {0,4}.
  PlacementOptions o;
  o.order = "dp-tp-cp-pp";
  const Layout l = layout(2, 1, 4, 1);
  EXPECT_EQ((*group_members(l, GroupKind::kDp, o))[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ((*group_members(l, GroupKind::kTp, o))[0], (std::vector<int>{0, 4}));
  o.order = "tp-dp-pp";
  EXPECT_FALSE(group_members(l, GroupKind::kTp, o).is_ok());
}

TEST(Placement, ExpertGridIsSeparate) {
  // tp=2, dp=4, pp=2 on 16 GPUs with ep=4, etp=1: each stage's 8 ranks are re-divided etp-ep-edp,
  // so the EP groups of stage 0 are {0,1,2,3} and {4,5,6,7}, EDP pairs {0,4}; stage 1 adds 8.
  const Layout l = layout(2, 1, 4, 2, 4, 1);
  auto ep = *group_members(l, GroupKind::kEp);
  ASSERT_EQ(ep.size(), 4u);
  EXPECT_EQ(ep[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(ep[2], (std::vector<int>{8, 9, 10, 11}));
  EXPECT_EQ((*group_members(l, GroupKind::kEdp))[0], (std::vector<int>{0, 4}));
  EXPECT_EQ((*group_members(l, GroupKind::kEtp))[0], (std::vector<int>{0}));
}

TEST(Placement, NicSharingWithFewerNics) {
  // 4 NICs for 8 GPUs: GPUs 0 and 1 share NIC 0. A group {0,1,8,9} has two members per NIC.
  Cluster c = h100();
  c.network.nics_per_node = 4;
  auto g = describe_group({0, 1, 8, 9}, c, 1);
  EXPECT_EQ(g.nic_sharing, 2);
  EXPECT_EQ(g.nodes, 2);
  EXPECT_EQ(g.ranks_per_node, 2);
}

TEST(Placement, Nvl72DomainSpansTrays) {
  // GB200 NVL72: 4 GPUs per tray, 72 per NVLink domain. A 16-rank group spans 4 trays but stays on
  // NVLink.
  auto c = *load_cluster("gb200-nvl72");
  std::vector<int> m(16);
  for (int i = 0; i < 16; ++i) m[i] = i;
  auto g = describe_group(m, c);
  EXPECT_EQ(g.nodes, 4);
  EXPECT_TRUE(g.in_nvlink_domain);
  EXPECT_EQ(g.ranks_per_domain, 16);
}

}  // namespace
// The groups a Program adds to the grid's (embedding, mirror, world): the embedding group of each
// pipeline is its first and last stage, DualPipe's mirror pairs stage s with stage pp-1-s, and the
// world is every rank.
TEST(Placement, EmbeddingMirrorAndWorldGroups) {
  auto l = resolve_layout(*parse_layout("tp=2,pp=4,dp=1"), {}, 8);
  ASSERT_TRUE(l.is_ok());
  // Default order tp-cp-dp-pp: pipeline j holds ranks j, j+2, j+4, j+6.
  auto emb = group_members(*l, GroupKind::kEmbedding);
  ASSERT_TRUE(emb.is_ok());
  EXPECT_EQ(*emb, (std::vector<std::vector<int>>{{0, 6}, {1, 7}}));
  auto mirror = group_members(*l, GroupKind::kPpMirror);
  ASSERT_TRUE(mirror.is_ok());
  EXPECT_EQ(*mirror, (std::vector<std::vector<int>>{{0, 6}, {1, 7}, {2, 4}, {3, 5}}));
  auto world = group_members(*l, GroupKind::kWorld);
  ASSERT_TRUE(world.is_ok());
  ASSERT_EQ(world->size(), 1u);
  EXPECT_EQ(world->front().size(), 8u);
}

// issue 44: qwen3-235b-a22b's tp=1, pp=9, dp=64, ep=16 on 576 GB200 (8 NVL72 racks). Stage s holds
// ranks 64s..64s+63 (pp outermost); an EP group is 16 consecutive ranks of a stage. Stage 0's four
// groups (0-15 .. 48-63) lie in rack 0 (ranks 0-71); stage 1's first group (64-79) straddles racks
// 0 and 1. Each stage is charged its own groups: stage 0's all-to-all is the one `collective`
// times for 16 ranks packed in one rack, not stage 1's straddling one.
TEST(Placement, EachStageIsChargedItsOwnGroups) {
  const Cluster c = *load_cluster("gb200-nvl72");
  Layout l;
  l.tp = 1;
  l.cp = 1;
  l.dp = 64;
  l.pp = 9;
  l.ep = 16;
  const auto p = place_layout(l, c);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ((*p)[GroupKind::kEp].domains, 2);  // the layout-wide worst: a straddling group
  ASSERT_EQ(p->stages.size(), 9u);
  EXPECT_EQ(p->at(GroupKind::kEp, 0).domains, 1);
  EXPECT_TRUE(p->at(GroupKind::kEp, 0).in_nvlink_domain);
  EXPECT_EQ(p->at(GroupKind::kEp, 1).domains, 2);
  // Stage 8 (ranks 512-575) is rack 7's last 64 ranks (504-575): inside one rack again.
  EXPECT_EQ(p->at(GroupKind::kEp, 8).domains, 1);
  // The all-to-all of 256 MiB on stage 0 within 10% of a packed 16-rank group in one domain.
  const CollectiveModel cm(c);
  const double packed =
      cm.estimate(CollectiveOp::kAllToAll, Bytes(256 << 20), GroupPlacement::packed(c, 16))
          .time.to_seconds();
  const double stage0 =
      cm.estimate(CollectiveOp::kAllToAll, Bytes(256 << 20), p->at(GroupKind::kEp, 0))
          .time.to_seconds();
  EXPECT_NEAR(stage0, packed, 0.1 * packed);
  // Stages aligned with nodes carry no per-stage list: every stage's groups are alike.
  Layout a;
  a.tp = 8;
  a.dp = 2;
  a.pp = 4;
  const auto aligned = place_layout(a, *load_cluster("dgx-h100"));
  ASSERT_TRUE(aligned.is_ok());
  EXPECT_TRUE(aligned->stages.empty());
}

// issue 44, place=packed: the same job with each NVL72 rack holding 64 ranks (four whole EP
// groups of 16, or one whole stage of 64; 72/16 = 4.5, so 8 GPUs of each rack stay idle). Rank r
// runs on GPU (r/64)·72 + r%64, so stage s (ranks 64s..64s+63) is rack s: 9 racks, every EP group
// inside one, and each stage's 256 MiB all-to-all is the one `collective` times for 16 ranks
// packed in one rack (scaleplan collective --ranks 16, GroupPlacement::packed).
TEST(Placement, PackedKeepsEveryNvl72StageInItsRack) {
  const Cluster c = *load_cluster("gb200-nvl72");
  Layout l = layout(1, 1, 64, 9, 16);
  l.place = Placement::kPacked;
  const auto m = rank_map(l, c);
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  EXPECT_EQ(m->per_domain, 64);
  EXPECT_EQ(m->domains(576), 9);
  EXPECT_EQ(m->segment_nodes(), 16);  // 64 ranks on 16 trays of 4
  EXPECT_EQ(m->gpu(63), 63);
  EXPECT_EQ(m->gpu(64), 72);
  EXPECT_EQ(m->gpu(575), 8 * 72 + 63);
  const auto ep = group_members(l, GroupKind::kEp);
  ASSERT_TRUE(ep.is_ok());
  ASSERT_EQ(ep->size(), 36u);
  for (const auto& g : *ep) {
    for (int r : g) EXPECT_EQ(m->gpu(r) / 72, g.front() / 64) << "rank " << r;
  }
  const auto p = place_layout(l, c);
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  EXPECT_EQ(p->map, *m);
  EXPECT_EQ(p->nodes, 8 * 18 + 16);  // eight full racks' trays, then 16 of the ninth's 18
  const CollectiveModel cm(c);
  const double collective =
      cm.estimate(CollectiveOp::kAllToAll, Bytes(256 << 20), GroupPlacement::packed(c, 16))
          .time.to_seconds();
  for (int s = 0; s < 9; ++s) {
    EXPECT_EQ(p->at(GroupKind::kEp, s).domains, 1) << "stage " << s;
    const double charged =
        cm.estimate(CollectiveOp::kAllToAll, Bytes(256 << 20), p->at(GroupKind::kEp, s))
            .time.to_seconds();
    EXPECT_NEAR(charged, collective, 0.1 * collective) << "stage " << s;
  }
  // Linear on the same grid: stage 1's first group (ranks 64-79) straddles racks 0 and 1.
  l.place = Placement::kLinear;
  EXPECT_EQ(place_layout(l, c)->at(GroupKind::kEp, 1).domains, 2);
}

// Group membership per rank under place=packed, from the grid: tp=4, pp=16, dp=4 on 256 GB200
// GPUs. A stage is tp·dp = 16 consecutive ranks (the largest whole block that fits 72); a rack
// takes the largest multiple of 16 up to 72 that divides 256, 64: four stages, ranks 64d..64d+63
// on rack d's first 64 GPUs. Every TP and DP group then lies in one rack; pipelines cross racks.
TEST(Placement, PackedMapsWholeStagesOntoRacks) {
  const Cluster c = *load_cluster("gb200-nvl72");
  Layout l = layout(4, 1, 4, 16);
  l.place = Placement::kPacked;
  const auto m = rank_map(l, c);
  ASSERT_TRUE(m.is_ok());
  EXPECT_EQ(m->per_domain, 64);
  for (int r = 0; r < 256; ++r) EXPECT_EQ(m->gpu(r), (r / 64) * 72 + r % 64) << r;
  const auto p = place_layout(l, c);
  ASSERT_TRUE(p.is_ok());
  EXPECT_EQ((*p)[GroupKind::kTp].domains, 1);
  EXPECT_EQ((*p)[GroupKind::kDp].domains, 1);
  EXPECT_EQ((*p)[GroupKind::kPp].domains, 4);
  // Linear: stage 4 (ranks 64-79) straddles racks 0 (0-71) and 1.
  l.place = Placement::kLinear;
  EXPECT_EQ(place_layout(l, c)->operator[](GroupKind::kDp).domains, 2);
}

// Where the groups divide the domain, or the job fits one, packed is linear: the same map, the
// same placement; the planner then has one placement to simulate.
TEST(Placement, PackedCoincidesWithLinearWhereGroupsDivideTheDomain) {
  Layout h = layout(8, 1, 2, 4);
  h.place = Placement::kPacked;
  EXPECT_TRUE(rank_map(h, h100())->linear());  // 8-GPU NVLink domains, TP groups of 8
  EXPECT_EQ(*distinct_placements(h, h100()), std::vector<Placement>{Placement::kLinear});
  const Cluster c = *load_cluster("gb200-nvl72");
  Layout one = layout(1, 1, 64, 1, 16);  // 64 GPUs: inside one rack either way
  one.place = Placement::kPacked;
  EXPECT_TRUE(rank_map(one, c)->linear());
  Layout eight = layout(8, 1, 9, 8);  // stages of 72 ranks: a rack each
  eight.place = Placement::kPacked;
  EXPECT_TRUE(rank_map(eight, c)->linear());
}

// The planner compares packed with linear only where packed holds no more racks than the job's
// GPUs already span: 576 GPUs are 8 racks, and 64 per rack would need 9; 256 GPUs span 4 racks
// (3·72 < 256), and 64 per rack is 4.
TEST(Placement, PackedIsComparedOnlyOnTheRacksTheJobHolds) {
  const Cluster c = *load_cluster("gb200-nvl72");
  EXPECT_EQ(*distinct_placements(layout(1, 1, 64, 9, 16), c),
            std::vector<Placement>{Placement::kLinear});
  EXPECT_EQ(*distinct_placements(layout(1, 1, 64, 4, 64), c),
            (std::vector<Placement>{Placement::kLinear, Placement::kPacked}));
}

namespace {

// place_layout against a reference built from the definitions alone (hw_profiles/placement.h):
// each group's members found by decomposing every rank into its grid coordinates, mapped to GPUs
// by RankMap::gpu, described one by one with describe_group, the concurrency counted per node
// over the groups that leave their domain, the worst group the first with the largest (domains,
// concurrent groups, NIC sharing, nodes), per stage among the groups whose first rank lies in it.
// place_layout describes translated groups once per period of the map and skips what cannot
// change; these grids cover linear and packed maps on nodes of 8 and NVL72 racks, Megatron's
// order and one with pp not outermost (the expert grid taken in rank order).
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

TEST(Placement, TranslatedGroupsMatchTheReferenceOnNodesOf8) {
  const Cluster c = *load_cluster("dgx-h100");
  for (Placement place : {Placement::kLinear, Placement::kPacked}) {
    expect_same_as_reference(layout(8, 1, 64, 32), c, place);  // the 405B plan's 16,384 GPUs
    expect_same_as_reference(layout(4, 2, 8, 4, 4), c, place);
    expect_same_as_reference(layout(2, 1, 6, 3, 2), c, place);  // groups across node boundaries
    expect_same_as_reference(layout(2, 1, 6, 3, 2), c, place, "tp-pp-dp-cp");
    expect_same_as_reference(layout(1, 1, 24, 2, 4, 2), c, place, "dp-tp-pp-cp");
  }
  Cluster four_nics = c;
  four_nics.network.nics_per_node = 4;
  expect_same_as_reference(layout(2, 3, 4, 2, 3), four_nics, Placement::kLinear);
}

TEST(Placement, TranslatedGroupsMatchTheReferenceOnNvl72) {
  const Cluster c = *load_cluster("gb200-nvl72");
  for (Placement place : {Placement::kLinear, Placement::kPacked}) {
    expect_same_as_reference(layout(1, 1, 64, 9, 16), c, place);  // stages straddling racks
    expect_same_as_reference(layout(1, 1, 64, 4, 64), c, place);  // packed: 64 ranks per rack
    expect_same_as_reference(layout(2, 1, 24, 3, 8), c, place);
    expect_same_as_reference(layout(8, 1, 5, 7), c, place);
    expect_same_as_reference(layout(4, 2, 4, 5, 2, 2), c, place, "tp-dp-pp-cp");
  }
}

}  // namespace
}  // namespace scaleplan::hw
