// sim::PlacementCache (sim/placement_cache.h): the placement the lower bound and the simulator
// share, one entry per parallel grid.
#include "sim/placement_cache.h"

#include <gtest/gtest.h>

#include "core/layout.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/placement.h"

namespace scaleplan::sim {
namespace {

Layout resolved(const char* text, int64_t gpus) {
  auto l = resolve_layout(*parse_layout(text), {}, gpus);
  EXPECT_TRUE(l.is_ok()) << text;
  return *l;
}

// The placement depends on the grid (tp, cp, pp, dp, ep, etp) alone: two layouts of one grid that
// differ in schedule, ZeRO and batch get the same entry, equal to hw::place_layout's.
TEST(PlacementCache, OneEntryPerGridEqualToPlaceLayout) {
  const hw::Cluster cluster = *hw::load_cluster("dgx-h100");
  const PlacementCache cache(&cluster);
  const Layout a = resolved("tp=4,pp=4,dp=8,mbs=1,gbs=64,zero=1", 128);
  const Layout b = resolved("tp=4,pp=4,dp=8,vpp=2,schedule=interleaved,mbs=2,gbs=128,zero=0", 128);
  auto pa = cache.get(a);
  auto pb = cache.get(b);
  ASSERT_TRUE(pa.is_ok() && pb.is_ok());
  EXPECT_EQ(*pa, *pb);  // the same stored placement
  const hw::LayoutPlacement direct = *hw::place_layout(a, cluster);
  for (int k = 0; k < kNumPlacedGroupKinds; ++k)
    EXPECT_EQ((**pa).groups.at(k), direct.groups.at(k)) << "group kind " << k;
  EXPECT_EQ((**pa).stages.size(), direct.stages.size());
}

// Another grid is another entry: TP spread over 8 GPUs of a node instead of 4.
TEST(PlacementCache, ADifferentGridIsPlacedOnItsOwn) {
  const hw::Cluster cluster = *hw::load_cluster("dgx-h100");
  const PlacementCache cache(&cluster);
  auto four = cache.get(resolved("tp=4,pp=4,dp=8", 128));
  auto eight = cache.get(resolved("tp=8,pp=4,dp=4", 128));
  ASSERT_TRUE(four.is_ok() && eight.is_ok());
  EXPECT_NE(*four, *eight);
  EXPECT_EQ((**four)[GroupKind::kTp].size, 4);
  EXPECT_EQ((**eight)[GroupKind::kTp].size, 8);
}

// An unresolved layout (dp unset) is place_layout's error, passed on.
TEST(PlacementCache, PassesOnPlaceLayoutsError) {
  const hw::Cluster cluster = *hw::load_cluster("dgx-h100");
  const PlacementCache cache(&cluster);
  EXPECT_FALSE(cache.get(*parse_layout("tp=2,pp=2")).is_ok());
}

}  // namespace
}  // namespace scaleplan::sim
