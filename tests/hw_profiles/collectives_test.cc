// Collective cost model: the nccl-tests factors, and the ring / tree / NVLS / sharing formulas
// derived by hand from the defaults of docs/hw_profiles.md.
#include "hw_profiles/collectives.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace scaleplan::hw {
namespace {

Cluster h100() {
  auto c = load_cluster("dgx-h100");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return *c;
}

TEST(BusFactor, MatchesNcclTests) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather/reduce-scatter/alltoall (n-1)/n,
  // broadcast/reduce/sendrecv 1.
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllReduce, 8), 2.0 * 7 / 8);  // 1.75
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllGather, 8), 7.0 / 8);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kReduceScatter, 16), 15.0 / 16);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllToAll, 4), 3.0 / 4);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kBarrier, 8), 0.0);
}

TEST(BusFactor, AlgbwAndBusbw) {
  // The A100 row of the sample log: 8 GiB in 64.0739 ms is algbw 134.06 GB/s, busbw x1.75 = 234.61.
  const Bytes s(8589934592);
  const Duration t = Duration::microseconds(64073.9);
  EXPECT_NEAR(algbw(s, t).value() / 1e9, 134.06, 0.01);
  EXPECT_NEAR(busbw(CollectiveOp::kAllReduce, 8, s, t).value() / 1e9, 234.61, 0.02);
}

TEST(CollectiveOpNames, RoundTrip) {
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    auto op = static_cast<CollectiveOp>(i);
    auto back = parse_collective_op(to_string(op));
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(*back, op);
  }
  EXPECT_EQ(*parse_collective_op("all_reduce_perf"), CollectiveOp::kAllReduce);
  EXPECT_EQ(*parse_collective_op("AllGather"), CollectiveOp::kAllGather);
  EXPECT_FALSE(parse_collective_op("allreduse").is_ok());
}

TEST(Ring, AllReduceInsideOneNode) {
  // 8 ranks on one DGX H100, ring forced, 1 GiB (Simple wins at this size):
  //   latency = base 8.4 us + 2(n-1)=14 NVLink steps x 3.4 us = 56.0 us
  //   bandwidth = 450 GB/s x 0.82 = 369 GB/s per GPU; the ring moves 2·7/8 of (buffer + 8 MiB ramp)
  Cluster c = h100();
  CollectiveModel m(c);
  const Bytes s = 1_GiB;
  auto e =
      m.estimate(CollectiveOp::kAllReduce, s, GroupPlacement::packed(c, 8), AlgorithmChoice::kRing);
  const double expected = 8.4e-6 + 14 * 3.4e-6 + (1073741824.0 + 8388608.0) * 1.75 / 369e9;
  EXPECT_NEAR(e.time.to_seconds(), expected, 1e-9);
  EXPECT_EQ(e.algorithm, "ring/Simple");
}

TEST(Ring, AllGatherMovesHalfOfAllReduce) {
  // all-gather: n-1 = 7 steps and (n-1)/n of the buffer, half of all-reduce's 2(n-1) and 2(n-1)/n.
  Cluster c = h100();
  CollectiveModel m(c);
  const Bytes s = 4_GiB;
  auto e = m.estimate(CollectiveOp::kAllGather, s, GroupPlacement::packed(c, 8));
  const double expected = 8.4e-6 + 7 * 3.4e-6 + (4294967296.0 + 8388608.0) * 0.875 / 369e9;
  EXPECT_NEAR(e.time.to_seconds(), expected, 1e-9);
}

TEST(Tree, AllReduceAcrossTwoNodes) {
  // 16 ranks on 2 nodes, tree forced, 4 GiB (Simple): NCCL's tree latency is
  //   8.4 + 2·((8-1)·4.0 NVLink + log2(2)=1 · 14 network) = 92.4 us;
  // bandwidth = min(NVLink 369, NICs 8 x 50 x 0.94 = 376) x 0.92 = 339.48 GB/s, factor 2·15/16.
  Cluster c = h100();
  CollectiveModel m(c);
  auto e = m.estimate(CollectiveOp::kAllReduce, 4_GiB, GroupPlacement::packed(c, 16),
                      AlgorithmChoice::kTree);
  const double expected = 92.4e-6 + (4294967296.0 + 8388608.0) * (30.0 / 16) / (369e9 * 0.92);
  EXPECT_NEAR(e.time.to_seconds(), expected, 1e-9);
  EXPECT_EQ(e.algorithm, "tree/Simple");
}

