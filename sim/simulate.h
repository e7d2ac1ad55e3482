// simulate(): from (model, cluster, sequence length, layout) to one simulated iteration.
//
// Resolves the layout against the model and GPU count, builds the Program (sim/builder.h) with the
// kernel cost model (the roofline default from the cluster's GPU peaks unless one is given) and the
// cluster's collective model, runs the Engine, and summarizes:
//   iteration     the makespan of one optimizer step;
//   tokens/s      gbs·seq / iteration, and per GPU;
//   MFU, HFU      model FLOPs (no recompute) and hardware FLOPs (with recompute) per second over
//                 gpus × dense bf16 peak (Narayanan et al. 2021; Chowdhery et al. 2022, App. B);
//   breakdown     per simulated rank (sim/metrics.h);
//   memory        the allocated peak, the reserved peak and `fits` come from
//                 models::estimate_memory (validated on measured peaks); the engine's allocation
//                 peak per stage (static states plus the activations the schedule keeps in flight)
//                 is reported beside it for the timeline.
// Pure function of its inputs; thread-safe (the planner calls it from many threads).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/layout.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "sim/builder.h"
#include "sim/metrics.h"

namespace scaleplan::sim {

// Bounds of one simulation (docs/reliability.md, "Bounded work"): layer passes (simulated ranks x
// micro-batches x layers per stage) whose ops the program holds, and the longest iteration the
// int64 picosecond clock reports (it holds ~106 days and saturates beyond). Measured on Llama-3-8B,
// tp=8,pp=4,dp=16,gbs=128 --all-ranks (36,864 passes): 105 MB and 0.55 s without a trace; with
// --trace 455 MB, 3.9 s and a 284 MB trace (33 ops per pass). So 2^20 passes take ~3 GB, and a
// trace of 2^16 passes ~0.5 GB on disk and ~0.8 GB in memory.
inline constexpr int64_t kMaxLayerPasses = int64_t{1} << 20;
inline constexpr int64_t kMaxTracedLayerPasses = int64_t{1} << 16;
inline constexpr double kMaxIterationSeconds = 1e6;

struct SimulateOptions {
  int64_t gpus = 0;        // 0: derive from the layout (dp must be set)
  bool all_ranks = false;  // simulate every GPU, not one per stage
  bool trace = false;      // fill SimulationResult::trace
  const calibrate::KernelCostModel* kernels = nullptr;  // nullptr: roofline from the cluster
  // The framework whose conventions apply: memory (models/memory.h), timing (framework_timing)
  // and host issue (framework_host_issue).
  std::string framework = "megatron";
  // Decoder layers per model chunk (pp·vpp entries, in chunk order) where the framework splits
  // them its own way (nanotron balances compute, models::nanotron_chunk_layers); empty: the
  // default split (stage_layer_counts). Used by both the memory model and the program.
  std::vector<int> chunk_layers;
  // The attention core's kernel (core/kernel_shapes.h); unset: the framework's
  // (framework_timing).
  std::optional<AttentionKernel> attention;
  // The host issue model (sim/builder.h HostIssue); unset: framework_host_issue(framework).
  std::optional<HostIssue> host;
  // The layout's placement, hw::place_layout(resolved layout, cluster) with default options, where
  // the caller keeps one (the planner caches one per parallel grid: for 16k GPUs computing it
  // costs about as much as building and running the program); nullptr: computed here.
  const hw::LayoutPlacement* placement = nullptr;
  // DualPipe's forward-backward pairs overlapped (BuildOptions::overlap_pairs); false runs each
  // pair's passes one after the other, to see what the overlap hides.
  bool overlap_pairs = true;
  // Whether a pass waits for the previous pass's sends (BuildOptions::blocking_p2p); unset: the
  // framework's (FrameworkTiming::blocking_p2p, bidirectional_blocking_sends), set to see what
  // blocking sends cost.
  std::optional<bool> blocking_sends;
  // The layout names dtype=bf16 itself. Under the fp16-era conventions (megatron-2022,
  // deepspeed-2021), whose runs omit dtype for their fp16, the run is bf16 mixed precision
  // instead: no loss scale, fp32 main gradients (Megatron-LM's --bf16 forces
  // --accumulate-allreduce-grads-in-fp32) reduced in fp32 and accumulated by the weight-gradient
  // GEMMs (gradient accumulation fusion, allowed with fp32 accumulation). Other conventions are
  // bf16 already.
  bool bf16_given = false;
  // Transformer Engine's TP communication overlap (BuildOptions::tp_comm_overlap): what
  // Megatron-core runs with --tp-comm-overlap and NeMo's and Megatron-Bridge's performance recipes
  // configure (tp_comm_overlap). Needs SP; off by default, as in Megatron-LM, and not exported.
  bool tp_comm_overlap = false;
  // Megatron-core options NeMo's and Megatron-Bridge's recipes set, which change memory and
  // traffic (validate infers them per record, cli/cmd_validate.cc). grad_reduce_in_fp32 (Megatron
  // DDP config): the main gradients and their DP reduction in fp32 (4 B/param) or bf16 (2);
  // unset: the framework's (Megatron-LM's command line forces fp32 for bf16).
  std::optional<bool> grad_reduce_in_fp32;
  // --fp8-param-gather under dtype=fp8: the decoder weights held in fp8 only
  // (models::FrameworkMemory::fp8_primary_weights).
  bool fp8_param_gather = false;
  // Called between the phases of a run (placement, program, timeline) with what comes next, for
  // a caller that shows progress on long runs (--all-ranks on thousands of GPUs); may be empty.
  std::function<void(std::string_view)> progress;
};

// What a training framework does that changes the timeline, beyond the host (framework_host_issue)
// and memory (models::framework_memory) models. docs/simulator.md, "Frameworks".
struct FrameworkTiming {
  // The attention core: kUnfused, or a fused kernel, which is FlashAttention-2 unless the GPU's
  // SM version is at least cudnn_from_sm (0: never), where it is cuDNN's (framework_attention).
  AttentionKernel attention = AttentionKernel::kFlash2;
  int cudnn_from_sm = 0;
  bool dp_overlap = true;                     // BuildOptions::dp_overlap
  bool blocking_p2p = false;                  // BuildOptions::blocking_p2p
  bool p2p_scatter_gather = false;            // BuildOptions::p2p_scatter_gather
  bool fp16_loss_scale = false;               // BuildOptions::fp16_loss_scale
  int dp_grad_bytes = 4;                      // BuildOptions::dp_grad_bytes
  int grad_accum_bytes = 0;                   // BuildOptions::grad_accum_bytes
  bool dp_reduce_every_microbatch = false;    // BuildOptions::dp_reduce_every_microbatch
  bool zero2_reduce_every_microbatch = true;  // BuildOptions::zero2_reduce_every_microbatch
  // ZeRO-1/2's parameter gather (BuildOptions::param_gather) without pipelining; with it,
  // param_gather_for decides.
  ParamGather param_gather = ParamGather::kAfterStep;
  bool zero3_per_tensor_sync = false;  // BuildOptions::zero3_per_tensor_sync
  Duration zero3_call_overhead{};      // BuildOptions::zero3_call_overhead
  bool zero3_list_copies = false;      // BuildOptions::zero3_list_copies
  // DP gradient bucket in parameters; 0: Megatron-core's default max(40e6, 1e6·dp·cp)
  // (megatron/core/distributed/distributed_data_parallel.py, when ddp_config.bucket_size is
  // None). nanotron: torch DDP's bucket_cap_mb = ModelArgs.ddp_bucket_cap_mb = 25 MiB of bf16
  // gradients, 13,107,200 parameters.
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

// "megatron" (Megatron-core: flash attention, DP reduction overlapping the backward, asynchronous
// pipeline sends), "nanotron" (the same three), "megatron-2022" (Megatron-LM as its 2021 and 2022
// papers ran it: the unfused attention core, the DP all-reduce after the backward, blocking
// pipeline sends, fp16 with a dynamic loss scale), "deepspeed-2021" (megatron-2022's model code and
// precision under DeepSpeed's ZeRO-3 of early 2021: per-parameter, synchronous gathers and
// reduce-scatters); anything else is an invalid-input error naming `framework`.
Result<FrameworkTiming> framework_timing(std::string_view framework);

// The parameter gather a framework runs for a layout: its FrameworkTiming::param_gather, except
// that Megatron-core's (kFirstForwardFromStepStart) pipelines gather aligned with interleaving
// (--align-param-gather, which Megatron-LM allows only there; ZeRO-1's distributed optimizer
// only, ZeRO-2 being Megatron FSDP) and after the step otherwise: there each stage would wait for
// its own gathers in turn in the pipeline's fill, so the export does not pass
// --overlap-param-gather.
ParamGather param_gather_for(const FrameworkTiming& timing, const Layout& layout);

// The attention core `timing`'s framework runs on `gpu`: its unfused core, or the fused kernel it
// picks on that GPU generation (hw::sm_version): Megatron-core's Transformer Engine prefers cuDNN
// on Hopper and later, torchtitan's SDPA lists cuDNN first (its 2025 releases did on Blackwell
// only), nanotron calls flash-attn. docs/simulator.md, "Attention kernels".
AttentionKernel framework_attention(const FrameworkTiming& timing, const hw::GpuSpec& gpu);

// torchtitan's eager conventions: "torchtitan" (today's, PyTorch >= 2.9: one fused RMSNorm
// kernel) or "torchtitan-2025" (its 2024-2025 releases on PyTorch <= 2.8: composite RMSNorm).
inline bool is_torchtitan(std::string_view framework) {
  return framework == "torchtitan" || framework == "torchtitan-2025";
}

// The DP gradient bucket, in parameters, that `timing` uses on the resolved `layout`.
int64_t dp_bucket_params(const FrameworkTiming& timing, const Layout& layout);

// The host issue model of a framework (docs/simulator.md, "Host issue"): eager PyTorch pays
// kEagerLaunchCost of CPU time per kernel or collective; "nanotron" adds the glue kernels its
// llama.py launches per layer beyond the operator list and waits on each pipeline receive.
// Others get none: "graph" (CUDA-graph captured) by definition, "megatron" for speed (its records
// are GPU-bound; docs/simulator.md); SimulateOptions::host sets any model explicitly.
HostIssue framework_host_issue(std::string_view framework);

// framework_host_issue(framework) at `per_launch` of CPU time per kernel or collective instead of
// its own (`--host-launch`): its glue kernels and blocking receives are kept; 0 turns it off.
HostIssue framework_host_issue(std::string_view framework, Duration per_launch);

// CPU time to issue one kernel from eager PyTorch: the Python call, the ATen dispatcher and
// autograd bookkeeping, the caching allocator and cudaLaunchKernel (docs/simulator.md gives the
// sources).
inline const Duration kEagerLaunchCost = Duration::microseconds(10);

struct StageResult {
  int stage = 0;
  int64_t global_rank = 0;
  RankBreakdown breakdown;
  Bytes peak_memory;         // allocated peak of the stage: models::estimate_memory `total`
  Bytes step_peak_memory;    // allocated peak of the optimizer phase (`step_peak`)
  Bytes engine_peak_memory;  // the engine's allocation peak (static states + activations in
                             // flight, no transients): follows the timeline, not the verdict
};

struct SimulationResult {
  Layout layout;  // resolved
  Duration iteration;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  std::vector<StageResult> stages;  // one per simulated rank
  Bytes peak_memory;                // memory model: max over stages of the allocated peak
  Bytes peak_reserved;              // memory model: allocator reserve + context + NCCL
  bool fits = false;
  size_t ops = 0;
  uint64_t events = 0;
  AttentionKernel attention = AttentionKernel::kFlash2;  // the attention core the program ran
  std::string kernel_model;                              // describe() of the kernel cost model
  std::string collective_model;                          // describe() of the collective cost model
  std::string trace;                                     // Perfetto JSON when requested
};

// What the simulator cannot time, refused by name before anything runs (simulate, and `plan`
// before it searches): attention-logit soft-capping (Gemma-2's attn_logit_softcapping), which
// Transformer Engine's fused attention does not apply (NeMo runs Gemma-2 through its own unfused
// core) and whose FlashAttention-2 kernel (softcap, flash-attn >= 2.6) has no measured cost here.
Status check_simulable(const models::ModelSpec& model);

Result<SimulationResult> simulate(const models::ModelSpec& model, const hw::Cluster& cluster,
                                  int64_t seq_len, const Layout& layout,
                                  const SimulateOptions& options = {});

}  // namespace scaleplan::sim
