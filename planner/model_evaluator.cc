#include "planner/model_evaluator.h"

#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "hw_profiles/placement.h"
#include "sim/simulate.h"

namespace scaleplan::planner {

struct ModelEvaluator::PlacementSets {
  using Grid = std::tuple<int, int, int, int, int, int>;  // tp, cp, pp, dp, ep, etp
  std::mutex mu;
  std::map<Grid, std::vector<Placement>> sets;  // entries are never erased: pointers stay valid

  // hw::distinct_placements of the layout's grid, computed once per grid.
  Result<const std::vector<Placement>*> get(const Layout& layout, const hw::Cluster& cluster) {
    const Grid grid{layout.tp, layout.cp, layout.pp, layout.dp_degree(), layout.ep, layout.etp};
    {
      std::lock_guard<std::mutex> lock(mu);
      if (auto it = sets.find(grid); it != sets.end()) return &it->second;
    }
    // Computed outside the lock; equal results, the first stored wins.
    SP_ASSIGN_OR_RETURN(std::vector<Placement> places, hw::distinct_placements(layout, cluster));
    std::lock_guard<std::mutex> lock(mu);
    return &sets.try_emplace(grid, std::move(places)).first->second;
  }
};

// Memory for the simulations' arrays (sim::SimulationScratch), one per simulation running at once:
// a simulation takes one (a new one where none is free) and gives it back when done, so that the
// next simulation on any thread writes over pages already mapped. A scratch holds no result.
struct ModelEvaluator::ScratchPool {
  std::mutex mu;
  std::vector<std::unique_ptr<sim::SimulationScratch>> free;

