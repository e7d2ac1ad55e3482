// The program builder's SM clock (sim/emit.h): the clock each pipeline stage's step runs at under
// the GPU's power limit (hw_profiles/sm_clock.h), from the stage's timed kernels before the engine
// runs, and the stage's clock-bound kernels re-timed at it by the kernel model (at_sm_clock).
#include <unordered_map>
#include <variant>

#include "sim/emit.h"
#include "sim/stage_clock.h"

namespace scaleplan::sim::build {

namespace {

// The clock a kernel's figure was measured at where its time follows the SM clock; 0 where it
// does not. Tensor-core kernels: GEMMs, attention (the unfused core's time is mostly its GEMMs).
double measured_clock(const KernelPayload& k, const hw::SmClock& c, bool* tensor) {
  *tensor = k.kind != KernelKind::kMemoryBound;
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

// The busy kernel time of a stage's step: its chunks' passes (every micro-batch) and its
// optimizer. Idle time (pipeline bubbles, waits for exposed collectives) and the communication
// kernels are left out: the power limit is taken to hold over the kernels the GPU computes
// (docs/hw_profiles.md, "GH100 under its 700 W limit").
void ProgramBuilder::apply_step_clock() {
  const calibrate::KernelCostModel& base = *in_.kernels;
  const hw::SmClock* clock = base.sm_clock();
  if (clock == nullptr) return;
  const double passes = static_cast<double>(l_.num_microbatches());
  const auto& labels = prog_.labels();
  // The clock-bound payload of a compute op (nullptr otherwise) and its measured clock.
  auto bound = [&](const Timed& t, double* hz, bool* tensor) -> const KernelPayload* {
    if (t.kind != OpKind::kCompute) return nullptr;
    const auto* k = std::get_if<KernelPayload>(&labels[t.label].payload);
    if (k == nullptr) return nullptr;
    *hz = measured_clock(*k, *clock, tensor);
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
  for (int stage = 0; stage < l_.pp; ++stage) {
    double tensor_cycles = 0, other_cycles = 0, fixed_seconds = 0;
    lists(stage, [&](const std::vector<Timed>& list) {
      for (const Timed& t : list) {
        double hz = 0;
        bool tensor = false;
        if (bound(t, &hz, &tensor) == nullptr) continue;
        const double s = t.duration.to_seconds() * passes;
        if (hz <= 0) {
          fixed_seconds += s;
        } else {
          (tensor ? tensor_cycles : other_cycles) += s * hz;
        }
      }
    });
    fixed_seconds += optimizer_clock_sums(optimizer_ops(stage), base).fixed_seconds;
    const auto model =
        base.at_sm_clock(hw::step_clock(*clock, tensor_cycles, other_cycles, fixed_seconds));
    if (!model) continue;
    std::unordered_map<uint32_t, double> ratio;  // by label: time at the step's clock / measured
    lists(stage, [&](std::vector<Timed>& list) {
      for (Timed& t : list) {
        double hz = 0;
        bool tensor = false;
        const KernelPayload* k = bound(t, &hz, &tensor);
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
