#include "planner/search_space.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <memory>
#include <set>
#include <tuple>

#include "core/layout_keys.h"
#include "sim/schedule.h"

namespace scaleplan::planner {
namespace {

// Divisors of n, ascending (trial division: n is at most a GPU count or a batch size).
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> low, high;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    low.push_back(d);
    if (d != n / d) high.push_back(n / d);
  }
  low.insert(low.end(), high.rbegin(), high.rend());
  return low;
}

// Policy rules, in the order they are reported. The first rule a layout meets is the one counted.
enum Rule : int {
  kCrossNodeTp,
  kCpShard,
  kDualPipe,
  kUnrunnable,
  kVppCap,
  kVppUneven,
  kMicroBatchCap,
  kNumRules,
};

// Whether an enumerated (unresolved) layout is the same choice as a resolved one: every key the
// walk sets (gbs is the job's).
bool same_choice(const Layout& a, const Layout& b) {
  return a.tp == b.tp && a.pp == b.pp && a.cp == b.cp && a.dp == b.dp && a.ep == b.ep &&
         a.etp == b.etp && a.schedule == b.schedule && a.vpp_degree() == b.vpp_degree() &&
         a.pp_first == b.pp_first && a.pp_last == b.pp_last && a.pp_embedding == b.pp_embedding &&
         a.pp_loss == b.pp_loss && a.mbs == b.mbs && a.zero == b.zero &&
         a.sequence_parallel() == b.sequence_parallel() && a.recompute == b.recompute &&
         a.dtype == b.dtype && a.moments == b.moments && a.act_cache == b.act_cache;
}

std::string rule_text(int rule, const SearchOptions& o) {
  switch (rule) {
    case kCrossNodeTp:
      return "tp or etp above the " + std::to_string(o.nvlink_domain_gpus) +
             " GPUs of one NVLink domain (TP all-reduces would leave NVLink; "
             "--allow-cross-node-tp or --fix tp=...)";
    case kCpShard:
      return "cp shards shorter than " + std::to_string(o.min_cp_tokens) +
             " tokens (seq/cp; the K/V ring cannot hide behind attention; --fix cp=...)";
    case kDualPipe:
      return "schedules dualpipe, dualpipev and zb-v (not in the default space; --fix "
             "schedule=dualpipe, dualpipev or zb-v)";
    case kUnrunnable: {
      std::string runs;
      for (const auto& [key, values] : o.runnable) {
        std::string alts;
        for (const auto& v : values) alts += (alts.empty() ? "" : "|") + v;
        runs += (runs.empty() ? "" : ", ") + key + "=" + alts;
      }
      for (const RefusedCombination& r : o.refused) runs += (runs.empty() ? "" : ", ") + r.text;
      return "layouts " + o.runnable_by + " cannot run as predicted (it runs " + runs +
             "; --fix KEY=... ranks others anyway)";
    }
    case kVppCap:
      return "interleaved vpp above " + std::to_string(o.max_vpp) + " (--fix vpp=...)";
    case kVppUneven:
      return "interleaved vpp with layers not divisible by pp·vpp (Megatron-LM needs even "
             "chunks; --fix vpp=...)";
    case kMicroBatchCap:
      return "micro-batches above " + std::to_string(o.max_microbatch_tokens) +
             " tokens (mbs·seq; --fix mbs=...)";
  }
  return "?";
}

// One pipeline arrangement: schedule, vpp and the optional pinned first/last stage sizes.
struct PipelineChoice {
  Schedule schedule;
  int vpp;
  int pp_first;  // -1: unset (0: no layers, the embedding or the head alone)
  int pp_last;   // -1: unset
  int rule;      // -1 or the policy rule that prunes it
};

}  // namespace

// The walk of the space, cut into parts: one per parallel grid (tp, cp, pp, dp, the CP exchange
// and the expert grid), listed in the walk's order when the Impl is made. The tables a part's walk
// reads (what the fixes allow of the inner keys, each pp's pipeline choices, the micro-batch sizes
// of each per-replica batch) are filled then too, so that walking a part is const and parts can be
// walked on several threads at once (issue 45).
class SpaceWalk::Impl {
 public:
  // One parallel grid (tp, cp, pp, dp, gbs, cp_comm, ep, etp set) and the policy rule that sets
  // all of it aside, or -1.
  struct Part {
    Layout grid;
    int rule;
  };

