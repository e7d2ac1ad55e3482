// Internal to models/memory*.cc: what the memory model reads from one decoder layer's operator
// list (its stored activations and backward working set), with a cache of per-list sums that
// lets the layouts of one search build each list once. Not part of the library's interface.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <tuple>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "models/operators.h"

namespace scaleplan::models::memory_layers {

// Stored activations and working set of one decoder layer for one micro-batch.
struct LayerActivations {
  Bytes saved;          // under the layout's recompute mode
  Bytes grad_working;   // gradients alive during the layer's backward (FFN intermediates)
  Bytes largest_block;  // the largest single activation tensor (fused FFN output)
};

// Half of what the forward "mlp.act" ops of a layer's list store, and its experts' "moe.expert.act"
// and "moe.shared.act" where the list runs them as separate SiLU and product kernels
// ("<prefix>.swiglu_unfused"): with an unfused SwiGLU (FrameworkMemory::unfused_glu), act(gate)
// on top of the gate and up the list counts.
Bytes unfused_glu_half(const std::vector<Op>& ops);

// What the framework's own implementation stores on top of the operator list (FrameworkMemory),
// per decoder layer and micro-batch; 0 under full recompute (only the layer input is kept).
// `glu_half`: unfused_glu_half of the layer's list.
Bytes framework_layer_extra(const ModelSpec& m, const Layout& l, const FrameworkMemory& fw,
                            Bytes glu_half, const TokenCounts& tok);

// torchtitan's op-level checkpointing (in the list) stores what apply_torchtitan_selective_ac
// says, and the layer's forward is rematerialised (all but the saved outputs) before its
// backward; the framework's own extras are not stored then.
bool op_level_sac(const ModelSpec& m, const Layout& l, int64_t layer, const FrameworkOps& fw_ops);

// What the memory model reads from one layer's operator list (layer_activations). A layout's
// activations also read the lists of its layer without the recompute modules beyond the attention
// core or the activation cache, and without recompute: lists of other operator-list keys, which
// the planner meets as layouts of their own. Summed once per list (ListSumsCache), each is built
// once for all of them.
struct ListSums {
  Bytes saved;        // total_saved
  Bytes glu_half;     // unfused_glu_half
  Bytes ffn_grad;     // gradients of the FFN's stored intermediates (layer_activations)
  Bytes largest_act;  // the largest output an ".act" op stores
};
ListSums list_sums(const std::vector<Op>& ops);

// ListSums per (operator-list key, layer, selective checkpointing at op level): the key and the
// layer decide the list (models/operators.h), the flag the FrameworkOps variant it was built
// with (the others are one estimator's). Thread-safe; errors are not kept.
class ListSumsCache {
 public:
  using Key = std::tuple<OperatorListKey, int64_t, bool>;
  std::optional<ListSums> find(const Key& k) const;
  void add(const Key& k, const ListSums& s);

 private:
  mutable std::mutex mu_;
  std::map<Key, ListSums> sums_;
};

// The stored bytes of framework_layer_operators(m, l, seq, layer, fw_ops): those of the first
// layer of `layer`'s ModelSpec::layer_kind (the kind decides the list, as sim::operator_lists and
// the program builder take it), from `cache` where given.
Result<Bytes> layer_list_saved(const ModelSpec& m, const Layout& l, int64_t seq, int64_t layer,
                               const FrameworkOps& fw_ops, ListSumsCache* cache);

// The layer's stored activations and backward working set under `l`, from the sums of its lists
// (kept in `cache` where given; nullptr: built each time).
Result<LayerActivations> layer_activations(const ModelSpec& m, const Layout& l, int64_t seq,
                                           int64_t layer, const FrameworkMemory& fw,
                                           const FrameworkOps& fw_ops, ListSumsCache* cache);

}  // namespace scaleplan::models::memory_layers
