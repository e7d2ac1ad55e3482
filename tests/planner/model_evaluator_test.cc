// The planner's evaluator (planner/model_evaluator.h) against the simulation it summarises.
#include "planner/model_evaluator.h"

#include <gtest/gtest.h>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "sim/simulate.h"

namespace scaleplan::planner {
namespace {

// The breakdown a plan shows is the bottleneck stage's: the one with the most compute and exposed
// communication, which sets the pace while the others wait in the bubble. Every stage's makespan
// is the whole iteration, so the old "longest makespan" rule always fell on stage 0, whose
// fill-and-drain bubble is the largest (Meta's 405B layout read as 56% bubble). With llama3-8b on
// pp = 4 the last stage also runs the LM head over a 128k vocabulary and the loss, so it is the
// busiest: its compute is more than stage 0's and its bubble less.
TEST(ModelEvaluator, BreakdownIsTheBottleneckStages) {
  auto model = models::load_model("llama3-8b");
  auto cluster = hw::load_cluster("dgx-h100");
  const sim::Framework fw = sim::framework(FrameworkId::kMegatron);
  auto kernels = calibrate::kernel_cost_model_for(*cluster);
  ASSERT_TRUE(model && cluster && kernels);
  const int64_t seq = 4096;
  ModelEvaluator ev(*model, *cluster, seq, fw, std::move(*kernels));
  auto layout = parse_layout("tp=2,pp=4,dp=1,mbs=1,gbs=16");
  ASSERT_TRUE(layout.is_ok());
  auto resolved = resolve_layout(*layout, models::layout_constraints(*model, seq), 8);
  ASSERT_TRUE(resolved.is_ok()) << resolved.status().message();
  auto p = ev.simulate(*resolved);
  ASSERT_TRUE(p.is_ok()) << p.status().message();

  auto r = sim::simulate(*model, *cluster, seq, *resolved, sim::SimulateOptions{});
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->stages.size(), 4u);
  const sim::RankBreakdown& first = r->stages.front().breakdown;
  const sim::RankBreakdown& last = r->stages.back().breakdown;
  ASSERT_GT(last.compute, first.compute);
  EXPECT_EQ(p->breakdown.compute, last.compute);
  EXPECT_EQ(p->breakdown.bubble, last.bubble);
  EXPECT_LT(p->breakdown.bubble, first.bubble);
}

}  // namespace
}  // namespace scaleplan::planner