  explicit Impl(const SearchOptions& o) : o_(o) {
    // What the fixes allow of the inner keys, looked up once per walk rather than once per
    // candidate: a large MoE space (DeepSeek-V3 on 2,048 GPUs: 3.86 million layouts) spent most of
    // its enumeration in these string-keyed lookups (issue 45). Same values, same order.
    mbs_fixed_ = o_.fixes.has("mbs");
    modules_fixed_ = o_.fixes.has("recompute_modules");
    for (int zero = 0; zero <= 3; ++zero) zero_allowed_[zero] = o_.fixes.allows("zero", zero);
    sp_allowed_[0] = o_.fixes.allows("sp", "off");
    sp_allowed_[1] = o_.fixes.allows("sp", "on");
    for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      const auto i = static_cast<size_t>(r);
      recompute_allowed_[i] = o_.fixes.allows("recompute", to_string(r));
      modules_[i] = module_sets(r);
    }
    // The precision is the job's, not the planner's: bf16 unless the fixes name fp8.
    for (DType d : {DType::kBf16, DType::kFp8}) {
      if (d == DType::kFp8 ? o_.fixes.names("dtype", "fp8") : o_.fixes.allows("dtype", "bf16"))
        dtypes_.push_back(d);
    }
    // Likewise the moments' dtype and the activation cache: the defaults unless the fixes name
    // the others (act_cache=fp8 only with dtype=fp8: resolve_layout refuses it otherwise).
    for (MomentDtype m : {MomentDtype::kFp32, MomentDtype::kBf16}) {
      const std::string_view v = to_string(m);
      if (m == MomentDtype::kBf16 ? o_.fixes.names("moments", v) : o_.fixes.allows("moments", v))
        moments_.push_back(m);
    }
    for (ActCache c : {ActCache::kDefault, ActCache::kFp8}) {
      const std::string_view v = to_string(c);
      if (c == ActCache::kFp8 ? o_.fixes.names("act_cache", v) : o_.fixes.allows("act_cache", v))
        caches_.push_back(c);
    }
    for (int multi_tp = 0; multi_tp < 2; ++multi_tp)
      for (int trivial = 0; trivial < 2; ++trivial)
        inner_choices_[multi_tp][trivial] = make_inner_choices(multi_tp == 1, trivial == 1);
    list_parts();
  }

  const std::vector<Part>& parts() const { return parts_; }

  SpacePart walk(const Part& part) const {
    SpacePart out;
    out.set_aside.assign(kNumRules, 0);
    Layout l = part.grid;
    pipeline(l, part.rule, out);
    return out;
  }

  SearchSpace set_aside(const std::vector<SpacePart>& parts) const {
    SearchSpace s;
    std::vector<int64_t> counts(kNumRules, 0);
    int probe_rule = -1;
    int64_t rejected = 0;
    std::string first_rejection;
    for (const SpacePart& p : parts) {
      for (int r = 0; r < kNumRules; ++r) counts[r] += p.set_aside[r];
      if (probe_rule < 0) probe_rule = p.probe_rule;
      if (rejected == 0) first_rejection = p.first_rejection;
      rejected += p.rejected;
    }
    for (int r = 0; r < kNumRules; ++r) {
      if (counts[r] > 0) s.pruned.push_back({rule_text(r, o_), counts[r]});
    }
    if (probe_rule >= 0) s.probe_rule = rule_text(probe_rule, o_);
    if (rejected > 0) {
      s.pruned.push_back(
          {"rejected by resolve_layout (an enumeration bug; first: " + first_rejection + ")",
           rejected});
    }
    return s;
  }

 private:
  // The parallel grids in the walk's order, each with the tables its walk reads.
  void list_parts() {
    const auto& m = o_.model;
    for (int64_t tp : divisors(o_.gpus)) {
      // Heads by tp; KV heads divide by tp or are replicated (tp a multiple of them). DESIGN.md.
      if (m.num_heads % tp != 0) continue;
      if (m.num_kv_heads > 0 && m.num_kv_heads % tp != 0 &&
          !(m.num_kv_heads < tp && tp % m.num_kv_heads == 0)) {
        continue;
      }
      if (!o_.fixes.allows("tp", tp)) continue;
      const int tp_rule =
          tp > o_.nvlink_domain_gpus && !o_.allow_cross_node_tp && !o_.fixes.names("tp", tp)
              ? kCrossNodeTp
              : -1;
      for (int64_t cp : divisors(o_.gpus / tp)) {
        // Zig-zag causal balancing splits the sequence into 2·cp chunks.
        if (cp > 1 && m.seq_len % (2 * cp) != 0) continue;
        if (!o_.fixes.allows("cp", cp)) continue;
        int cp_rule = tp_rule;
        if (cp_rule < 0 && cp > 1 && m.seq_len / cp < o_.min_cp_tokens &&
            !o_.fixes.names("cp", cp)) {
          cp_rule = kCpShard;
        }
        for (int64_t pp : divisors(o_.gpus / (tp * cp))) {
          if (pp > m.num_layers) continue;  // a stage needs at least one layer
          if (!o_.fixes.allows("pp", pp)) continue;
          const int64_t dp = o_.gpus / (tp * cp * pp);
          if (o_.gbs % dp != 0) continue;  // gbs = mbs·dp·accumulation
          if (!o_.fixes.allows("dp", dp)) continue;
          divisors_of(o_.gbs / dp);
          allowed_pipeline_choices(static_cast<int>(pp));
          Layout l;
          l.tp = static_cast<int>(tp);
          l.cp = static_cast<int>(cp);
          l.pp = static_cast<int>(pp);
          l.dp = static_cast<int>(dp);
          l.gbs = o_.gbs;
          // CP's K/V exchange: the ring unless --fix names others (cp_comm applies where cp > 1).
          const std::vector<std::string>* comms = cp > 1 ? o_.fixes.values("cp_comm") : nullptr;
          if (comms == nullptr) {
            expert_grid(l, cp_rule);
            continue;
          }
          for (const std::string& v : *comms) {
            l.cp_comm = parse_cp_comm(v).value();
            expert_grid(l, cp_rule);
          }
        }
      }
    }
  }

  void expert_grid(Layout& l, int rule) {
    const auto& m = o_.model;
    if (m.num_experts == 0) {
      l.ep = l.etp = 1;
      if (o_.fixes.allows("ep", 1) && o_.fixes.allows("etp", 1)) parts_.push_back({l, rule});
      return;
    }
    // The expert grid re-divides the tp·cp·dp ranks of a stage into etp·ep·edp (Megatron-LM).
    const int64_t grid = static_cast<int64_t>(l.tp) * l.cp * *l.dp;
    for (int64_t etp : divisors(grid)) {
      if (!o_.fixes.allows("etp", etp)) continue;
      const int etp_rule =
          rule >= 0 ? rule
          : etp > o_.nvlink_domain_gpus && !o_.allow_cross_node_tp && !o_.fixes.names("etp", etp)
              ? kCrossNodeTp
              : -1;
      for (int64_t ep : divisors(grid / etp)) {
        if (m.num_experts % ep != 0) continue;
        if (!o_.fixes.allows("ep", ep)) continue;
        l.etp = static_cast<int>(etp);
        l.ep = static_cast<int>(ep);
        parts_.push_back({l, etp_rule});
      }
    }
  }

  std::vector<PipelineChoice> pipeline_choices(int pp) const {
    std::vector<PipelineChoice> out;
    const int64_t layers = o_.model.num_layers;
    if (pp == 1) {
      // Without a pipeline every schedule is plain gradient accumulation: one candidate, under
      // the first schedule name the fixes allow.
      for (Schedule s : {Schedule::k1F1B, Schedule::kAfab, Schedule::kZbH1}) {
        if (o_.fixes.allows("schedule", to_string(s))) {
          out.push_back({s, 1, -1, -1, -1});
          break;
        }
      }
      return out;
    }
    // Megatron-style pinned splits (pinned_splits: 0 = unset) and the balanced one.
    std::vector<std::pair<int, int>> splits = {{-1, -1}};
    for (auto [f, last] : pinned_splits(layers, pp))
      splits.push_back({f > 0 ? f : -1, last > 0 ? last : -1});
    for (Schedule s : {Schedule::kAfab, Schedule::k1F1B}) {
      for (auto [f, last] : splits) out.push_back({s, 1, f, last, -1});
    }
    for (int64_t v = 2; static_cast<int64_t>(pp) * v <= layers; ++v) {
      const bool named = o_.fixes.names("vpp", v);
      int rule = -1;
      if (!named && v > o_.max_vpp)
        rule = kVppCap;
      else if (!named && layers % (pp * v) != 0)
        rule = kVppUneven;
      out.push_back({Schedule::kInterleaved, static_cast<int>(v), -1, -1, rule});
    }
    for (auto [f, last] : splits) out.push_back({Schedule::kZbH1, 1, f, last, -1});
    // DualPipe runs two copies of a pp-stage pipeline from both ends (sim/schedule.h): an even
    // number of stages, each with at least one layer.
    // The two-chunk schedules, asked for by name only: balanced, or with the rank(s) that also run
    // the embedding and the head lighter (two_chunk_end_splits).
    auto two_chunk = [&](Schedule s) {
      const int rule = o_.fixes.names("schedule", to_string(s)) ? -1 : kDualPipe;
      out.push_back({s, 1, -1, -1, rule});
      for (auto [f, last] : two_chunk_end_splits(layers, pp, v_shaped(s)))
        out.push_back({s, 1, f, last, rule});
    };
    // DualPipe: an even number of stages, each with at least one layer. DualPipeV and ZB-V cut
    // the layers into 2·pp chunks placed in a V, each with at least one layer.
    if (pp % 2 == 0 && static_cast<int64_t>(pp) <= layers) two_chunk(Schedule::kDualPipe);
    if (2 * static_cast<int64_t>(pp) <= layers) {
      two_chunk(Schedule::kDualPipeV);
      two_chunk(Schedule::kZbV);
    }
    return out;
  }

  // pipeline_choices(pp) that the fixes allow, computed once per pp (they depend on nothing else).
  const std::vector<PipelineChoice>& allowed_pipeline_choices(int pp) {
    auto it = allowed_choices_.find(pp);
    if (it != allowed_choices_.end()) return it->second;
    std::vector<PipelineChoice> out;
    for (const PipelineChoice& c : pipeline_choices(pp)) {
      if (!o_.fixes.allows("schedule", to_string(c.schedule))) continue;
      if (!o_.fixes.allows("vpp", c.vpp)) continue;
      if (!o_.fixes.allows("pp_first", c.pp_first >= 0 ? std::to_string(c.pp_first) : "none")) {
        continue;
      }
      if (!o_.fixes.allows("pp_last", c.pp_last >= 0 ? std::to_string(c.pp_last) : "none")) {
        continue;
      }
      out.push_back(c);
    }
    return allowed_choices_.emplace(pp, std::move(out)).first->second;
  }

  void pipeline(Layout& l, int rule, SpacePart& out) const {
    for (const PipelineChoice& c : allowed_choices_.at(l.pp)) {
      l.schedule = c.schedule;
      l.vpp = c.vpp;
      l.pp_first = c.pp_first >= 0 ? std::optional<int>(c.pp_first) : std::nullopt;
      l.pp_last = c.pp_last >= 0 ? std::optional<int>(c.pp_last) : std::nullopt;
      inner(l, rule >= 0 ? rule : c.rule, out);
    }
  }

  // Whether the export target runs `l` as predicted: every listed key's value is one it accepts
  // or one the user named in --fix.
  bool runnable(const Layout& l) const {
    for (const auto& [key, values] : o_.runnable) {
      const std::string v = scaleplan::layout_value(l, key);
      if (std::find(values.begin(), values.end(), v) == values.end() && !o_.fixes.names(key, v))
        return false;
    }
    for (const RefusedCombination& r : o_.refused) {
      if (r.refuses(l) && !o_.fixes.names(r.lift_key, scaleplan::layout_value(l, r.lift_key)))
        return false;
    }
    return true;
  }

  // One combination of the keys inside the micro-batch (ZeRO, SP, recompute and its modules, the
  // dtype, the moments, the activation cache) that the fixes allow.
  struct InnerChoice {
    int zero;
    bool sp;
    Recompute recompute;
    std::optional<uint8_t> modules;
    DType dtype;
    MomentDtype moments;
    ActCache cache;
  };

  // The inner choices in the walk's order (zero, sp, recompute, modules, dtype, moments, cache),
  // for tp > 1 or not and a ZeRO group of one or more: they depend on nothing else, so they are
  // listed once per walk.
  std::vector<InnerChoice> make_inner_choices(bool multi_tp, bool zero_trivial) const {
    std::vector<InnerChoice> out;
    for (int zero = 0; zero <= 3; ++zero) {
      if (!zero_allowed_[zero]) continue;
      for (bool sp : {true, false}) {
        if (sp && !multi_tp) continue;  // SP shards TP activations; nothing to shard at tp=1
        if (!sp_allowed_[sp ? 1 : 0]) continue;
        for (Recompute r : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
          if (!recompute_allowed_[static_cast<size_t>(r)]) continue;
          for (const std::optional<uint8_t>& modules : modules_[static_cast<size_t>(r)]) {
            Layout probe;  // layout_value of recompute_modules reads these two keys alone
            probe.recompute = r;
            probe.recompute_modules = modules;
            if (modules_fixed_ &&
                !o_.fixes.allows("recompute_modules",
                                 scaleplan::layout_value(probe, "recompute_modules")))
              continue;
            for (DType d : dtypes_)
              for (MomentDtype mo : moments_)
                for (ActCache c : caches_) {
                  if (c == ActCache::kFp8 && d != DType::kFp8) continue;
                  out.push_back({zero, sp, r, modules, d, mo, c});
                }
          }
        }
      }
      // ZeRO shards over the dp·cp group; with one member every stage is ZeRO-0.
      if (zero_trivial) break;
    }
    return out;
  }

  // Divisors of n, computed once per n in a walk.
  const std::vector<int64_t>& divisors_of(int64_t n) {
    auto it = divisors_.find(n);
    if (it == divisors_.end()) it = divisors_.emplace(n, divisors(n)).first;
    return it->second;
  }

  // Micro-batch, then the inner choices.
  void inner(Layout& l, int rule, SpacePart& out) const {
    const int64_t per_replica = o_.gbs / *l.dp;
    const bool zero_trivial = static_cast<int64_t>(*l.dp) * l.cp == 1;
    const std::vector<InnerChoice>& choices =
        inner_choices_[l.tp > 1 ? 1 : 0][zero_trivial ? 1 : 0];
    // Layouts a rule sets aside are counted rather than walked one by one (a large MoE job's
    // space sets aside hundreds of millions: issue 45), unless --explain's layout is still looked
    // for among them.
    const bool count_only = !o_.probe || out.probe_rule >= 0;
    for (int64_t mbs : divisors_.at(per_replica)) {
      if (mbs_fixed_ && !o_.fixes.allows("mbs", mbs)) continue;
      int mbs_rule = rule;
      if (mbs_rule < 0 && mbs * o_.model.seq_len > o_.max_microbatch_tokens &&
          !o_.fixes.names("mbs", mbs) && mbs > 1) {
        mbs_rule = kMicroBatchCap;
      }
      // Megatron-LM's interleaved schedule (and the simulator's) needs at least pp micro-batches:
      // its warm-up alone runs (pp-1)·2 + (vpp-1)·pp chunk passes over groups of pp.
      if (l.schedule == Schedule::kInterleaved && per_replica / mbs < l.pp) continue;
      l.mbs = static_cast<int>(mbs);
      if (mbs_rule >= 0 && count_only) {
        out.set_aside[static_cast<size_t>(mbs_rule)] += static_cast<int64_t>(choices.size());
        continue;
      }
      for (const InnerChoice& c : choices) {
        std::tie(l.zero, l.sp, l.recompute, l.recompute_modules, l.dtype, l.moments, l.act_cache) =
            std::tie(c.zero, c.sp, c.recompute, c.modules, c.dtype, c.moments, c.cache);
        emit(l, mbs_rule, out);
      }
    }
  }

  // What selective recompute reruns, per candidate: the values --fix names, else Megatron-core's
  // default (the attention core) and, for MoE and MLA models, the output-discarding modules too
  // (layernorm, moe_act, mla_up_proj: memory back for little recompute). None otherwise.
  std::vector<std::optional<uint8_t>> module_sets(Recompute r) const {
    if (r != Recompute::kSelective) return {std::nullopt};
    if (const auto* fixed = o_.fixes.values("recompute_modules")) {
      std::vector<std::optional<uint8_t>> out;
      for (const std::string& v : *fixed) {
        if (v == "none") continue;
        auto bits = parse_recompute_modules(v);
        if (!bits) continue;
        out.push_back(*bits == kDefaultRecomputeModules ? std::nullopt
                                                        : std::optional<uint8_t>(*bits));
      }
      return out;
    }
    const auto& m = o_.model;
    if (m.num_experts == 0 && !m.mla) return {std::nullopt};
    uint8_t lean = kRecomputeCoreAttn | kRecomputeLayernorm;
    if (m.num_experts > 0) lean |= kRecomputeMoeAct;
    if (m.mla) lean |= kRecomputeMlaUpProj;
    return {std::nullopt, lean};
  }

  void emit(const Layout& l, int rule, SpacePart& out) const {
    if (rule < 0 && !runnable(l)) rule = kUnrunnable;
    if (rule >= 0) {
      ++out.set_aside[static_cast<size_t>(rule)];
      if (o_.probe && out.probe_rule < 0 && same_choice(l, *o_.probe)) out.probe_rule = rule;
      return;
    }
    auto r = resolve_layout(l, o_.model, o_.gpus);
    if (!r) {
      if (out.rejected++ == 0) out.first_rejection = r.status().message();
      return;
    }
    if (!o_.fixes.matches(*r)) return;
    // DualPipe's own rules (sim::dualpipe_fits) and ZeRO 0-2 (sim/builder.cc); other layouts of
    // it are not candidates.
    if (r->schedule == Schedule::kDualPipe &&
        (r->zero >= 3 || !sim::dualpipe_fits(r->pp, r->num_microbatches()).is_ok()))
      return;
    if (r->schedule == Schedule::kDualPipeV &&
        !sim::dualpipev_fits(r->pp, r->num_microbatches()).is_ok())
      return;
    out.candidates.push_back(std::move(r).value());
  }

  const SearchOptions o_;  // a copy: the walk outlives no caller's options
  // The fixes on the inner keys, looked up once (constructor).
  bool mbs_fixed_ = false, modules_fixed_ = false;
  bool zero_allowed_[4] = {}, sp_allowed_[2] = {}, recompute_allowed_[3] = {};
  std::vector<std::optional<uint8_t>> modules_[3];
  std::vector<DType> dtypes_;
  std::vector<MomentDtype> moments_;
  std::vector<ActCache> caches_;
  std::vector<InnerChoice> inner_choices_[2][2];  // [tp > 1][dp·cp == 1]
  std::map<int64_t, std::vector<int64_t>> divisors_;
  std::map<int, std::vector<PipelineChoice>> allowed_choices_;  // by pp
  std::vector<Part> parts_;
};