TEST(Nvls, AllReduceIsAlgbwBound) {
  // NVLS: 25 us + (S + ramp) / (0.61 x 450 GB/s); busbw at 16 GiB -> 1.75 x 274.5 = 480 GB/s, the
  // NCCL maintainers' expected H100 figure.
  Cluster c = h100();
  CollectiveModel m(c);
  const Bytes s = 16_GiB;
  auto e = m.estimate(CollectiveOp::kAllReduce, s, GroupPlacement::packed(c, 8));
  EXPECT_EQ(e.algorithm, "nvls/Simple");
  EXPECT_NEAR(e.time.to_seconds(), 25e-6 + (17179869184.0 + 8388608.0) / (0.61 * 450e9), 1e-9);
  EXPECT_NEAR(busbw(CollectiveOp::kAllReduce, 8, s, e.time).value() / 1e9, 480, 2);
}

TEST(Choice, SmallMessagesUseLowLatencyProtocols) {
  Cluster c = h100();
  CollectiveModel m(c);
  auto small = m.estimate(CollectiveOp::kAllReduce, Bytes(1024), GroupPlacement::packed(c, 8));
  EXPECT_EQ(small.algorithm, "ring/LL");
  // LL: 6.6 us base + 14 x 0.6 us; bandwidth 369 x 0.25; the 1 KiB message pays its own size again.
  EXPECT_NEAR(small.time.to_seconds(), 6.6e-6 + 14 * 0.6e-6 + 2048.0 * 1.75 / (369e9 * 0.25), 1e-9);
  // Across 64 nodes the tree's log2 latency wins at medium sizes, the ring at large ones.
  auto g = GroupPlacement::packed(c, 512);
  EXPECT_TRUE(m.estimate(CollectiveOp::kAllReduce, 1_MiB, g).algorithm.starts_with("tree"));
  EXPECT_TRUE(m.estimate(CollectiveOp::kAllReduce, 16_GiB, g).algorithm.starts_with("ring"));
}

TEST(Sharing, ConcurrentGroupsSplitTheNics) {
  // A group with 4 ranks on each of 2 nodes: its members' own NICs give 4 x 47 = 188 GB/s per node.
  // With 2 such groups per node the fair share of the 8 NICs is 8 x 47 / 2 = 188 as well; with 4
  // groups (say NICs shared with other traffic) it halves to 94, so the bandwidth term doubles.
  Cluster c = h100();
  CollectiveModel m(c);
  GroupPlacement g;
  g.size = 8;
  g.ranks_per_node = 4;
  g.nodes = 2;
  g.domains = 2;
  g.ranks_per_domain = 4;
  g.in_nvlink_domain = false;
  const Bytes s = 4_GiB;
  const double lat = 8.4e-6 + (14 - 4) * 3.4e-6 + 4 * 14e-6;  // 2(n-1)=14 steps, 2·domains=4 cross
  g.concurrent_groups = 2;
  double t2 = m.estimate(CollectiveOp::kAllReduce, s, g, AlgorithmChoice::kRing).time.to_seconds();
  g.concurrent_groups = 4;
  double t4 = m.estimate(CollectiveOp::kAllReduce, s, g, AlgorithmChoice::kRing).time.to_seconds();
  const double bytes = (4294967296.0 + 8388608.0) * 1.75;
  EXPECT_NEAR(t2, lat + bytes / 188e9, 1e-9);
  EXPECT_NEAR(t4, lat + bytes / 94e9, 1e-9);
}

