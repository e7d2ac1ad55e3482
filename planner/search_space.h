// The planner's search space: every layout the planner considers for one job, in a fixed order.
//
// `enumerate_layouts` walks the whole space of DESIGN.md's layout string for a model, a GPU count
// and a global batch: every factorization of the GPUs into tp·cp·pp·dp, the expert grid (ep·etp
// dividing tp·cp·dp, ep dividing the experts) for MoE models, the pipeline schedules (AFAB, 1F1B,
// interleaved with each valid vpp, ZB-H1), uneven stage splits where the layers do not divide by
// pp (the balanced split and Megatron-style pinned first/last stages), micro-batch sizes dividing
// the per-replica batch, ZeRO 0-3, SP on/off and recompute none/selective/full. Every candidate
// satisfies every constraint of DESIGN.md (it is checked by core's resolve_layout), so the space
// holds no layout that a framework would reject; the interleaved schedule also needs at least pp
// micro-batches (Megatron-LM's schedule and the simulator's).
//
// A few policy rules keep the space to what practitioners would run; each one is counted, never
// silent, and each is lifted by naming the value in a --fix (or by an option):
//   - tp beyond one node (cross-node TP all-reduces on the critical path): `allow_cross_node_tp`;
//   - micro-batches above `max_microbatch_tokens` tokens (kernel efficiency has saturated long
//     before, and activation memory grows linearly);
//   - cp shards shorter than `min_cp_tokens` tokens (seq/cp): the K/V ring step can no longer hide
//     behind the attention of a shard (ring attention's compute grows with the shard squared, its
//     transfer with the shard);
//   - interleaved vpp above `max_vpp`, or a vpp whose chunks do not divide the layers evenly
//     (Megatron-LM requires layers % (pp·vpp) == 0 for the interleaved schedule);
//   - the dualpipe schedule and the fp8 dtype (not chosen unless asked for);
//   - layouts the export target cannot run as predicted, when there is one (`runnable`: its
//     schedules, ZeRO stages, recompute modes, stage splits).
// Values that are equivalent are not enumerated twice: at pp=1 every schedule is the same plain
// gradient accumulation (one candidate, 1f1b), ZeRO>0 with a data-parallel group of one is ZeRO-0,
// and SP needs tp>1.
//
// The order is deterministic: tp, cp, pp ascending (dp follows), then the expert grid, the
// pipeline schedule and split, mbs, zero, sp, recompute, dtype. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/layout.h"
#include "core/status.h"

namespace scaleplan::planner {

// Restrictions of layout keys to listed values: `--fix zero=0|1 --fix cp=1`. Keys are those of the
// layout string except gbs (which --gbs sets): tp, pp, dp, cp, ep, etp, vpp, schedule, sp, mbs,
// zero, recompute, dtype, pp_first, pp_last; values are written as in a layout string (pp_first
// and pp_last also take `none`, meaning the balanced split). Values are stored canonically
// (schedule=gpipe is afab, sp=true is on).
class Fixes {
 public:
  // Adds one "KEY=V1|V2|..." restriction. Errors name the key or the value: an unknown key, gbs,
  // a key given twice, an empty or malformed value.
  Status add(std::string_view text);

  bool empty() const { return values_.empty(); }
  bool has(std::string_view key) const { return values_.find(key) != values_.end(); }
  // True when `key` is not fixed or `value` (canonical form) is one of its values.
  bool allows(std::string_view key, std::string_view value) const;
  bool allows(std::string_view key, int64_t value) const;
  // True when `key` is fixed and `value` is listed explicitly: such values lift the policy rules.
  bool names(std::string_view key, std::string_view value) const;
  bool names(std::string_view key, int64_t value) const;
  // The values `key` is fixed to (canonical), or nullptr when it is not fixed.
  const std::vector<std::string>* values(std::string_view key) const;
  // Whether `layout` (resolved) satisfies every restriction.
  bool matches(const Layout& layout) const;
  // "zero=0|1 cp=1", keys sorted; "" when empty.
  std::string to_string() const;