namespace {

// The canonical string of one fixed value, by parsing it as a one-key layout: the value as that
// layout holds it (sp=true is on, schedule=gpipe is afab).
Result<std::string> canonical_value(std::string_view key, std::string_view value) {
  if ((key == "pp_first" || key == "pp_last" || key == "recompute_modules") && value == "none")
    return std::string("none");
  SP_ASSIGN_OR_RETURN(Layout l, parse_layout(std::string(key) + "=" + std::string(value)));
  return layout_given(l, key).value_or(scaleplan::layout_value(l, key));
}

}  // namespace

std::string layout_value(const Layout& l, std::string_view key) {
  return scaleplan::layout_value(l, key);  // the key table's (core/layout_keys.h)
}

std::span<const std::string_view> layout_keys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> v;
    for (const LayoutKey& k : layout_key_table())
      if (k.name != "gbs") v.push_back(k.name);  // --gbs sets it
    return v;
  }();
  return keys;
}

Status Fixes::add(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) {
    return Status::invalid("--fix: '" + std::string(text) + "' is not KEY=V1|V2|...");
  }
  const std::string key(text.substr(0, eq));
  if (key == "gbs") return Status::invalid("--fix: gbs is set by --gbs, not by --fix");
  if (key == "place") {
    return Status::invalid(
        "--fix: place is chosen per layout by the planner, the faster of the placements that "
        "differ (docs/planner.md, \"Rank placement\"); simulate --layout takes it");
  }
  if (std::find(layout_keys().begin(), layout_keys().end(), key) == layout_keys().end()) {
    std::string known;
    for (std::string_view k : layout_keys()) known += (known.empty() ? "" : ", ") + std::string(k);
    return Status::invalid("--fix: unknown key '" + key + "' (known: " + known + ")");
  }
  if (has(key)) return Status::invalid("--fix: key '" + key + "' given twice");
  std::vector<std::string> values;
  std::string_view rest = text.substr(eq + 1);
  while (true) {
    const size_t bar = rest.find('|');
    std::string_view v = rest.substr(0, bar);
    if (v.empty())
      return Status::invalid("--fix: " + key + " has an empty value in '" + std::string(text) +
                             "'");
    auto c = canonical_value(key, v);
    if (!c) return Status::invalid("--fix: " + c.status().message());
    if (std::find(values.begin(), values.end(), *c) == values.end()) values.push_back(*c);
    if (bar == std::string_view::npos) break;
    rest.remove_prefix(bar + 1);
  }
  values_.emplace(key, std::move(values));
  return Status::ok();
}

