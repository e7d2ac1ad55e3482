// The step's SM clock in the simulator (sim/emit_clock.cc, hw_profiles/sm_clock.h): a step that
// keeps the tensor cores busier runs them at a lower clock, a profile without the clock model
// times as before, and the planner's bound (at the maximum clock) stays below the simulation.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "calibrate/kernel_model.h"
#include "calibrate/roofline.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "sim/framework.h"
#include "sim/iteration_bound.h"
#include "sim/simulate.h"

namespace scaleplan::sim {
namespace {

constexpr const char* kLayout = "tp=1,pp=1,dp=1,mbs=1,gbs=4";
constexpr int64_t kSeq = 4096;

SimulationResult run(const hw::Cluster& cluster, const char* framework, bool keep = false) {
  auto model = models::load_model("llama3-8b");
  auto fw = parse_framework_value(framework);
  auto l = parse_layout(kLayout);
  EXPECT_TRUE(model.is_ok() && fw.is_ok() && l.is_ok());
  SimulateOptions o;
  o.framework = *fw;
  o.keep_program = keep;
  auto r = simulate(*model, cluster, kSeq, *l, o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r.is_ok() ? *r : SimulationResult{};
}

hw::Cluster h200() {
  auto c = hw::load_cluster("hgx-h200");
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return *c;
}

// The duration of the step's GEMM with the most FLOPs (the LM head's forward, the same shape
// under every framework).
Duration largest_gemm(const SimulationResult& r) {
  const Program& p = *r.program;
  double most = 0;
  Duration d{};
  for (OpId i = 0; i < p.num_ops(); ++i) {
    const auto* kp = std::get_if<KernelPayload>(&p.label(i).payload);
    if (kp == nullptr || kp->kind != KernelKind::kGemm) continue;
    const double f = std::get<GemmShape>(kp->shape).flops().value();
    if (f > most) {
      most = f;
      d = p.op(i).duration;
    }
  }
  EXPECT_GT(most, 0);
  return d;
}

TEST(StepClock, ClockBoundTermsFollowTheClockAndMemoryBoundOnesDoNot) {
  const hw::Cluster c = h200();
  const hw::SmClock& clock = c.gpu.efficiency.sm_clock;
  const calibrate::RooflineCostModel base(calibrate::peaks_of(c));
  const double f = 1.6e9;
  const auto at = base.at_sm_clock(f);
  ASSERT_NE(at, nullptr);
  auto ratio = [](Duration a, Duration b) { return a.to_seconds() / b.to_seconds(); };
  // A large GEMM is compute-bound: its whole time scales by f_measured / f.
  const GemmShape g{.m = 8192, .n = 8192, .k = 8192};
  EXPECT_NEAR(ratio(at->gemm(g), base.gemm(g)), clock.gemm_at() / f, 1e-6);
  // The attention curves were measured at their own clock.
  AttentionShape a{.batch = 1,
                   .heads = 32,
                   .q_len = 4096,
                   .kv_len = 4096,
                   .head_dim = 128,
                   .causal = true,
                   .kernel = AttentionKernel::kCudnn};
  EXPECT_NEAR(ratio(at->attention_forward(a), base.attention_forward(a)), clock.attention_at() / f,
              1e-6);
  // A vectorized memory-bound kernel moves bytes at HBM's rate, whatever the SM clock.
  const MemoryBoundShape m{Bytes(1 << 30), Flops(0)};
  EXPECT_EQ(at->memory_bound(m), base.memory_bound(m));
  // The casting loop's rate is elements per SM clock: its rate term (all but the 2 us overhead).
  MemoryBoundShape cast{Bytes(1 << 30), Flops(0), MemOp::kCast, MemPath::kCastLoop};
  const double overhead = 2e-6;
  EXPECT_NEAR((at->memory_bound(cast).to_seconds() - overhead) /
                  (base.memory_bound(cast).to_seconds() - overhead),
              clock.cast_loop_at() / f, 1e-6);
  // No clock model: no clock-dependent model.
  hw::Cluster off = c;
  off.gpu.efficiency.sm_clock = hw::SmClock{};
  EXPECT_EQ(calibrate::RooflineCostModel(calibrate::peaks_of(off)).at_sm_clock(f), nullptr);
}

TEST(StepClock, AProfileWithoutAPowerLimitTimesTheStepAsWithoutTheClock) {
  // A clock model whose every figure was measured at the maximum and that never reaches its
  // limit: every step runs at the clock its figures were measured at, so nothing moves.
  hw::Cluster off = h200();
  off.gpu.efficiency.sm_clock = hw::SmClock{};
  hw::Cluster at_max = h200();
  at_max.gpu.efficiency.sm_clock = hw::SmClock{.max_hz = 1.98e9};
  for (const char* fw : {"torchtitan", "megatron"}) {
    EXPECT_EQ(run(off, fw).iteration, run(at_max, fw).iteration) << fw;
  }
}

TEST(StepClock, ATensorBoundStepRunsItsGemmsSlowerThanAnEagerMixedOne) {
  // Megatron-core's fused step spends a larger share of its kernel time in GEMMs and attention
  // than torchtitan's eager one (autocast casts, fp32 accumulation, unfused element-wise
  // kernels), so at the same power limit it holds a lower clock: the same GEMM takes longer.
  const hw::Cluster c = h200();
  const hw::SmClock& clock = c.gpu.efficiency.sm_clock;
  const Duration eager = largest_gemm(run(c, "torchtitan", true));
  const Duration fused = largest_gemm(run(c, "megatron", true));
  EXPECT_GT(fused, eager);
  // Both between the two ends: no step is slower than back to back, none faster than the
  // maximum clock.
  hw::Cluster off = c;
  off.gpu.efficiency.sm_clock = hw::SmClock{};
  const Duration measured = largest_gemm(run(off, "torchtitan", true));
  for (Duration d : {eager, fused}) {
    EXPECT_LE(d.to_seconds(),
              measured.to_seconds() * clock.gemm_at() / clock.tensor_bound_hz * (1 + 1e-9));
    EXPECT_GE(d.to_seconds(), measured.to_seconds() * clock.gemm_at() / clock.max_hz * (1 - 1e-9));
  }
}

TEST(StepClock, TheBoundStaysBelowTheSimulationOfATensorBoundStep) {
  const hw::Cluster c = h200();
  auto model = models::load_model("llama3-8b");
  auto fw = parse_framework_value("megatron");
  auto kernels = calibrate::kernel_cost_model_for(c);
  ASSERT_TRUE(model.is_ok() && fw.is_ok() && kernels.is_ok());
  const SimulationResult r = run(c, "megatron");
  IterationBound bound(*model, c, kSeq, kernels->get(), *fw);
  auto b = bound.lower_bound(r.layout);
  ASSERT_TRUE(b.is_ok()) << b.status().message();
  EXPECT_GT(*b, Duration::zero());
  EXPECT_LE(*b, r.iteration);
}

}  // namespace
}  // namespace scaleplan::sim

namespace scaleplan::sim {
namespace {

// The clock a stage's step ran its GEMMs at, read off the simulated program: the stage's largest
// GEMM is compute-bound, so its time is its time at the clock its efficiency was measured at
// times gemm_at / f (calibrate/roofline.cc).
double gemm_clock(const SimulationResult& r, const calibrate::KernelCostModel& measured,
                  int stage) {
  const Program& p = *r.program;
  double most = 0, hz = 0;
  for (OpId i = 0; i < p.num_ops(); ++i) {
    if (p.ranks()[p.op(i).rank].stage != stage) continue;
    const auto* kp = std::get_if<KernelPayload>(&p.label(i).payload);
    if (kp == nullptr || kp->kind != KernelKind::kGemm) continue;
    const GemmShape& g = std::get<GemmShape>(kp->shape);
    if (g.flops().value() <= most) continue;
    most = g.flops().value();
    hz = measured.sm_clock()->gemm_at() * measured.gemm(g).to_seconds() /
         p.op(i).duration.to_seconds();
  }
  EXPECT_GT(most, 0) << "stage " << stage;
  return hz;
}

TEST(StepClock, TheBoundTimesEachStageAtTheClockTheSimulationSolves) {
  // Where the builder adds no kernel of its own to the operator lists (no gradient-accumulation
  // kernel, no autocast), the bound solves each stage's clock on the builder's sums
  // (sim/stage_clock.h): its clocks are the simulation's, stage by stage (the ends carry the
  // embedding, the head and different optimizer shards), under Megatron's and torchtitan's
  // conventions.
  const hw::Cluster c = h200();
  auto model = models::load_model("llama3-8b");
  auto kernels = calibrate::kernel_cost_model_for(c);
  ASSERT_TRUE(model.is_ok() && kernels.is_ok());
  for (const char* framework : {"megatron", "torchtitan"}) {
    for (const char* text : {"tp=1,pp=2,dp=1,mbs=1,gbs=4,schedule=1f1b",
                             "tp=2,pp=4,dp=1,mbs=1,gbs=8,schedule=1f1b,sp=on",
                             "tp=1,pp=2,vpp=2,dp=1,mbs=1,gbs=8,schedule=interleaved"}) {
      auto fw = parse_framework_value(framework);
      auto l = parse_layout(text);
      ASSERT_TRUE(fw.is_ok() && l.is_ok()) << text;
      SimulateOptions o;
      o.framework = *fw;
      o.keep_program = true;
      auto r = simulate(*model, c, kSeq, *l, o);
      ASSERT_TRUE(r.is_ok()) << text << ": " << r.status().message();
      IterationBound bound(*model, c, kSeq, kernels->get(), *fw);
      std::vector<double> hz;
      auto b = bound.lower_bound(r->layout, IterationBound::Effort::kReplay, &hz);
      ASSERT_TRUE(b.is_ok()) << b.status().message();
      ASSERT_EQ(hz.size(), static_cast<size_t>(r->layout.pp)) << text;
      for (int s = 0; s < r->layout.pp; ++s) {
        EXPECT_NEAR(hz[static_cast<size_t>(s)], gemm_clock(*r, **kernels, s),
                    1e-6 * hz[static_cast<size_t>(s)])
            << framework << " " << text << " stage " << s;
        EXPECT_LT(hz[static_cast<size_t>(s)], c.gpu.efficiency.sm_clock.max_hz) << text;
      }
      EXPECT_LE(*b, r->iteration) << framework << " " << text;
    }
  }
}

}  // namespace
}  // namespace scaleplan::sim
