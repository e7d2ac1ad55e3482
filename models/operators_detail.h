// Internal to models/operators*.cc: the constructors of list ops and the list operations the
// lists and the framework adjustments share. Not part of the library's interface.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "models/operators.h"
#include "models/tensors.h"

namespace scaleplan::models::detail {

constexpr int64_t kAct = 2;   // bytes per activation element: bf16
constexpr int64_t kFp8 = 1;   // an fp8 linear's quantized input (Builder::linear_input)
constexpr int64_t kFp32 = 4;  // log-sum-exp, norm statistics, router probabilities, logits

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Local (out, in, copies) of a 2-D weight on one rank: the TP (or, for experts, ETP) split of
// tensors.h, experts over ep. Same arithmetic as shard_numel, kept per dimension.
struct LocalWeight {
  int64_t out = 0, in = 0, count = 1;
};
LocalWeight local_weight(const TensorEntry& t, const ModelSpec& m, const Layout& l);

// "self_attn.q_proj.weight" -> "attn.q"; "mlp.experts.down_proj.weight" -> "moe.expert.down".
std::string op_name(std::string_view tensor);

Op make_op(std::string name, Pass pass, OpKind kind);
Op gemm(std::string name, Pass pass, int64_t m, int64_t n, int64_t k, int64_t batch, DType dt,
        Bytes saved = Bytes(0));
// A memory-bound kernel computing `kind` (core/kernel_shapes.h MemOp) over `bytes` read plus
// written.
Op memory_bound(MemOp kind, std::string name, Pass pass, int64_t bytes, Bytes saved = Bytes(0));
// `op` with its memory-bound kernel's implementation set to `path` (unchanged if not memory-bound).
Op on_path(Op op, MemPath path);
// The memory-bound kind of the model's norms and of its FFN activation.
MemOp norm_op(const ModelSpec& m);
MemOp act_op(const ModelSpec& m);
Op comm(std::string name, Pass pass, CollectiveOp kind, GroupKind group, int size, int64_t bytes,
        int steps = 1);

// Inserts `op` right after the first op named `anchor` in pass `pass` (or before it with
// `before`). An error naming the anchor and the pass when the list has no such op.
Status insert_at(std::vector<Op>& ops, std::string_view anchor, Pass pass, Op op, bool before);

// One MTP module of mtp_operators, before its ops are renamed "mtp." and laid out D times; without
// its decoder layer (layer_operators of the model's last layer) unless `with_layer`.
Result<std::vector<Op>> mtp_module_operators(const ModelSpec& m, const Layout& layout,
                                             int64_t seq_len, bool with_layer);

// Whether framework_layer_operators under `fw` is layer_operators adjusted op by op alone (TE's
// expert-GEMM launches, the fp8 recipe), as framework_head_operators adjusts the MTP modules'
// decoder layer: no adjustment of `fw` that reads or rewrites a layer's list as a whole is on.
// Megatron's eager kernels (`megatron_kernels`, add_megatron_layer_kernels) read the list but add
// ops that store nothing, so the stored bytes, all that framework_head_saved takes, still agree
// (test Memory.HeadSavedBytesAreThoseOfTheHeadList on GPT-OSS, which gets both of them).
bool layer_adjusted_op_by_op(const FrameworkOps& fw);

// total_saved(framework_head_operators(m, layout, seq_len, fw)), bit for bit. `mtp_layer_saved`:
// the stored bytes of the MTP modules' decoder layer where the caller has them (total_saved of
// framework_layer_operators of a layer of the kind of the model's last one, which equals the
// module's own where layer_adjusted_op_by_op(fw)); nullopt: that layer is built here.
Result<Bytes> framework_head_saved(const ModelSpec& m, const Layout& layout, int64_t seq_len,
                                   const FrameworkOps& fw, std::optional<Bytes> mtp_layer_saved);

}  // namespace scaleplan::models::detail