bool Fixes::allows(std::string_view key, std::string_view value) const {
  auto it = values_.find(key);
  if (it == values_.end()) return true;
  return std::find(it->second.begin(), it->second.end(), value) != it->second.end();
}
bool Fixes::allows(std::string_view key, int64_t value) const {
  return !has(key) || allows(key, std::to_string(value));  // no string for an unfixed key
}
const std::vector<std::string>* Fixes::values(std::string_view key) const {
  auto it = values_.find(key);
  return it == values_.end() ? nullptr : &it->second;
}
bool Fixes::names(std::string_view key, std::string_view value) const {
  return has(key) && allows(key, value);
}
bool Fixes::names(std::string_view key, int64_t value) const {
  return names(key, std::to_string(value));
}

bool Fixes::matches(const Layout& layout) const {
  for (const auto& [key, vals] : values_) {
    if (key == "cp_comm" && layout.cp == 1) continue;  // no K/V to exchange
    if (!allows(key, scaleplan::layout_value(layout, key))) return false;
  }
  return true;
}

std::string Fixes::to_string() const {
  std::string s;
  for (const auto& [key, vals] : values_) {
    if (!s.empty()) s += ' ';
    s += key + '=';
    for (size_t i = 0; i < vals.size(); ++i) s += (i ? "|" : "") + vals[i];
  }
  return s;
}

