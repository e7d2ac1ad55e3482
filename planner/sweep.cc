#include "planner/sweep.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

#include "core/counts.h"
#include "planner/parallel.h"
#include "planner/search_space.h"

namespace scaleplan::planner {
namespace {

Status bad_counts(std::string_view what, std::string_view text, const std::string& why) {
  return Status::invalid(std::string(what) + ": '" + std::string(text) + "' " + why);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == sep) {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  return parts;
}

Result<int64_t> gpu_count(std::string_view part, std::string_view what, std::string_view text) {
  Result<int64_t> n = parse_count(part, what);
  if (!n) return n.status();
  if (*n <= 0 || *n > kMaxGpus)
    return bad_counts(what, text,
                      "has a GPU count of " + std::to_string(*n) + ": each must be in 1.." +
                          std::to_string(kMaxGpus));
  return *n;
}

// One point's search: planner::plan at `gpus` GPUs and global batch `gbs`.
Result<SweepPoint> plan_point(const PlanRequest& base, int64_t gpus, int64_t gbs,
                              const Budget& budget, const Evaluator& evaluator) {
  PlanRequest req = base;
  req.search.gpus = gpus;
  req.search.gbs = gbs;
  req.progress = nullptr;
  req.compare_with_next = false;  // a point reports its best plan only
  SweepPoint p;
  p.gpus = gpus;
  p.gbs = gbs;
  SP_ASSIGN_OR_RETURN(p.result, plan(req, evaluator));
  if (!p.result.plans.empty())
    p.cost = training_cost(p.best_tokens_per_s_per_gpu(), gpus, budget.train_tokens,
                           budget.gpu_hour_cost);
  return p;
}

}  // namespace

Result<std::vector<int64_t>> parse_gpu_counts(std::string_view text, std::string_view what) {
  std::vector<int64_t> out;
  auto too_many = [&] {
    return bad_counts(what, text,
                      "has more than " + std::to_string(kMaxSweepPoints) +
                          " points; sweep a wider step (e.g. :x2) or fewer counts");
  };
  if (text.find(':') != std::string_view::npos) {
    const auto parts = split(text, ':');
    if (parts.size() != 2 && parts.size() != 3)
      return bad_counts(what, text,
                        "is not a range: write FROM:TO (doubling), FROM:TO:xF or "
                        "FROM:TO:+STEP, e.g. 256:4096");
    SP_ASSIGN_OR_RETURN(const int64_t from, gpu_count(parts[0], what, text));
    SP_ASSIGN_OR_RETURN(const int64_t to, gpu_count(parts[1], what, text));
    if (to < from) return bad_counts(what, text, "ends below its start");
    int64_t factor = 2, step = 0;
    if (parts.size() == 3) {
      const std::string_view s = parts[2];
      if (s.size() < 2 || (s[0] != 'x' && s[0] != '+'))
        return bad_counts(
            what, text,
            "has a step '" + std::string(s) + "' that is neither xF (a factor) nor +S (GPUs)");
      SP_ASSIGN_OR_RETURN(const int64_t v, parse_count(s.substr(1), what));
      if (s[0] == 'x') {
        if (v < 2) return bad_counts(what, text, "has a factor below 2");
        factor = v;
      } else {
        if (v < 1) return bad_counts(what, text, "has a step below 1");
        step = v;
        factor = 0;
      }
    }
    // g <= to <= kMaxGpus, but a factor or step may be up to kMaxCount: stop before a step that
    // would pass `to` instead of computing it, so the product cannot overflow.
    for (int64_t g = from;;) {
      if (static_cast<int>(out.size()) == kMaxSweepPoints) return too_many();
      out.push_back(g);
      if (step > 0 ? step > to - g : g > to / factor) break;
      g = step > 0 ? g + step : g * factor;
    }
    return out;
  }
  for (std::string_view part : split(text, ',')) {
    SP_ASSIGN_OR_RETURN(const int64_t g, gpu_count(part, what, text));
    out.push_back(g);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (static_cast<int>(out.size()) > kMaxSweepPoints) return too_many();
  return out;
}

std::string layout_shape_change(const Layout& from, const Layout& to) {
  std::string s;
  for (std::string_view k : layout_keys()) {
    if (k == "dp") continue;  // follows the GPU count (gbs is not among the keys)
    const std::string a = layout_value(from, k), b = layout_value(to, k);
    if (a == b) continue;
    if (!s.empty()) s += ", ";
    s += std::string(k) + " " + a + "→" + b;
  }
  return s;
}

Result<SweepResult> sweep(const SweepRequest& request, const Evaluator& evaluator) {
  if (request.gpus.empty()) return Status::invalid("--gpus: no GPU counts to sweep");
  if ((request.gbs > 0) == (request.gbs_per_gpu > 0))
    return Status::invalid(
        "--gbs or --gbs-per-gpu: give exactly one (a fixed global batch, or one "
        "that grows with the GPU count)");
  if (request.plan.threads < 0 || request.plan.threads > kMaxThreads)
    return Status::invalid("--threads: " + std::to_string(request.plan.threads) +
                           " is not between 0 (all cores) and " + std::to_string(kMaxThreads));
  const auto start = std::chrono::steady_clock::now();
  const size_t n = request.gpus.size();
  std::vector<int64_t> batch(n, request.gbs);
  for (size_t i = 0; i < n && request.gbs_per_gpu > 0; ++i) {
    const int64_t gpus = request.gpus[i];
    const double b = request.gbs_per_gpu * static_cast<double>(gpus);
    if (b < 1 || b != std::floor(b) || b > static_cast<double>(kMaxCount))
      return Status::invalid("--gbs-per-gpu " + std::to_string(request.gbs_per_gpu) + ": at " +
                             std::to_string(gpus) + " GPUs the global batch would be " +
                             std::to_string(b) + " sequences, not a whole positive number");
    batch[i] = static_cast<int64_t>(b);
  }

  // Points are searched side by side: `workers` of them at a time, each on its share of the
  // threads, taking the next point as they finish one. A search alone leaves cores idle between
  // its parallel phases and in the tail of its simulations; independent points fill them. Each
  // point's answer does not depend on its thread count (planner/planner.h, "Determinism"), so the
  // result is the same as planning the points one after another.
  const int threads = resolve_threads(request.plan.threads);
  const size_t workers = std::min<size_t>(n, static_cast<size_t>(threads));
  PlanRequest base = request.plan;
  base.threads = std::max(1, threads / static_cast<int>(workers));
  std::vector<std::optional<Result<SweepPoint>>> done(n);
  std::mutex mu;                    // guards done
  std::atomic<bool> failed{false};  // a point failed; take no more
  size_t reported = 0;              // the calling thread's: points given to on_point
  // The calling thread reports the points in order as they complete (on_point), up to the first
  // that failed or is not planned yet.
  auto report = [&] {
    std::unique_lock<std::mutex> lock(mu);
    while (reported < n && done[reported].has_value() && *done[reported]) {
      SweepPoint& p = **done[reported];
      lock.unlock();
      if (request.on_point) request.on_point(p, reported, n);
      ++reported;
      lock.lock();
    }
  };
  ParallelOptions options;
  options.threads = static_cast<int>(workers);
  options.tick = report;
  options.interval = std::chrono::milliseconds(20);
  options.item = "point";
  SP_RETURN_IF_ERROR(parallel_for(static_cast<int64_t>(n), options, [&](int64_t k) {
                       if (failed.load()) return;
                       const size_t i = static_cast<size_t>(k);
                       Result<SweepPoint> p =
                           plan_point(base, request.gpus[i], batch[i], request.budget, evaluator);
                       if (!p) failed.store(true);
                       std::lock_guard<std::mutex> lock(mu);
                       done[i] = std::move(p);
                     }).with_context("sweep"));
  report();

  SweepResult out;
  out.points.reserve(n);  // `previous` points into it
  const Layout* previous = nullptr;
  for (size_t i = 0; i < n; ++i) {
    // The first failure in point order (a later point may have failed first in time).
    if (!done[i].has_value()) continue;
    if (!*done[i]) return done[i]->status();
  }
  for (size_t i = 0; i < n; ++i) {
    if (!done[i].has_value()) return Status::internal("sweep: a point was not planned");
    out.points.push_back(std::move(**done[i]));
    SweepPoint& added = out.points.back();
    if (!added.result.plans.empty()) {
      const Layout& best = added.result.plans.front().layout;
      if (previous != nullptr) added.layout_change = layout_shape_change(*previous, best);
      previous = &best;
    }
  }
  out.sweep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

const SweepPoint* DeadlineResult::chosen() const {
  for (const SweepPoint& p : tried)
    if (p.gpus == gpus) return &p;
  return nullptr;
}

Result<DeadlineResult> find_smallest_gpus(const DeadlineRequest& request,
                                          const Evaluator& evaluator) {
  if (request.budget.train_tokens <= 0)
    return Status::invalid("--deadline: needs --train-tokens (the tokens to train by then)");
  if (!(request.deadline_s > 0)) return Status::invalid("--deadline: must be positive");
  const int64_t node = std::max(1, request.gpus_per_node);
  const int64_t lo_nodes = std::max<int64_t>(1, (request.min_gpus + node - 1) / node);
  const int64_t hi_nodes = request.max_gpus / node;
  if (hi_nodes < lo_nodes)
    return Status::invalid("--max-gpus " + std::to_string(request.max_gpus) +
                           ": below one node of " + std::to_string(node) + " GPUs");

  std::map<int64_t, SweepPoint> tried;  // by node count
  auto meets = [&](int64_t nodes) -> Result<bool> {
    auto it = tried.find(nodes);
    if (it == tried.end()) {
      SP_ASSIGN_OR_RETURN(SweepPoint p, plan_point(request.plan, nodes * node, request.gbs,
                                                   request.budget, evaluator));
      it = tried.emplace(nodes, std::move(p)).first;
      if (request.on_try) request.on_try(it->second);
    }
    return it->second.cost && it->second.cost->seconds <= request.deadline_s;
  };

  // Doubling: the last count that missed (lo) and the first that met (hi).
  int64_t miss = 0, hit = 0;
  for (int64_t n = lo_nodes;; n = std::min(n * 2, hi_nodes)) {
    SP_ASSIGN_OR_RETURN(const bool ok, meets(n));
    if (ok) {
      hit = n;
      break;
    }
    miss = n;
    if (n == hi_nodes) break;
  }
  // Bisection between them over node counts.
  if (hit > 0) {
    int64_t lo = miss, hi = hit;  // lo misses (or is 0: below the range), hi meets
    if (lo == 0) lo = lo_nodes - 1;
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      SP_ASSIGN_OR_RETURN(const bool ok, meets(mid));
      (ok ? hi : lo) = mid;
    }
    hit = hi;
  }

  DeadlineResult out;
  out.met = hit > 0;
  for (auto& [n, p] : tried) out.tried.push_back(std::move(p));
  if (out.met) {
    out.gpus = hit * node;
  } else {
    double best = std::numeric_limits<double>::infinity();
    for (const SweepPoint& p : out.tried)
      if (p.cost && p.cost->seconds < best) {
        best = p.cost->seconds;
        out.gpus = p.gpus;
      }
  }
  return out;
}

}  // namespace scaleplan::planner
