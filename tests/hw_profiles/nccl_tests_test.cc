// nccl-tests import: the sample log parses, and fitting it recovers its large-message busbw.
#include "hw_profiles/nccl_tests.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/json_util.h"

namespace scaleplan::hw {
namespace {

const std::string kLog =
    std::string(SCALEPLAN_SOURCE_DIR) + "/examples/nccl-tests/a100_8gpu_all_reduce.log";

TEST(NcclTestsLog, ParsesSample) {
  auto text = read_text_file(kLog);
  ASSERT_TRUE(text.is_ok());
  auto log = parse_nccl_tests_log(*text, kLog);
  ASSERT_TRUE(log.is_ok()) << log.status().message();
  EXPECT_EQ(log->op, CollectiveOp::kAllReduce);
  EXPECT_EQ(log->ranks, 8);
  EXPECT_EQ(log->nodes, 1);
  ASSERT_EQ(log->rows.size(), 9u);
  const auto& last = log->rows.back();
  EXPECT_EQ(last.size, 8_GiB);
  EXPECT_EQ(last.count, (8LL << 30) / 4);  // float elements
  EXPECT_DOUBLE_EQ(last.busbw_gbps, 234.61);
  // The printed busbw is algbw x 2·7/8, and algbw is size / time.
  EXPECT_NEAR(last.algbw_gbps * bus_factor(CollectiveOp::kAllReduce, 8), last.busbw_gbps, 0.01);
  EXPECT_NEAR(algbw(last.size, last.time).value() / 1e9, last.algbw_gbps, 0.01);
  ASSERT_TRUE(last.time_in_place.has_value());
}

TEST(NcclTestsLog, MeasuredPlacementOfTheLogsGroup) {
  NcclTestLog log;
  log.ranks = 8;
  log.nodes = 1;
  EXPECT_EQ(measured_placement(log), "intra_node");
  log.ranks = 16;
  log.nodes = 2;  // 8 per node, packed
  EXPECT_EQ(measured_placement(log), "multi_node");
  log.ranks = 2;  // one rank on each node
  EXPECT_EQ(measured_placement(log), "inter_node");
}

// The published A100 all-reduce curve as a profile's measurements (what `scaleplan profile
// --nccl-log` stores): every logged size is reproduced exactly, sizes between two rows follow the
// curve log-log, and beyond the largest the measured / modelled ratio there is held. The
// latency-bandwidth line alone misses the middle of this curve by up to half (at 1 MiB: 43.6 us +
// 1 MiB at 132 GB/s = 51.5 us against 101.9 measured), which is why the points are kept.
TEST(NcclTestsLog, MeasuredPointsPinTheModelToTheCurve) {
  auto base = load_cluster("dgx-a100-80g");
  ASSERT_TRUE(base.is_ok());
  const NcclTestLog log = *parse_nccl_tests_log(*read_text_file(kLog), kLog);
  Cluster c = *base;
  MeasuredCollective m{"all_reduce", 8, std::string(measured_placement(log)), {}, 0, {}};
  for (const NcclTestRow& r : log.rows) m.points.emplace_back(r.size, r.time);
  c.measured_collectives = {m};
  const CollectiveModel model(c), plain(*base);
  const GroupPlacement g = GroupPlacement::packed(c, 8);
  for (const NcclTestRow& r : log.rows) {
    EXPECT_NEAR(model.estimate(CollectiveOp::kAllReduce, r.size, g).time.to_seconds(),
                r.time.to_seconds(), 1e-6 * r.time.to_seconds())
        << r.size.value();
  }
  // 4 MiB is the geometric midpoint of the 1 MiB and 16 MiB rows (101.9 and 276.6 us).
  EXPECT_NEAR(model.estimate(CollectiveOp::kAllReduce, 4_MiB, g).time.to_seconds(),
              std::sqrt(101.9e-6 * 276.6e-6), 1e-9);
  const auto& last = log.rows.back();  // 8 GiB
  const double held = last.time.to_seconds() /
                      plain.estimate(CollectiveOp::kAllReduce, last.size, g).time.to_seconds();
  EXPECT_NEAR(model.estimate(CollectiveOp::kAllReduce, 32_GiB, g).time.to_seconds(),
              held * plain.estimate(CollectiveOp::kAllReduce, 32_GiB, g).time.to_seconds(), 1e-9);
}

TEST(NcclTestsLog, OldFormatWithoutRootAndErrors) {
  const std::string old =
      "#       size         count      type   redop     time   algbw   busbw  error     time   "
      "algbw   busbw  error\n"
      "     1048576        262144     float     sum    100.0   10.49   18.35  0e+00    100.0   "
      "10.49   18.35  0e+00\n";
  auto log = parse_nccl_tests_log(old, "old.log");
  ASSERT_TRUE(log.is_ok()) << log.status().message();
  EXPECT_FALSE(log->op.has_value());
  EXPECT_DOUBLE_EQ(log->rows[0].busbw_gbps, 18.35);
  EXPECT_FALSE(parse_nccl_tests_log("# nothing here\n", "empty.log").is_ok());
  auto bad = parse_nccl_tests_log("#  size count type redop root time\n 8 2 float sum -1 x y z 0\n",
                                  "bad.log");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("bad.log: line 2"), std::string::npos);
}

TEST(NcclTestsLog, FitRecoversLargeMessageBusbw) {
  auto log = *parse_nccl_tests_log(*read_text_file(kLog), kLog);
  auto c = *load_cluster("dgx-a100-80g");
  auto fit = fit_to_nccl_log(c, log, kLog);
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  // NVLink-bound ring on one node: the fitted model reproduces 234.61 GB/s at 8 GiB, and the
  // efficiency lands near 234.6 / 300 = 0.78.
  CollectiveModel m(fit->cluster);
  auto e = m.estimate(CollectiveOp::kAllReduce, 8_GiB, GroupPlacement::packed(c, 8));
  EXPECT_NEAR(busbw(CollectiveOp::kAllReduce, 8, 8_GiB, e.time).value() / 1e9, 234.61, 1.0);
  EXPECT_NEAR(fit->cluster.cost.nvlink_efficiency, 0.78, 0.01);
  EXPECT_NE(fit->cluster.cost.calibrated_from.find("8 ranks"), std::string::npos);
}

// The sum over the log's rows from `from` up of the squared log ratio of model to measured time.
double log_error(const Cluster& c, const NcclTestLog& log, Bytes from) {
  const CollectiveModel m(c);
  double sum = 0;
  for (const auto& row : log.rows) {
    if (row.size < from) continue;
    const double d = std::log(
        m.estimate(*log.op, row.size, GroupPlacement::packed(c, log.ranks)).time.to_seconds() /
        row.time.to_seconds());
    sum += d * d;
  }
  return sum;
}

TEST(NcclTestsLog, FitFollowsTheMiddleOfTheCurve) {
  // Start from the documented defaults (the A100 profile carries this very fit).
  auto log = *parse_nccl_tests_log(*read_text_file(kLog), kLog);
  Cluster c = *load_cluster("dgx-a100-80g");
  c.cost = load_cluster("dgx-h100")->cost;
  ASSERT_TRUE(c.cost.calibrated_from.empty());
  auto fit = fit_to_nccl_log(c, log, kLog);
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  EXPECT_NE(fit->report.find("ramp_bytes"), std::string::npos) << fit->report;
  // Over the sizes a training step's collectives have (1 MiB and up), the fitted model is closer
  // to the log than the defaults, and within 15% of each measured busbw from 16 MiB up.
  EXPECT_LT(log_error(fit->cluster, log, 1_MiB), 0.5 * log_error(c, log, 1_MiB));
  const CollectiveModel m(fit->cluster);
  for (const auto& row : log.rows) {
    if (row.size < 16_MiB) continue;
    const Duration t =
        m.estimate(CollectiveOp::kAllReduce, row.size, GroupPlacement::packed(c, 8)).time;
    const double model = busbw(CollectiveOp::kAllReduce, 8, row.size, t).value() / 1e9;
    EXPECT_NEAR(model / row.busbw_gbps, 1.0, 0.15) << row.size.value() << " B";
  }
}

TEST(NcclTestsLog, BundledA100ProfilesCarryTheFit) {
  // dgx-a100-80g and -40g (the same NVLink3 / NVSwitch node) hold the fit of this log, so that
  // what `import-nccl` prints and what the bundled profiles simulate with agree.
  auto log = *parse_nccl_tests_log(*read_text_file(kLog), kLog);
  for (const char* name : {"dgx-a100-80g", "dgx-a100-40g"}) {
    Cluster c = *load_cluster(name);
    EXPECT_NE(c.cost.calibrated_from.find("a100_8gpu_all_reduce.log"), std::string::npos) << name;
    Cluster defaults = c;
    defaults.cost = load_cluster("dgx-h100")->cost;
    auto fit = *fit_to_nccl_log(defaults, log, kLog);
    EXPECT_NEAR(c.cost.nvlink_efficiency, fit.cluster.cost.nvlink_efficiency, 0.001) << name;
    EXPECT_NEAR(c.cost.base_latency.to_microseconds(),
                fit.cluster.cost.base_latency.to_microseconds(), 0.1)
        << name;
    EXPECT_NEAR(static_cast<double>(c.cost.ramp_bytes.value()),
                static_cast<double>(fit.cluster.cost.ramp_bytes.value()),
                0.01 * static_cast<double>(fit.cluster.cost.ramp_bytes.value()))
        << name;
  }
}

// Measured points made by the model itself from a cluster with a known scaling: the fit from the
// unscaled profile must recover that scaling.
std::vector<MeasuredBusbw> points_from(const Cluster& truth, const std::vector<int>& nodes) {
  std::vector<MeasuredBusbw> out;
  const CollectiveModel m(truth);
  for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather}) {
    for (int n : nodes) {
      GroupPlacement g = GroupPlacement::packed(truth, 8 * n);
      const Duration t = m.estimate(op, 256_MiB, g).time;
      out.push_back({op, n, 8, 256_MiB, busbw(op, 8 * n, 256_MiB, t).value() / 1e9});
    }
  }
  return out;
}

