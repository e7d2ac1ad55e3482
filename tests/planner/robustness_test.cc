// The "how sure" check: the ranked layouts re-simulated on perturbed profiles
// (planner/robustness.h), with a fake evaluator whose times are a closed form of the perturbation.
#include "planner/robustness.h"

#include <gtest/gtest.h>

#include <memory>

#include "core/layout.h"

namespace scaleplan::planner {
namespace {

// A time model of two resources: compute seconds times the kernel-time factor, plus network
// seconds over the network-bandwidth factor. Layout `dp` picks the pair (the layouts need only
// differ): dp 8 is compute-light and network-heavy, dp 4 the reverse.
class TwoResourceEvaluator : public Evaluator {
 public:
  explicit TwoResourceEvaluator(Perturbation p) : p_(std::move(p)) {}
  Result<MemoryVerdict> memory(const Layout&) const override {
    return MemoryVerdict{Bytes(1), Bytes(2)};
  }
  Result<Prediction> simulate(const Layout& l) const override {
    if (l.dp == 2) return Status::internal("fake: dp 2 fails");
    const double compute = l.dp == 8 ? 1.0 : 1.1, network = l.dp == 8 ? 0.2 : 0.05;
    Prediction pr;
    pr.iteration = Duration::seconds(compute * p_.kernel_time + network / p_.network_bandwidth);
    return pr;
  }

 private:
  Perturbation p_;
};

RankedPlan ranked(int dp, int rank) {
  RankedPlan r;
  r.rank = rank;
  r.layout.dp = dp;
  return r;
}

PerturbedEvaluator fake() {
  return [](const Perturbation& p) -> Result<std::unique_ptr<const Evaluator>> {
    return std::unique_ptr<const Evaluator>(std::make_unique<TwoResourceEvaluator>(p));
  };
}

TEST(Robustness, TheComputeHeavyFirstLosesWhenKernelsAreSlower) {
  // Nominal: dp 4 takes 1.1 + 0.05 = 1.15 s and dp 8 1.0 + 0.2 = 1.2 s, so dp 4 is #1.
  //   kernels x1.1:  dp 4 1.21 + 0.05 = 1.26 s, dp 8 1.1 + 0.2 = 1.30 s -> dp 4 stays first;
  //   network x0.5:  dp 4 1.1 + 0.1 = 1.2 s,    dp 8 1.0 + 0.4 = 1.4 s  -> dp 4 stays first;
  //   kernels x0.8:  dp 4 0.88 + 0.05 = 0.93 s, dp 8 0.8 + 0.2 = 1.0 s  -> dp 4 stays first;
  //   kernels x2:    dp 4 2.2 + 0.05 = 2.25 s,  dp 8 2.0 + 0.2 = 2.2 s  -> dp 8 overtakes,
  //                  by (2.25 - 2.2) / 2.25 = 2.2%.
  const std::vector<RankedPlan> plans = {ranked(4, 1), ranked(8, 2)};
  const std::vector<Perturbation> ps = {{.name = "kernels +10%", .kernel_time = 1.1},
                                        {.name = "network -50%", .network_bandwidth = 0.5},
                                        {.name = "kernels -20%", .kernel_time = 0.8},
                                        {.name = "kernels x2", .kernel_time = 2.0}};
  auto r = assess_robustness(plans, ps, fake(), 2);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->rankings.size(), 4u);
  EXPECT_EQ(r->stays_first, 3);
  EXPECT_EQ(r->rankings[0].first, 0);
  EXPECT_EQ(r->rankings[1].first, 0);
  EXPECT_EQ(r->rankings[2].first, 0);
  EXPECT_EQ(r->rankings[3].first, 1);
  EXPECT_NEAR(r->rankings[3].iteration[0]->to_seconds(), 2.25, 1e-9);
  EXPECT_NEAR(r->rankings[3].iteration[1]->to_seconds(), 2.2, 1e-9);
  EXPECT_NEAR(r->rankings[1].iteration[1]->to_seconds(), 1.4, 1e-9);
  // The summary names who overtakes, in which keys the layouts differ, under what and by how much.
  EXPECT_NE(r->summary.find("3 of 4"), std::string::npos) << r->summary;
  EXPECT_NE(r->summary.find("#2 (dp 4→8) is faster under kernels x2 (by 2.2%)"), std::string::npos)
      << r->summary;
}

TEST(Robustness, AllFirstSaysSoAndAFailedSimulationIsRecorded) {
  const std::vector<RankedPlan> plans = {ranked(4, 1), ranked(2, 2), ranked(8, 3)};
  const std::vector<Perturbation> ps = {{.name = "network -30%", .network_bandwidth = 0.7}};
  auto r = assess_robustness(plans, ps, fake(), 1);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->stays_first, 1);
  EXPECT_EQ(r->summary, "#1 stays first under the one perturbation.");
  ASSERT_EQ(r->rankings[0].errors.size(), 1u);
  EXPECT_NE(r->rankings[0].errors[0].find("#2: fake: dp 2 fails"), std::string::npos);
  EXPECT_FALSE(r->rankings[0].iteration[1].has_value());
}

