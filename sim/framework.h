// sim::Framework: a training framework's conventions as one typed value.
//
// A framework (core/framework.h names them) changes a prediction in four ways, each cited to the
// framework code it describes: its memory conventions (models::FrameworkMemory: what it stores),
// its timing conventions (FrameworkTiming: when it communicates, how its collectives and pipeline
// sends behave, which attention core it runs), the kernels it launches beyond the operator list's
// fused ideal with what its layers store (models::FrameworkOps) and the CPU cost of issuing them
// (HostIssue). sim::framework(id)
// builds the value once; everything below the command line takes it (sim::simulate, the memory
// model through its `memory` part, the planner's evaluator, the exporters) and never looks at a
// framework's name. What depends on the layout or the GPU as well (which fused attention kernel,
// when ZeRO-1/2 gathers parameters, the DP bucket size, blocking sends) is resolved from the
// value by the functions below, so that the builder (build_options) and the planner's bound ask
// the same functions. docs/simulator.md, "Frameworks".
//
// Values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "core/framework.h"
#include "core/kernel_shapes.h"
#include "core/layout.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/operators.h"

namespace scaleplan::sim {

// The host (CPU) side of eager execution. The rank's Python thread issues every kernel and
// collective in program order, paying `per_launch` of CPU time for each (Python call, the ATen
// dispatcher, autograd bookkeeping, cudaLaunchKernel); a GPU op cannot start before it was issued.
// The thread runs ahead of the GPU asynchronously and waits only at synchronizing points
// (`blocking_recv`: it waits for each pipeline receive to complete before issuing what follows).
// Where per-kernel GPU work is short the GPU waits for the CPU, and the step becomes host-bound.
// `glue_*_kernels` are kernels the framework launches per layer beyond the operator list's ops
// (layout copies, index computations, gradient accumulation): they cost CPU time to issue and
// their GPU time is negligible. per_launch = 0 (the default) turns the model off: graph-captured
// execution (CUDA graphs, torch.compile with cudagraphs) or an unknown framework.
struct HostIssue {
  Duration per_launch{};
  int glue_forward_kernels = 0;   // per decoder layer, forward
  int glue_backward_kernels = 0;  // per decoder layer, backward
  bool blocking_recv = false;
};

// When ZeRO-1/2 gathers the updated parameters (FrameworkTiming::param_gather).
enum class ParamGather : uint8_t {
  // One all-gather per group after the optimizer step (Megatron-LM without
  // --overlap-param-gather, nanotron's ZeRO-1).
  kAfterStep,
  // In each chunk's first forward, one block ahead of its compute, the first when the pass
  // starts (FSDP2 with reshard_after_forward=False: the forward pre-hooks unshard, prefetching
  // the next module).
  kFirstForward,
  // As kFirstForward, but the first block's gather is dispatched when the step starts
  // (Megatron-core --overlap-param-gather: DistributedOptimizer.zero_grad dispatches the first
  // bucket, each forward pre-hook waits for its bucket and dispatches the next).
  kFirstForwardFromStepStart,
  // Every block's gather dispatched when the step starts, in chunk order (Megatron-core
  // --overlap-param-gather --align-param-gather, which it allows with interleaving only:
  // start_param_sync dispatches a chunk's buckets at once).
  kAligned,
};

// What a training framework does that changes the timeline, beyond its memory conventions, its
// kernels and its host costs. The builder reads these fields as they are (BuildOptions::timing);
// the fields that also depend on the layout or the GPU are resolved by the functions below.
struct FrameworkTiming {
  // The attention core: kUnfused, or a fused kernel, which is FlashAttention-2 unless the GPU's
  // SM version is at least cudnn_from_sm (0: never), where it is cuDNN's (framework_attention).
  AttentionKernel attention = AttentionKernel::kFlash2;
  int cudnn_from_sm = 0;
  // When the DP gradients are reduced (ZeRO-0/1/2; ZeRO-3 reduce-scatters per layer regardless).
  // true: in buckets as the backward of the last micro-batch produces them, overlapping the rest
  // of it (Megatron-core --overlap-grad-reduce, torch DDP, nanotron). false: after the last
  // backward pass, one collective per model chunk over its whole gradient buffer, as Megatron-LM
  // did until 2023 (training.py train_step: forward_backward_func(...), then
  // model_module.allreduce_gradients() for every chunk; LocalDDP all-reduces its contiguous
  // buffer in one call).
  bool dp_overlap = true;
  // A pipeline send holds up the sender's next op until it completes: Megatron-LM's
  // p2p_communication._communicate (2021-2022) waits on the batch_isend_irecv requests and then
  // calls torch.cuda.synchronize(). false: sends run on their own stream beside compute.
  // (Resolved with bidirectional_blocking_sends by blocks_p2p.)
  bool blocking_p2p = false;
  // Megatron-LM 2021-2022's scatter_gather_tensors_in_pipeline (on by default there): without
  // sequence parallelism each TP rank sends only its 1/tp slice of the boundary activation, and
  // the receiver all-gathers the slices over TP before the pass starts
  // (p2p_communication._communicate, mpu.gather_split_1d_tensor). false: the whole activation
  // crosses (Megatron-core and nanotron; with sequence parallelism it is a 1/tp slice anyway).
  bool p2p_scatter_gather = false;
  // fp16 mixed precision with a dynamic loss scale: the optimizer step first unscales the fp32
  // gradients and checks them for inf/NaN (models::optimizer_operators).
  bool fp16_loss_scale = false;
  // Bytes per gradient element reduced over DP: 4 (Megatron-LM and nanotron reduce the fp32 main
  // gradients for bf16 training), 2 for Megatron-LM's fp16 main gradients (megatron-2022); ZeRO-3
  // reduce-scatters bf16 gradients (2), as FSDP does. Also the main-gradient width the optimizer
  // step reads (models::optimizer_operators).
  int dp_grad_bytes = 4;
  // Bytes per local parameter of the separate kernel that adds each micro-batch's weight
  // gradients into the gradient-accumulation buffer (models::grad_accumulation); 0: the weight-
  // gradient GEMMs accumulate into it themselves (gradient accumulation fusion).
  int grad_accum_bytes = 0;
  // Without pipeline parallelism, reduce the gradients over DP after every micro-batch's backward
  // instead of after the last one only (FSDP2 / DDP with gradient accumulation and no no_sync, as
  // torchtitan runs them; its pipeline schedules sync only at each stage's last backward).
  bool dp_reduce_every_microbatch = false;
  // ZeRO-2: the sharded gradients are reduce-scattered after every micro-batch's backward, with or
  // without pipelining, since a shard cannot accumulate the micro-batches' full gradients: Megatron
  // FSDP's optim_grads (grad_reduce_every_bprop, megatron/core/distributed/fsdp/src/megatron_fsdp/
  // megatron_fsdp.py at NVIDIA/Megatron-LM d98e8a6) and DeepSpeed's stage 2 (its backward hooks
  // reduce every micro-batch's gradients into the partition). Off: ZeRO-2 reduces as ZeRO-1 does
  // (torchtitan's pipeline schedules accumulate FSDP2's unsharded gradients under no_sync).
  bool zero2_reduce_every_microbatch = true;
  // ZeRO-1/2: when the parameters the step updated are all-gathered (over DP x CP, the experts'
  // over EDP). In the overlapped modes each chunk's first forward waits for its blocks' gathers,
  // block by block, as a ZeRO-3 forward does; in steady state the gather of step i runs in step
  // i + 1, so one step holds one of them.
  // This is the gather without pipelining; param_gather_for decides with it.
  ParamGather param_gather = ParamGather::kAfterStep;
  // DeepSpeed ZeRO-3 as of early 2021 (v0.3.x, the runs benchmarked in Narayanan et al. 2021):
  // fetch_sub_module all-gathers every parameter of a submodule by itself, and each all_gather
  // first calls torch.cuda.synchronize(), so nothing is prefetched and no gather overlaps
  // compute or an earlier reduce-scatter (deepspeedai/DeepSpeed PR #1188, June 2021: "the async
  // version is not async at all, because each all_gather calls torch.cuda.synchronize()"); the
  // gradients are reduce-scattered per parameter as each layer's backward ends
  // (partition_parameters.py _reduce_scatter_gradient). Each collective is timed on its own tensor
  // and pays `zero3_call_overhead` of host time (issue #1069: ~130 µs pre-launch + ~250 µs launch
  // per parameter all-gather, measured with DeepSpeed 0.3.16 and PyTorch 1.8). false: one
  // collective per layer, the next layer's gather issued when the current one starts (FSDP,
  // today's DeepSpeed prefetch).
  bool zero3_per_tensor_sync = false;
  Duration zero3_call_overhead{};
  // With zero3_per_tensor_sync: each collective is list-form, one tensor view per rank of the
  // group (DeepSpeed's _allgather_param passes `world_size` narrow()s of a flat buffer to
  // dist.all_gather, _reduce_scatter_gradient `world_size` narrow()s of the gradient to
  // dist.reduce_scatter), and PyTorch's ProcessGroupNCCL runs list-form calls through a flat
  // buffer: all_gather copies each rank's part out of it after the NCCL call, reduce_scatter
  // copies each rank's part into it before (flatten_for_scatter_gather; one copy_ per list
  // entry on the NCCL stream). So each collective also pays `ranks` copies of one shard, each
  // timed as its own memory-bound kernel (so each pays the kernel model's per-kernel floor);
  // an all-gather also zero-fills its whole output first (_allgather_param's torch.zeros).
  // DeepSpeed PR #1188 (June 2021) names them ("the existing _allgather_params has explicit
  // memcpy after the all-gather op"); _all_gather_base later removed them.
  bool zero3_list_copies = false;
  // ZeRO-3 as PyTorch's FSDP2 runs it (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py,
  // torchtitan): each all-gather first copies the fp32 shard into a bf16 flat buffer (read 4,
  // write 2 B per shard element) and into the gather's input (2 + 2), then, on the compute
  // stream, copies the gathered layer out into its parameters (split_with_sizes_copy: 2 + 2 B
  // per parameter); each reduce-scatter first widens the bf16 gradients into its fp32 input
  // (chunk_cat: 2 + 4 B per parameter) and reduces in fp32 (reduce_dtype).
  bool fsdp2_copies = false;
  // nanotron's ZeRO-1/2 data path (ZeroDistributedOptimizer): list-form collectives wrapped in
  // flatten copies. The gradient hook's reduce_scatter_coalesced flattens each bucket's fp32
  // gradients twice before the reduce-scatter (src/nanotron/distributed.py
  // `_flatten_dense_tensors` per DP rank, then ProcessGroupNCCL's flatten of the input list:
  // 16 B per element, 2·dp kernels); after the optimizer, all_gather_coalesced flattens the bf16
  // output lists (4 B per local parameter, dp + 1 kernels), the list-form all_gather copies each
  // rank's part out of its flat buffer (4 B, dp kernels) and `update_output` copies every
  // parameter's slice of every rank back (4 B, tensors·dp kernels). Megatron's distributed
  // optimizer works on contiguous buffers and has none of these.
  bool nanotron_zero_copies = false;
  // DP gradient bucket in parameters; 0: Megatron-core's default max(40e6, 1e6·dp·cp)
  // (megatron/core/distributed/distributed_data_parallel.py, when ddp_config.bucket_size is
  // None). nanotron: torch DDP's bucket_cap_mb = ModelArgs.ddp_bucket_cap_mb = 25 MiB of bf16
  // gradients, 13,107,200 parameters. Resolved by dp_bucket_params.
  int64_t dp_bucket_params = 0;
  // DualPipe(V)'s forward-backward pairs overlap only around expert all-to-alls, and only without
  // activation checkpointing: torchtitan runs PyTorch's OVERLAP_F_B action as a forward then a
  // backward unless pipeline_parallel_expert_parallel_overlap (default on; "only effective when
  // the pipeline parallel schedule is DualPipeV and ... expert_parallel_degree > 1", "does not
  // support activation_checkpoint") registers its two-thread overlap callback. Otherwise pairs
  // overlap at every collective, as DeepSeek's reference overlapped_forward_backward does.
  bool pairs_overlap_only_with_ep = false;
  // DualPipe(V) sends block the next pass, as DeepSeek's reference runs them (dualpipe.py,
  // dualpipev.py _commit_and_wait_comm: the pass's sends go out in one batch_isend_irecv with the
  // next pass's receives, and the next pass's compute waits on every request of the batch);
  // torchtitan's pipelining runtime waits on its sends only at the end of the step.
  bool bidirectional_blocking_sends = true;
};

// CPU time to issue one kernel from eager PyTorch: the Python call, the ATen dispatcher and
// autograd bookkeeping, the caching allocator and cudaLaunchKernel (docs/simulator.md gives the
// sources).
inline const Duration kEagerLaunchCost = Duration::microseconds(10);

// One framework's conventions (the file comment says what each part covers).
struct Framework {
  FrameworkId id = FrameworkId::kMegatron;
  models::FrameworkMemory memory;
  models::FrameworkOps ops;  // its kernels beyond the operator list, fp8 recipe, checkpointing
  FrameworkTiming timing;
  HostIssue host;
  std::string_view name() const { return to_string(id); }
};

// The conventions of `id` (docs/simulator.md, "Frameworks", and the cited sources beside each
// field in framework.cc).
Framework framework(FrameworkId id);
// framework(parse_framework(name)); the error names `framework` and lists the names.
Result<Framework> parse_framework_value(std::string_view name);

// The conventions a published run trained under (core/framework.h resolve_run_framework): the
// framework of its date, with the attention kernel choice of `attention_of` where it differs (a
// torch.compile'd torchtitan run on Megatron-core's conventions).
Framework run_framework(const RunConventions& run);

// The layout names dtype=bf16 itself. Under the fp16-era conventions (megatron-2022,
// deepspeed-2021), whose runs omit dtype for their fp16, the run is bf16 mixed precision instead:
// no loss scale, fp32 main gradients (Megatron-LM's --bf16 forces
// --accumulate-allreduce-grads-in-fp32) reduced in fp32 and accumulated by the weight-gradient
// GEMMs (gradient accumulation fusion, allowed with fp32 accumulation). Other conventions are bf16
// already and come back unchanged.
Framework with_bf16_named(Framework f);

// Megatron-core options NeMo's and Megatron-Bridge's recipes set beyond the layout, which change
// memory and traffic (validate infers them per record, validate/validation.h):
//  - tp_comm_overlap: --tp-comm-overlap (models::FrameworkOps::tp_comm_overlap), with the
//    recipe's userbuffers preset (tp_comm_overlap_preset; models/ub_presets.h);
//  - grad_reduce_in_fp32 (Megatron DDP config): the main gradients and their DP reduction in fp32
//    (4 B/param) or bf16 (2), in memory and traffic alike; unset: the framework's (Megatron-LM's
//    command line forces fp32 for bf16);
//  - fp8_param_gather: --fp8-param-gather under dtype=fp8, the decoder weights held in fp8 only
//    (models::FrameworkMemory::fp8_primary_weights);
//  - fp8_recipe: --fp8-recipe under dtype=fp8, Transformer Engine's quantization of the fp8
//    linears' operands (models::Fp8Recipe; default delayed, Megatron-core's);
//  - moe_router_fusion, moe_router_force_load_balancing: Megatron-core's router options
//    (models::FrameworkOps::router_fusion, router_force_balance; default off, Megatron-LM's);
//  - moe_sequential_experts: moe_grouped_gemm off, so Megatron-core builds SequentialMLP, which
//    runs its local experts' MLPs one after another (models::FrameworkOps::expert_gemm_streams
//    = 1); default off: TEGroupedMLP, the grouped GEMM the simulated Megatron-core runs;
//  - moe_core_r010: the MoE layer of Megatron-core core_r0.10.0
//  (models::FrameworkOps::moe_core_r010:
//    the unfused router with capacity and padding, the eager permute and unpermute, the
//    probabilities applied in the unpermute); default off: the list follows core_r0.16.0;
//  - no_fused_attention: NVTE_FUSED_ATTN=0 in the run's environment, so Transformer Engine's
//    DotProductAttention cannot pick cuDNN's fused attention and runs FlashAttention-2 on every
//    GPU (FrameworkTiming::cudnn_from_sm = 0; framework_attention).
struct RecipeOptions {
  bool tp_comm_overlap = false;
  // The recipe's userbuffers preset for the overlap (models::find_ub_preset; static data);
  // nullptr: Transformer Engine's defaults (models::FrameworkOps::tp_comm_overlap_preset).
  const models::UbPreset* tp_comm_overlap_preset = nullptr;
  std::optional<bool> grad_reduce_in_fp32;
  bool fp8_param_gather = false;
  models::Fp8Recipe fp8_recipe = models::Fp8Recipe::kDelayed;
  bool moe_router_fusion = false;
  bool moe_router_force_load_balancing = false;
  bool moe_sequential_experts = false;
  bool moe_core_r010 = false;
  bool no_fused_attention = false;
};
// `f` with `recipe`'s options applied.
Framework with_recipe(Framework f, const RecipeOptions& recipe);

// `f` as it runs on `gpu` where that changes its operator lists: Megatron-core's Transformer
// Engine writes no fp8 transpose where the GPU's fp8 GEMMs take any operand layout
// (models::FrameworkOps::fp8_gemm_any_layout). The program builder and the planner's bound both
// build from it.
Framework on_gpu(Framework f, const hw::GpuSpec& gpu);

// Ok when `f`'s fp8 recipe runs on `gpu` under `layout`: MXFP8 needs data-center Blackwell's
// block-scaled tensor cores (Transformer Engine d0067d0 pytorch/quantization.py:162-168,
// _compute_mxfp8_support: compute capability 10.0 or higher, and not 12.0+), NVFP4 compute
// capability 10.0 or higher (_compute_nvfp4_support, :171-175); otherwise an error naming
// fp8_recipe, the GPU and its compute capability.
Status check_fp8_recipe(const Framework& f, const Layout& layout, const hw::GpuSpec& gpu);

// The host issue model of a framework (docs/simulator.md, "Host issue"): eager PyTorch pays
// kEagerLaunchCost of CPU time per kernel or collective; nanotron adds the glue kernels its
// llama.py launches per layer beyond the operator list and waits on each pipeline receive.
// Megatron gets none, for speed (its records are GPU-bound; docs/simulator.md); a caller may set
// any model explicitly (SimulateOptions::host).
HostIssue framework_host_issue(FrameworkId id);
// `f`'s host issue model at `per_launch` of CPU time per kernel or collective instead of its own
// (`--host-launch`): its glue kernels and blocking receives are kept; 0 turns it off.
HostIssue framework_host_issue(const Framework& f, Duration per_launch);

// The parameter gather a framework runs for a layout: its FrameworkTiming::param_gather, except
// that Megatron-core's (kFirstForwardFromStepStart) pipelines gather aligned with interleaving
// (--align-param-gather, which Megatron-LM allows only there; ZeRO-1's distributed optimizer
// only, ZeRO-2 being Megatron FSDP) and after the step otherwise: there each stage would wait for
// its own gathers in turn in the pipeline's fill, so the export does not pass
// --overlap-param-gather. The Megatron exporter writes its flags from this function.
ParamGather param_gather_for(const FrameworkTiming& timing, const Layout& layout);

// The attention core `timing`'s framework runs on `gpu`: its unfused core, or the fused kernel it
// picks on that GPU generation (hw::sm_version): Megatron-core's Transformer Engine prefers cuDNN
// on Hopper and later, torchtitan's SDPA lists cuDNN first (its 2025 releases did on Blackwell
// only), nanotron calls flash-attn. docs/simulator.md, "Attention kernels".
AttentionKernel framework_attention(const FrameworkTiming& timing, const hw::GpuSpec& gpu);

// The DP gradient bucket, in parameters, that `timing` uses on the resolved `layout`.
int64_t dp_bucket_params(const FrameworkTiming& timing, const Layout& layout);

// Whether the DP gradient buckets are reduced after every micro-batch's backward, not only the
// last one's (FrameworkTiming::dp_reduce_every_microbatch without pipelining,
// zero2_reduce_every_microbatch under ZeRO-2).
bool reduces_every_microbatch(const FrameworkTiming& timing, const Layout& layout);

// Whether a pipeline send holds up the sender's next pass under `timing` on `schedule`: the
// framework's blocking sends, or DualPipe(V)'s (bidirectional_blocking_sends).
bool blocks_p2p(const FrameworkTiming& timing, Schedule schedule);

// Whether DualPipe(V)'s forward-backward pairs overlap under `timing` on `layout`
// (pairs_overlap_only_with_ep).
bool pairs_overlap(const FrameworkTiming& timing, const Layout& layout);

}  // namespace scaleplan::sim