TEST(NetworkScalingFit, RecoversAKnownScaling) {
  const Cluster base = *load_cluster("dgx-h100");
  Cluster truth = base;
  truth.cost.network_scaling = {{"all_reduce", 2, 0.9},
                                {"all_reduce", 16, 0.3},
                                {"all_gather", 2, 0.6},
                                {"all_gather", 16, 0.1}};
  const auto pts = points_from(truth, {1, 2, 4, 16});
  auto fit = fit_network_scaling(base, pts, "synthetic");
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  const auto& c = fit->cluster;
  // All-reduce at 4 nodes lies on the log-log line between 2 and 16: 0.9 x (0.3/0.9)^(1/3).
  const double ar4 = 0.9 * std::pow(0.3 / 0.9, 1.0 / 3.0);
  EXPECT_NEAR(interpolate_network_fraction(c.cost.network_scaling_for("all_reduce"), 4), ar4,
              0.01 * ar4);
  EXPECT_NEAR(interpolate_network_fraction(c.cost.network_scaling_for("all_reduce"), 16), 0.3,
              0.003);
  EXPECT_NEAR(interpolate_network_fraction(c.cost.network_scaling_for("all_gather"), 16), 0.1,
              0.001);
  // Op-less points exist for collectives that were not measured; the one-node points are
  // reported, not fitted.
  EXPECT_FALSE(c.cost.network_scaling_for("alltoall").empty());
  for (const auto& p : c.cost.network_scaling) EXPECT_GE(p.nodes, 2);
  EXPECT_NE(fit->report.find("all_gather 16x8 256 MiB"), std::string::npos) << fit->report;
  EXPECT_NE(c.cost.calibrated_from.find("synthetic"), std::string::npos);
}