TEST(Robustness, SameAnswerOnAnyThreadCount) {
  std::vector<RankedPlan> plans;
  for (int dp : {4, 8, 4, 8, 4}) plans.push_back(ranked(dp, static_cast<int>(plans.size()) + 1));
  auto one = assess_robustness(plans, default_perturbations(), fake(), 1);
  auto four = assess_robustness(plans, default_perturbations(), fake(), 4);
  ASSERT_TRUE(one.is_ok() && four.is_ok());
  ASSERT_EQ(one->rankings.size(), four->rankings.size());
  for (size_t i = 0; i < one->rankings.size(); ++i) {
    EXPECT_EQ(one->rankings[i].iteration, four->rankings[i].iteration);
    EXPECT_EQ(one->rankings[i].first, four->rankings[i].first);
  }
  EXPECT_EQ(one->summary, four->summary);
}

TEST(Robustness, AnEvaluatorThatCannotBeBuiltIsAnError) {
  PerturbedEvaluator broken = [](const Perturbation&) -> Result<std::unique_ptr<const Evaluator>> {
    return Status::invalid("no profile");
  };
  auto r = assess_robustness({ranked(4, 1)}, default_perturbations(), broken, 1);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(), "no profile");
}

TEST(Robustness, PerturbedChangesOnlyWhatItNames) {
  hw::Cluster c;
  c.node.nvlink_bandwidth = BytesPerSecond(450e9);
  c.network.nic_bandwidth = BytesPerSecond(50e9);
  c.cost.base_latency = Duration::microseconds(6);
  c.cost.nvlink_step_latency = Duration::microseconds(0.6);
  c.cost.network_step_latency = Duration::microseconds(5);
  c.gpu.bf16_dense = FlopsPerSecond(989e12);
  const hw::Cluster net = perturbed(c, {.name = "n", .network_bandwidth = 0.7});
  EXPECT_NEAR(net.network.nic_bandwidth.value(), 35e9, 1);
  EXPECT_EQ(net.node.nvlink_bandwidth, c.node.nvlink_bandwidth);
  EXPECT_EQ(net.cost.base_latency, c.cost.base_latency);
  const hw::Cluster nv = perturbed(c, {.name = "v", .nvlink_bandwidth = 0.85});
  EXPECT_NEAR(nv.node.nvlink_bandwidth.value(), 382.5e9, 1);
  EXPECT_EQ(nv.network.nic_bandwidth, c.network.nic_bandwidth);
  const hw::Cluster lat = perturbed(c, {.name = "l", .latency = 2});
  EXPECT_EQ(lat.cost.base_latency, Duration::microseconds(12));
  EXPECT_EQ(lat.cost.nvlink_step_latency, Duration::microseconds(1.2));
  EXPECT_EQ(lat.cost.network_step_latency, Duration::microseconds(10));
  EXPECT_EQ(lat.node.nvlink_bandwidth, c.node.nvlink_bandwidth);
  // Kernel time is the kernel model's (calibrate::ScaledKernelModel), not a profile field.
  const hw::Cluster k = perturbed(c, {.name = "k", .kernel_time = 1.1});
  EXPECT_EQ(k.gpu.bf16_dense, c.gpu.bf16_dense);
  EXPECT_EQ(k.network.nic_bandwidth, c.network.nic_bandwidth);
}

}  // namespace
}  // namespace scaleplan::planner
