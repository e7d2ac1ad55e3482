// The memory model: bytes per GPU on each pipeline stage of a layout, by named term.
//
// Every term is a formula with a source (docs/memory-model.md has the table):
//  - model states (Rajbhandari et al. 2020, ZeRO; Megatron-LM docs/distrib_optimizer.md): bf16
//    weights 2 B/param; gradients 2 B/param, or 4 when the framework accumulates them in fp32;
//    fp32 master weights 4 and Adam m, v 8. ZeRO-1 shards the 12 optimizer bytes over the data
//    parallel group (dp·cp), ZeRO-2 also the gradients, ZeRO-3 also the weights. Parameters come
//    from the tensor table (models/tensors.h) sharded by TP/EP (shard_numel) and placed on stages:
//    the embedding on the first, the final norm and LM head on the last (a tied embedding is held
//    on both when pp > 1).
//  - activations: the bytes each forward op of the operator list (models/operators.h) saves for
//    the backward, flash attention (no s×s scores), summed over the stage's layers and multiplied
//    by the micro-batches the schedule keeps in flight on that stage; plus the last stage's fp32
//    softmax of the loss. Korthikanti et al. 2022's s·b·h·(34 + 5·a·s/h) is kept as a cited
//    cross-check (korthikanti_layer_bytes).
//  - transients: the working set on top of the stored activations: the loss's logits (bf16 and
//    fp32 copies), one layer's backward gradients, the SP all-gather buffer, pipeline p2p buffers,
//    ZeRO-3 gather buffers; and in the optimizer phase the framework's parameter-gather buffers.
//  - allocator: PyTorch's caching allocator reserves more than it allocates. The gap is modelled
//    as one extra copy of the largest transient block (a freed large block is split for smaller
//    tensors and cannot serve the next large request, which then takes a new segment).
//  - overhead outside PyTorch's allocator: CUDA context and NCCL communicator buffers.
// `fits` compares reserved + overhead with the GPU memory minus a margin.
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/framework.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"
#include "models/operators.h"

