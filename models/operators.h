// The operator list: what one rank computes and communicates for one micro-batch.
//
// For one decoder layer (dense or MoE; MHA, GQA or MLA) under a resolved layout, the list holds,
// in execution order, every GEMM with its (m, n, k) after TP/SP/CP/EP sharding, the fused
// attention kernel, the memory-bound element-wise ops (norms, RoPE, activation, residual adds)
// with the bytes they move, and the communication points the model structure dictates (TP
// all-reduce, or SP all-gather / reduce-scatter around attention and MLP; CP K/V ring passes; EP
// all-to-all dispatch and combine), with their byte sizes and group. The backward is split into
// input-gradient ("….dgrad") and weight-gradient ("….wgrad") GEMMs so that zero-bubble schedules
// can move the latter; the recompute mode adds the forward ops that rerun before the backward.
// The embedding, the LM head with its vocab-parallel fp32 cross entropy, and the optimizer step
// have their own lists. This is the single source of shapes: the simulator's program builder only
// places these ops on streams, the runtime executes them, and the memory model sums what each
// forward op saves for the backward (`Op::saved`).
//
// GEMM weights come from the tensor table (models/tensors.h): one GEMM per 2-D weight of the layer,
// its local (out, in) after the TP/ETP split, except that the projections every supported framework
// concatenates run as one GEMM: Q, K and V ("attn.qkv": Megatron-LM query_key_value / linear_qkv,
// nanotron qkv_proj; not MLA, whose down and up projections chain) and SwiGLU's gate and up
// ("mlp.fc1", "moe.expert.fc1", "moe.shared.fc1": Megatron-LM linear_fc1 with
// gated_linear_unit, nanotron gate_up_proj). Conventions:
//  - tokens: a micro-batch of b sequences of s tokens; under CP a rank holds s/cp of each sequence
//    (zig-zag balanced, so its causal attention work is the average); under SP the norms, residual
//    adds and the embedding/LM-head boundaries hold s/(cp·tp) tokens, the GEMMs s/cp after the
//    all-gather (Korthikanti et al. 2022 §4.2.2).
//  - GEMM: m = tokens, n = local output width, k = local input width. dgrad is (m, k_in, n_out),
//    wgrad is (n_out, k_in, m): both cost the forward's FLOPs (Narayanan et al. 2021 §5.1).
//  - attention: flash attention (Dao et al. 2022): no s×s tensor; the backward recomputes scores.
//  - comm bytes: the full per-rank buffer of the collective (all-reduce: the buffer; all-gather:
//    the gathered output; reduce-scatter: the unreduced input; all-to-all: what the rank sends;
//    send/recv: one message, `steps` times).
//
// Everything here is a pure function of its inputs and thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>
#include <vector>

#include "core/comm.h"
#include "core/framework.h"
#include "core/kernel_shapes.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"
#include "models/ub_presets.h"

namespace scaleplan::models {

enum class Pass : uint8_t {
  kForward,
  kBackwardInput,   // activation gradients (dgrad), the critical path of the backward
  kBackwardWeight,  // weight gradients (wgrad); zero-bubble schedules defer these
  kRecompute,       // forward ops rerun before the backward (selective / full recompute)
  kOptimizer,       // the optimizer step over the local parameter shard
};
std::string_view to_string(Pass p);

// A communication point: a collective (core/comm.h; kSendRecv for CP's K/V ring passes) on a
// parallel group (kDpCp for the data-parallel gradient group, which spans dp·cp).
struct CommShape {
  CollectiveOp kind = CollectiveOp::kAllReduce;
  GroupKind group = GroupKind::kTp;
  int group_size = 1;
  Bytes bytes;    // per-rank buffer (see the header comment)
  int steps = 1;  // repetitions: ring passes of CP (cp − 1)
  // An EP dispatch or combine through DeepEP (MoeDispatcher::kDeepEp): each token's top_k copies
  // cross the network once per destination node (deepep_network_share); 0: every copy crosses.
  int dedup_top_k = 0;
  // Group-limited routing (MoeSpec::n_group, topk_group), which limits the nodes a token reaches
  // where the groups are the EP group's nodes; 0: none.
  int route_groups = 0, route_group_topk = 0;
  // Runs beside the next op of the list, which it is pipelined with; the op after that waits for
  // both (the CP ring beside the attention core; apply_tp_comm_overlap). Off: on the critical path.
  bool overlap_next = false;
  // With overlap_next: the GEMM after it runs as this many kernels of 1/partner_chunks of its
  // rows, one after another (Transformer Engine splits it to pipeline the collective with it).
  int partner_chunks = 1;
  // Takes no SMs from compute beside it, so the engine does not slow compute while it transfers
  // (sim::Op::spares_compute): Transformer Engine's userbuffers ring exchange (the copy engine)
  // and pipeline (on the SMs its GEMM leaves it, GemmShape::sm_margin); apply_tp_comm_overlap.
  // Off: a kernel that shares the SMs with compute (NCCL's; userbuffers' bulk), which slows it by
  // s_overlap.
  bool spares_compute = false;
};

// DeepEP's network traffic per rank as a share of what it dispatches (its tokens' top_k copies),
// over an EP group of `nodes` nodes: a token whose experts are spread evenly reaches
// m·(1 − (1 − 1/m)^top_k) distinct nodes of the m it may use (all, or node-limited routing's
// group_topk where the route_groups are the nodes), (nodes − 1)/nodes of them remote, and crosses
// the network once to each: that over top_k. One node: 0.
double deepep_network_share(int nodes, int top_k, int route_groups, int route_group_topk);

enum class OpKind : uint8_t { kGemm, kAttentionFwd, kAttentionBwd, kMemoryBound, kComm };
std::string_view to_string(OpKind k);

struct Op {
  std::string
      name;  // "attn.qkv", "attn.qkv.dgrad", "mlp.down.wgrad", "attn.core", "tp.ag.attn" ...
  OpKind kind = OpKind::kGemm;
  Pass pass = Pass::kForward;
  std::variant<GemmShape, AttentionShape, MemoryBoundShape, CommShape> shape;
  Flops flops;  // FLOPs this op executes (0 for communication)
  Bytes saved;  // forward ops: bytes of activations it keeps for the backward under the layout's
                // recompute mode (each stored tensor is counted on exactly one op)
  // Runs in every micro-batch but a step's first (autograd's AccumulateGrad: the first
  // micro-batch's gradient becomes param.grad without a kernel; autocast_weight_ops).
  bool skips_first_microbatch = false;