TEST(AllToAll, InsideAndAcrossNodes) {
  // 8 ranks in one node: each sends 7/8 of its buffer over NVLink at 369 GB/s (Simple) after
  // 8.4 + 3.4 us. 16 ranks on 2 nodes: 8/16 of the buffer leaves the node at 47 GB/s per GPU,
  // which dominates the 7/16 that stays on NVLink.
  Cluster c = h100();
  CollectiveModel m(c);
  const double S = 1073741824.0, ramp = 8388608.0;
  auto in = m.estimate(CollectiveOp::kAllToAll, 1_GiB, GroupPlacement::packed(c, 8));
  EXPECT_NEAR(in.time.to_seconds(), 11.8e-6 + (S * 7 / 8 + ramp) / 369e9, 1e-9);
  auto out = m.estimate(CollectiveOp::kAllToAll, 1_GiB, GroupPlacement::packed(c, 16));
  EXPECT_NEAR(out.time.to_seconds(), 25.8e-6 + (S / 2 + ramp) / 47e9, 1e-9);
}

// DeepEP-style dispatch: the traffic between nodes is `network_share` of the buffer, and NVLink
// forwards (r-1)/r of it inside the destination nodes. 16 ranks on 2 nodes, 1 GiB: with the
// plain all-to-all's own share, 8/16, the network still dominates and the time is the same; with a
// quarter of that it is a quarter of the network time (the 7/8 over NVLink at 369 GB/s, 2.5 ms,
// stays under the 5.7 ms of network). Inside one node nothing crosses the network.
TEST(AllToAll, DeduplicatedAcrossNodesMovesOnlyItsNetworkShare) {
  Cluster c = h100();
  CollectiveModel m(c);
  const double S = 1073741824.0, ramp = 8388608.0;
  const GroupPlacement two = GroupPlacement::packed(c, 16);
  const auto plain = m.estimate(CollectiveOp::kAllToAll, 1_GiB, two);
  EXPECT_NEAR(m.estimate_deduplicated_all_to_all(1_GiB, two, 0.5).time.to_seconds(),
              plain.time.to_seconds(), 1e-9);
  EXPECT_NEAR(m.estimate_deduplicated_all_to_all(1_GiB, two, 0.125).time.to_seconds(),
              25.8e-6 + (S / 8 + ramp) / 47e9, 1e-9);
  const GroupPlacement one = GroupPlacement::packed(c, 8);
  EXPECT_NEAR(m.estimate_deduplicated_all_to_all(1_GiB, one, 0.0).time.to_seconds(),
              11.8e-6 + (S * 7 / 8 + ramp) / 369e9, 1e-9);
}

TEST(P2p, NvlinkAndNetwork) {
  Cluster c = h100();
  CollectiveModel m(c);
  const double S = 268435456.0, ramp = 8388608.0;
  // Same node: 8.4 + 3.4 us, 369 GB/s. Across nodes: 8.4 + 14 us, one NIC at 47 GB/s; 16 transfers
  // leaving a node with 8 NICs get half a NIC each.
  EXPECT_NEAR(m.p2p_time(256_MiB, true).to_seconds(), 11.8e-6 + (S + ramp) / 369e9, 1e-9);
  EXPECT_NEAR(m.p2p_time(256_MiB, false).to_seconds(), 22.4e-6 + (S + ramp) / 47e9, 1e-9);
  EXPECT_NEAR(m.p2p_time(256_MiB, false, 16).to_seconds(), 22.4e-6 + (S + ramp) / 23.5e9, 1e-9);
}

TEST(Estimate, SingleRankIsFree) {
  Cluster c = h100();
  CollectiveModel m(c);
  auto e = m.estimate(CollectiveOp::kAllReduce, 1_GiB, GroupPlacement::packed(c, 1));
  EXPECT_EQ(e.time, Duration::zero());
  EXPECT_EQ(e.algorithm, "local");
}