namespace scaleplan::models {

// What a training framework does that changes memory. Each field cites the code it describes.
struct FrameworkMemory {
  // Main gradients in fp32 (4 B/param) instead of bf16 (2). Megatron-LM forces it for bf16
  // (arguments.py: "bfloat16 requires gradient accumulation and all-reduce to be performed in
  // fp32"); nanotron's accumulate_grad_in_fp32 (FP32GradientAccumulator).
  bool fp32_grad_accum = true;
  // FSDP2's mixed precision (torchtitan: MixedPrecisionPolicy(param_dtype=bf16,
  // reduce_dtype=fp32)): the sharded parameters stay fp32 (4 B/param) and are the optimizer's
  // masters, so Adam adds only m and v (8 B) where Megatron keeps bf16 weights (2 B) and fp32
  // masters + m + v (12 B). The bf16 copies are gathered per layer (the ZeRO-3 working set).
  bool fp32_params = false;
  // A bf16 gradient copy besides the fp32 accumulator when dp·cp > 1: nanotron wraps the model in
  // torch DistributedDataParallel, whose Reducer holds flat bf16 bucket buffers for every
  // parameter (its comm hook then accumulates them into the fp32 buffer). Megatron: none.
  bool half_grad_buckets = false;
  // ZeRO-1 parameter all-gather through flat coalesced buffers (torch all_gather_coalesced):
  // 2 B/param output + the 2 B/param/N_d input shard during the optimizer phase (nanotron
  // ZeroDistributedOptimizer._all_gather_params). Megatron gathers into the param buffer in place.
  bool flat_param_gather = false;
  // The last stage casts the bf16 logits to fp32 before the loss (nanotron sharded_cross_entropy
  // dtype=float; Megatron's loss casts with .float() too).
  bool fp32_logits = true;
  // The fp32 tensor the loss's forward makes is the softmax it stores for the backward, so the
  // working set at the loss is only the bf16 logits on top of the stored activations: Megatron-core
  // VocabParallelCrossEntropy (calculate_logits_max's .float() copy, exp_ in place, divided in
  // place and saved as exp_logits; Megatron-LM d98e8a6 tensor_parallel/cross_entropy.py), and
  // Transformer Engine's parallel_cross_entropy (it saves the fp32 grad_input it writes). Off:
  // the fp32 working copy is counted besides the stored softmax (nanotron's _ShardedCrossEntropy
  // makes separate fp32 temporaries). Before 2026-11-27 every framework counted both.
  bool loss_softmax_in_place = false;
  // Persistent full-size (b·s·h, bf16, not divided by tp) gather buffers held when tp > 1 under
  // sequence parallelism, instead of a transient all-gather output. nanotron's MemoryBuffer
  // singleton (src/nanotron/parallel/utils.py) keeps, for the whole run, "allgather" (the
  // column-parallel input, _ColumnLinear*ReduceScatterMode / _ColumnLinearAsyncCommunication
  // with tp_recompute_allgather=True, re-gathered in the backward) and "allgather2" (the
  // gathered grad_output of _RowLinearAsyncCommunication.backward). 0 = Megatron (transient).
  int tp_gather_buffers = 0;
  // SwiGLU computed as act(gate) * up by separate ops (nanotron models/llama.py GLUActivation):
  // autograd also stores act(gate) for the product's backward: one more f-wide tensor per layer.
  // Megatron fuses it (bias_swiglu_impl saves its input only).
  bool unfused_glu = false;  // (torchtitan's FeedForward too: w2(F.silu(w1(x)) * w3(x)))
  // Multi-head attention (kv heads = heads): nanotron's CausalSelfAttention permutes the fused
  // qkv output into one contiguous [3, b, s, heads, d] tensor, copies K and V into a new
  // key_value_states tensor for the rotary embedding, and flash-attn saves q (a view of the
  // stack, so all three thirds stay alive) and k, v (views of the copy): the stack's K and V
  // thirds are stored on top of the Q, K, V the operator list counts.
  bool mha_qkv_stack_saved = false;
  // Under dtype=fp8 the decoder linears keep fp8 copies of their weights through the step, 2 B per
  // parameter: Transformer Engine quantizes each weight on a step's first micro-batch
  // (is_first_microbatch, which Megatron-core passes) into a cached workspace with the row-wise
  // data the forward GEMM reads and the column-wise (transposed) data the input-gradient GEMM
  // reads, 1 B each on Hopper, and reuses it for the other micro-batches. Megatron-core (not
  // with ZeRO-3, whose weights are gathered per layer); torchao (torchtitan) casts the weights at
  // every GEMM instead.
  bool fp8_weight_copies = false;
  // With fp8_weight_copies, the fp8 copies are the weights: Megatron-core's --fp8-param-gather
  // (fp8_param_gather=True in NeMo's bf16_with_fp8_mixed and Megatron-Bridge's current-scaling
  // and MXFP8 recipes) keeps each decoder linear's weight as a Transformer Engine fp8 tensor
  // (row- and column-wise data, the 2 B/param of fp8_weight_copies) with no bf16 copy; the fp32
  // masters stay in the optimizer. A run option, not a framework constant: set from
  // sim::RecipeOptions::fp8_param_gather.
  bool fp8_primary_weights = false;
  // The loss is PyTorch's F.cross_entropy over the fp32 logits without TP (torchtitan's
  // cross_entropy_loss): its backward holds nll_loss_backward's zero-filled fp32 gradient and
  // _log_softmax_backward_data's fp32 input gradient beside the stored log-softmax, 8 B per logit
  // of working set where the forward's is the bf16 logits and their fp32 copy (6 B).
  bool torch_cross_entropy_backward = false;
};
// The memory conventions of framework `id` (core/framework.h; sim::Framework holds them with the
// framework's other conventions).
FrameworkMemory framework_memory(FrameworkId id);

// What decoder layer `layer` stores per micro-batch under the layout's recompute mode: the saved
// bytes of its framework-adjusted operator list `ops` (framework_layer_operators with `fw_ops`)
// and what the framework's own implementation stores on top (`fw`; none under full recompute or
// torchtitan's op-level checkpointing). One source for the memory model's activations and the
// program builder's activation allocations (which the runtime executes).
Bytes layer_saved_bytes(const ModelSpec& m, const Layout& l, int64_t seq_len, int64_t layer,
                        const std::vector<Op>& ops, const FrameworkMemory& fw,
                        const FrameworkOps& fw_ops);

struct MemoryOptions {
  FrameworkMemory framework;
  // The framework's changes to the operator list whose saved bytes the activations sum
  // (models/operators.h; sim::Framework::ops).
  FrameworkOps ops;
  Bytes gpu_memory;  // device memory (hw::Cluster gpu.memory); 0 = unknown, `fits` then false
  Bytes margin;      // kept free on purpose (default 0: the overheads below are modelled)
  // CUDA context of one process: ~0.5 GiB on Hopper with lazy module loading (CUDA 12
  // CUDA_MODULE_LOADING=LAZY); outside PyTorch's allocator.
  Bytes cuda_context = 512_MiB;
  // NCCL buffers per communicator whose group has > 1 rank: NCCL_BUFFSIZE (4 MiB) × 2 ring
  // neighbours × up to 16 channels = 128 MiB (NCCL env docs; channels per NVLink ring on H100).
  Bytes nccl_per_communicator = 128_MiB;
  // Layers per pipeline chunk in chunk order (size pp·vpp), when the framework splits the layers
  // its own way (nanotron balances compute costs); default: stage_layer_counts(layout).
  std::optional<std::vector<int>> chunk_layers;
};

// One pipeline stage (one GPU of it: first TP rank; the TP ranks are symmetric up to rounding).
struct StageMemory {
  int stage = 0;
  int layers = 0;           // decoder layers on this stage (all its virtual chunks)
  int64_t params = 0;       // parameters held by this GPU (TP/EP shard, before ZeRO)
  double in_flight = 0;     // micro-batches of activations held at the peak (stage-sized units)
  Bytes weights;            // bf16 weights (ZeRO-3: the shard)
  Bytes gradients;          // main gradients (+ framework's bf16 buckets)
  Bytes optimizer;          // fp32 master + Adam m, v (sharded from ZeRO-1)
  Bytes fp8_weight_copies;  // dtype=fp8: the fp8 weights and transposes kept through the step
  // Under torch.autocast over fp32 parameters (models::runs_autocast): the bf16 copies of the
  // cast weights, alive from their forward cast to their backward (autocast_memory_terms).
  Bytes autocast_weight_cache;
  Bytes activations;  // stored activations of the micro-batches in flight (+ loss softmax)
  Bytes activations_per_microbatch;  // one micro-batch of the whole stage
  // Buffers and transients (the working set at the forward/backward peak).
  Bytes logits_transient;     // last stage: bf16 logits + their fp32 copy during the loss
  Bytes backward_transient;   // one layer's backward gradients (and its recomputed forward)
  Bytes comm_buffers;         // SP all-gather, pipeline p2p, ZeRO-3 gathers, ZeRO-2/3 buckets
  Bytes buffers;              // the sum of the three above
  Bytes optimizer_transient;  // optimizer phase: the framework's parameter-gather buffers
  Bytes step_peak;            // allocated peak of the optimizer phase (model states + transient)
  Bytes fwd_bwd_peak;         // allocated peak of forward/backward
  Bytes total;                // allocated peak: max of the two phases
  Bytes fragmentation;        // caching-allocator gap: the largest transient block, once more
  Bytes reserved;             // total + fragmentation
};

struct MemoryResult {
  std::vector<StageMemory> stages;
  int peak_stage = 0;    // the stage with the largest reserved estimate
  Bytes peak_allocated;  // max over stages of `total`
  Bytes peak_reserved;   // max over stages of `reserved`
  Bytes overhead;        // CUDA context + NCCL communicators (outside the allocator)
  Bytes gpu_memory;
  Bytes margin;       // options.margin
  Bytes headroom;     // gpu_memory − margin − overhead − peak_reserved (may be negative)
  bool fits = false;  // headroom >= 0 (false when gpu_memory is unknown)
};

// The memory of every pipeline stage of `layout` (resolved) at sequence length `seq_len`.
Result<MemoryResult> estimate_memory(const ModelSpec& m, const Layout& layout, int64_t seq_len,
                                     const MemoryOptions& options);

// estimate_memory for many layouts of one job (model, sequence length, options), as the planner
// calls it: the tensor table is built once, its TP/EP shard sums are kept per (tp, ep, etp), and
// the operator list's activation sums per (tp, cp, ep, etp, sp, mbs, recompute, dtype), so that a
// call costs a pass over the layers and the stages. `estimate(l)` equals
// `estimate_memory(model, l, seq_len, options)` bit for bit (tests/models/memory_test.cc).
// Thread-safe: concurrent calls share the caches under a mutex. Not copyable.
class MemoryEstimator {
 public:
  MemoryEstimator(ModelSpec model, int64_t seq_len, MemoryOptions options);
  ~MemoryEstimator();
  MemoryEstimator(const MemoryEstimator&) = delete;
  MemoryEstimator& operator=(const MemoryEstimator&) = delete;