  const GemmShape* gemm() const { return std::get_if<GemmShape>(&shape); }
  const AttentionShape* attention() const { return std::get_if<AttentionShape>(&shape); }
  const CommShape* comm() const { return std::get_if<CommShape>(&shape); }
};

// Ops of decoder layer `layer` (0-based: decides dense vs MoE) for one micro-batch on one rank:
// forward, then the recompute ops of the layout's mode, then the backward (dgrad and wgrad
// interleaved in reverse layer order). `layout` must be resolved (resolve_layout). Errors name
// the dimension that the layout does not divide.
Result<std::vector<Op>> layer_operators(const ModelSpec& m, const Layout& layout, int64_t seq_len,
                                        int64_t layer);

// First stage: the (vocab-parallel) embedding lookup, its TP reduction, and its backward.
Result<std::vector<Op>> embedding_operators(const ModelSpec& m, const Layout& layout,
                                            int64_t seq_len);

// Last stage: final norm, LM head GEMM (forward, dgrad, wgrad) and the vocab-parallel cross
// entropy over fp32 logits (Megatron-LM's vocab_parallel_cross_entropy: max and sum-exp
// all-reduced over TP), and their backward.
Result<std::vector<Op>> head_operators(const ModelSpec& m, const Layout& layout, int64_t seq_len);

// DeepSeek's multi-token-prediction modules (m.mtp_layers; none when 0), run on the last stage
// after the main model (Megatron-core's MultiTokenPredictionBlock, DeepSeek-V3 report §2.2): per
// module the shifted tokens' embedding lookup (the shared table), RMSNorm of it and of the hidden
// states (enorm, hnorm), eh_proj [h, 2h] on their concatenation, one decoder layer of the main
// model's last layer's kind, and the shared output head with its loss. Names start "mtp.";
// forward ops first, then the backward in reverse module order.
Result<std::vector<Op>> mtp_operators(const ModelSpec& m, const Layout& layout, int64_t seq_len);

// Appends `then` to `first` as one pass list: the forward ops of `first` then those of `then`,
// followed by the other ops (recompute, backward) of `then` and then those of `first`.
void append_in_pass_order(std::vector<Op>& first, std::vector<Op> then);

// The optimizer step over `local_params` parameters, as the memory-bound passes a mixed-precision
// Adam step makes (Megatron-LM MixedPrecisionOptimizer.step and DistributedDataParallel; nanotron
// makes the same passes): the gradient norm reads the fp32 gradients (4 B/param; clip_grad_norm
// multi_tensor_l2norm), fused Adam reads gradient, master weight, m, v and writes master, m, v
// (28 B), the bf16 weights are refreshed from the masters (_copy_main_params_to_model_params:
// read 4, write 2), and the fp32 gradient buffer is zeroed for the next iteration
// (zero_grad_buffer: write 4). 42 B/param in all. `fp16_loss_scale`: fp16 training with a
// dynamic loss scale first unscales the fp32 gradients and checks them for inf/NaN
// (Megatron-LM _unscale_main_grads_and_check_for_nan:
// torch._amp_foreach_non_finite_check_and_unscale_ reads and writes each: 8 B/param, 50 in all).
// `main_grad_bytes` 2: the main gradients are kept and reduced in fp16 (Megatron-LM without
// --accumulate-allreduce-grads-in-fp32, the default for --fp16): the step first makes the fp32
// copy the optimizer works on (_copy_model_grads_to_main_grads: main_grad.float(), read 2,
// write 4), and zeroing the buffer writes 2 B: 54 B/param with the loss scale.
// `fp32_params`: the parameters themselves are the fp32 masters (FrameworkMemory::fp32_params,
// torchtitan: FSDP2's sharded fp32 parameters, or fp32 parameters under autocast): Adam updates
// them in place, there is no bf16 copy to refresh (FSDP2's gathers and autocast cast at use), and
// zero_grad sets the gradients to None (torch.optim.Optimizer.zero_grad's set_to_none=True, which
// torchtitan's OptimizersContainer.zero_grad calls: components/optimizer.py:97-99 at v0.2.2)
// instead of filling them: the gradient norm and Adam only, 32 B per parameter.
// `moments` bf16 (Layout::moments; Megatron-core's precision-aware optimizer, DeepSeek-V3): Adam
// reads and writes m and v in 2 B each, 20 B instead of 28 (the fp32 gradient and master as
// before; Megatron-core's FusedAdam with master_weights keeps the update's math in fp32).
std::vector<Op> optimizer_operators(int64_t local_params, bool fp16_loss_scale = false,
                                    int main_grad_bytes = 4, bool fp32_params = false,
                                    MomentDtype moments = MomentDtype::kFp32);

// The elementwise kernel that adds one micro-batch's weight gradients of `params` local
// parameters into the gradient-accumulation buffer, `bytes_per_param` moved per parameter
// ("grad_accum", Pass::kBackwardWeight): where the weight-gradient GEMMs do not accumulate
// into that buffer themselves.
Op grad_accumulation(int64_t params, int64_t bytes_per_param);

// torch.autocast over fp32 parameters (FrameworkOps::autocast_without_fsdp on a layout that runs
// it: runs_autocast). Each matmul casts its fp32 weight to bf16 in every micro-batch's forward
// (autocast's weight cache lives only inside one `with torch.autocast` region, which torchtitan
// opens around each micro-batch's forward and loss), the cast's backward (ToCopyBackward0) casts
// the bf16 weight gradient back to fp32, and autograd's AccumulateGrad adds it into the fp32
// param.grad from the second micro-batch on. Ops for a block of `cast_params` weights that its
// matmuls read through the cast and `params` parameters in all (norm weights and the embedding
// are not cast: autocast runs rms_norm and embedding in fp32), in pass order: "autocast.cast"
// (forward, read 4 write 2 B), "autocast.cast.bwd" (Pass::kBackwardWeight, read 2 write 4 B),
// "autocast.accumulate_grad" (read 4 + 4, write 4 B; Op::skips_first_microbatch).
std::vector<Op> autocast_weight_ops(int64_t cast_params, int64_t params);

// The fp32 residual stream under autocast, per decoder layer `layer` and micro-batch: the
// embedding runs in fp32 and fp32 + bf16 residual adds promote, so the stream between the blocks
// is fp32. Each RMSNorm reads and writes fp32 (autocast runs rms_norm in fp32); every linear that
// reads a norm's output casts it to bf16 itself (autocast caches only leaf weights), so the
// attention norm's output is cast once per projection (wq, wk, wv: 3; MLA's 2) and the FFN
// norm's once per input linear (w1, w3: 2; an ungated FFN or a MoE router: 1); the residual adds
// read fp32 + bf16 and write fp32. Backward: each cast's gradient back to fp32, the fp32 sums of
// the projections' input gradients and of the residual branches, the fp32 norm backward, and the
// residual gradient cast to bf16 for each block's output. Bytes beyond the list's bf16 stream
// ("autocast.stream_*": kCast, kAdd, kRmsNorm/kLayerNorm ops; forward first, then backward).
// `layer` -1: the final norm and the LM head's cast of its output.
// Sources and the H200 trace's kernel for each: docs/simulator.md.
std::vector<Op> autocast_stream_ops(const ModelSpec& m, const Layout& layout, int64_t seq_len,
                                    int64_t layer);
// How many linears read the attention norm's and the FFN norm's output (autocast_stream_ops).
std::pair<int, int> autocast_norm_readers(const ModelSpec& m, int64_t layer);

// The embedding's backward under autocast: the lookup runs in fp32 (autocast casts nothing for
// it), and its dense backward zero-fills an fp32 gradient of the whole table of `params`
// before adding the rows into it ("embed.grad_fill", 4 B/param), then AccumulateGrad as above.
std::vector<Op> autocast_embedding_ops(int64_t params);

// torchtitan's embedding backward in eager PyTorch: embedding_dense_backward's index sort and
// segment sums ("embed.lookup.wgrad" on MemPath::kSegmentSum), over an fp32 gradient under
// autocast (`fp32_gradient`: 16 B per token and hidden element). Applied to the embedding list
// (embedding_operators) when FrameworkOps::torchtitan_kernels.
void apply_torchtitan_embedding_kernels(std::vector<Op>& ops, const ModelSpec& m,
                                        const Layout& layout, int64_t seq_len, bool fp32_gradient);

// The parameters (this rank's shard) that autocast casts to bf16: the matrices of the tensor table
// (linear, expert and LM head weights; a tied LM head casts the embedding's), not the norms'
// vectors or the embedding lookup, which autocast runs in fp32 (rms_norm is on its fp32 list,
// embedding on none; the H200 trace's _fused_rms_norm and embedding kernels read fp32).
struct AutocastParams {
  std::vector<int64_t> layer;  // per decoder layer
  int64_t head = 0;            // the LM head
  int64_t total() const;
};
AutocastParams autocast_cast_params(const ModelSpec& m, const Layout& layout);

// Kernels nanotron runs per micro-batch beyond the lists above (sources in operators.cc), added in
// place to a list from layer_operators / head_operators. Layer: the layout copies of q/k/v
// around its flash rotary and of the attention output before o_proj, the unfused split-SiLU-mul
// of its GLUActivation (its FP32GradientAccumulator's adds are grad_accumulation kernels,
// sim::FrameworkTiming::grad_accum_bytes). Head: the remaining fp32 passes of
// _ShardedCrossEntropy over the logits.
// Each extra kernel goes next to the list op it belongs with; a list without that op is an error
// naming it (insert_at in operators_detail.h).
Status add_nanotron_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                                  int64_t seq_len);
Status add_nanotron_head_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                                 int64_t seq_len);