int64_t pruned_total(const std::vector<PruneRule>& pruned) {
  int64_t n = 0;
  for (const auto& p : pruned) n += p.candidates;
  return n;
}
int64_t SearchSpace::pruned_total() const { return planner::pruned_total(pruned); }

std::vector<std::pair<int, int>> pinned_splits(int64_t layers, int pp) {
  std::vector<std::pair<int, int>> out;
  if (pp < 2 || layers % pp == 0 || layers < pp) return out;
  Layout base;
  base.pp = pp;
  base.vpp = 1;
  auto balanced = stage_layer_counts(base, layers);
  std::set<std::vector<int>> seen;
  if (balanced) seen.insert(*balanced);
  auto consider = [&](int first, int last) {
    Layout l = base;
    if (first > 0) l.pp_first = first;
    if (last > 0) l.pp_last = last;
    auto counts = stage_layer_counts(l, layers);
    if (counts && seen.insert(*counts).second) out.emplace_back(first, last);
  };
  // The ends carry the embedding and the LM head, so Megatron users make them lighter and give the
  // middle stages an even share: the heaviest end size e (e ≤ the middle share) with the rest
  // divisible by the stages left.
  auto lighter_ends = [&](int ends) -> int {
    const int64_t middle = pp - ends;
    for (int64_t e = layers / pp; e >= 1; --e) {
      const int64_t rest = layers - ends * e;
      if (middle > 0 && rest % middle == 0 && e <= rest / middle) return static_cast<int>(e);
    }
    return 0;
  };
  if (pp > 2) {
    if (int e = lighter_ends(2); e > 0) consider(e, e);
  }
  if (int e = lighter_ends(1); e > 0) {
    consider(0, e);
    consider(e, 0);
  }
  return out;
}