  std::unique_ptr<sim::SimulationScratch> take() {
    std::lock_guard<std::mutex> lock(mu);
    if (free.empty()) return std::make_unique<sim::SimulationScratch>();
    std::unique_ptr<sim::SimulationScratch> s = std::move(free.back());
    free.pop_back();
    return s;
  }
  void give(std::unique_ptr<sim::SimulationScratch> s) {
    std::lock_guard<std::mutex> lock(mu);
    free.push_back(std::move(s));
  }
};

ModelEvaluator::ModelEvaluator(models::ModelSpec model, hw::Cluster cluster, int64_t seq_len,
                               sim::Framework framework,
                               std::unique_ptr<const calibrate::KernelCostModel> kernels,
                               std::optional<Duration> host_launch)
    : model_(std::move(model)),
      cluster_(std::move(cluster)),
      seq_len_(seq_len),
      framework_(std::move(framework)),
      host_launch_(host_launch),
      kernels_(std::move(kernels)),
      placement_sets_(std::make_unique<PlacementSets>()),
      scratch_(std::make_unique<ScratchPool>()) {
  models::MemoryOptions mo;
  mo.framework = framework_.memory;
  mo.ops = framework_.ops;
  mo.gpu_memory = cluster_.gpu.memory;
  mo.margin = Bytes(0);  // the planner applies the user's margin
  memory_ = std::make_unique<const models::MemoryEstimator>(model_, seq_len_, std::move(mo));
  // The bound reads the plan the simulation follows (sim/pass_plan.h) under the same framework: it
  // times attention with the fused kernel the simulation will run (a slower one would not bound
  // it).
  bound_ = std::make_unique<const sim::IterationBound>(model_, cluster_, seq_len_, kernels_.get(),
                                                       framework_);
}

ModelEvaluator::~ModelEvaluator() = default;

Result<MemoryVerdict> ModelEvaluator::memory(const Layout& layout) const {
  SP_ASSIGN_OR_RETURN(models::MemoryResult m, memory_->estimate(layout));
  // peak + margin <= capacity  <=>  memory.h's headroom (gpu − margin − overhead − reserved) >= 0.
  return MemoryVerdict{m.peak_reserved + m.overhead, m.gpu_memory, m.peak_allocated};
}

Result<std::vector<Layout>> ModelEvaluator::placements(const Layout& layout) const {
  if (layout.place) return std::vector{layout};
  SP_ASSIGN_OR_RETURN(const std::vector<Placement>* places, placement_sets_->get(layout, cluster_));
  std::vector<Layout> out;
  for (Placement p : *places) {
    out.push_back(layout);
    if (p != Placement::kLinear) out.back().place = p;
  }
  return out;
}

Result<Prediction> ModelEvaluator::simulate(const Layout& layout) const {
  return simulate_within(layout, Duration::infinite());
}

Result<Prediction> ModelEvaluator::simulate_within(const Layout& layout,
                                                   Duration breakdown_within) const {
  SP_ASSIGN_OR_RETURN(const std::vector<Layout> placed, placements(layout));
  std::optional<Prediction> best;
  for (const Layout& l : placed) {
    SP_ASSIGN_OR_RETURN(Prediction p, simulate_placed(l, breakdown_within));
    // The faster; linear (first) on a tie.
    if (!best || p.iteration < best->iteration) {
      best = std::move(p);
      best->place = layout.place ? std::nullopt : l.place;
    }
  }
  return std::move(*best);
}

Result<Prediction> ModelEvaluator::simulate_placed(const Layout& layout,
                                                   Duration breakdown_within) const {
  sim::SimulateOptions opt;
  if (breakdown_within < Duration::infinite()) {
    opt.breakdown_wanted = [breakdown_within](Duration it) { return it <= breakdown_within; };
  }
  opt.gpus = layout.gpus();
  opt.framework = framework_;
  opt.kernels = kernels_.get();
  if (host_launch_) opt.host = sim::framework_host_issue(framework_, *host_launch_);
  // The bound already placed this grid (its per-grid cache): placing 16k GPUs costs ~60 ms, more
  // than the rest of a typical simulation.
  SP_ASSIGN_OR_RETURN(opt.placement, bound_->placement(layout));
  opt.memory = memory_.get();  // the same options as simulate's own (framework, GPU memory)
  std::unique_ptr<sim::SimulationScratch> scratch = scratch_->take();
  opt.scratch = scratch.get();
  Result<sim::SimulationResult> simulated = sim::simulate(model_, cluster_, seq_len_, layout, opt);
  scratch_->give(std::move(scratch));
  SP_ASSIGN_OR_RETURN(sim::SimulationResult r, std::move(simulated));
  Prediction p;
  p.iteration = r.iteration;
  p.tokens_per_s_per_gpu = r.tokens_per_s_per_gpu;
  p.mfu = r.mfu;
  p.memory = MemoryVerdict{r.peak_reserved, cluster_.gpu.memory, r.peak_memory};
  // The breakdown of the bottleneck stage: the one busiest with work (compute and exposed
  // communication), which is the stage that sets the pace; the others wait on it and show bubble.
  // Every stage's makespan is the iteration, so the longest makespan picked stage 0, the one with
  // the largest fill-and-drain bubble. The first such stage on a tie, for determinism.
  const sim::StageResult* critical = nullptr;
  auto busy = [](const sim::RankBreakdown& b) { return b.compute + b.exposed_comm_total(); };
  for (const auto& st : r.stages) {
    if (critical == nullptr || busy(st.breakdown) > busy(critical->breakdown)) critical = &st;
  }
  if (critical != nullptr) {
    const sim::RankBreakdown& b = critical->breakdown;
    p.breakdown.compute = b.compute;
    p.breakdown.recompute = b.recompute;
    for (int k = 0; k < kNumCommClasses; ++k) p.breakdown.exposed[k] = b.exposed_comm[k];
    p.breakdown.bubble = b.bubble;
    p.breakdown.other = b.idle;
  }
  return p;
}

template <class Bound>
Result<Duration> ModelEvaluator::placed_bound(const Layout& layout, const Bound& bound) const {
  // simulate() keeps the fastest placement, so the least of the placements' bounds bounds it.
  // Called on every fitting layout: the placements are read from the cache in place, and the
  // layout is copied only for a placement other than linear (its own `place` left unset).
  if (layout.place) return bound(layout);
  SP_ASSIGN_OR_RETURN(const std::vector<Placement>* places, placement_sets_->get(layout, cluster_));
  std::optional<Duration> least;
  for (Placement p : *places) {
    Result<Duration> b = Duration::zero();
    if (p == Placement::kLinear) {
      b = bound(layout);
    } else {
      Layout placed = layout;
      placed.place = p;
      b = bound(placed);
    }
    SP_RETURN_IF_ERROR(b.status());
    if (!least || *b < *least) least = *b;
  }
  return *least;
}

Result<Duration> ModelEvaluator::coarse_lower_bound(const Layout& layout) const {
  // Per placement at most its closed form, so the least of them is at most the least closed form.
  return placed_bound(layout, [&](const Layout& l) { return bound_->work_bound(l); });
}

Result<Duration> ModelEvaluator::iteration_lower_bound(const Layout& layout) const {
  return placed_bound(layout, [&](const Layout& l) {
    return bound_->lower_bound(l, sim::IterationBound::Effort::kClosedForm);
  });
}

Result<Duration> ModelEvaluator::refined_lower_bound(const Layout& layout) const {
  return placed_bound(layout, [&](const Layout& l) {
    return bound_->lower_bound(l, sim::IterationBound::Effort::kReplay);
  });
}

}  // namespace scaleplan::planner