// Kernels torchtitan's Llama model runs in eager mode (no torch.compile) per micro-batch beyond
// the fused ideal of the lists above (sources in operators.cc): RoPE through complex64 (upcast,
// complex multiply, downcast, for q and k), repeat_kv's copies of K and V to every query head
// (GQA), SwiGLU's separate SiLU and product, and with `composite_rmsnorm` (PyTorch <= 2.8, under
// torchtitan's 2024-2025 releases; 2.9 runs one fused kernel) nn.RMSNorm as PyTorch's composite
// rms_norm (eight kernels with fp32 intermediates). Head: the final norm's composite kernels, if
// any. Errors as add_nanotron_layer_kernels.
Status add_torchtitan_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                                    int64_t seq_len, bool composite_rmsnorm);
Status add_torchtitan_head_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                                   int64_t seq_len, bool composite_rmsnorm);

// Under dtype=fp8, what torchao's float8 linears store (torchtitan's `converters = ["float8"]`):
// matmul_with_hp_or_float8_args.forward saves its high-precision (bf16) input and casts it again
// in the backward, where the list's decoder linears keep Transformer Engine's fp8 copy
// (Builder::linear_input). Sets each forward op's `saved` to the bf16 list's; no-op otherwise.
Status save_high_precision_linear_inputs(std::vector<Op>& ops, const ModelSpec& m,
                                         const Layout& layout, int64_t seq_len, int64_t layer);

