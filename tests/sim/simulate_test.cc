#include "sim/simulate.h"

#include <gtest/gtest.h>

#include "hw_profiles/cluster.h"
#include "models/model_spec.h"

namespace scaleplan::sim {
namespace {

struct Case {
  models::ModelSpec model;
  hw::Cluster cluster;
};

Case load(const std::string& m, const std::string& c) {
  auto model = models::load_model(m);
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  auto cluster = hw::load_cluster(c);
  EXPECT_TRUE(cluster.is_ok()) << cluster.status().message();
  return {*model, *cluster};
}

SimulationResult sim(const Case& c, int64_t seq, const std::string& layout,
                     SimulateOptions o = {}) {
  auto l = parse_layout(layout);
  EXPECT_TRUE(l.is_ok()) << l.status().message();
  auto r = simulate(c.model, c.cluster, seq, *l, o);
  EXPECT_TRUE(r.is_ok()) << layout << ": " << r.status().message();
  return r.is_ok() ? *r : SimulationResult{};
}

TEST(Simulate, EveryParallelismAndScheduleBuildsAndRuns) {
  Case c = load("llama3-8b", "dgx-h100");
  for (const char* layout : {
           "tp=1,pp=1,dp=8,gbs=32",
           "tp=8,pp=1,dp=1,gbs=4,sp=off",
           "tp=8,pp=1,dp=1,gbs=4,sp=on,recompute=selective",
           "tp=2,pp=4,dp=1,gbs=16,schedule=1f1b,recompute=full",
           "tp=2,pp=4,dp=1,gbs=16,schedule=afab",
           "tp=2,pp=4,dp=1,gbs=16,schedule=interleaved,vpp=2",
           "tp=2,pp=4,dp=1,gbs=16,schedule=zb-h1",
           "tp=1,pp=1,dp=8,gbs=16,zero=1",
           "tp=1,pp=1,dp=8,gbs=16,zero=2",
           "tp=1,pp=1,dp=8,gbs=16,zero=3",
           "tp=2,pp=2,dp=1,cp=2,gbs=4",
           "tp=2,pp=2,dp=2,gbs=16,zero=3,schedule=zb-h1",
       }) {
    SimulationResult r = sim(c, 8192, layout);
    EXPECT_GT(r.iteration.to_seconds(), 0) << layout;
    EXPECT_GT(r.mfu, 0.05) << layout;
    EXPECT_LT(r.mfu, 0.8) << layout;
    EXPECT_GE(r.hfu, r.mfu) << layout;
    for (const auto& s : r.stages) {
      const auto& b = s.breakdown;
      EXPECT_EQ(b.compute + b.exposed_comm_total() + b.bubble + b.idle, b.total) << layout;
    }
    std::printf("%-60s %8.3f s  mfu %.3f  peak %.1f GiB\n", layout, r.iteration.to_seconds(), r.mfu,
                to_gib(r.peak_memory));
  }
}

}  // namespace
}  // namespace scaleplan::sim
