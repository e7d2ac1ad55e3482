#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

namespace scaleplan::planner {
namespace {

constexpr size_t kMaxErrors = 5;

std::string pct(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
  return buf;
}

// Runs body(i) for i in [0, n) on `threads` workers pulling indices in chunks; the calling thread
// waits and calls `tick` every `interval` until all are done. Each body writes only its own slot,
// so the results do not depend on the thread count or the interleaving.
template <typename Body>
void parallel_for(int64_t n, int threads, int64_t chunk, Body&& body,
                  const std::function<void()>& tick, std::chrono::milliseconds interval) {
  std::atomic<int64_t> next{0};
  std::atomic<int> running{threads};
  std::mutex mu;
  std::condition_variable cv;
  auto worker = [&] {
    for (;;) {
      const int64_t begin = next.fetch_add(chunk);
      if (begin >= n) break;
      const int64_t end = std::min(n, begin + chunk);
      for (int64_t i = begin; i < end; ++i) body(i);
    }
    if (running.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running.load() > 0) {
      cv.wait_for(lock, interval, [&] { return running.load() == 0; });
      if (tick) {
        lock.unlock();
        tick();
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
}

struct Slot {
  std::optional<MemoryVerdict> memory;
  bool fits = false;
  std::optional<Prediction> prediction;
  std::string error;
};

struct Search {
  SearchSpace space;
  std::vector<Slot> slots;
  std::vector<std::string> strings;  // format_layout of each candidate (the last tie-break)
  std::vector<size_t> order;         // simulated candidates, ranked
  int64_t fit = 0, simulated = 0, failed = 0;
  std::vector<std::string> errors;
  // Budgeted simulation (see PlanRequest::max_simulations).
  int64_t shapes = 0, refined_shapes = 0, unsimulated_shapes = 0;
  std::string unrefined_best;  // the fastest shape whose variants were not all simulated
  double unrefined_best_tps = 0;
};

Result<Search> run_search(const PlanRequest& req, const SearchOptions& options, const Evaluator& ev,
                          int threads) {
  Search s;
  SP_ASSIGN_OR_RETURN(s.space, enumerate_layouts(options));
  const auto& cand = s.space.candidates;
  const int64_t n = static_cast<int64_t>(cand.size());
  s.slots.resize(cand.size());
  s.strings.resize(cand.size());

  std::atomic<int64_t> seen{0}, fitting{0}, simulated{0};
  std::mutex best_mu;
  double best_tps = 0;
  int64_t best_index = -1;
  Progress progress;
  progress.candidates = n;
  auto report = [&](const char* phase) {
    if (!req.progress) return;
    progress.phase = phase;
    progress.seen = seen.load();
    progress.fitting = fitting.load();
    progress.simulated = simulated.load();
    {
      std::lock_guard<std::mutex> lock(best_mu);
      progress.best_tokens_per_s_per_gpu = best_tps;
      progress.best_layout = best_index >= 0 ? s.strings[static_cast<size_t>(best_index)] : "";
    }
    req.progress(progress);
  };

  // Phase 1: the memory model on every candidate.
  parallel_for(
      n, threads, 256,
      [&](int64_t i) {
        Slot& slot = s.slots[static_cast<size_t>(i)];
        s.strings[static_cast<size_t>(i)] = format_layout(cand[static_cast<size_t>(i)]);
        auto m = ev.memory(cand[static_cast<size_t>(i)]);
        if (!m) {
          slot.error = m.status().message();
        } else {
          slot.memory = *m;
          slot.fits = m->fits(req.memory_margin);
          if (slot.fits) fitting.fetch_add(1, std::memory_order_relaxed);
        }
        seen.fetch_add(1, std::memory_order_relaxed);
      },
      [&] { report("memory"); }, req.progress_interval);

  std::vector<size_t> fit_idx;
  for (size_t i = 0; i < s.slots.size(); ++i) {
    if (s.slots[i].fits) fit_idx.push_back(i);
  }
  s.fit = static_cast<int64_t>(fit_idx.size());

  // Phase 2: simulate the fitting candidates, all of them when they are within the budget.
  auto simulate_all = [&](const std::vector<size_t>& which) {
    parallel_for(
        static_cast<int64_t>(which.size()), threads, 1,
        [&](int64_t k) {
          const size_t i = which[static_cast<size_t>(k)];
          Slot& slot = s.slots[i];
          auto p = ev.simulate(cand[i]);
          if (!p) {
            slot.error = p.status().message();
            return;
          }
          slot.prediction = *p;
          simulated.fetch_add(1, std::memory_order_relaxed);
          std::lock_guard<std::mutex> lock(best_mu);
          if (p->tokens_per_s_per_gpu > best_tps) {
            best_tps = p->tokens_per_s_per_gpu;
            best_index = static_cast<int64_t>(i);
          }
        },
        [&] { report("simulate"); }, req.progress_interval);
  };
  if (req.max_simulations <= 0 || s.fit <= req.max_simulations) {
    simulate_all(fit_idx);
  } else {
    // Over budget: group the fitting candidates by shape (everything but zero, sp, recompute and
    // the pinned split), simulate one representative per shape, then every variant of the shapes
    // in order of their representative's time while the budget lasts. The representative is the
    // variant a practitioner would try first: least recompute, ZeRO-1 (then 0, 2, 3), SP on,
    // balanced split; the enumeration order breaks remaining ties.
    auto shape_key = [&](size_t i) {
      Layout l = cand[i];
      l.zero = 0;
      l.sp.reset();
      l.recompute = Recompute::kNone;
      l.pp_first.reset();
      l.pp_last.reset();
      return format_layout(l);
    };
    auto preference = [&](size_t i) {
      const Layout& l = cand[i];
      static constexpr int kZeroOrder[] = {1, 0, 2, 3};
      return std::make_tuple(static_cast<int>(l.recompute), kZeroOrder[l.zero],
                             l.sequence_parallel() ? 0 : 1, l.pp_first || l.pp_last ? 1 : 0);
    };
    std::map<std::string, std::vector<size_t>> shapes;
    for (size_t i : fit_idx) shapes[shape_key(i)].push_back(i);
    std::vector<size_t> reps;
    std::vector<const std::vector<size_t>*> members;
    for (const auto& [key, group] : shapes) {
      size_t rep = group.front();
      for (size_t i : group) {
        if (preference(i) < preference(rep)) rep = i;
      }
      reps.push_back(rep);
      members.push_back(&group);
    }
    s.shapes = static_cast<int64_t>(reps.size());
    // More shapes than half the budget: simulate the representatives of the shapes with the
    // smallest analytic pipeline bubble (p−1)/(m·v) (DESIGN.md), then the smallest tp, and count
    // the rest as not simulated.
    const size_t max_reps = static_cast<size_t>(std::max<int64_t>(1, req.max_simulations / 2));
    if (reps.size() > max_reps) {
      auto bubble = [&](size_t i) {
        const Layout& l = cand[i];
        return static_cast<double>(l.pp - 1) /
               (static_cast<double>(l.num_microbatches()) * l.vpp_degree());
      };
      std::vector<size_t> order(reps.size());
      for (size_t g = 0; g < reps.size(); ++g) order[g] = g;
      std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const double ba = bubble(reps[a]), bb = bubble(reps[b]);
        if (ba != bb) return ba < bb;
        return cand[reps[a]].tp < cand[reps[b]].tp;
      });
      order.resize(max_reps);
      std::sort(order.begin(), order.end());
      std::vector<size_t> kept_reps;
      std::vector<const std::vector<size_t>*> kept_members;
      for (size_t g : order) {
        kept_reps.push_back(reps[g]);
        kept_members.push_back(members[g]);
      }
      s.unsimulated_shapes = static_cast<int64_t>(reps.size() - max_reps);
      reps = std::move(kept_reps);
      members = std::move(kept_members);
    }
    simulate_all(reps);
    // Shapes by their representative's rank (failed representatives last).
    std::vector<size_t> by_rep(reps.size());
    for (size_t g = 0; g < reps.size(); ++g) by_rep[g] = g;
    auto rep_before = [&](size_t a, size_t b) {
      const Slot &x = s.slots[reps[a]], &y = s.slots[reps[b]];
      if (!x.prediction || !y.prediction)
        return x.prediction.has_value() > y.prediction.has_value();
      return ranks_before(*x.prediction, *x.memory, s.strings[reps[a]], *y.prediction, *y.memory,
                          s.strings[reps[b]]);
    };
    std::sort(by_rep.begin(), by_rep.end(), rep_before);
    int64_t budget = req.max_simulations - static_cast<int64_t>(reps.size());
    std::vector<size_t> refine;
    size_t g = 0;
    for (; g < by_rep.size(); ++g) {
      const auto& group = *members[by_rep[g]];
      if (!s.slots[reps[by_rep[g]]].prediction) break;
      const int64_t extra = static_cast<int64_t>(group.size()) - 1;
      if (extra > budget && g > 0) break;
      for (size_t i : group) {
        if (i != reps[by_rep[g]]) refine.push_back(i);
      }
      budget -= extra;
      ++s.refined_shapes;
    }
    if (g < by_rep.size() && s.slots[reps[by_rep[g]]].prediction) {
      s.unrefined_best = s.strings[reps[by_rep[g]]];
      s.unrefined_best_tps = s.slots[reps[by_rep[g]]].prediction->tokens_per_s_per_gpu;
    }
    std::sort(refine.begin(), refine.end());
    simulate_all(refine);
  }

  for (size_t i = 0; i < s.slots.size(); ++i) {
    const Slot& slot = s.slots[i];
    if (!slot.error.empty()) {
      ++s.failed;
      if (s.errors.size() < kMaxErrors) s.errors.push_back(s.strings[i] + ": " + slot.error);
    }
    if (slot.prediction) s.order.push_back(i);
  }
  s.simulated = static_cast<int64_t>(s.order.size());
  std::sort(s.order.begin(), s.order.end(), [&](size_t a, size_t b) {
    return ranks_before(*s.slots[a].prediction, *s.slots[a].memory, s.strings[a],
                        *s.slots[b].prediction, *s.slots[b].memory, s.strings[b]);
  });
  report("done");
  return s;
}

std::string no_fit_message(const Search& s, Bytes margin) {
  int64_t best = -1;
  for (size_t i = 0; i < s.slots.size(); ++i) {
    if (!s.slots[i].memory) continue;
    if (best < 0 ||
        s.slots[i].memory->headroom() > s.slots[static_cast<size_t>(best)].memory->headroom()) {
      best = static_cast<int64_t>(i);
    }
  }
  if (best < 0) return "no candidate layout could be evaluated";
  const MemoryVerdict& m = *s.slots[static_cast<size_t>(best)].memory;
  return "no layout fits in " + format_bytes(m.capacity) + " per GPU with a " +
         format_bytes(margin) + " margin; the closest, " + s.strings[static_cast<size_t>(best)] +
         ", needs " + format_bytes(m.peak) + " (short by " +
         format_bytes(m.peak + margin - m.capacity) + ")";
}

Explanation explain(const PlanRequest& req, const SearchOptions& options, const Evaluator& ev,
                    const Search& s) {
  Explanation e;
  e.layout_text = req.explain;
  auto parsed = parse_layout(req.explain);
  if (!parsed) {
    e.why = parsed.status().message();
    return e;
  }
  Layout l = *parsed;
  if (!l.gbs) l.gbs = options.gbs;
  auto resolved = resolve_layout(l, options.model, options.gpus);
  if (!resolved) {
    e.why = "not a valid layout for this model and " + std::to_string(options.gpus) +
            " GPUs: " + resolved.status().message();
    return e;
  }
  e.valid = true;
  e.layout = *resolved;
  const std::string text = format_layout(*resolved);
  const auto& strings = s.strings;
  e.in_space = std::find(strings.begin(), strings.end(), text) != strings.end();
  auto mem = ev.memory(*resolved);
  if (!mem) {
    e.why = "its memory could not be estimated: " + mem.status().message();
    return e;
  }
  e.memory = *mem;
  e.fits = mem->fits(req.memory_margin);
  if (!e.fits) {
    e.why = "does not fit: its worst stage needs " + format_bytes(mem->peak) +
            " per GPU, plus the " + format_bytes(req.memory_margin) + " margin, of " +
            format_bytes(mem->capacity) + " (short by " +
            format_bytes(mem->peak + req.memory_margin - mem->capacity) + ").";
    return e;
  }
  auto pred = ev.simulate(*resolved);
  if (!pred) {
    e.why = "it could not be simulated: " + pred.status().message();
    return e;
  }
  e.prediction = *pred;
  int ahead = 0;
  for (size_t i : s.order) {
    if (strings[i] == text) continue;
    if (ranks_before(*s.slots[i].prediction, *s.slots[i].memory, strings[i], *pred, *mem, text)) {
      ++ahead;
    }
  }
  e.rank = ahead + 1;
  const std::string where = "ranks " + std::to_string(e.rank) + " of " +
                            std::to_string(s.simulated + (e.in_space ? 0 : 1)) +
                            (e.in_space ? ""
                                        : " (outside the searched space: a policy rule "
                                          "pruned it, so it was simulated on its own)");
  if (s.order.empty() || e.rank == 1) {
    e.why = where + "; it is the fastest layout that fits.";
    return e;
  }
  const size_t b = s.order.front();
  e.why = where + ". The best, " + strings[b] + ", is " +
          compare_reason(s.space.candidates[b], *s.slots[b].prediction, *s.slots[b].memory,
                         *resolved, *pred, *mem);
  return e;
}

}  // namespace

bool ranks_before(const Prediction& a, const MemoryVerdict& ma, const std::string& la,
                  const Prediction& b, const MemoryVerdict& mb, const std::string& lb) {
  if (a.tokens_per_s_per_gpu != b.tokens_per_s_per_gpu) {
    return a.tokens_per_s_per_gpu > b.tokens_per_s_per_gpu;
  }
  if (ma.headroom() != mb.headroom()) return ma.headroom() > mb.headroom();
  return la < lb;
}

std::string layout_diff(const Layout& a, const Layout& b) {
  static constexpr std::string_view kKeys[] = {
      "tp", "pp",  "dp",   "cp",        "ep",    "etp",      "vpp",    "schedule",
      "sp", "mbs", "zero", "recompute", "dtype", "pp_first", "pp_last"};
  std::string s;
  for (std::string_view k : kKeys) {
    const std::string va = layout_value(a, k), vb = layout_value(b, k);
    if (va == vb) continue;
    if (!s.empty()) s += ", ";
    s += std::string(k) + " " + va + "→" + vb;
  }
  return s;
}

std::string compare_reason(const Layout& a, const Prediction& pa, const MemoryVerdict& ma,
                           const Layout& b, const Prediction& pb, const MemoryVerdict& mb) {
  const std::string diff = layout_diff(a, b);
  const std::string differs = diff.empty() ? "" : " (" + diff + ")";
  const Duration dt = pb.iteration - pa.iteration;
  if (pa.tokens_per_s_per_gpu == pb.tokens_per_s_per_gpu || dt <= Duration::zero()) {
    if (ma.headroom() == mb.headroom()) {
      return "as fast as the next" + differs + " with the same memory; ordered by layout string.";
    }
    return "as fast as the next" + differs + " and leaves " +
           format_bytes(ma.headroom() - mb.headroom()) + " more memory headroom (" +
           format_bytes(ma.headroom()) + ").";
  }
  // The breakdown component where `a` saves the most time relative to `b`.
  struct Part {
    std::string name;
    Duration saved;
  };
  const Breakdown &x = pa.breakdown, &y = pb.breakdown;
  std::vector<Part> parts = {
      {"pipeline bubble", y.bubble - x.bubble},
      {"recomputation", y.recompute - x.recompute},
      {"compute", (y.compute - y.recompute) - (x.compute - x.recompute)},
      {"other idle time (optimizer step, stragglers)", y.other - x.other},
  };
  static constexpr std::string_view kCommText[] = {
      "exposed TP communication", "exposed DP/ZeRO communication", "exposed PP communication",
      "exposed CP communication", "exposed EP all-to-all"};
  for (int k = 0; k < kNumComm; ++k) {
    parts.push_back({std::string(kCommText[k]), y.exposed[k] - x.exposed[k]});
  }
  const Part* best = &parts.front();
  for (const Part& p : parts) {
    if (p.saved > best->saved) best = &p;
  }
  const double faster = pa.tokens_per_s_per_gpu / pb.tokens_per_s_per_gpu - 1;
  std::string s = pct(faster) + " faster than" + differs + ": ";
  if (best->saved > Duration::zero()) {
    s += "it avoids " + format_duration(best->saved) + " of " + best->name + " per iteration.";
  } else {
    s += "shorter iteration by " + format_duration(dt) + ".";
  }
  return s;
}

Result<PlanResult> plan(const PlanRequest& req, const Evaluator& ev) {
  const auto start = std::chrono::steady_clock::now();
  if (req.top_k < 1) return Status::invalid("plan: --top must be at least 1");
  if (req.memory_margin < Bytes(0)) return Status::invalid("plan: --memory-margin is negative");
  int threads =
      req.threads > 0 ? req.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, threads);