// torchtitan's selective activation checkpointing ("op" policy, _op_sac_save_list in its
// parallelize.py) in place of the list's selective recompute, on a dense layer's list under
// `recompute=selective` (no-op otherwise, and on MoE and MLA layers, which keep the list's):
// the block input, the outputs of every second matmul (wq, wv, w1, w2 of wq, wk, wv, wo, w1,
// w3, w2) and SDPA's output are saved; before the backward everything else of the forward
// reruns (wk, wo and w3, the memory-bound ops, TP all-gathers), not the attention core.
void apply_torchtitan_selective_ac(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                                   int64_t seq_len, int64_t layer);

// Transformer Engine's tensor-parallel communication overlap (userbuffers; Megatron-core
// --tp-comm-overlap, NeMo's and Megatron-Bridge's tp_comm_overlap), applied in place to a layer's
// list under SP: each all-gather and reduce-scatter of the attention and MLP blocks is pipelined
// with one GEMM, as TE's default overlap configuration pairs them (transformer_engine/pytorch/
// module/base.py initialize_ub: ring-exchange all-gathers with qkv_fprop, fc1_fprop, proj_dgrad and
// fc2_dgrad; pipelined reduce-scatters with proj_fprop and fc2_fprop; bulk overlaps in the
// column-parallel linears' backward, the input's re-gather with qkv_dgrad / fc1_dgrad and the
// input gradient's reduce-scatter with qkv_wgrad / fc1_wgrad). Each collective moves to just
// before its GEMM and is marked CommShape::overlap_next; the GEMM runs in splits
// (CommShape::partner_chunks) and loses what its collective takes from it
// (CommShape::spares_compute, GemmShape::sm_margin), as `preset` configures that GEMM
// (models/ub_presets.h; TE's defaults without a recipe's preset):
//   ring exchange  tp chunks (tp/2 with `aggregate`); the copy engine moves them, so the
//                  collective spares compute; the GEMM loses num_sm SMs with set_sm_margin. A
//                  ring-exchange reduce-scatter ends with TE's reduction of the tp partial
//                  outputs on the main stream ("<gemm>.ub_reduce", a memory-bound kAdd).
//   pipeline       num_splits chunks; with set_sm_margin the GEMM loses num_sm SMs and the
//                  collective spares compute, without it the two share the SMs (s_overlap).
//   bulk           the GEMM whole, the same margin rule.
// No-op without TP > 1 and SP, for MLA attention, and for MoE blocks (TE's userbuffers cover its
// own linears only).
void apply_tp_comm_overlap(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                           const UbPreset& preset = te_default_ub_preset());
// Transformer Engine's quantization recipe for the fp8 linears of dtype=fp8: Megatron-core's
// --fp8-recipe (transformer_config.py `fp8_recipe`, default "delayed"; Megatron-LM d98e8a6
// megatron/core/fp8_utils.py builds TE's DelayedScaling, Float8CurrentScaling or MXFP8BlockScaling
// from it). What each runs on a GEMM operand of `e` bf16 elements (TE d0067d0,
// pytorch/csrc/quantizer.cpp; docs/simulator.md, "fp8 recipes"):
//   kDelayed     one cast-transpose, scale from the amax history: 2e read, e + e written
//                (kFp8CastTranspose); the cast alone where the GPU's fp8 GEMMs take any layout
//                (kFp8Cast, 3e)
//   kTensorwise  per-tensor current scaling: an amax pass (kAmax, 2e read) before the same cast
//   kMxfp8       MXFP8: one pass writing the row-wise and column-wise e4m3 copies and an E8M0
//                scale per 32 elements of each (kMxfp8Quantize, 2e + 2e + e/16); Blackwell only
//   kNvfp4       NVFP4 (TE NVFP4BlockScaling, Megatron-core --fp4-format e2m1 --fp4-recipe
//                nvfp4, megatron/core/fp4_utils.py:219-245): the fp8 linears' fprop, dgrad and
//                wgrad GEMMs run in e2m1 with an E4M3 scale per 16 (DType::kFp4); each operand an
//                amax pass (kAmax, 2e; with the random Hadamard transform's columnwise amax,
//                nvte_hadamard_transform_amax) and one quantize pass writing both usages
//                (quantizer.cpp:2508-2733): 2e read, two e2m1 copies and their scales written,
//                2e + e + e/8, carried by the kMxfp8Quantize kind (the runtime has no NVFP4
//                kernel: it runs MXFP8's one-pass quantize over the same bytes); Blackwell only
enum class Fp8Recipe : uint8_t { kDelayed, kTensorwise, kMxfp8, kNvfp4 };
std::string_view to_string(Fp8Recipe r);  // "delayed", "tensorwise", "mxfp8", "nvfp4"
// An error names `fp8_recipe`, the value and the accepted names.
Result<Fp8Recipe> parse_fp8_recipe(std::string_view s);

