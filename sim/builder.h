// build_program: one training iteration of a model under a layout, as a sim::Program.
//
// The builder only places ops; it derives no shapes. Every compute op and every communication
// point of a layer, the embedding, the LM head and the optimizer comes from the operator list
// (models/operators.h); the builder times them once per distinct layer with the kernel cost model
// (calibrate/cost_model.h) and the collective model (hw_profiles/collectives.h) on the layout's
// placement (hw_profiles/placement.h), then lays them out per rank:
//   - pipeline: the pass order of sim/schedule.h; a send/recv pair carries each activation and
//     gradient between neighbouring model chunks; the embedding runs in the first chunk and the LM
//     head with the loss in the last;
//   - TP/SP, EP and ETP communication sits on the critical path in operator-list order (their own
//     streams, but the next op waits for them); a CP K/V ring transfer overlaps the attention
//     kernel next to it (ring attention hides each K/V step behind the current chunk's attention);
//   - DP: the gradients of the last micro-batch are reduced in buckets of `dp_bucket_params`
//     parameters (Megatron-LM's DDP default, 40 M) as the backward produces them, on the DP stream,
//     so they overlap the rest of the backward; no reduction runs for earlier micro-batches (no
//     sync during gradient accumulation). ZeRO-0 all-reduces; ZeRO-1/2 reduce-scatter and
//     all-gather the updated parameters after the optimizer step; ZeRO-3 all-gathers each layer's
//     parameters before its forward and again before its backward, the next layer's gather
//     prefetched while the current layer computes (one layer ahead), frees them after use, and
//     reduce-scatters each layer's gradients every micro-batch;
//   - recompute: the operator list's recompute ops run right before each layer's backward;
//   - the step: a gradient-norm all-reduce over every rank, then the optimizer.
// Activations: each (chunk, micro-batch) allocates the bytes its forward saves (Op::saved) and
// frees them after its backward, so the engine's memory peak follows the schedule's in-flight
// micro-batches; weights, gradients and optimizer states are the ranks' static memory.
//
// Ranks: by default one representative rank per pipeline stage (the first TP/CP/DP rank of the
// stage); its collectives inside TP/CP/DP/EP groups have a single simulated member because the
// other members are symmetric. With all_ranks every GPU is simulated and collectives match their
// real members, so that later work can perturb single ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/layout.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "models/model_spec.h"
#include "sim/program.h"

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

// When ZeRO-1/2 gathers the updated parameters (BuildOptions::param_gather).
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

struct BuildOptions {
  bool all_ranks = false;
  // DP gradient bucket in parameters (sim::simulate sets the framework's: FrameworkTiming).
  int64_t dp_bucket_params = 40'000'000;
  // Bytes per gradient element reduced over DP: 4 (Megatron-LM and nanotron reduce the fp32 main
  // gradients for bf16 training), 2 for Megatron-LM's fp16 main gradients (megatron-2022); ZeRO-3
  // reduce-scatters bf16 gradients (2), as FSDP does. Also the main-gradient width the optimizer
  // step reads (models::optimizer_operators).
  int dp_grad_bytes = 4;
  // Static memory per stage (weights, gradients, optimizer states) from the memory model; empty
  // means none is tracked.
  std::vector<Bytes> stage_static_memory;
  // Decoder layers per model chunk (pp·vpp entries summing to the layer count); empty: the
  // layout's default split (stage_layer_counts).
  std::vector<int> chunk_layers;
  AttentionKernel attention = AttentionKernel::kFlash2;
  // When the DP gradients are reduced (ZeRO-0/1/2; ZeRO-3 reduce-scatters per layer regardless).
  // true: in buckets as the backward of the last micro-batch produces them, overlapping the rest
  // of it (Megatron-core --overlap-grad-reduce, torch DDP, nanotron). false: after the last
  // backward pass, one collective per model chunk over its whole gradient buffer, as Megatron-LM
  // did until 2023 (training.py train_step: forward_backward_func(...), then
  // model_module.allreduce_gradients() for every chunk; LocalDDP all-reduces its contiguous
  // buffer in one call).
  bool dp_overlap = true;
  // DualPipe's forward-backward pairs (sim/schedule.h Pass::with_next) share the compute stream,
  // each pass's communication beside the other's compute; false: one after the other.
  bool overlap_pairs = true;
  // A pipeline send holds up the sender's next op until it completes: Megatron-LM's
  // p2p_communication._communicate (2021-2022) waits on the batch_isend_irecv requests and then
  // calls torch.cuda.synchronize(). false: sends run on their own stream beside compute.
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
  ParamGather param_gather = ParamGather::kAfterStep;
  // Transformer Engine's TP communication overlap (userbuffers): each SP all-gather and
  // reduce-scatter of the attention and MLP blocks runs beside the GEMM TE pipelines it with
  // (models::apply_tp_comm_overlap). Megatron-core's --tp-comm-overlap; NeMo's and
  // Megatron-Bridge's performance recipes turn it on (SimulateOptions::tp_comm_overlap).
  bool tp_comm_overlap = false;
  // Add the kernels nanotron launches beyond the operator list (models::add_nanotron_layer_kernels,
  // add_nanotron_head_kernels): its layout copies, unfused GLU and cross entropy passes, and the
  // fp32 gradient accumulation of every micro-batch.
  bool nanotron_kernels = false;
  // torchtitan's eager kernels beyond the fused ideal (models::add_torchtitan_layer_kernels).
  bool torchtitan_kernels = false;
  // With torchtitan_kernels: nn.RMSNorm as PyTorch <= 2.8's composite kernels
  // (models::add_torchtitan_layer_kernels), the "torchtitan-2025" conventions.
  bool torchtitan_composite_rmsnorm = false;
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
  HostIssue host;
  // Merge each run of consecutive compute ops of a pass into one op lasting their summed durations
  // (ProgramBuilder::chain says which runs). Every other op starts and ends at the same tick, and
  // the breakdown is unchanged, when compute runs at full speed; under a compute slowdown
  // (EngineOptions::compute_slowdown_under_comm > 1) the engine rounds each op's stretched end to
  // a tick and a merged op rounds once, so times may move by a tick (1 ps) per merged op. Ops with
  // a host issue op are never merged. The per-kernel names and shapes are lost, so simulate()
  // merges only when no trace is asked for. Default off: the program lists every kernel.
  bool merge_compute = false;
};

struct BuildInputs {
  const models::ModelSpec* model = nullptr;
  const Layout* layout = nullptr;  // resolved
  int64_t seq_len = 0;
  const hw::Cluster* cluster = nullptr;
  const calibrate::KernelCostModel* kernels = nullptr;
  const hw::CollectiveModel* collectives = nullptr;
  // hw::place_layout(*layout, *cluster) if the caller has it; nullptr: build_program computes it.
  const hw::LayoutPlacement* placement = nullptr;
};

Result<Program> build_program(const BuildInputs& in, const BuildOptions& options = {});

}  // namespace scaleplan::sim