  PlanResult r;
  r.threads = threads;
  SearchOptions options = req.search;
  SP_ASSIGN_OR_RETURN(Search s, run_search(req, options, ev, threads));
  if (s.fit == 0 && !options.allow_cross_node_tp) {
    // Nothing fits within a node: TP across nodes is allowed, not preferred (DESIGN.md).
    SearchOptions wider = options;
    wider.allow_cross_node_tp = true;
    SP_ASSIGN_OR_RETURN(Search s2, run_search(req, wider, ev, threads));
    if (s2.space.candidates.size() > s.space.candidates.size()) {
      s = std::move(s2);
      options = wider;
      r.cross_node_tp_fallback = true;
    }
  }

  r.candidates = static_cast<int64_t>(s.space.candidates.size());
  r.fit = s.fit;
  r.simulated = s.simulated;
  r.failed = s.failed;
  r.errors = s.errors;
  r.pruned = s.space.pruned;
  if (s.fit == 0) r.no_fit = no_fit_message(s, req.memory_margin);
  if (s.shapes > 0) {
    r.shapes = s.shapes;
    r.refined_shapes = s.refined_shapes;
    const int64_t not_simulated = s.fit - s.simulated - s.failed;
    r.budget_note =
        std::to_string(s.fit) + " fitting layouts exceed the simulation budget of " +
        std::to_string(req.max_simulations) + ": they form " + std::to_string(s.shapes) +
        " shapes; one representative per shape was simulated, then every variant of the " +
        std::to_string(s.refined_shapes) + " fastest shapes; " + std::to_string(not_simulated) +
        " variants (zero/sp/recompute/split) of slower shapes were not simulated";
    if (s.unsimulated_shapes > 0) {
      r.budget_note += "; " + std::to_string(s.unsimulated_shapes) +
                       " shapes with the largest analytic pipeline bubble (p−1)/(m·v) were not "
                       "simulated at all";
    }
    if (!s.unrefined_best.empty() && s.simulated > 0) {
      const double best = s.slots[s.order.front()].prediction->tokens_per_s_per_gpu;
      r.budget_note += "; the fastest such shape's representative (" + s.unrefined_best + ") is " +
                       pct(1 - s.unrefined_best_tps / best) + " slower than the best plan";
    }
    r.budget_note += " (--max-simulations 0 simulates all)";
  }

  const size_t k = std::min(s.order.size(), static_cast<size_t>(req.top_k));
  for (size_t j = 0; j < k; ++j) {
    const size_t i = s.order[j];
    RankedPlan p;
    p.rank = static_cast<int>(j + 1);
    p.layout = s.space.candidates[i];
    p.prediction = *s.slots[i].prediction;
    p.memory = *s.slots[i].memory;
    if (j + 1 < s.order.size()) {
      const size_t n = s.order[j + 1];
      p.reason = "Ranks above #" + std::to_string(j + 2) + ": " +
                 compare_reason(p.layout, p.prediction, p.memory, s.space.candidates[n],
                                *s.slots[n].prediction, *s.slots[n].memory);
    } else {
      p.reason = s.order.size() == 1 ? "The only layout that fits." : "The last layout that fits.";
    }
    r.plans.push_back(std::move(p));
  }
  if (!req.explain.empty()) r.explanation = explain(req, options, ev, s);
  r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace scaleplan::planner