// What a training framework changes in the lists above: the kernels it launches beyond the fused
// ideal, and what its linears and its activation checkpointing store. sim::Framework holds it
// with the framework's other conventions; framework_layer_operators applies it, for the program
// builder, the memory model and the planner's bound alike.
struct FrameworkOps {
  bool nanotron_kernels = false;    // add_nanotron_layer_kernels, add_nanotron_head_kernels
  bool torchtitan_kernels = false;  // add_torchtitan_layer_kernels, add_torchtitan_head_kernels
  bool composite_rmsnorm = false;   // their composite_rmsnorm (torchtitan-2025)
  // Under dtype=fp8 the linears store their bf16 input, not an fp8 copy: torchao's float8 linears
  // (torchtitan), save_high_precision_linear_inputs. Megatron-core's Transformer Engine linears
  // store the fp8 copy (the lists' convention).
  bool fp8_saves_high_precision_inputs = false;
  // recompute=selective is torchtitan's op-level checkpointing (apply_torchtitan_selective_ac:
  // the block input, every second matmul's output and SDPA's output stored) instead of
  // recomputing the attention core.
  bool op_level_selective_ac = false;
  // Transformer Engine's TP communication overlap (apply_tp_comm_overlap): Megatron-core's
  // --tp-comm-overlap, which NeMo's and Megatron-Bridge's performance recipes turn on
  // (sim::RecipeOptions). Off by default, as in Megatron-LM, and not exported.
  bool tp_comm_overlap = false;
  // The userbuffers configuration a recipe gave it (models/ub_presets.h, static data); nullptr:
  // TE's defaults (te_default_ub_preset).
  const UbPreset* tp_comm_overlap_preset = nullptr;
  // torchtitan without FSDP: torch.autocast(bf16) over fp32 parameters (maybe_enable_amp,
  // torchtitan/distributed/utils.py:243-263 at v0.2.2: "the following code will only be executed
  // for DDP or single-device training"); runs_autocast says on which layouts.
  bool autocast_without_fsdp = false;
  // torchtitan's torch.compile (`[compile] enable = true` with compile.components; default off,
  // as torchtitan's): each TransformerBlock ("model") and the loss ("loss") run Inductor's fused
  // kernels (models/inductor.h).
  bool compile_model = false;
  bool compile_loss = false;
  // How many of a rank's expert GEMMs run at once (split_grouped_expert_gemms): Transformer
  // Engine's GroupedLinear, which Megatron-core's TEGroupedMLP runs, launches one cuBLAS GEMM per
  // local expert, round-robin over 4 compute streams (multi_stream_cublas_gemm). 1: one expert
  // after another, Megatron-core's SequentialMLP (moe_grouped_gemm off, core_v0.10.0
  // megatron/core/transformer/moe/moe_layer.py:93-105: each local expert an MLP of its own
  // linears, called in a loop, experts.py:795-801; sim::RecipeOptions::moe_sequential_experts).
  // 0: one grouped kernel for all of them (torch._grouped_mm, torchtitan).
  int expert_gemm_streams = 0;
  // Megatron-core's eager kernels beyond the fused ideal (add_megatron_layer_kernels): the routed
  // experts' output bias, which TEGroupedMLP adds per expert outside the GEMM, the clamp of a
  // clamped gated unit before its fused activation, the weighted gated unit's compiled backward
  // (two kernels), and the rotary embedding's unfused path under a YaRN concentration factor
  // other than 1.
  bool megatron_kernels = false;
  // Megatron-core's router after its GEMM (add_megatron_router_kernels): `router_fusion` is
  // moe_router_fusion, Transformer Engine's fused top-k, aux-loss scores and aux loss;
  // `router_force_balance` is moe_router_force_load_balancing, random logits in place of the
  // GEMM's. Both off by default, as in Megatron-LM; Megatron-Bridge's performance recipes set
  // both (sim::RecipeOptions). Without `router_fusion` the router's eager kernels are not
  // modelled (docs/simulator.md, "Megatron-core's router").
  bool router_fusion = false;
  bool router_force_balance = false;
  // Megatron-core core_r0.10.0's MoE layer (add_megatron_r010_moe_kernels): the unfused router
  // with capacity and padding, the eager permute and unpermute, and the router probabilities
  // applied in the unpermute rather than in the experts' activation. Off by default (the list
  // follows core_r0.16.0); sim::RecipeOptions::moe_core_r010 sets it for the records that ran it.
  bool moe_core_r010 = false;
  // Megatron-core's experts run Transformer Engine's op fuser (`use_transformer_engine_op_fuser`,
  // off by default; TEGroupedMLP._make_fused_ops): the gated activation with its clamp is one TE
  // op (te.pytorch.ops.ScaledClampedQGeGLU, Megatron-LM cd4afffa / 2a75ac12c5
  // megatron/core/transformer/moe/experts.py), so the eager clamp is not run. Megatron-Bridge's
  // 26.08 GPT-OSS 120B MXFP8 recipes set it (validate: apply_gpt_oss_recipe).
  bool te_op_fuser = false;
  // The fp8 linears' quantization (Fp8Recipe; sim::RecipeOptions sets it from a record or the
  // CLI), and whether the GPU's fp8 GEMMs take any operand layout, so that Transformer Engine
  // writes no transpose (nvte_is_non_tn_fp8_gemm_supported: compute capability 10.x-11.x or
  // 13.0 and later, common/transformer_engine.cpp:1191-1203 at d0067d0; sim::on_gpu sets it).
  Fp8Recipe fp8_recipe = Fp8Recipe::kDelayed;
  bool fp8_gemm_any_layout = false;
};