  Result<MemoryResult> estimate(const Layout& layout) const;

  const ModelSpec& model() const { return model_; }
  int64_t seq_len() const { return seq_len_; }
  const MemoryOptions& options() const { return options_; }

 private:
  struct Cache;
  ModelSpec model_;
  int64_t seq_len_;
  MemoryOptions options_;
  std::unique_ptr<Cache> cache_;
};

// Micro-batches of activations stage `stage` holds at its peak, in units of the stage's layers:
// AFAB m; 1F1B min(p − s, m); interleaved Megatron's warmup (p − s − 1)·2 + (v − 1)·p, plus one,
// chunk passes, divided by v; ZB-H1 min(p, m), each stage's deferred weight passes keeping their
// activations (the peak over stages is 1F1B's, Qi et al. 2023); DualPipe p + 1 (DeepSeek-V3
// §3.2.1); DualPipeV 2p + 1 chunk passes of half the stage each.
double microbatches_in_flight(const Layout& layout, int stage);

// nanotron's pipeline split (src/nanotron/trainer.py _init_model): blocks [embedding, L decoder
// layers, final norm, LM head] with costs 0, 4·a·d·h + 3·f·h each, 0, V·h; block i goes to the
// current rank, which advances once the cumulative cost exceeds rank·total/pp. Layers per stage.
// The validation applies it to nanotron's records (validate/validation.h), whose layout strings do
// not spell it out.
std::vector<int> nanotron_chunk_layers(const ModelSpec& m, int pp);

// Korthikanti et al. 2022, Eq. 1-2 and Table 2: activation bytes of one transformer layer without
// flash attention, 16-bit, dropout included: s·b·h·(34 + 5·a·s/h), both terms / t with TP+SP;
// selective recompute drops the 5·a·s/h term; full recompute keeps 2·s·b·h (/ t with SP).
Bytes korthikanti_layer_bytes(int64_t s, int64_t b, int64_t h, int64_t a, int t, bool sp,
                              Recompute r);

}  // namespace scaleplan::models
