#include "planner/model_evaluator.h"

#include <utility>

#include "sim/simulate.h"

namespace scaleplan::planner {

ModelEvaluator::ModelEvaluator(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                               models::FrameworkMemory framework)
    : model_(std::move(model)), cluster_(std::move(cluster)), seq_len_(seq_len) {
  memory_options_.framework = std::move(framework);
  memory_options_.gpu_memory = cluster_.gpu.memory;
  memory_options_.margin = Bytes(0);  // the planner applies the user's margin
}

Result<MemoryVerdict> ModelEvaluator::memory(const Layout& layout) const {
  SP_ASSIGN_OR_RETURN(models::MemoryResult m,
                      models::estimate_memory(model_, layout, seq_len_, memory_options_));
  // peak + margin <= capacity  <=>  memory.h's headroom (gpu − margin − overhead − reserved) >= 0.
  return MemoryVerdict{m.peak_reserved + m.overhead, m.gpu_memory};
}

Result<Prediction> ModelEvaluator::simulate(const Layout& layout) const {
  sim::SimulateOptions opt;
  opt.gpus = layout.gpus();
  opt.framework = memory_options_.framework.name;
  SP_ASSIGN_OR_RETURN(sim::SimulationResult r,
                      sim::simulate(model_, cluster_, seq_len_, layout, opt));
  Prediction p;
  p.iteration = r.iteration;
  p.tokens_per_s_per_gpu = r.tokens_per_s_per_gpu;
  p.mfu = r.mfu;
  p.memory = MemoryVerdict{r.peak_reserved, cluster_.gpu.memory};
  // The breakdown of the critical rank: the simulated stage with the longest makespan (the first
  // such stage on a tie, so that the choice is deterministic).
  const sim::StageResult* critical = nullptr;
  for (const auto& st : r.stages) {
    if (critical == nullptr || st.breakdown.total > critical->breakdown.total) critical = &st;
  }
  if (critical != nullptr) {
    const sim::RankBreakdown& b = critical->breakdown;
    p.breakdown.compute = b.compute;
    p.breakdown.recompute = b.recompute;
    for (int k = 0; k < kNumComm; ++k) p.breakdown.exposed[k] = b.exposed_comm[k];
    p.breakdown.bubble = b.bubble;
    p.breakdown.other = b.idle;
  }
  return p;
}

}  // namespace scaleplan::planner