TEST(NetworkScalingFit, NeedsAMultiNodePoint) {
  const Cluster base = *load_cluster("dgx-h100");
  auto fit = fit_network_scaling(base, points_from(base, {1}), "one-node.json");
  ASSERT_FALSE(fit.is_ok());
  EXPECT_NE(fit.status().message().find("one-node.json: no point spans more than one node"),
            std::string::npos);
  auto bad = parse_measured_busbw(R"({"points": [{"op": "all_reduce", "nodes": 2, "bytes": "1GiB",
                                      "busbw_gbps": -3}]})",
                                  "m.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(),
            "m.json: points[0]: busbw_gbps: must be positive, got -3.000000");
  bad = parse_measured_busbw(R"({"points": [{"op": "all_smash", "nodes": 2, "bytes": 1,
                                  "busbw_gbps": 3}]})",
                             "m.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message().rfind("m.json: points[0]: op: ", 0), 0u)
      << bad.status().message();
}

TEST(NetworkScalingFit, BundledHfProfileCarriesThePlaybookFit) {
  // hf-h100 holds the fit of the Ultra-Scale Playbook's measured bandwidth by node count (the
  // profile against `cluster import-scaling` of the file: FrontDoor.ImportScalingRebuildsHfH100,
  // which times the list-form copies); the fitted model reproduces each measured all-reduce (no
  // copy) from 4 nodes up.
  const std::string file =
      std::string(SCALEPLAN_SOURCE_DIR) + "/examples/ultrascale-playbook/bandwidth_by_nodes.json";
  auto pts = parse_measured_busbw(*read_text_file(file), file);
  ASSERT_TRUE(pts.is_ok()) << pts.status().message();
  ASSERT_EQ(pts->size(), 21u);
  // nanotron's measure_bandwidth: 256 Mi fp32 elements, list-form all_gather / reduce_scatter.
  for (const auto& p : *pts) {
    EXPECT_EQ(p.bytes, 1_GiB);
    EXPECT_EQ(p.copied, p.op == CollectiveOp::kAllReduce ? Bytes(0) : 2_GiB);
  }
  const Cluster hf = *load_cluster("hf-h100");
  const CollectiveModel m(hf);
  for (const auto& p : *pts) {
    if (p.op != CollectiveOp::kAllReduce || p.nodes < 4) continue;
    const GroupPlacement g = GroupPlacement::packed(hf, 8 * p.nodes);
    const double model =
        busbw(p.op, g.size, p.bytes, m.estimate(p.op, p.bytes, g).time).value() / 1e9;
    EXPECT_NEAR(model / p.busbw_gbps, 1.0, 0.01) << p.nodes << " nodes";
  }
}