// Transformer Engine's grouped GEMM as it runs: each routed-expert GEMM of `streams` < batch local
// experts becomes ceil(batch / streams) kernels in a row, each of at most `streams` experts' GEMMs
// running side by side, with the FLOPs and the stored bytes (on the first) of the original.
void split_grouped_expert_gemms(std::vector<Op>& ops, int streams);

// Megatron-core's eager kernels around the fused ones, where the model calls for them:
// - routed experts with biases (gpt-oss): TEGroupedMLP builds linear_fc2 with skip_bias_add and
//   adds its bias weighted by the router probability per local expert, in eager PyTorch
//   (`_apply_bias`, core_r0.16.0 megatron/core/transformer/moe/experts.py:571-572, 608-625,
//   758): per element of the experts' output, forward b*p written (2 B), t + b*p (6 B) and the
//   torch.cat of the experts' pieces (4 B); backward the two products of the gradient with p and
//   b and their reductions (2 × 6 B) and the split's backward, a cat of the gradient (4 B):
//   "moe.expert.bias", 12 B forward and 16 B backward per element;
// - a YaRN rotary embedding whose concentration factor is not 1 (no mscale pair: 0.1·ln(factor)
//   + 1, yarn_rotary_pos_embedding.py:252-271; gpt-oss 1.35): apply_rotary_pos_emb takes the
//   unfused path whatever apply_rope_fusion says (rope_utils.py:279-284), the eager
//   _apply_rotary_pos_emb_bshd (rope_utils.py:73-126) on q and k: t·cos (4 B per element),
//   rotate_half's negation and cat (2 + 4 B), ·sin (4 B), the sum (6 B) and the cat with the
//   unrotated channels (4 B), 24 B against the fused kernel's 4; backward 26 B against 4 (the
//   two products, the negation, rotate_half's and the slice's gradients and their sum):
//   "attn.rope_unfused", the difference. MLA's rotary path is its own and is left as it is;
// - a clamped gated unit on the routed experts (gpt-oss: swiglu_limit 7, Megatron-core's
//   activation_func_clamp_value): weighted_bias_quick_geglu_impl clamps the two halves of
//   linear_fc1's output in eager PyTorch before its fused activation (core_r0.16.0
//   megatron/core/fusions/fused_bias_geglu.py:424-432, called from experts.py:698-706):
//   per element of fc1's output [rows, 2·ffn], the two clamps (read 2, write 2 B each over their
//   half) and the torch.cat of the halves (read 2, write 2 B): "moe.expert.clamp", 8 B forward.
//   Backward (PyTorch torch/csrc/autograd/FunctionsManual.cpp clamp_backward, Scalar overload;
//   cat_tensors_backward: narrow views, no kernel): the gate half's `self <= max` (read 2, write
//   a 1-byte mask) and where(mask, grad, 0) (read 1 + 2, write 2), 8 B per element; the linear
//   half's `self >= min`, `self <= max` (3 B each), logical_and_ (read 2, write 1) and where
//   (5 B), 14 B; then chunk's backward, the cat of the two gradients (4 B): 15 B per element on
//   average, "moe.expert.clamp.bwd". The clamp lies inside the moe_act checkpoint
//   (bias_act_func, experts.py:680-743), so it reruns with the activation where that is
//   recomputed. Not under `te_op_fuser` (the clamp is fused there). The clamp's autograd keeps
//   fc1's output as well as the activation's own input where moe_act is not recomputed: that
//   copy (2 B per element) is not counted in the stored bytes (the list's invariant that these
//   kernels store nothing; docs/simulator.md). The clamps read strided halves, so PyTorch runs
//   them on its legacy loop (gpu_kernel_impl_nocast: not iter.is_contiguous() ->
//   launch_legacy_kernel<128, 4> for bf16, aten/src/ATen/native/cuda/CUDALoops.cuh); they are
//   timed at the list's rate until that loop is measured at these strides;
// - the routed experts' weighted gated unit's backward (weighted_swiglu_back,
//   fused_bias_swiglu.py:89-97; weighted_quick_geglu_back, fused_bias_geglu.py:239-252; called
//   through weighted_bias_*_impl, experts.py:690-706), compiled by torch.compile (jit_fuser,
//   megatron/core/jit.py, PyTorch >= 2.2): per element of the activation's output, the input
//   gradient (read the output gradient 2 B and both input halves 4 B, write both halves'
//   gradients 4 B: 10 B, "moe.expert.act.bwd", the list's gated backward as it stands),
//   and the probabilities' gradient, a sum over the FFN width that Inductor cannot fuse with
//   the input gradient's [rows, 2·ffn] cat (SIMDScheduling.can_fuse needs the pointwise numel
//   to equal the reduction's numel·rnumel or numel), so it re-reads the input and the output
//   gradient: 6 B, "moe.expert.act.probs_grad", just before. Not under `te_op_fuser`, nor under
//   `moe_core_r010` (whose activation is unweighted: add_megatron_r010_moe_kernels).
Status add_megatron_layer_kernels(std::vector<Op>& ops, const ModelSpec& m, const FrameworkOps& fw);

