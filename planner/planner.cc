#include "planner/planner.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "planner/chunked.h"
#include "planner/parallel.h"

namespace scaleplan::planner {
namespace {

// `l` with the rank placement the evaluator chose for it where it left `place` open
// (Prediction::place): the layout that was simulated.
Layout placed(Layout l, const Prediction& p) {
  if (p.place) l.place = p.place;
  return l;
}

constexpr size_t kMaxErrors = 5;

// The search's phases on the shared pool (planner/parallel.h): `threads` workers taking `chunk`
// indices at a time, the calling thread reporting progress every `interval`; a worker's exception
// comes back as an internal error.
Status search_parallel(int64_t n, int threads, int64_t chunk,
                       const std::function<void(int64_t)>& body, const std::function<void()>& tick,
                       std::chrono::milliseconds interval) {
  ParallelOptions options;
  options.threads = threads;
  options.chunk = chunk;
  options.tick = tick;
  options.interval = interval;
  return parallel_for(n, options, body).with_context("plan: worker failed");
}

struct Slot {
  std::optional<MemoryVerdict> memory;
  bool fits = false;
  // Lower bound on the iteration (fitting candidates): Evaluator::iteration_lower_bound where
  // `exact`, else only its coarse_lower_bound (the search needed no more: run_search).
  Duration bound;
  bool exact = false;
  std::optional<Duration> refined;  // the refined bound, where the search computed it
  bool done = false;                // simulated (prediction or error set)
  bool bounded = false;  // not simulated: its bound exceeds the K'-th best simulated time
  // Held by pointer: a large MoE space has millions of slots and only tens of predictions, and
  // the slots' memory, faulted in page by page, costs CPU time (issue 45).
  std::unique_ptr<Prediction> prediction;
  std::string error;
};

// The searched space: SearchSpace's, with the candidates kept in the parts they were listed in.
struct SearchedSpace {
  Chunked<Layout> candidates;
  std::vector<PruneRule> pruned;
  std::string probe_rule;
  int64_t pruned_total() const { return planner::pruned_total(pruned); }
};

struct Search {
  SearchedSpace space;
  Chunked<Slot> slots;
  // format_layout of each candidate that was simulated or failed (the last tie-break of the
  // ranking); the many others (those that fit included: a sweep meets ~80,000) are named only
  // where a message needs one (name_of, all_names).
  Chunked<std::string> strings;
  std::vector<size_t> order;  // simulated candidates, ranked
  int64_t fit = 0, simulated = 0, failed = 0;
  std::vector<std::string> errors;
  int64_t bounded = 0;        // fitting, provably slower than the K'-th best: not simulated
  int64_t cut = 0;            // fitting, not simulated because the cap was reached
  size_t cut_best_bound = 0;  // the cut candidate with the smallest bound (when cut > 0)
};

// Candidate i's format_layout: the stored one where the search kept it, formatted otherwise.
std::string name_of(const Search& s, size_t i) {
  return s.strings[i].empty() ? format_layout(s.space.candidates[i]) : s.strings[i];
}

Result<Search> run_search(const PlanRequest& req, const SearchOptions& options, const Evaluator& ev,
                          int threads) {
  Search s;
  SP_ASSIGN_OR_RETURN(const SpaceWalk walk, SpaceWalk::make(options));
  std::atomic<int64_t> listed{0}, seen{0}, fitting{0}, simulated{0};
  std::mutex best_mu;
  double best_tps = 0;
  int64_t best_index = -1;
  Progress progress;
  auto report = [&](const char* phase) {
    if (!req.progress) return;
    progress.phase = phase;
    progress.candidates = listed.load();
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

  // Phases 1 and 2, part by part of the space (SpaceWalk: one parallel grid each) on every
  // worker: the part's layouts listed, the memory model on each, and a lower bound on the
  // iteration of each that fits (cheap; a bound that cannot be computed is zero: that candidate is
  // never bounded out). Listing a large MoE space takes seconds; walked by parts, it is spread over
  // the workers with the rest instead of running alone before them, and the parts are kept as
  // they are (Chunked) rather than joined into one array on one thread (issue 45). Each part's
  // results are its own, in the walk's order, so nothing depends on the thread count.
  struct PartResult {
    SpacePart part;
    std::vector<Slot> slots;
    std::vector<std::string> strings;
    std::vector<std::pair<Duration, size_t>> fitting;  // (bound, place in the part)
    std::vector<size_t> failed;                        // places whose memory failed
  };
  std::vector<PartResult> parts(walk.parts());
  SP_RETURN_IF_ERROR(search_parallel(
      static_cast<int64_t>(parts.size()), threads, 1,
      [&](int64_t p) {
        PartResult& r = parts[static_cast<size_t>(p)];
        r.part = walk.walk(static_cast<size_t>(p));
        const std::vector<Layout>& layouts = r.part.candidates;
        listed.fetch_add(static_cast<int64_t>(layouts.size()), std::memory_order_relaxed);
        r.slots.resize(layouts.size());
        r.strings.resize(layouts.size());
        for (size_t j = 0; j < layouts.size(); ++j) {
          Slot& slot = r.slots[j];
          auto m = ev.memory(layouts[j]);
          if (!m) {
            slot.error = m.status().message();
            r.strings[j] = format_layout(layouts[j]);
            r.failed.push_back(j);
            continue;
          }
          slot.memory = *m;
          slot.fits = m->fits(req.memory_margin);
          if (!slot.fits) continue;
          auto c = ev.coarse_lower_bound(layouts[j]);
          slot.bound = c ? std::max(*c, Duration::zero()) : Duration::zero();
          r.fitting.emplace_back(slot.bound, j);
        }
        seen.fetch_add(static_cast<int64_t>(layouts.size()), std::memory_order_relaxed);
        fitting.fetch_add(static_cast<int64_t>(r.fitting.size()), std::memory_order_relaxed);
      },
      [&] { report("enumerate"); }, req.progress_interval));
  // The parts in order; `coarse` holds each fitting candidate's (coarse bound, index), `failed` the
  // indices whose memory could not be estimated.
  std::vector<std::pair<Duration, size_t>> coarse;
  coarse.reserve(static_cast<size_t>(fitting.load()));
  std::vector<size_t> failed;
  std::vector<SpacePart> walked;
  walked.reserve(parts.size());
  for (PartResult& r : parts) {
    const size_t first = s.slots.size();
    for (const auto& [bound, j] : r.fitting) coarse.emplace_back(bound, first + j);
    for (size_t j : r.failed) failed.push_back(first + j);
    s.space.candidates.append(std::move(r.part.candidates));
    s.slots.append(std::move(r.slots));
    s.strings.append(std::move(r.strings));
    walked.push_back(std::move(r.part));
  }
  std::vector<PartResult>().swap(parts);
  const SearchSpace set_aside = walk.set_aside(walked);
  s.space.pruned = set_aside.pruned;
  s.space.probe_rule = set_aside.probe_rule;
  s.fit = static_cast<int64_t>(coarse.size());
  const auto& cand = s.space.candidates;
  auto by_bound = [](const std::pair<Duration, size_t>& a, const std::pair<Duration, size_t>& b) {
    return a.first < b.first || (a.first == b.first && a.second < b.second);
  };

  // The bounds (Evaluator::iteration_lower_bound) in the order of the coarse ones, as far as the
  // walk below needs them: `keys` holds the (bound, index) of the candidates whose bound is
  // computed, which are those at positions below `coarse_done` of `coarse`; every other one has a
  // coarse bound of at least `unknown_from`, so its bound is no lower either. A computed bound
  // below `unknown_from` therefore has its final place in the bound order, with every bound before
  // it computed; at and beyond it the order is not known yet, and `more_bounds` computes the next
  // candidates' (DeepSeek-V3's search needs about 10,000 of its 580,882: issue 45).
  std::vector<std::pair<Duration, size_t>> keys;
  size_t coarse_done = 0;
  Duration unknown_from = Duration::zero();
  auto more_bounds = [&](size_t n) -> Status {
    const size_t from = coarse_done, to = std::min(coarse.size(), from + n);
    const auto first = coarse.begin() + static_cast<std::ptrdiff_t>(from);
    const auto last = coarse.begin() + static_cast<std::ptrdiff_t>(to);
    if (to < coarse.size()) std::nth_element(first, last, coarse.end(), by_bound);
    SP_RETURN_IF_ERROR(search_parallel(
        static_cast<int64_t>(to - from), threads, 64,
        [&](int64_t j) {
          Slot& slot = s.slots[coarse[from + static_cast<size_t>(j)].second];
          auto b = ev.iteration_lower_bound(cand[coarse[from + static_cast<size_t>(j)].second]);
          slot.bound = b ? std::max(*b, Duration::zero()) : Duration::zero();
          slot.exact = true;
        },
        [&] { report("bound"); }, req.progress_interval));
    for (size_t j = from; j < to; ++j) {
      const size_t i = coarse[j].second;
      if (s.slots[i].bound < coarse[j].first) {  // the order would not be the bounds'
        return Status::internal("plan: the coarse bound of " + name_of(s, i) +
                                " exceeds its bound (Evaluator::coarse_lower_bound)");
      }
      keys.emplace_back(s.slots[i].bound, i);
    }
    coarse_done = to;
    unknown_from = to < coarse.size() ? coarse[to].first : Duration::infinite();
    return Status::ok();
  };
  SP_RETURN_IF_ERROR(more_bounds(4096));

  // Phase 3: branch and bound. Candidates are taken in the order of their cheap bounds (ties:
  // enumeration order). Candidate k is bounded out when its bound exceeds the iteration of the
  // K'-th best simulated among those before it (K' = top_k + 1, so that the reason of the K-th
  // plan compares it with the true next one; top_k without compare_with_next); its refined bound is
  // computed first, and it is simulated only if that does not bound it out either. Once a cheap
  // bound exceeds the threshold, so do all later ones: the search stops. This sequential definition
  // is what the result follows; workers run ahead of it speculatively (their threshold, from the
  // results completed so far, is never below the sequential one, so they skip nothing it would
  // simulate), and results beyond it are discarded, so the output does not depend on the thread
  // count.
  //
  // The order is sorted as far as the walk reaches (under best_mu): positions below `sorted` are
  // in order, the rest, each no lower than all of those, not yet. The walk reaches a prefix (77 of
  // DeepSeek-V3's 580,882 fitting layouts; sorting all of them took 0.2 s on one thread).
  //
  // Only the computed bounds are in `keys`: position k holds its candidate in the whole bound
  // order where its bound is below `unknown_from` (`known`). Where it is not, the candidate at
  // that place of the whole order has a bound of at least min(keys[k], unknown_from) (`at_least`),
  // which is enough to stop there; to go on, the walk waits for more bounds (`starve`: the round
  // ends, `more_bounds` computes the next ones in coarse order, and the walk resumes there).
  size_t sorted = 0;
  auto sort_to = [&](size_t k) {  // sorts positions up to k at least
    if (k < sorted) return;
    const size_t end = std::min(keys.size(), std::max({k + 1, 4 * sorted, size_t{4096}}));
    const auto from = keys.begin() + static_cast<std::ptrdiff_t>(sorted);
    const auto to = keys.begin() + static_cast<std::ptrdiff_t>(end);
    std::nth_element(from, to, keys.end(), by_bound);
    std::sort(from, to, by_bound);
    sorted = end;
  };
  auto index_at = [&](size_t k) { return keys[k].second; };
  auto known = [&](size_t k) {  // every bound computed: all are (bounds may saturate)
    return keys[k].first < unknown_from || coarse_done == coarse.size();
  };
  auto at_least = [&](size_t k) { return std::min(keys[k].first, unknown_from); };
  const size_t keep = static_cast<size_t>(req.top_k) + (req.compare_with_next ? 1 : 0);
  const int64_t cap = req.max_simulations > 0 ? req.max_simulations : s.fit;
  // The K' smallest iterations so far, as a max-heap: the threshold is its top.
  auto add_time = [keep](std::vector<Duration>& heap, Duration t) {
    if (heap.size() < keep) {
      heap.push_back(t);
      std::push_heap(heap.begin(), heap.end());
    } else if (t < heap.front()) {
      std::pop_heap(heap.begin(), heap.end());
      heap.back() = t;
      std::push_heap(heap.begin(), heap.end());
    }
  };
  auto threshold = [keep](const std::vector<Duration>& heap) {
    return heap.size() < keep ? Duration::infinite() : heap.front();
  };
  // Every completed result with its position in the bound order. A worker at position k compares
  // with the results of positions before k only: those are a subset of what the sequential walk
  // has seen there, or results it bounds out, which lie above its threshold (their refined bound
  // does), so this threshold is never below the sequential one. A result of a later position can
  // complete first (a worker descheduled between taking k and its check, or computing its refined
  // bound): counting it could bound out a candidate the sequential walk simulates, and the replay
  // below would then fail ("should have been simulated"; test
  // Planner.ALaterResultDoesNotBoundOutAnEarlierCandidate).
  std::vector<std::pair<int64_t, Duration>> live;
  auto threshold_before = [&](int64_t k) {
    std::vector<Duration> heap;
    for (const auto& [j, t] : live)
      if (j < k) add_time(heap, t);
    return threshold(heap);
  };
  // The sequential definition, followed as far as the results allow (under best_mu): candidates
  // before `seq_k` are decided, `seq_used` of them simulated. It tells workers when the cap is
  // reached; the final replay below is the same walk.
  size_t seq_k = 0;
  std::vector<Duration> seq_heap;
  int64_t seq_used = 0;
  std::atomic<int64_t> stop_at{std::numeric_limits<int64_t>::max()};
  auto stop = [&](int64_t k) {
    int64_t cur = stop_at.load();
    while (k < cur && !stop_at.compare_exchange_weak(cur, k)) {
    }
  };
  auto advance_seq = [&] {
    for (; seq_k < sorted; ++seq_k) {
      const Slot& slot = s.slots[index_at(seq_k)];
      const Duration thr = threshold(seq_heap);
      if (at_least(seq_k) > thr) return stop(static_cast<int64_t>(seq_k));
      if (!known(seq_k)) return;  // the candidate at this place is not known yet
      if (seq_used >= cap && (!slot.refined || *slot.refined <= thr)) {
        stop(static_cast<int64_t>(seq_k));
        return;
      }
      if (!slot.refined) return;          // not reached yet
      if (*slot.refined > thr) continue;  // bounded out
      if (!slot.done) return;             // being simulated
      ++seq_used;
      if (slot.prediction) add_time(seq_heap, slot.prediction->iteration);
    }
  };
  constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
  std::atomic<int64_t> starved_at{kNone};  // the first position whose candidate was not known
  auto starve = [&](int64_t k) {
    int64_t cur = starved_at.load();
    while (k < cur && !starved_at.compare_exchange_weak(cur, k)) {
    }
  };
  auto walk_from = [&](size_t resume) {
    return search_parallel(
        static_cast<int64_t>(keys.size() - resume), threads, 1,
        [&](int64_t j) {
          const int64_t k = static_cast<int64_t>(resume) + j;
          if (k > stop_at.load() || k >= starved_at.load()) return;
          size_t i;
          Slot* slot;
          {
            std::lock_guard<std::mutex> lock(best_mu);
            sort_to(static_cast<size_t>(k));
            i = index_at(static_cast<size_t>(k));
            slot = &s.slots[i];
            if (at_least(static_cast<size_t>(k)) > threshold_before(k)) return stop(k);
            if (!known(static_cast<size_t>(k))) return starve(k);
          }
          auto refined = ev.refined_lower_bound(cand[i]);
          // The breakdown is read for the top K' alone (each plan's reason compares it with the
          // next): a result slower than the K'-th best of the sequential walk so far has K' faster
          // results in the final set (those before k), so it is not among them and its breakdown is
          // not computed. The walk's heap, not the worker's: a result in `live` may be one that the
          // walk bounds out.
          Duration breakdown_within;
          {
            std::lock_guard<std::mutex> lock(best_mu);
            slot->refined = refined ? std::max(*refined, slot->bound) : slot->bound;
            if (*slot->refined > threshold_before(k)) return advance_seq();  // bounded out
            if (seq_used >= cap) return stop(k);
            breakdown_within = threshold(seq_heap);
          }
          auto p = ev.simulate_within(cand[i], breakdown_within);
          std::string name = format_layout(cand[i]);
          std::lock_guard<std::mutex> lock(best_mu);
          s.strings[i] = std::move(name);
          slot->done = true;
          if (!p) {
            slot->error = p.status().message();
            return advance_seq();
          }
          slot->prediction = std::make_unique<Prediction>(std::move(p).value());
          simulated.fetch_add(1, std::memory_order_relaxed);
          live.emplace_back(k, p->iteration);
          if (p->tokens_per_s_per_gpu > best_tps) {
            best_tps = p->tokens_per_s_per_gpu;
            best_index = static_cast<int64_t>(i);
          }
          advance_seq();
        },
        [&] { report("simulate"); }, req.progress_interval);
  };
  // Rounds of the walk: each ends where it stops or where it needs bounds not computed yet.
  for (size_t resume = 0;;) {
    starved_at = kNone;
    SP_RETURN_IF_ERROR(walk_from(resume));
    // A stop beyond the first unknown place (a worker there first) does not end the walk: the
    // places from there on are sorted again below, so it is dropped.
    if (stop_at.load() < starved_at.load()) break;
    stop_at = kNone;
    if (starved_at.load() == kNone) {
      if (coarse_done == coarse.size()) break;  // every candidate walked
      starved_at = static_cast<int64_t>(keys.size());
    }
    // Positions before `resume` hold known candidates, sorted; the rest are sorted again with the
    // new bounds, each no lower than theirs.
    resume = static_cast<size_t>(starved_at.load());
    sorted = std::min(sorted, resume);
    SP_RETURN_IF_ERROR(more_bounds(std::max(coarse_done, size_t{4096})));
  }

  // The sequential definition, replayed on the results; speculative results beyond it are
  // discarded. Every position it reads was reached by a worker, so it is sorted.
  std::vector<Duration> heap;
  int64_t used = 0;
  size_t k = 0;
  for (; k < keys.size(); ++k) {
    Slot& slot = s.slots[index_at(k)];
    const Duration thr = threshold(heap);
    if (at_least(k) > thr) break;
    if (!known(k)) {
      return Status::internal("plan: the walk stopped before the bound order was known at " +
                              name_of(s, index_at(k)));
    }
    if (!slot.refined) {
      return Status::internal("plan: the refined bound of " + name_of(s, index_at(k)) +
                              " was not computed");
    }
    if (*slot.refined > thr) {
      slot.prediction.reset();
      slot.error.clear();
      slot.bounded = true;
      ++s.bounded;
      continue;
    }
    if (used >= cap) break;
    if (!slot.done) {
      return Status::internal("plan: candidate " + name_of(s, index_at(k)) +
                              " should have been simulated");
    }
    ++used;
    if (slot.prediction) add_time(heap, slot.prediction->iteration);
  }
  if (k == keys.size() && coarse_done < coarse.size()) {
    return Status::internal("plan: the walk ended before every bound it needed was computed");
  }
  const Duration final_threshold = threshold(heap);
  // Where the cap stopped the walk, a candidate is cut rather than bounded out where its bound is
  // at most the threshold: the bounds of every candidate whose coarse bound is not above it. (Where
  // the bounds stopped it, none: each coarse bound not computed is at least `unknown_from`, which
  // is above the threshold.)
  SP_RETURN_IF_ERROR(more_bounds(static_cast<size_t>(std::count_if(
      coarse.begin() + static_cast<std::ptrdiff_t>(coarse_done), coarse.end(),
      [&](const std::pair<Duration, size_t>& c) { return c.first <= final_threshold; }))));
  // Their coarse bounds above the threshold, so are their bounds: bounded out.
  for (size_t j = coarse_done; j < coarse.size(); ++j) {
    s.slots[coarse[j].second].bounded = true;
    ++s.bounded;
  }
  // The rest, sorted (where the walk reached) or not: none of them is kept. The cut candidate with
  // the smallest bound is the first cut one in the order.
  std::optional<std::pair<Duration, size_t>> first_cut;
  std::vector<size_t> errors(failed);
  for (size_t j = 0; j < keys.size(); ++j) {
    Slot& slot = s.slots[index_at(j)];
    if (j >= k) {
      slot.prediction.reset();
      slot.error.clear();
      // The closed form alone: a refined bound past k exists only where a worker ran ahead,
      // which the thread count and the timing decide, and the count must not depend on them
      // (test Planner.TheCapCutsTheSameLayoutsOnAnyThreadCount).
      if (slot.bound > final_threshold) {
        slot.bounded = true;
        ++s.bounded;
      } else {
        ++s.cut;  // the cap stopped the search before this one
        if (!first_cut || by_bound(keys[j], *first_cut)) first_cut = keys[j];
      }
    } else {
      if (!slot.error.empty()) errors.push_back(index_at(j));
      if (slot.prediction) s.order.push_back(index_at(j));
    }
  }
  if (first_cut) s.cut_best_bound = first_cut->second;

  // Failures in the order of the candidates.
  std::sort(errors.begin(), errors.end());
  for (size_t i : errors) {
    ++s.failed;
    if (s.errors.size() < kMaxErrors) s.errors.push_back(s.strings[i] + ": " + s.slots[i].error);
  }
  s.simulated = static_cast<int64_t>(s.order.size());
  simulated.store(s.simulated);
  progress.bounded = s.bounded;
  std::sort(s.order.begin(), s.order.end(), [&](size_t a, size_t b) {
    return ranks_before(*s.slots[a].prediction, *s.slots[a].memory, s.strings[a],
                        *s.slots[b].prediction, *s.slots[b].memory, s.strings[b]);
  });
  report("done");
  return s;
}

// Every candidate's format_layout (Search::strings has only those that fit or failed).
std::vector<std::string> all_names(const Search& s) {
  std::vector<std::string> out = s.strings.to_vector();
  for (size_t i = 0; i < out.size(); ++i)
    if (out[i].empty()) out[i] = format_layout(s.space.candidates[i]);
  return out;
}

std::string no_fit_message(const Search& s, const SearchOptions& options, Bytes margin) {
  if (s.space.candidates.empty()) {
    const std::string job =
        std::to_string(options.gpus) + " GPUs and gbs " + std::to_string(options.gbs) +
        (options.fixes.empty() ? "" : " with --fix " + options.fixes.to_string());
    if (s.space.pruned_total() > 0) {
      return "no layout was searched: every layout of " + job +
             " is set aside by a policy rule below (each says how to lift it)";
    }
    return "no layout of " + job +
           " meets the layout rules (tp·pp·cp·dp = GPUs, heads divisible by tp, gbs by mbs·dp, "
           "at most one pipeline chunk per layer; docs/architecture.md)";
  }
  int64_t best = -1;
  for (size_t i = 0; i < s.slots.size(); ++i) {
    if (!s.slots[i].memory) continue;
    if (best < 0 ||
        s.slots[i].memory->headroom() > s.slots[static_cast<size_t>(best)].memory->headroom()) {
      best = static_cast<int64_t>(i);
    }
  }
  if (best < 0) return "no candidate layout could be evaluated (see the errors below)";
  const MemoryVerdict& m = *s.slots[static_cast<size_t>(best)].memory;
  return "no layout fits in " + format_bytes(m.capacity) + " per GPU with a " +
         format_bytes(margin) + " margin; the closest, " +
         format_layout(s.space.candidates[static_cast<size_t>(best)]) + ", needs " +
         format_bytes(m.peak) + " (short by " + format_bytes(m.peak + margin - m.capacity) + ")";
}

// The --explain layout, resolved for the job (its gbs defaults to the job's); a parse error as is.
Result<Layout> explained_layout(const PlanRequest& req, const SearchOptions& options,
                                bool* parsed_ok = nullptr) {
  auto parsed = parse_layout(req.explain);
  if (parsed_ok) *parsed_ok = parsed.is_ok();
  if (!parsed) return parsed.status();
  Layout l = *parsed;
  if (!l.gbs) l.gbs = options.gbs;
  return resolve_layout(l, options.model, options.gpus);
}

Explanation explain(const PlanRequest& req, const SearchOptions& options, const Evaluator& ev,
                    const Search& s, int threads) {
  Explanation e;
  e.layout_text = req.explain;
  bool parsed = false;
  auto resolved = explained_layout(req, options, &parsed);
  if (!parsed) {
    e.why = resolved.status().message();
    return e;
  }
  if (!resolved) {
    e.why = "not a valid layout for this model and " + std::to_string(options.gpus) +
            " GPUs: " + resolved.status().message();
    return e;
  }
  e.valid = true;
  e.layout = *resolved;
  const std::string text = format_layout(*resolved);
  const std::vector<std::string> strings = all_names(s);
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
  const auto self = std::find(strings.begin(), strings.end(), text);
  const bool was_simulated =
      self != strings.end() && s.slots[static_cast<size_t>(self - strings.begin())].prediction;
  int ahead = 0;
  for (size_t i : s.order) {
    if (strings[i] == text) continue;
    if (ranks_before(*s.slots[i].prediction, *s.slots[i].memory, strings[i], *pred, *mem, text)) {
      ++ahead;
    }
  }
  // Bounded-out layouts were not simulated; those whose bound is below its time might be ahead.
  // Where the search computed only a coarse bound, one at most its time needs the bound itself
  // (on the search's threads: for a slow layout, most of a large space).
  int64_t unsure = 0;
  std::vector<size_t> coarse_only;
  for (size_t i = 0; i < s.slots.size(); ++i) {
    const Slot& o = s.slots[i];
    if (!o.bounded || strings[i] == text) continue;
    const Duration bound = o.refined.value_or(o.bound);
    if (bound > pred->iteration) continue;
    if (o.exact) {
      ++unsure;
    } else {
      coarse_only.push_back(i);
    }
  }
  std::atomic<int64_t> below{0};
  const Status st = search_parallel(
      static_cast<int64_t>(coarse_only.size()), threads, 64,
      [&](int64_t j) {
        auto b = ev.iteration_lower_bound(s.space.candidates[coarse_only[static_cast<size_t>(j)]]);
        if (!b || *b <= pred->iteration) below.fetch_add(1, std::memory_order_relaxed);
      },
      [] {}, req.progress_interval);
  if (!st.is_ok()) {
    e.why = st.message();
    return e;
  }
  unsure += below.load();
  e.rank = ahead + 1;
  e.rank_max = e.rank + unsure;
  std::string where = "ranks " + std::to_string(e.rank) + " of " +
                      std::to_string(s.simulated + (was_simulated ? 0 : 1)) + " simulated";
  if (!e.in_space) {
    std::string why_out;
    if (!s.space.probe_rule.empty())
      why_out = "set aside by the rule \"" + s.space.probe_rule + "\"";
    else if (!options.fixes.matches(*resolved))
      why_out = "the --fix restrictions (" + options.fixes.to_string() + ") exclude it";
    else
      why_out = "not one of the layouts the planner enumerates";
    where += " (outside the searched space: " + why_out + "; simulated on its own)";
  } else if (!was_simulated) {
    where += " (its lower bound put it out of the search, so it was simulated on demand)";
  }
  if (unsure > 0) {
    where += "; " + std::to_string(unsure) +
             " bounded-out layouts that were not simulated have a lower bound under its time, so "
             "among all fitting layouts it ranks " +
             std::to_string(e.rank) + " to " + std::to_string(e.rank_max);
  }
  if (s.order.empty() || e.rank == 1) {
    e.why = where + "; it is the fastest layout that fits.";
    return e;
  }
  const size_t b = s.order.front();
  e.why =
      where + ". The best, " + strings[b] + ", is " +
      compare_reason(placed(s.space.candidates[b], *s.slots[b].prediction), *s.slots[b].prediction,
                     *s.slots[b].memory, placed(*resolved, *pred), *pred, *mem);
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

std::string percent(double fraction) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * fraction);
  return buf;
}

std::string layout_diff(const Layout& a, const Layout& b) {
  std::string s;
  for (std::string_view k : layout_keys()) {
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
  for (int k = 0; k < kNumCommClasses; ++k) {
    parts.push_back({std::string(kCommText[k]), y.exposed[k] - x.exposed[k]});
  }
  std::stable_sort(parts.begin(), parts.end(),
                   [](const Part& p, const Part& q) { return p.saved > q.saved; });
  const Part& best = parts.front();
  const Part& worst = parts.back();
  const double faster = pa.tokens_per_s_per_gpu / pb.tokens_per_s_per_gpu - 1;
  std::string s = percent(faster) + " faster than the next" + differs + ": ";
  if (best.saved > Duration::zero()) {
    // The savings that matter (at least a tenth of the largest, three at most), largest first.
    std::vector<const Part*> named;
    Duration total{};
    for (const Part& p : parts) {
      if (named.size() == 3 || p.saved <= Duration::zero() || p.saved * 10 < best.saved) break;
      named.push_back(&p);
      total += p.saved;
    }
    s += "it avoids ";
    for (size_t i = 0; i < named.size(); ++i) {
      if (i > 0) s += i + 1 == named.size() ? " and " : ", ";
      s += format_duration(named[i]->saved) + " of " + named[i]->name;
    }
    // Savings mostly spent elsewhere are a trade, not a gain: say what they cost when that is at
    // least a tenth of them.
    if (worst.saved < Duration::zero() && (Duration::zero() - worst.saved) * 10 >= total) {
      s += " for " + format_duration(Duration::zero() - worst.saved) + " more " + worst.name;
    }
    s += " per iteration.";
  } else {
    s += "shorter iteration by " + format_duration(dt) + ".";
  }
  return s;
}

Result<PlanResult> plan(const PlanRequest& req, const Evaluator& ev) {
  const auto start = std::chrono::steady_clock::now();
  if (req.top_k < 1) return Status::invalid("plan: --top must be at least 1");
  if (req.memory_margin < Bytes(0)) return Status::invalid("plan: --memory-margin is negative");
  if (req.threads < 0 || req.threads > kMaxThreads)
    return Status::invalid("plan: --threads: " + std::to_string(req.threads) +
                           " is not between 0 (all cores) and " + std::to_string(kMaxThreads));
  const int threads = resolve_threads(req.threads);

  PlanResult r;
  r.threads = threads;
  SearchOptions options = req.search;
  // --explain: find which policy rule, if any, sets its layout aside.
  if (!req.explain.empty()) {
    if (auto resolved = explained_layout(req, options)) options.probe = *resolved;
  }
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
  if (s.fit == 0) r.no_fit = no_fit_message(s, options, req.memory_margin);
  r.bounded = s.bounded;
  r.not_simulated = s.cut;
  if (s.cut > 0) {
    const size_t c = s.cut_best_bound;
    r.budget_note = "the --max-simulations cap of " + std::to_string(req.max_simulations) +
                    " stopped the search: " + std::to_string(s.cut) +
                    " fitting layouts were neither simulated nor bounded out";
    const Duration lb = s.slots[c].bound;
    if (s.simulated == 0 || lb <= Duration::zero()) {
      r.budget_note += ", so the best plan is not proven optimal";
    } else {
      const Duration best = s.slots[s.order.front()].prediction->iteration;
      r.budget_note += lb >= best ? "; none of them can beat the best plan"
                                  : "; none of them can be more than " +
                                        percent(best.to_seconds() / lb.to_seconds() - 1) +
                                        " faster than the best plan";
      r.budget_note += " (the lowest bound: " + name_of(s, c) + ", " + format_duration(lb) + ")";
    }
    r.budget_note += " (--max-simulations 0 searches exactly)";
  }

  const size_t k = std::min(s.order.size(), static_cast<size_t>(req.top_k));
  for (size_t j = 0; j < k; ++j) {
    const size_t i = s.order[j];
    RankedPlan p;
    p.rank = static_cast<int>(j + 1);
    p.layout = s.space.candidates[i];
    p.prediction = *s.slots[i].prediction;
    p.layout = placed(p.layout, p.prediction);
    p.memory = *s.slots[i].memory;
    p.lower_bound = s.slots[i].refined.value_or(s.slots[i].bound);
    if (!req.compare_with_next && j + 1 == static_cast<size_t>(req.top_k)) {
      // The next one was not searched for: the order beyond the top_k is not exact.
    } else if (j + 1 < s.order.size()) {
      const size_t n = s.order[j + 1];
      p.reason = "Ranks above #" + std::to_string(j + 2) + ": " +
                 compare_reason(p.layout, p.prediction, p.memory,
                                placed(s.space.candidates[n], *s.slots[n].prediction),
                                *s.slots[n].prediction, *s.slots[n].memory);
    } else {
      p.reason = s.order.size() == 1 ? "The only layout that fits." : "The last layout that fits.";
    }
    r.plans.push_back(std::move(p));
  }
  if (!req.explain.empty()) r.explanation = explain(req, options, ev, s, threads);
  r.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace scaleplan::planner
