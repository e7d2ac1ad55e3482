// nccl-tests import: the sample log parses, and fitting it recovers its large-message busbw.
#include "hw_profiles/nccl_tests.h"

#include <cmath>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace scaleplan::hw