// Megatron-core's router kernels after its GEMM on a MoE layer (core_r0.16.0
// megatron/core/transformer/moe/router.py TopKRouter.forward/routing, moe_utils.py; Transformer
// Engine v2.12 pytorch/router.py, pytorch/csrc/extensions/router.cpp, common/fused_router/),
// per micro-batch on T tokens (the router GEMM's rows) and E experts, each element of the
// logits and of the [T, E] tensors derived from them counted at the list's router width (4 B,
// the router GEMM's output) and a routing map at 1 B:
// - `router_force_balance` (RandomSTE, moe_utils.py:1112-1160): logits.clone() (read and write,
//   8 B per element) and .normal_() (write, 4 B): "moe.router.random_copy", "moe.router.random";
//   its backward passes the gradient through (no kernel);
// - `router_fusion` (topk_routing_with_score_function, moe_utils.py:654-668):
//   fused_topk_with_score_function_fwd, one kernel reading the logits and writing the probs, the
//   routing map and the score function's output for the backward (13 B per element):
//   "moe.router.topk"; its backward reads the map, that output and the probs' gradient and writes
//   the logits' gradient (13 B): "moe.router.topk.bwd";
// - with a load-balancing loss (MoeSpec::aux_loss_coeff > 0; per sequence if seq_aux) under
//   `router_fusion` (router.py:597-626): fused_score_for_moe_aux_loss_fwd (13 B, as the top-k:
//   "moe.router.aux_scores"), routing_map.sum(dim=0) (1 B: "moe.router.aux_counts",
//   moe_utils.py:225), its all-reduce over the TP (or CP) group where that is larger than one
//   (8 B per expert: "moe.router.aux_counts_ar", moe_utils.py:226-228), fused_moe_aux_loss_fwd
//   (reads the scores, 4 B: "moe.router.aux_loss"), the logging tracker's division and in-place
//   add (router.py:448-455, moe_utils.py:898-899; with seq_aux also "/ bsz", router.py:357):
//   scalar kernels "moe.router.aux_log"; backward MoEAuxLossAutoScaler's ones_like and product
//   (moe_utils.py:268-275, with seq_aux the division's gradient): scalar kernels
//   "moe.router.aux_scale.bwd", fused_moe_aux_loss_bwd writing the scores' gradient (4 B:
//   "moe.router.aux_loss.bwd"), fused_score_for_moe_aux_loss_bwd (12 B:
//   "moe.router.aux_scores.bwd") and autograd's sum of the two gradients of the logits (12 B:
//   "moe.router.grad_sum");
// - an expert bias (a router bias on a sigmoid router: DeepSeek-V3's e_score_correction_bias,
//   Megatron-core's moe_router_enable_expert_bias; Transformer Engine takes an expert bias only
//   with sigmoid, router.cpp:24-27): _apply_expert_bias's routing_map.sum(dim=0) into
//   local_tokens_per_expert, one compiled kernel (router.py:531-543): "moe.router.expert_counts"
//   (1 B per element).
// The forward kernels follow "moe.router", the backward ones precede "moe.router.dgrad"; they
// store nothing. Scalar and per-expert kernels pay the kernel model's per-kernel floor.
Status add_megatron_router_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                   const FrameworkOps& fw);

