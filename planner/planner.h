// The planner: enumerate layouts, keep those that fit, simulate them in the order of a lower bound
// on their time until no other can reach the top K (branch and bound), rank, explain.
//
//   enumerate (planner/search_space.h)
//     -> memory filter: Evaluator::memory on every candidate, kept when peak + margin <= capacity
//     -> Evaluator::coarse_lower_bound on every candidate that fits, and iteration_lower_bound on
//        those whose coarse bound does not rule them out (in coarse order, as far as the walk
//        below needs the order of the bounds)
//     -> simulate in the order of the bounds, in parallel on `threads` threads, until the next
//        bound exceeds the (K+1)-th best simulated iteration: the rest are provably slower than
//        K+1 simulated layouts, so they cannot enter the top K nor be the next after it; they are
//        counted as `bounded` (exact pruning; an optional cap, `max_simulations`, can stop it
//        earlier and is reported in `budget_note`)
//     -> rank by tokens/s per GPU (equivalently iteration time: gbs, seq and GPUs are fixed), ties
//        broken by memory headroom, then by the layout string
//     -> the top K, each with one sentence on which cost it avoids that the next one pays
//     -> optionally, where the user's own layout ranks and why it loses or does not fit.
//
// Determinism: results are stored by candidate index and sorted by a total order, and the set of
// simulated candidates is defined sequentially (in bound order, a candidate is simulated iff its
// bound is at most the (K+1)-th best time among those before it; workers may run ahead, and their
// results beyond that set are discarded), so the ranking, the counts and every number are the same
// for any thread count (the Evaluator contract makes each evaluation a pure function). Progress
// goes to a callback, called from the calling thread only, at most every `progress_interval`; it is
// the only output that depends on timing.
//
// When no candidate fits and TP across nodes was not allowed, the search is run again with it
// allowed (DESIGN: TP beyond one node is allowed but not preferred) and the result says so.
// `plan` is thread-compatible: call it from one thread; it starts its own workers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "planner/evaluator.h"
#include "planner/prediction.h"
#include "planner/search_space.h"

namespace scaleplan::planner {

// The default safety margin kept free on every GPU. The memory model already counts the caching
// allocator's reserve, the CUDA context and NCCL's buffers, so the margin covers only what it does
// not model: its own error and allocator behaviour beyond the one-extra-block rule. docs/planner.md
// ("Memory margin") says how the value was chosen.
inline constexpr Bytes kDefaultMemoryMargin = 4_GiB;  // docs/planner.md "Memory margin"

struct Progress {
  // "enumerate" (the space listed part by part, each part's layouts memory-checked and those that
  // fit given a coarse bound as they are listed), "bound" (the bounds the walk needs, in coarse
  // order), "simulate", "done".
  const char* phase = "";
  int64_t candidates = 0;                // in the space (while "enumerate": listed so far)
  int64_t seen = 0;                      // memory-checked so far
  int64_t fitting = 0;                   // of those, fitting
  int64_t simulated = 0;                 // simulated so far
  int64_t bounded = 0;                   // bounded out (known at "done")
  double best_tokens_per_s_per_gpu = 0;  // best simulated so far (0: none yet)
  std::string best_layout;
};

// The most worker threads a search runs on (--threads); far more than cores only costs memory
// (docs/reliability.md, "Bounded work").
inline constexpr int kMaxThreads = 1024;

struct PlanRequest {
  SearchOptions search;
  Bytes memory_margin = kDefaultMemoryMargin;
  int top_k = 5;
  // Also find the (top_k + 1)-th plan, which the top_k-th plan's reason compares it with. Without
  // it the search prunes against the top_k-th plan itself (fewer simulations; the top_k plans are
  // the same) and that plan's reason is empty: a sweep, which reports only each count's best.
  bool compare_with_next = true;
  int threads = 0;  // 0: std::thread::hardware_concurrency()
  // A layout string to explain (its gbs defaults to the request's); empty for none.
  std::string explain;
  // Most simulations to run, in bound order; 0 for no cap (exact: the search stops only where the
  // bounds prove the rest slower). When the cap stops it, PlanResult::budget_note says how many
  // fitting layouts were left and how much faster the best of them could be at most.
  int64_t max_simulations = 0;
  std::function<void(const Progress&)> progress;  // optional
  std::chrono::milliseconds progress_interval{250};
};

struct RankedPlan {
  int rank = 0;  // 1-based
  Layout layout;
  Prediction prediction;
  Duration lower_bound;  // Evaluator::iteration_lower_bound (≤ prediction.iteration)
  MemoryVerdict memory;  // the memory model's verdict (what the filter used)
  std::string reason;    // why it beats the next one
};

// Where the user's layout stands.
struct Explanation {
  std::string layout_text;       // as given
  bool valid = false;            // passes DESIGN's constraints for this model and GPU count
  bool in_space = false;         // one of the searched candidates (not pruned by a policy rule)
  bool fits = false;             // memory model with the margin
  int rank = 0;                  // 1-based among the simulated candidates (0: not simulated)
  int64_t rank_max = 0;          // worst possible rank among all fitting layouts: rank plus the
                                 // bounded-out layouts whose bound is under its time
  std::optional<Layout> layout;  // resolved, when valid
  std::optional<MemoryVerdict> memory;
  std::optional<Prediction> prediction;
  std::string why;  // one or two sentences
};

struct PlanResult {
  std::vector<RankedPlan> plans;        // the top K, best first
  int64_t candidates = 0;               // layouts in the searched space
  int64_t fit = 0;                      // of those, fitting with the margin
  int64_t simulated = 0;                // of those, simulated successfully
  int64_t bounded = 0;                  // of those, bounded out: lower bound above the (K+1)-th
                                        // best simulated iteration, so not simulated
  int64_t not_simulated = 0;            // of those, left when the max_simulations cap was hit
  int64_t failed = 0;                   // memory or simulation errors (see `errors`)
  std::vector<std::string> errors;      // the first few error messages, with their layouts
  std::vector<PruneRule> pruned;        // policy rules of the search space, with counts
  bool cross_node_tp_fallback = false;  // nothing fitted within a node; TP across nodes allowed
  std::string no_fit;       // when nothing fits: the closest candidate and its shortfall
  std::string budget_note;  // when the cap stopped the search: what was left and its bound
  double search_s = 0;      // wall time of the whole search
  int threads = 0;          // worker threads used
  std::optional<Explanation> explanation;
};

Result<PlanResult> plan(const PlanRequest& request, const Evaluator& evaluator);

// The ranking order: tokens/s per GPU descending, memory headroom descending, layout string.
bool ranks_before(const Prediction& a, const MemoryVerdict& ma, const std::string& la,
                  const Prediction& b, const MemoryVerdict& mb, const std::string& lb);

// One sentence on why `a` ranks above `b`: the cost component of the breakdown where `a` saves the
// most (bubble, exposed TP/DP/PP/CP/EP communication, recompute, compute), or the headroom when
// they tie on time, with the layout keys in which they differ.
std::string compare_reason(const Layout& a, const Prediction& pa, const MemoryVerdict& ma,
                           const Layout& b, const Prediction& pb, const MemoryVerdict& mb);

// The keys in which two layouts differ, as "pp 2→4, mbs 1→2" (from a to b).
std::string layout_diff(const Layout& a, const Layout& b);

// A fraction as a percentage with one decimal: 0.123 -> "12.3%".
std::string percent(double fraction);

}  // namespace scaleplan::planner
