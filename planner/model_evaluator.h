// ModelEvaluator: the planner's Evaluator backed by the real models.
//
// memory():   models::MemoryEstimator (estimate_memory with its per-job caches) with the
//             framework's memory conventions and margin 0 (the planner applies the user's margin);
//             the verdict's peak is the worst stage's reserved estimate plus what lives outside
//             PyTorch's allocator (CUDA context, NCCL buffers), its capacity the GPU's memory from
//             the cluster profile.
// simulate(): the event simulator (sim/) on the same model, cluster and sequence length, with the
//             cluster's kernel model (calibrate::kernel_cost_model_for, as sim::simulate builds it
//             when given none) built once and passed to every simulation.
// iteration_lower_bound(), refined_lower_bound(): sim::IterationBound's closed form and its
//             schedule replay, on the same kernel model object and the cluster's collective model;
//             coarse_lower_bound(): its work_bound, which is at most the closed form.
// Rank placement: a layout that leaves `place` open is evaluated under each placement that differs
//             (hw::distinct_placements: linear, and packed where it differs and fits the domains
//             the job holds); simulate() returns the faster (Prediction::place says which where
//             it is not linear) and the bounds are the least of the placements' bounds, so that
//             they stay below what simulate() returns.
//
// The evaluator holds its inputs and caches that do not change any answer, so it is thread-safe.
// Not copyable.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "planner/evaluator.h"
#include "sim/framework.h"
#include "sim/iteration_bound.h"

namespace scaleplan::planner {

class ModelEvaluator : public Evaluator {
 public:
  // `kernels`: the cluster's kernel model, calibrate::kernel_cost_model_for(cluster) (fitted when
  // the profile is calibrated, roofline otherwise) — the one sim::simulate builds by default.
  // `framework`: the conventions every memory estimate, bound and simulation uses.
  // `host_launch`: the framework's host issue model at this CPU cost per kernel or collective
  // (sim::framework_host_issue, its per_launch replaced; `--host-launch`); nullopt: its own.
  ModelEvaluator(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                 sim::Framework framework,
                 std::unique_ptr<const calibrate::KernelCostModel> kernels,
                 std::optional<Duration> host_launch = std::nullopt);
  ~ModelEvaluator() override;

  Result<MemoryVerdict> memory(const Layout& layout) const override;
  Result<Prediction> simulate(const Layout& layout) const override;
  Result<Prediction> simulate_within(const Layout& layout,
                                     Duration breakdown_within) const override;
  Result<Duration> coarse_lower_bound(const Layout& layout) const override;
  Result<Duration> iteration_lower_bound(const Layout& layout) const override;
  Result<Duration> refined_lower_bound(const Layout& layout) const override;

  const models::ModelSpec& model() const { return model_; }
  const hw::Cluster& cluster() const { return cluster_; }
  const calibrate::KernelCostModel& kernels() const { return *kernels_; }
  const sim::Framework& framework() const { return framework_; }

 private:
  // `layout` with each placement to compare (itself where it gives `place`).
  Result<std::vector<Layout>> placements(const Layout& layout) const;
  Result<Prediction> simulate_placed(const Layout& layout, Duration breakdown_within) const;
  // The least of `bound(placed layout)` over placements(layout) (defined in the .cc, its only
  // user).
  template <class Bound>
  Result<Duration> placed_bound(const Layout& layout, const Bound& bound) const;

  models::ModelSpec model_;
  hw::Cluster cluster_;
  int64_t seq_len_;
  sim::Framework framework_;
  std::optional<Duration> host_launch_;
  std::unique_ptr<const calibrate::KernelCostModel> kernels_;
  std::unique_ptr<const models::MemoryEstimator> memory_;
  std::unique_ptr<const sim::IterationBound> bound_;
  // hw::distinct_placements per parallel grid (it reads the grid alone): the bound and the
  // simulation of a layout, and every layout of a grid, ask it once.
  struct PlacementSets;
  std::unique_ptr<PlacementSets> placement_sets_;
  // Memory the simulations reuse (sim::SimulationScratch), one per simulation running at once.
  struct ScratchPool;
  std::unique_ptr<ScratchPool> scratch_;
};

}  // namespace scaleplan::planner