// Megatron-core core_r0.10.0's MoE layer as it runs with the alltoall dispatcher, top-k softmax
// routing (post-softmax), the aux-loss balancing, capacity factor 1 with padding
// (megatron/core/transformer/moe/router.py, moe_utils.py, token_dispatcher.py at tag core_r0.10.0,
// 7ee599a25c), per micro-batch on T tokens (the router GEMM's rows), E experts, top-k, R = T·k
// routed rows of h channels, logits in bf16 (Router.weight is params_dtype, gating is
// F.linear, router.py:39-59; 2 B per element), int64 indices (8 B), bool maps (1 B):
// - the router (TopKRouter.aux_loss_load_balancing -> topk_softmax_with_capacity,
//   moe_utils.py:231-309; apply_load_balancing_loss, switch_load_balancing_loss_func:11-55;
//   save_to_aux_losses_tracker:312-338), forward: torch.topk over the experts, the softmax of the
//   k scores in fp32 and its cast back, topk_masked_gates (zeros_like, the out-of-place scatter's
//   clone and its scatter), topk_map (zeros_like, .int(), clone, scatter, .bool()), its sum over
//   tokens, the capacity top-k over tokens (C = T·k/E with factor 1: C·E = R), capacity_mask
//   (zeros_like, clone, scatter, .bool()), probs times the mask, the aux loss's fp32 softmax of the
//   logits, the counts' all-reduce over the TP-and-CP group, probs.sum(dim=0), the product, the
//   sum, the coefficient's product, the tracker's division and in-place add: 25 kernels
//   ("moe.router.*") and one all-reduce. Backward (autograd of the same graph): the mask product's,
//   the scatter's gather, the cast's, the k-softmax's and torch.topk's (zeros and scatter)
//   gradients; the aux-loss scaler's ones_like and product, the coefficient's and the counts'
//   products, the copy that makes the sum's expanded gradient contiguous and the logits softmax's
//   backward, and the sum of the logits' two gradients: 13 kernels.
// - the dispatcher's preprocess: routing_map.sum(dim=0) (token_dispatcher.py:352); with padding it
//   returns before any count all-gather or host copy (:354-373). Permute (moe_utils.py:156-184):
//   the map's transpose copy, arange and masked_select before the list's index_select
//   ("moe.permute"); its backward new_zeros before index_add_ ("moe.permute.bwd").
// - unpermute with probabilities (moe_utils.py:187-221): probs.T.contiguous(),
//   routing_map.T.contiguous(), masked_select, the rows times their probability (R·h, 4 B per
//   element) and the zero-filled output before the list's scatter_add_ ("moe.unpermute"), which
//   keeps the rows and their probabilities for the product's backward in place of the
//   activation's fp32 probabilities; backward after the scatter's gather ("moe.unpermute.bwd"):
//   the rows' gradient (grad·p, 4 B), the probabilities' (grad·rows, 6 B, then its sum over h,
//   2 B) and masked_select's backward (zeros, masked_scatter). The experts' activation is
//   unweighted (SequentialMLP's experts are MLPs, experts.py:745, calling bias_swiglu_impl
//   without probabilities, mlp.py:107), so "moe.expert.act.probs_grad" is not run.
// Kernels that select by mask (masked_select, masked_scatter) are counted as one kernel each; in
// PyTorch they are a nonzero (several CUB kernels and a device-to-host copy of the count) and an
// index, whose host synchronisation the simulation does not model.
Status add_megatron_r010_moe_kernels(std::vector<Op>& ops, const ModelSpec& m, const Layout& l,
                                     const FrameworkOps& fw);

// Whether the step runs under torch.autocast over fp32 parameters: the framework's
// autocast_without_fsdp on a layout without FSDP (ZeRO-0: torchtitan's FSDP2 is ZeRO-1/2/3 in
// scaleplan's layouts), without TP, PP and CP (torchtitan turns mixed precision off for TP or PP
// without FSDP, and CP shards over FSDP's mesh).
bool runs_autocast(const FrameworkOps& fw, const Layout& layout);

// What framework `id` changes in the lists (core/framework.h): nanotron its kernels, torchtitan its
// eager kernels (composite RMSNorm for torchtitan-2025), bf16 inputs of fp8 linears and op-level
// selective checkpointing; Megatron's are the lists' own conventions.
FrameworkOps framework_ops(FrameworkId id);

// layer_operators of `layer` as framework `fw` runs it: nanotron's extra kernels, Transformer
// Engine's TP communication overlap, torchtitan's extra kernels, then what its fp8 linears store,
// then its selective checkpointing, in that order. The one list the builder times, the memory model
// sums and the planner's bound times.
Result<std::vector<Op>> framework_layer_operators(const ModelSpec& m, const Layout& layout,
                                                  int64_t seq_len, int64_t layer,
                                                  const FrameworkOps& fw);
// head_operators with the framework's head kernels, followed in pass order by the MTP modules
// (mtp_operators): everything the last chunk runs beyond its decoder layers.
Result<std::vector<Op>> framework_head_operators(const ModelSpec& m, const Layout& layout,
                                                 int64_t seq_len, const FrameworkOps& fw);

// Sums over a list.
Flops total_flops(const std::vector<Op>& ops, Pass pass);
Bytes total_saved(const std::vector<Op>& ops);

// Token counts of one micro-batch on one rank (shared by the operator list and the memory model).
struct TokenCounts {
  int64_t gemm = 0;  // b·s/cp: rows of the dense GEMMs and attention queries
  int64_t sp = 0;  // b·s/(cp·tp) under SP, else b·s/cp: rows of norms, residual, layer boundary
  int64_t seqs = 0;  // b
};
TokenCounts token_counts(const Layout& layout, int64_t seq_len);

// The fields of a layout that the operator lists above depend on (with the model and sequence
// length fixed): tp, cp (with its K/V exchange), ep, etp, mbs, recompute (with its modules), sp,
// dtype (with act_cache). Layouts with equal keys get equal lists, so caches of anything derived
// from them (the memory model's activations, the planner's bound) key on this; a field that starts
// to matter must be added here, once.
using OperatorListKey = std::tuple<int, int, int, int, int, int, bool, int>;
OperatorListKey operator_list_key(const Layout& layout);

}  // namespace scaleplan::models