TEST(NetworkScalingFit, ACopyInsideTheTimedCallLeavesTheCollectiveFaster) {
  // A list-form all_gather timed with its copy-out: measured time = collective + copy. With the
  // copy's time given, the fit recovers the collective's own fraction; without it, it charges the
  // copy to the network and lands lower.
  const Cluster base = *load_cluster("dgx-h100");
  Cluster truth = base;
  truth.cost.network_scaling = {{"all_gather", 2, 0.5}};
  const CollectiveModel m(truth);
  const Duration copy = Duration::microseconds(800);
  const GroupPlacement g = GroupPlacement::packed(truth, 16);
  const Duration t = m.estimate(CollectiveOp::kAllGather, 1_GiB, g).time + copy;
  MeasuredBusbw p{CollectiveOp::kAllGather, 2, 8, 1_GiB,
                  busbw(CollectiveOp::kAllGather, 16, 1_GiB, t).value() / 1e9};
  p.copied = 2_GiB;
  p.copy_time = copy;
  auto with = fit_network_scaling(base, {p}, "with-copy");
  ASSERT_TRUE(with.is_ok()) << with.status().message();
  EXPECT_NEAR(interpolate_network_fraction(with->cluster.cost.network_scaling_for("all_gather"), 2),
              0.5, 0.005);
  p.copy_time = Duration();
  auto without = fit_network_scaling(base, {p}, "without-copy");
  ASSERT_TRUE(without.is_ok());
  EXPECT_LT(
      interpolate_network_fraction(without->cluster.cost.network_scaling_for("all_gather"), 2),
      0.49);
  auto bad = parse_measured_busbw(R"({"points": [{"op": "all_gather", "nodes": 2, "bytes": "1GiB",
                                      "busbw_gbps": 3, "copied_bytes": -1}]})",
                                  "m.json");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().message(),
            "m.json: points[0]: copied_bytes: must be non-negative, got -1");
}

}  // namespace
}  // namespace scaleplan::hw