TEST(NetworkScaling, SlowsOnlyTheNetworkPartAtItsSpan) {
  // A fraction f of the network rate at 4 nodes. A 16 GiB all-gather over 4 nodes (32 ranks) is a
  // ring bound by the slower of NVLink per GPU (450 GB/s x 0.82) and the node's NICs
  // (8 x 50 GB/s x 0.94); its latency is microseconds against ~50 ms of transfer. So its time grows
  // by min(nv, net) / min(nv, f x net). In one node nothing changes, and a pipeline send between
  // nodes pays the op-less fraction at 2 nodes.
  const Cluster base = h100();
  const double nv = base.node.nvlink_bandwidth.value() * base.cost.nvlink_efficiency;
  const double net = base.network.nics_per_node * base.network.nic_bandwidth.value() *
                     base.cost.network_efficiency;
  auto growth = [&](double f) { return std::min(nv, net) / std::min(nv, f * net); };
  Cluster scaled = base;
  scaled.cost.network_scaling = {{"", 2, 0.5}, {"", 4, 0.25}};
  const CollectiveModel m0(base), m1(scaled);
  const GroupPlacement g4 = GroupPlacement::packed(base, 32);
  const auto t0 = m0.estimate(CollectiveOp::kAllGather, 16_GiB, g4).time.to_seconds();
  const auto t1 = m1.estimate(CollectiveOp::kAllGather, 16_GiB, g4).time.to_seconds();
  EXPECT_NEAR(t1 / t0, growth(0.25), 0.005 * growth(0.25));
  const GroupPlacement g1 = GroupPlacement::packed(base, 8);
  EXPECT_EQ(m0.estimate(CollectiveOp::kAllGather, 16_GiB, g1).time,
            m1.estimate(CollectiveOp::kAllGather, 16_GiB, g1).time);
  EXPECT_NEAR(m1.p2p_time(16_GiB, false).to_seconds() / m0.p2p_time(16_GiB, false).to_seconds(),
              2.0, 0.01);
  EXPECT_EQ(m0.p2p_time(16_GiB, true), m1.p2p_time(16_GiB, true));
  // An op with its own points uses them; the others keep the op-less ones.
  scaled.cost.network_scaling.push_back({"all_gather", 4, 0.5});
  const CollectiveModel m2(scaled);
  EXPECT_NEAR(m2.estimate(CollectiveOp::kAllGather, 16_GiB, g4).time.to_seconds() / t0, growth(0.5),
              0.005 * growth(0.5));
  EXPECT_NEAR(m2.estimate(CollectiveOp::kReduceScatter, 16_GiB, g4).time.to_seconds() /
                  m0.estimate(CollectiveOp::kReduceScatter, 16_GiB, g4).time.to_seconds(),
              growth(0.25), 0.005 * growth(0.25));
}

// Measured collectives (Cluster::measured_collectives, from a calibrated profile).
TEST(MeasuredCollectives, TheEstimateIsTheMeasurementAtTheMeasuredGroup) {
  // An all-reduce measured on the 8 GPUs of a node at 30 us + size / 100 GB/s: on that group the
  // estimate is the measurement at every size, whatever the model says.
  Cluster c = h100();
  c.measured_collectives = {{"all_reduce", 8, "intra_node", Duration::microseconds(30), 1e-11}};
  const CollectiveModel m(c);
  EXPECT_EQ(m.measured_count(), 1);
  const GroupPlacement g8 = GroupPlacement::packed(c, 8);
  for (Bytes b : {1_KiB, 1_MiB, 1_GiB}) {
    const double want = 30e-6 + 1e-11 * static_cast<double>(b.value());
    EXPECT_NEAR(m.estimate(CollectiveOp::kAllReduce, b, g8).time.to_seconds(), want, 1e-6 * want)
        << b.value();
  }
  EXPECT_EQ(m.describe(), "nccl-model x measured (1 group: all_reduce)");
  EXPECT_EQ(CollectiveModel(h100()).describe(), "nccl-model");
}