 private:
  std::map<std::string, std::vector<std::string>, std::less<>> values_;
};

// The value of `key` in a resolved layout, in canonical string form ("" for unknown keys; pp_first
// and pp_last are "none" when unset).
std::string layout_value(const Layout& layout, std::string_view key);

// The layout keys a plan chooses and --fix restricts (every key but gbs), in DESIGN.md's order.
std::span<const std::string_view> layout_keys();

// A combination of layout values an export target refuses at startup (Megatron-core raises on EP
// with TP without SP; DeepSpeed's pipeline engine asserts ZeRO below 2): `refuses` says whether a
// layout is one, `text` what the target runs instead (for the rule's message); naming the
// layout's value of `lift_key` in --fix ranks it anyway.
struct RefusedCombination {
  std::string text;
  bool (*refuses)(const Layout&) = nullptr;
  std::string lift_key;
};

struct SearchOptions {
  LayoutConstraints model;  // layers, heads, KV heads, experts, sequence length
  int64_t gpus = 0;         // GPUs of the job
  int64_t gbs = 0;          // global batch in sequences
  // GPUs that reach each other over NVLink (8 in a DGX, 72 in a GB200 NVL72 rack): TP above it
  // would run its collectives over the network. Not the node (an NVL72 tray holds 4).
  int nvlink_domain_gpus = 8;
  Fixes fixes;  // user restrictions
  bool allow_cross_node_tp = false;
  int64_t max_microbatch_tokens = 65536;  // mbs·seq cap, lifted by --fix mbs=...
  int max_vpp = 8;                        // interleaved virtual stages cap, lifted by --fix vpp=...
  int64_t min_cp_tokens = 1024;           // shortest CP shard (seq/cp), lifted by --fix cp=...
  // What the export target can run as predicted (plan --emit F: planner::runnable_values): per
  // layout key, the values (canonical, as layout_value gives them) its framework accepts; keys
  // not listed take any value. Layouts with another value are set aside by a counted rule,
  // lifted by naming the value in --fix. `runnable_by` names the framework in the rule's text.
  std::vector<std::pair<std::string, std::vector<std::string>>> runnable;
  std::string runnable_by;
  // Combinations of values the target refuses at startup (planner::refused_combinations), set
  // aside by the same rule.
  std::vector<RefusedCombination> refused;
  // A resolved layout to look for among the layouts the policy rules set aside (plan --explain):
  // SearchSpace::probe_rule names the rule that did.
  std::optional<Layout> probe;
};

// One policy rule and the number of layouts of the space it removed.
struct PruneRule {
  std::string rule;
  int64_t candidates = 0;
};

struct SearchSpace {
  std::vector<Layout> candidates;  // resolved layouts (dp, vpp, sp, gbs set), deterministic order
  std::vector<PruneRule> pruned;   // rules that removed at least one layout, in a fixed order
  std::string probe_rule;          // the rule that set SearchOptions::probe aside; "" if none did
  int64_t pruned_total() const;
};

// The layouts the rules removed, summed.
int64_t pruned_total(const std::vector<PruneRule>& pruned);

// Enumerates the space. Errors (invalid input) when the options are inconsistent: gpus or gbs not
// positive, no model facts. An empty space is not an error here; the planner explains it.
Result<SearchSpace> enumerate_layouts(const SearchOptions& options);

// One part of the walk (SpaceWalk): its layouts in the walk's order, and what it set aside.
struct SpacePart {
  std::vector<Layout> candidates;
  std::vector<int64_t> set_aside;  // layouts per policy rule, in the rules' order
  int probe_rule = -1;             // the rule that set SearchOptions::probe aside in it, or -1
  int64_t rejected = 0;            // refused by resolve_layout (an enumeration bug)
  std::string first_rejection;
};

// The walk of enumerate_layouts cut into parts, one per parallel grid (tp, cp, pp, dp, the CP
// exchange, the expert grid), so that a search can walk them on several threads and evaluate each
// part's layouts as soon as they are listed (a large MoE space took seconds to list on one thread
// while the other cores waited: issue 45). Walking every part in order and joining them is
// enumerate_layouts. `walk` is thread-safe.
class SpaceWalk {
 public:
  // The checks of enumerate_layouts, and the parts listed.
  static Result<SpaceWalk> make(const SearchOptions& options);
  SpaceWalk(SpaceWalk&&) noexcept;
  SpaceWalk& operator=(SpaceWalk&&) noexcept;
  ~SpaceWalk();

  size_t parts() const;
  SpacePart walk(size_t part) const;
  // What `parts` (all of them, walked, in order) set aside, as SearchSpace gives it (its
  // candidates empty): each rule's layouts summed, the first part's probe rule and rejection.
  SearchSpace set_aside(const std::vector<SpacePart>& parts) const;

 private:
  class Impl;
  explicit SpaceWalk(std::unique_ptr<const Impl> impl);
  std::unique_ptr<const Impl> impl_;  // with its own copy of the options
};

// Megatron-style pinned splits for `pp` stages of `layers` layers when pp does not divide them:
// first and last stages lighter with the middle even, only the last lighter, only the first
// lighter. Each pair is (pp_first or 0 when unset, pp_last or 0 when unset); splits whose stage
// counts equal the balanced split (core's stage_layer_counts) or each other are left out.
std::vector<std::pair<int, int>> pinned_splits(int64_t layers, int pp);

// DualPipe's and the V schedules' lighter ends: a rank that runs a chunk with the embedding also
// runs one with the LM head and the loss (DualPipe: ranks 0 and pp-1 hold stages 0 and pp-1;
// DualPipeV, ZB-V: rank 0 holds the V's first and last chunk), so both ends get e layers,
// e = 1 .. share - 1 (share = layers / chunks, with pp chunks for DualPipe at pp > 2 and 2pp for a
// V), or the head's end none and the embedding's e = 1 .. share; the other chunks share the rest.
// As (pp_first, pp_last) pairs, both set.
std::vector<std::pair<int, int>> two_chunk_end_splits(int64_t layers, int pp, bool v_shape);

}  // namespace scaleplan::planner
