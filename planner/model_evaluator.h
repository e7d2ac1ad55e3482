// ModelEvaluator: the planner's Evaluator backed by the real models.
//
// memory():   models::estimate_memory with the framework's memory conventions and margin 0 (the
//             planner applies the user's margin); the verdict's peak is the worst stage's reserved
//             estimate plus what lives outside PyTorch's allocator (CUDA context, NCCL buffers),
//             its capacity the GPU's memory from the cluster profile.
// simulate(): the event simulator (sim/) on the same model, cluster and sequence length.
//
// The evaluator holds copies of its inputs and no mutable state, so it is thread-safe.
#pragma once

#include <memory>
#include <string>

#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/evaluator.h"

namespace scaleplan::planner {

class ModelEvaluator : public Evaluator {
 public:
  ModelEvaluator(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                 models::FrameworkMemory framework);

  Result<MemoryVerdict> memory(const Layout& layout) const override;
  Result<Prediction> simulate(const Layout& layout) const override;

  const models::ModelSpec& model() const { return model_; }
  const hw::Cluster& cluster() const { return cluster_; }

 private:
  models::ModelSpec model_;
  hw::Cluster cluster_;
  int64_t seq_len_;
  models::MemoryOptions memory_options_;
};

}  // namespace scaleplan::planner