TEST(MeasuredCollectives, OtherGroupsOfTheKindKeepTheMeasuredRatio) {
  // The 4-rank group of the same node was not measured: it takes the nearest measured group's
  // measured / modelled ratio at the same size, so the model's own size dependence is kept.
  Cluster c = h100();
  c.measured_collectives = {{"all_reduce", 8, "intra_node", Duration::microseconds(30), 1e-11}};
  const CollectiveModel m(c), plain(h100());
  const GroupPlacement g8 = GroupPlacement::packed(c, 8), g4 = GroupPlacement::packed(c, 4);
  for (Bytes b : {64_KiB, 256_MiB}) {
    auto ratio = [&](const GroupPlacement& g) {
      return m.estimate(CollectiveOp::kAllReduce, b, g).time.to_seconds() /
             plain.estimate(CollectiveOp::kAllReduce, b, g).time.to_seconds();
    };
    EXPECT_NEAR(ratio(g4), ratio(g8), 1e-6 * ratio(g8)) << b.value();
  }
  // A measurement across nodes (one rank per node, 2 nodes) applies to wider groups of that kind,
  // NIC sharing included: 4 groups sharing the NICs are slower by the model's factor, measured or
  // not.
  c.measured_collectives.push_back(
      {"all_gather", 2, "inter_node", Duration::microseconds(50), 1.0 / 20e9});
  const CollectiveModel m2(c);
  GroupPlacement wide = GroupPlacement::packed(c, 1);
  wide.size = wide.nodes = wide.domains = 16;
  wide.in_nvlink_domain = false;
  GroupPlacement shared = wide;
  shared.concurrent_groups = 8;
  const double r_wide = m2.estimate(CollectiveOp::kAllGather, 1_GiB, wide).time.to_seconds() /
                        plain.estimate(CollectiveOp::kAllGather, 1_GiB, wide).time.to_seconds();
  const double r_shared = m2.estimate(CollectiveOp::kAllGather, 1_GiB, shared).time.to_seconds() /
                          plain.estimate(CollectiveOp::kAllGather, 1_GiB, shared).time.to_seconds();
  EXPECT_NEAR(r_wide, r_shared, 1e-6 * r_wide);
  EXPECT_GT(r_wide, 1.5);  // 20 GB/s measured against ~47 GB/s per NIC modelled
}

TEST(MeasuredCollectives, UnmeasuredOpsAndKindsKeepTheModel) {
  Cluster c = h100();
  c.measured_collectives = {{"all_reduce", 8, "intra_node", Duration::microseconds(30), 1e-11}};
  const CollectiveModel m(c), plain(h100());
  const CollectiveModel model_only(c, CollectiveModel::Measured::kModelOnly);
  EXPECT_EQ(model_only.measured_count(), 0);
  const GroupPlacement g8 = GroupPlacement::packed(c, 8), g16 = GroupPlacement::packed(c, 16);
  // Another op in the node; the same op over two nodes (packed: no multi_node measurement).
  EXPECT_EQ(m.estimate(CollectiveOp::kAllGather, 1_GiB, g8).time,
            plain.estimate(CollectiveOp::kAllGather, 1_GiB, g8).time);
  EXPECT_EQ(m.estimate(CollectiveOp::kAllReduce, 1_GiB, g16).time,
            plain.estimate(CollectiveOp::kAllReduce, 1_GiB, g16).time);
  EXPECT_EQ(model_only.estimate(CollectiveOp::kAllReduce, 1_GiB, g8).time,
            plain.estimate(CollectiveOp::kAllReduce, 1_GiB, g8).time);
  EXPECT_EQ(m.p2p_time(1_GiB, false), plain.p2p_time(1_GiB, false));
  // A one-node measurement with more ranks than this cluster's nodes have is another machine's.
  c.measured_collectives = {{"all_gather", 16, "host", Duration::microseconds(30), 1e-11}};
  EXPECT_EQ(CollectiveModel(c).measured_count(), 0);
}

TEST(MeasuredCollectives, PipelineSendsUseTheMeasuredSendRecv) {
  // sendrecv measured between two nodes (one rank each): a pipeline send across nodes, alone on
  // its NIC, is the measurement; inside the node the model stays.
  Cluster c = h100();
  c.measured_collectives = {{"sendrecv", 2, "inter_node", Duration::microseconds(20), 1.0 / 40e9}};
  const CollectiveModel m(c), plain(h100());
  const double want = 20e-6 + 268435456.0 / 40e9;
  EXPECT_NEAR(m.p2p_time(256_MiB, false).to_seconds(), want, 1e-6 * want);
  EXPECT_EQ(m.p2p_time(256_MiB, true), plain.p2p_time(256_MiB, true));
}

