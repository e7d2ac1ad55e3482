#include "planner/model_evaluator.h"

#include <utility>

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
  return Status::internal("simulate: the event simulator front end (sim/) has not landed yet");
}

}  // namespace scaleplan::planner