std::vector<std::pair<int, int>> two_chunk_end_splits(int64_t layers, int pp, bool v_shape) {
  std::vector<std::pair<int, int>> out;
  if (pp < 2 || (!v_shape && pp < 3)) return out;  // DualPipe at pp = 2: both ranks hold all
  const int64_t chunks = (v_shape ? 2 : 1) * int64_t{pp};
  const int64_t share = layers / chunks;
  for (int64_t e = 1; e < share; ++e) out.emplace_back(static_cast<int>(e), static_cast<int>(e));
  // The head, with the loss, is the heavier end: an end chunk with the head alone.
  for (int64_t e = 1; e <= share; ++e) out.emplace_back(static_cast<int>(e), 0);
  return out;
}

Result<SpaceWalk> SpaceWalk::make(const SearchOptions& o) {
  if (o.gpus <= 0)
    return Status::invalid("plan: --gpus must be positive (got " + std::to_string(o.gpus) + ")");
  if (o.gbs <= 0)
    return Status::invalid("plan: --gbs must be positive (got " + std::to_string(o.gbs) + ")");
  if (o.model.num_layers <= 0 || o.model.num_heads <= 0 || o.model.seq_len <= 0) {
    return Status::invalid("plan: the model facts (layers, heads, sequence length) are missing");
  }
  if (o.nvlink_domain_gpus <= 0)
    return Status::invalid("plan: GPUs per NVLink domain must be positive");
  // Bounded work (docs/reliability.md): the walk enumerates the divisors of the GPU count and the
  // batch; past these bounds (core/layout.h) it would run for hours or overflow.
  if (o.gpus > kMaxGpus)
    return Status::invalid("plan: --gpus " + std::to_string(o.gpus) + " is more than the " +
                           std::to_string(kMaxGpus) + " GPUs scaleplan models");
  if (o.gbs > kMaxGlobalBatch)
    return Status::invalid("plan: --gbs " + std::to_string(o.gbs) + " is more than the " +
                           std::to_string(kMaxGlobalBatch) + " sequences scaleplan models");
  if (o.model.seq_len > kMaxSeqLen)
    return Status::invalid("plan: --seq " + std::to_string(o.model.seq_len) + " is more than the " +
                           std::to_string(kMaxSeqLen) + " tokens scaleplan models");
  return SpaceWalk(std::make_unique<const Impl>(o));
}