TEST(MeasuredCollectives, ReadFromTheCalibrationSectionAndChecked) {
  const std::string base =
      R"({"extends": "dgx-h100", "name": "t", "calibration": {"format": 1, "collectives": [)";
  auto ok = parse_cluster(base + R"({"op": "allreduce", "ranks": 8, "placement": "intra_node",
      "latency_s": 3e-5, "seconds_per_byte": 1e-11, "busbw_GBps": 175, "samples": 6}]}})",
                          "t.json");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ(ok->measured_collectives.size(), 1u);
  EXPECT_EQ(ok->measured_collectives[0].op, "all_reduce");  // normalised to the nccl-tests name
  EXPECT_EQ(ok->measured_collectives[0].latency, Duration::microseconds(30));
  const std::pair<std::string, std::string> bad[] = {
      {R"({"op": "allsum", "ranks": 8, "placement": "intra_node", "latency_s": 0,
           "seconds_per_byte": 1e-11})",
       "calibration: collectives[0]: op"},
      {R"({"op": "all_reduce", "ranks": 1, "placement": "intra_node", "latency_s": 0,
           "seconds_per_byte": 1e-11})",
       "collectives[0]: ranks"},
      {R"({"op": "all_reduce", "ranks": 8, "placement": "rack", "latency_s": 0,
           "seconds_per_byte": 1e-11})",
       "collectives[0]: placement"},
      {R"({"op": "all_reduce", "ranks": 8, "placement": "intra_node", "latency_s": -1,
           "seconds_per_byte": 1e-11})",
       "collectives[0]: latency_s"},
      {R"({"op": "all_reduce", "ranks": 8, "placement": "intra_node", "latency_s": 0})",
       "collectives[0]: seconds_per_byte"}};
  for (const auto& [entry, want] : bad) {
    auto r = parse_cluster(base + entry + "]}}", "t.json");
    ASSERT_FALSE(r.is_ok()) << entry;
    EXPECT_NE(r.status().message().find(want), std::string::npos) << r.status().message();
  }
}

TEST(MeasuredCollectives, MeasurementsAreReadMergedAndChecked) {
  // calibration.measurements.collectives (every measured point, as `scaleplan profile` writes
  // them) join the fit of their group; repeats of one size merge into their geometric mean.
  const std::string head = R"({"extends": "dgx-h100", "name": "t", "calibration": {"format": 1,
      "collectives": [{"op": "all_reduce", "ranks": 8, "placement": "intra_node",
                       "latency_s": 3e-5, "seconds_per_byte": 1e-11}],
      "measurements": {"kernels": [], "collectives": [)";
  auto ok = parse_cluster(head + R"(
      {"op": "all_reduce", "ranks": 8, "placement": "intra_node", "bytes": 1048576, "time_s": 4e-5},
      {"op": "all_reduce", "ranks": 8, "placement": "intra_node", "bytes": 1024, "time_s": 2e-5},
      {"op": "all_reduce", "ranks": 8, "placement": "intra_node", "bytes": 1024, "time_s": 8e-5},
      {"op": "all_gather", "ranks": 2, "placement": "inter_node", "bytes": 1024, "time_s": 1e-5}]}}})",
                          "t.json");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  ASSERT_EQ(ok->measured_collectives.size(), 2u);
  const MeasuredCollective& ar = ok->measured_collectives[0];
  EXPECT_EQ(ar.latency, Duration::microseconds(30));
  ASSERT_EQ(ar.points.size(), 2u);
  EXPECT_EQ(ar.points[0].first, Bytes(1024));
  EXPECT_NEAR(ar.points[0].second.to_seconds(), 4e-5, 1e-12);  // sqrt(2e-5 x 8e-5)
  EXPECT_EQ(ar.points[1].first, Bytes(1048576));
  EXPECT_EQ(ok->measured_collectives[1].op, "all_gather");  // points only, no fit
  EXPECT_EQ(CollectiveModel(*ok).measured_count(), 2);
  auto bad = parse_cluster(head + R"(
      {"op": "all_reduce", "ranks": 8, "placement": "intra_node", "bytes": 0, "time_s": 4e-5}]}}})",
                           "t.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("calibration: measurements: collectives[0]: bytes"),
            std::string::npos)
      << bad.status().message();
}

}  // namespace
}  // namespace scaleplan::hw
