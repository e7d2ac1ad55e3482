// The program builder's SM clock (sim/emit.h): the clock each pipeline stage's step runs at under
// the GPU's power limit (sim/stage_clock.h), from the stage's operator lists before the engine
// runs, and the stage's clock-bound timed kernels re-timed at it by the kernel model
// (at_sm_clock).
#include <unordered_map>
#include <variant>

#include "sim/emit.h"

namespace scaleplan::sim::build {

namespace {

// The clock a kernel's figure was measured at where its time follows the SM clock; 0 where it
// does not. Tensor-core kernels: GEMMs, attention (the unfused core's time is mostly its GEMMs).
double measured_clock(const KernelPayload& k, const hw::SmClock& c) {
  switch (k.kind) {
    case KernelKind::kGemm:
      return c.gemm_at();
    case KernelKind::kAttentionFwd:
    case KernelKind::kAttentionBwd:
      return c.attention_at();
    case KernelKind::kMemoryBound:
      return std::get<MemoryBoundShape>(k.shape).path == MemPath::kCastLoop ? c.cast_loop_at() : 0;
  }
  return 0;
}

Duration time_of(const KernelPayload& k, const calibrate::KernelCostModel& m) {
  if (const auto* g = std::get_if<GemmShape>(&k.shape)) return m.gemm(*g);
  if (const auto* a = std::get_if<AttentionShape>(&k.shape))
    return m.attention(*a, k.kind == KernelKind::kAttentionBwd);
  return m.memory_bound(std::get<MemoryBoundShape>(k.shape));
}

}  // namespace

// Each stage's clock from its busy kernel time as sim::stage_clocks sums it: the operator lists
// of its chunks' passes (every micro-batch) and its optimizer, the sums the planner's bound
// computes too (sim/stage_clock.h). Idle time (pipeline bubbles, waits for exposed collectives)
// and the communication kernels are left out: the power limit is taken to hold over the kernels
// the GPU computes (docs/hw_profiles.md, "GH100 under its 700 W limit").
void ProgramBuilder::apply_step_clock() {
  const calibrate::KernelCostModel& base = *in_.kernels;
  const hw::SmClock* clock = base.sm_clock();
  if (clock == nullptr) return;
  const auto& labels = prog_.labels();
  // The clock-bound payload of a compute op (nullptr otherwise) and its measured clock.
  auto bound = [&](const Timed& t, double* hz) -> const KernelPayload* {
    if (t.kind != OpKind::kCompute) return nullptr;
    const auto* k = std::get_if<KernelPayload>(&labels[t.label].payload);
    if (k == nullptr) return nullptr;
    *hz = measured_clock(*k, *clock);
    return k;
  };
  // Calls fn on every op list of the chunks a stage runs.
  auto lists = [&](int stage, auto&& fn) {
    for (size_t g = 0; g < chunks_.size(); ++g) {
      if (stage_of(static_cast<int>(g)) != stage) continue;
      for (std::vector<Timed>* list :
           {&chunks_[g].forward, &chunks_[g].backward, &chunks_[g].weight})
        fn(*list);
    }
  };
  std::vector<ClockSums> optimizer;
  for (int stage = 0; stage < l_.pp; ++stage)
    optimizer.push_back(optimizer_clock_sums(optimizer_ops(stage), base));
  const std::vector<double> stage_hz =
      stage_clocks(*clock, plan_, m_, layer_clock_, clock_sums(lists_.embedding, base),
                   clock_sums(lists_.head, base), optimizer);
  for (int stage = 0; stage < l_.pp; ++stage) {
    const auto model = base.at_sm_clock(stage_hz[static_cast<size_t>(stage)]);
    if (!model) continue;
    std::unordered_map<uint32_t, double> ratio;  // by label: time at the step's clock / measured
    lists(stage, [&](std::vector<Timed>& list) {
      for (Timed& t : list) {
        double hz = 0;
        const KernelPayload* k = bound(t, &hz);
        if (k == nullptr || hz <= 0) continue;
        auto [it, fresh] = ratio.try_emplace(t.label, 1.0);
        if (fresh) {
          const Duration at_measured = time_of(*k, base);
          if (at_measured > Duration::zero())
            it->second = time_of(*k, *model).to_seconds() / at_measured.to_seconds();
        }
        t.duration = t.duration * it->second;
      }
    });
  }
}

}  // namespace scaleplan::sim::build