Result<SearchSpace> enumerate_layouts(const SearchOptions& o) {
  SP_ASSIGN_OR_RETURN(SpaceWalk walk, SpaceWalk::make(o));
  std::vector<SpacePart> parts;
  parts.reserve(walk.parts());
  size_t total = 0;
  for (size_t i = 0; i < walk.parts(); ++i) {
    parts.push_back(walk.walk(i));
    total += parts.back().candidates.size();
  }
  SearchSpace s = walk.set_aside(parts);
  s.candidates.reserve(total);
  for (SpacePart& p : parts)
    std::move(p.candidates.begin(), p.candidates.end(), std::back_inserter(s.candidates));
  return s;
}

SpaceWalk::SpaceWalk(std::unique_ptr<const Impl> impl) : impl_(std::move(impl)) {}
SpaceWalk::SpaceWalk(SpaceWalk&&) noexcept = default;
SpaceWalk& SpaceWalk::operator=(SpaceWalk&&) noexcept = default;
SpaceWalk::~SpaceWalk() = default;

size_t SpaceWalk::parts() const { return impl_->parts().size(); }
SpacePart SpaceWalk::walk(size_t part) const { return impl_->walk(impl_->parts().at(part)); }
SearchSpace SpaceWalk::set_aside(const std::vector<SpacePart>& parts) const {
  return impl_->set_aside(parts);
}

}  // namespace scaleplan::planner
