// Sweeps over scale: the best plan of one job at several GPU counts, and the smallest GPU count
// that trains a token budget by a deadline.
//
// Both run planner::plan (planner/planner.h) once per GPU count with one Evaluator: the model, the
// cluster, the kernel model, the memory estimator's per-job caches and the bound's per-grid
// placements are built once and shared by every point (ModelEvaluator takes the GPU count from
// each layout, so one serves all counts; its operator lists and their timings are keyed by what
// does not change with the count). `sweep` searches its points side by side, as many at a time as
// there are threads (up to the point count), each on its share of them; `find_smallest_gpus` one
// after another, each on all of them. Either way the answers are the same as separate `plan` runs
// at each count with --top equal to the request's top_k (same search, same ranking: a search's
// answer does not depend on its thread count).
//
// GPU counts (`--gpus` of `sweep`, parse_gpu_counts):
//   "256:4096"      doubling from 256 to 4096: 256, 512, 1024, 2048, 4096 (a scaling study's usual
//                   axis); the end is included when the doubling reaches it exactly
//   "256:4096:x4"   the same with another factor: 256, 1024, 4096
//   "256:1024:+256" a step in GPUs: 256, 512, 768, 1024
//   "256,384,512"   an explicit list
// Counts take count suffixes ("1k:16k"); each point must be positive and at most kMaxGpus, and a
// sweep has at most kMaxSweepPoints points (docs/reliability.md, "Bounded work").
//
// Global batch: fixed (strong scaling, `--gbs`: the same optimizer step spread over more GPUs) or
// proportional to the GPU count (weak scaling, `--gbs-per-gpu`: gbs = that · GPUs, which must come
// out whole at every point).
//
// A point where nothing fits is a point with no plan and PlanResult::no_fit saying why, not an
// error; a point whose search fails (bad request) fails the sweep with the first such error in
// point order. Thread-compatible: call from one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "planner/evaluator.h"
#include "planner/planner.h"
#include "planner/training_cost.h"

namespace scaleplan::planner {

inline constexpr int kMaxSweepPoints = 64;

// The GPU counts of `text` (syntax above), ascending and distinct; errors name `what`.
Result<std::vector<int64_t>> parse_gpu_counts(std::string_view text, std::string_view what);

// One GPU count's answer.
struct SweepPoint {
  int64_t gpus = 0;
  int64_t gbs = 0;
  PlanResult result;                 // result.plans.front() is the best; empty: see result.no_fit
  std::optional<TrainingCost> cost;  // of the best plan, with a token budget
  // The keys in which the best layout's shape differs from the previous point's best, as
  // layout_diff writes them ("tp 4→8, pp 2→1"), dp and gbs left out (they follow the GPU count
  // and the batch); empty at the first point with a plan and where the shape is the same.
  std::string layout_change;
  double best_tokens_per_s_per_gpu() const {
    return result.plans.empty() ? 0 : result.plans.front().prediction.tokens_per_s_per_gpu;
  }
};

// The request's budget: tokens to train and an optional price per GPU-hour.
struct Budget {
  double train_tokens = 0;  // 0: no time or cost reported
  std::optional<double> gpu_hour_cost;
};

struct SweepRequest {
  // The search of every point: model facts, fixes, margin, threads, top_k (1 is enough for a
  // sweep: the best layout). search.gpus and search.gbs are set per point; `progress` of the
  // inner searches is not called (on_point reports each point instead).
  PlanRequest plan;
  std::vector<int64_t> gpus;  // parse_gpu_counts
  int64_t gbs = 0;            // fixed global batch, or
  double gbs_per_gpu = 0;     // global batch = gbs_per_gpu · GPUs
  Budget budget;
  // Called after each point, from the calling thread, in point order: the point, its index and
  // the total.
  std::function<void(const SweepPoint&, size_t, size_t)> on_point;
};

struct SweepResult {
  std::vector<SweepPoint> points;  // in the order of SweepRequest::gpus
  double sweep_s = 0;              // wall time of the whole sweep
};

Result<SweepResult> sweep(const SweepRequest& request, const Evaluator& evaluator);

// The layout keys in which two best layouts of a sweep differ, dp and gbs left out.
std::string layout_shape_change(const Layout& from, const Layout& to);

// The smallest GPU count that trains `budget.train_tokens` within `deadline_s`.
//
// Counts are whole nodes of the cluster (`gpus_per_node`, what a scheduler allocates), from
// `min_gpus` (rounded up to a node) to `max_gpus` (rounded down). The search doubles the node count
// until the deadline is met, then bisects between the last count that missed and the first that
// met. It assumes that the time to train falls as GPUs are added, which holds while the added
// GPUs raise the total throughput; where divisibility makes it dip (a node count whose layouts
// fit worse), a smaller count than the answer could also meet the deadline, so the result lists
// every count it tried and says "smallest" of the counts in that sequence. A count where nothing
// fits counts as missing the deadline.
struct DeadlineRequest {
  PlanRequest plan;  // as SweepRequest::plan
  int64_t gbs = 0;
  Budget budget;  // train_tokens must be positive
  double deadline_s = 0;
  int gpus_per_node = 8;
  int64_t min_gpus = 0;        // 0: one node
  int64_t max_gpus = 1 << 17;  // kDefaultMaxDeadlineGpus
  std::function<void(const SweepPoint&)> on_try;
};

inline constexpr int64_t kDefaultMaxDeadlineGpus = int64_t{1} << 17;  // 131,072

struct DeadlineResult {
  bool met = false;
  // met: the smallest count found that meets the deadline; otherwise the tried count with the
  // shortest time (0 when nothing fitted at any tried count).
  int64_t gpus = 0;
  std::vector<SweepPoint> tried;  // ascending GPU count
  const SweepPoint* chosen() const;
};

Result<DeadlineResult> find_smallest_gpus(const DeadlineRequest& request,
                                          const Evaluator& evaluator);

}  // namespace scaleplan::planner
