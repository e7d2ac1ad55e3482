// The topology graph: routes and ring bottlenecks on two DGX H100 nodes.
#include "hw_profiles/topology.h"

#include <gtest/gtest.h>

namespace scaleplan::hw {
namespace {

Topology two_h100() {
  auto t = Topology::build(*load_cluster("dgx-h100"), 2);
  EXPECT_TRUE(t.is_ok());
  return std::move(t).value();
}

TEST(Topology, VerticesAndLinks) {
  // Per node: 8 GPUs, 8 NICs, one NVSwitch vertex; 8 rail leaves and 8 spines for the fabric.
  Topology t = two_h100();
  EXPECT_EQ(t.num_gpus(), 16);
  EXPECT_EQ(t.num_vertices(), 2 * (8 + 8 + 1) + 8 + 8);
  // Links: per GPU nvlink + pcie, per NIC one ib link, 8 leaves x 8 spines uplinks.
  EXPECT_EQ(t.num_links(), 16 * 2 + 16 + 64);
}

TEST(Topology, Routes) {
  Topology t = two_h100();
  // Same node: GPU -> NVSwitch -> GPU.
  Route in = t.route(0, 5);
  EXPECT_EQ(in.links.size(), 2u);
  EXPECT_DOUBLE_EQ(in.bandwidth.value(), 450e9);
  // Same rail on two nodes: GPU -pcie- NIC -ib- leaf -ib- NIC -pcie- GPU, bounded by the 50 GB/s
  // NIC.
  Route out = t.route(3, 11);
  EXPECT_EQ(out.links.size(), 4u);
  EXPECT_DOUBLE_EQ(out.bandwidth.value(), 50e9);
}

TEST(Topology, RingBottleneck) {
  Topology t = two_h100();
  // A DP pair {3, 11}: one flow each way over rail 3's NICs, 50 GB/s.
  Bottleneck b = t.ring_bottleneck({3, 11});
  EXPECT_EQ(b.flows, 1);
  EXPECT_DOUBLE_EQ(b.per_flow.value(), 50e9);
  // A TP ring inside node 0: every NVLink carries one flow per direction: 450 GB/s.
  b = t.ring_bottleneck({0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_DOUBLE_EQ(b.per_flow.value(), 450e9);
  // The ring 0,8,1,9 crosses nodes at every hop: GPU 0 and 1 have their own NICs, so each NIC
  // link carries one flow per direction; still 50 GB/s.
  b = t.ring_bottleneck({0, 8, 1, 9});
  EXPECT_DOUBLE_EQ(b.per_flow.value(), 50e9);
}

}  // namespace
}  // namespace scaleplan::hw
