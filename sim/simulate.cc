#include "sim/simulate.h"

#include <algorithm>
#include <cstdio>

#include "calibrate/kernel_model.h"
#include "hw_profiles/collectives.h"
#include "models/accounting.h"
#include "models/memory.h"
#include "sim/builder.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/trace.h"

namespace scaleplan::sim {

Result<FrameworkTiming> framework_timing(std::string_view framework) {
  FrameworkTiming t;
  if (framework == "megatron" || framework == "megatron-lm" || framework == "Megatron-LM") {
    // Transformer Engine's DotProductAttention disables FlashAttention "to give FusedAttention
    // preference on Hopper+ for performance reasons" (dot_product_attention/utils.py,
    // get_attention_backend): cuDNN from sm90, flash-attn on A100.
    t.cudnn_from_sm = 90;
    // The distributed optimizer's parameter all-gather overlaps the next forward
    // (--overlap-param-gather, which the Megatron export passes with --overlap-grad-reduce where
    // param_gather_for overlaps it).
    t.param_gather = ParamGather::kFirstForwardFromStepStart;
    return t;
  }
  if (framework == "nanotron") {
    t.dp_bucket_params = 25LL * 1024 * 1024 / 2;
    // FP32GradientAccumulator (src/nanotron/optim/gradient_accumulator.py): after every
    // micro-batch's backward, fp32_grad.add_(half_param.grad) for each parameter: read the fp32
    // buffer (4 B) and the bf16 gradient (2 B), write the buffer (4 B).
    t.grad_accum_bytes = 10;
    return t;
  }
  // torchtitan: FSDP2 / DDP overlap the gradient reduction with the backward and SDPA runs a
  // fused (cuDNN or flash) attention kernel: the defaults. Its eager kernels and host issue are
  // BuildOptions::torchtitan_kernels and framework_host_issue. DualPipeV pairs: see
  // FrameworkTiming::pairs_overlap_only_with_ep.
  if (is_torchtitan(framework)) {
    // torchtitan's ScaledDotProductAttention sets SDPA's backend priority: CUDNN_ATTENTION first
    // on every GPU today ("Always make CuDNN as the highest priority if available"); in 2025
    // (PR #1196, May 2025) first only on sm100 ("Use cudnn backend on B200"), FLASH_ATTENTION
    // (FlashAttention-2) elsewhere.
    t.cudnn_from_sm = framework == "torchtitan-2025" ? 100 : 80;
    // Gradient accumulation without no_sync: FSDP2 reduce-scatters (DDP all-reduces) after every
    // micro-batch's backward ("doing it by default makes the code simpler", torchtitan PR #1710,
    // closed; its train_step loops forward_backward_step over the micro-batches). Its pipeline
    // schedules turn the sync off but for each stage's last backward
    // (PipelineStage.backward_maybe_with_nosync).
    t.dp_reduce_every_microbatch = true;
    // With pipelining its schedules accumulate FSDP2's unsharded gradients under no_sync and
    // reduce at each stage's last backward, ZeRO-2 included.
    t.zero2_reduce_every_microbatch = false;
    // ZeRO-1/2 as FSDP2 with reshard_after_forward = False: the first forward gathers each
    // block's parameters, prefetched one ahead, and keeps them.
    t.param_gather = ParamGather::kFirstForward;
    t.pairs_overlap_only_with_ep = true;
    t.bidirectional_blocking_sends = false;
    return t;
  }
  if (framework == "megatron-2022" || framework == "deepspeed-2021") {
    // Megatron-LM v2.x-v3.0, the code of Narayanan et al. 2021 and Korthikanti et al. 2022:
    // FlashAttention (Dao et al., May 2022) reached Megatron-LM as --use-flash-attn in 2023, so
    // the core ran unfused (ParallelAttention, FusedScaleMaskSoftmax); train_step all-reduces the
    // gradients after forward_backward_func returns (--overlap-grad-reduce came with
    // Megatron-core in 2023); p2p_communication._communicate synchronizes the device after every
    // send/receive.
    t.attention = AttentionKernel::kUnfused;
    t.dp_overlap = false;
    t.blocking_p2p = true;
    // --scatter-gather-tensors-in-pipeline defaulted to on (arguments.py).
    t.p2p_scatter_gather = true;
    // Their runs were fp16 mixed precision ("half precision", the --fp16 of the example
    // scripts; bf16 came later), whose loss scaler unscales the gradients every step.
    t.fp16_loss_scale = true;
    // ... and kept and all-reduced the main gradients in fp16: --accumulate-allreduce-grads-in-fp32
    // is off unless given (forced only for --bf16, arguments.py), DistributedDataParallel's
    // buffer then takes the parameters' dtype, and the paper's example script
    // (examples/pretrain_gpt3_175B.sh) does not give it.
    t.dp_grad_bytes = 2;
    if (framework == "megatron-2022") {
      // ... and added every micro-batch's weight gradients into them with a kernel of its own:
      // gradient accumulation fusion (the weight-gradient GEMM accumulating into main_grad,
      // fused_weight_gradient_dense.cu, late 2021) ran only with fp32 gradient accumulation
      // ("supported only with fp32 gradient accumulation. Setting gradient_accumulation_fusion
      // to False", arguments.py), so an fp16 run adds each gradient into the fp16 buffer:
      // DistributedDataParallel's hook param.main_grad.add_(param.grad.data) with contiguous
      // buffers, autograd's in-place param.grad += grad without (the 2021 default, which skips
      // the first micro-batch's add). Read both, write one: 6 B per local parameter.
      t.grad_accum_bytes = 6;
    }
    if (framework == "deepspeed-2021") {
      // The DeepSpeed ZeRO-3 runs of Narayanan et al. 2021 (Table 2) trained the same fp16 GPT
      // code under DeepSpeed's ZeRO-3 of the time (BuildOptions::zero3_per_tensor_sync).
      t.zero3_per_tensor_sync = true;
      t.zero3_call_overhead = Duration::microseconds(380);
      // Its collectives were list-form (one tensor view per rank) through PyTorch 1.8's
      // ProcessGroupNCCL, which copies each view out of (all_gather) or into (reduce_scatter)
      // a flat buffer: one copy per rank of the group (BuildOptions::zero3_list_copies).
      t.zero3_list_copies = true;
    }
    return t;
  }
  return Status::invalid("framework: '" + std::string(framework) +
                         "' is not one of megatron, megatron-2022, deepspeed-2021, nanotron, "
                         "torchtitan, torchtitan-2025");
}

ParamGather param_gather_for(const FrameworkTiming& timing, const Layout& layout) {
  if (timing.param_gather != ParamGather::kFirstForwardFromStepStart || layout.pp == 1)
    return timing.param_gather;
  // ZeRO-2 is Megatron FSDP (optim_grads), exported without --align-param-gather.
  return layout.vpp_degree() > 1 && layout.zero == 1 ? ParamGather::kAligned
                                                     : ParamGather::kAfterStep;
}

AttentionKernel framework_attention(const FrameworkTiming& timing, const hw::GpuSpec& gpu) {
  if (timing.attention != AttentionKernel::kFlash2 || timing.cudnn_from_sm <= 0)
    return timing.attention;
  const int sm = hw::sm_version(gpu);
  return sm >= timing.cudnn_from_sm ? AttentionKernel::kCudnn : AttentionKernel::kFlash2;
}

int64_t dp_bucket_params(const FrameworkTiming& timing, const Layout& layout) {
  if (timing.dp_bucket_params > 0) return timing.dp_bucket_params;
  return std::max<int64_t>(40'000'000, int64_t{1'000'000} * layout.dp_degree() * layout.cp);
}

HostIssue framework_host_issue(std::string_view framework) {
  HostIssue h;
  if (framework == "nanotron") {
    h.per_launch = kEagerLaunchCost;
    // Kernels of nanotron's LlamaDecoderLayer (src/nanotron/models/llama.py, training path, MHA)
    // that the operator list does not hold (the list's q/k/v and gate/up GEMMs are already fused
    // like nanotron's qkv_proj and gate_up_proj). Forward +10: the permute().contiguous() of qkv,
    // torch.cat and permute().contiguous() of K/V for the flash rotary, CoreAttention's
    // cu_seqlens (2 zeros, 2 sums, 2 cumsums), the copy of the transposed attention output before
    // o_proj. Backward +16: the gradient sums at the 2 residual branches, the 3 layout copies'
    // backward, the flash backward's dQ-accumulator memset, TritonRMSNorm's 2 weight-gradient
    // reductions, the GLU split/mul backward (2 more than one activation op), and the FP32
    // gradient accumulator's add into its fp32 buffer for each of the layer's 6 parameters
    // (gradient_accumulator.py).
    // With the operator list's nanotron kernels (BuildOptions::nanotron_kernels) the layout copies
    // are list ops of their own, issued once each: attn.qkv_layout and attn.out_layout forward
    // (-2), their backward and the GLU and gradient-accumulation ops backward (-4).
    h.glue_forward_kernels = 10 - 2;
    h.glue_backward_kernels = 16 - 4;
    h.blocking_recv = true;
  }
  if (is_torchtitan(framework)) {
    // Eager PyTorch (no torch.compile), one Python thread per rank. Launches of its Llama block
    // (torchtitan/models/llama3/model.py) beyond the list's ops: RoPE's three kernels for each
    // of q and k where the list has one op (5), repeat_kv's two copies (2), separate wq, wk, wv
    // (2 more GEMMs than the list's fused projection) and w1, w3 (1 more), SiLU and the product
    // (1 more): forward +11, and on PyTorch <= 2.8 ("torchtitan-2025") the composite RMSNorm's 7
    // more per norm (2 norms: 14), +25; the backward's autograd chain about twice that. The list
    // ops that models::add_torchtitan_layer_kernels adds (rope, repeat_kv and SiLU-product
    // forward and backward, and the two composite norms) are issued as ops of their own and
    // come off.
    const bool composite = framework == "torchtitan-2025";
    const int forward = composite ? 25 : 11, list_ops = composite ? 5 : 3;
    h.per_launch = kEagerLaunchCost;
    h.glue_forward_kernels = forward - list_ops;
    h.glue_backward_kernels = 2 * forward - list_ops;
  }
  // "megatron" is eager PyTorch too, but its model is left off by default: host ops double the
  // program (simulate_bench 77 -> 138 ms) and on every Megatron/Korthikanti record the host is
  // hidden under GPU work (< 0.01% change); SimulateOptions::host turns it on.
  return h;
}

HostIssue framework_host_issue(std::string_view framework, Duration per_launch) {
  HostIssue h = framework_host_issue(framework);
  h.per_launch = per_launch;
  return h;
}

Status check_simulable(const models::ModelSpec& model) {
  if (model.attn_softcap > 0) {
    char cap[32];
    std::snprintf(cap, sizeof cap, "%g", model.attn_softcap);
    return Status::invalid(
        "model_type '" + model.model_type +
        "': attention-logit soft-capping (attn_logit_softcapping " + cap +
        ") is not timed: Transformer Engine's fused attention does not apply it and the "
        "soft-capping FlashAttention-2 kernel has not been measured (`model` and `memory` "
        "work)");
  }
  return Status::ok();
}

namespace {

// Bounded work (docs/reliability.md): the program holds every op of every simulated rank, about
// kOpsPerLayerPass ops for each layer of each micro-batch on each rank, so its memory (and the
// trace's) grows as ranks x micro-batches x layers per stage. Refused up front past
// kMaxLayerPasses, with the numbers, instead of exhausting memory.
Status check_work(const Layout& l, int64_t num_layers, bool all_ranks, bool trace) {
  const int64_t ranks = all_ranks ? l.gpus() : l.pp;
  const int64_t layers_per_rank = (num_layers + l.pp - 1) / l.pp + 1;  // + embedding/head
  const double passes = static_cast<double>(ranks) * static_cast<double>(l.num_microbatches()) *
                        static_cast<double>(layers_per_rank);
  const int64_t limit = trace ? kMaxTracedLayerPasses : kMaxLayerPasses;
  if (passes <= static_cast<double>(limit)) return Status::ok();
  return Status::invalid(
      "layout: " + std::to_string(ranks) + (all_ranks ? " simulated GPUs" : " pipeline stages") +
      " x " + std::to_string(l.num_microbatches()) + " micro-batches x " +
      std::to_string(layers_per_rank) + " layers per stage = " +
      std::to_string(static_cast<int64_t>(passes)) + " layer passes, more than the " +
      std::to_string(limit) + (trace ? " one trace holds" : " one simulation holds in memory") +
      (all_ranks ? " (leave out --all-ranks: one rank per stage gives the same iteration time "
                   "for symmetric layouts)"
                 : " (a smaller global batch or a larger micro-batch)"));
}

}  // namespace

Result<SimulationResult> simulate(const models::ModelSpec& model, const hw::Cluster& cluster,
                                  int64_t seq_len, const Layout& layout,
                                  const SimulateOptions& options) {
  SP_RETURN_IF_ERROR(check_simulable(model));
  SP_ASSIGN_OR_RETURN(
      Layout l, resolve_layout(layout, models::layout_constraints(model, seq_len), options.gpus));
  // The kernel model would run fp8 at the bf16 rate on a GPU without fp8: a number for a run that
  // cannot exist.
  SP_RETURN_IF_ERROR(hw::check_dtype_supported(cluster, l.dtype, "layout"));
  SimulationResult out;
  out.layout = l;

  // Memory model: static model states per stage for the program, transients, and the verdict.
  SP_ASSIGN_OR_RETURN(auto framework, models::framework_memory(options.framework));
  SP_ASSIGN_OR_RETURN(FrameworkTiming timing, framework_timing(options.framework));
  if (options.bf16_given && l.dtype == DType::kBf16 && timing.fp16_loss_scale) {
    timing.fp16_loss_scale = false;
    timing.dp_grad_bytes = 4;
    timing.grad_accum_bytes = 0;
    framework.fp32_grad_accum = true;
  }
  if (options.grad_reduce_in_fp32) {
    framework.fp32_grad_accum = *options.grad_reduce_in_fp32;
    timing.dp_grad_bytes = *options.grad_reduce_in_fp32 ? 4 : 2;
  }
  framework.fp8_primary_weights = options.fp8_param_gather;
  models::MemoryOptions mo;
  mo.framework = framework;
  mo.gpu_memory = cluster.gpu.memory;
  if (!options.chunk_layers.empty()) mo.chunk_layers = options.chunk_layers;
  SP_ASSIGN_OR_RETURN(models::MemoryResult mem, models::estimate_memory(model, l, seq_len, mo));
  BuildOptions bo;
  bo.all_ranks = options.all_ranks;
  bo.overlap_pairs = options.overlap_pairs;
  bo.chunk_layers = options.chunk_layers;
  bo.attention = options.attention.value_or(framework_attention(timing, cluster.gpu));
  out.attention = bo.attention;
  bo.dp_overlap = timing.dp_overlap;
  bo.blocking_p2p = options.blocking_sends.value_or(
      timing.blocking_p2p || (timing.bidirectional_blocking_sends && bidirectional(l.schedule)));
  bo.p2p_scatter_gather = timing.p2p_scatter_gather;
  bo.fp16_loss_scale = timing.fp16_loss_scale;
  bo.dp_grad_bytes = timing.dp_grad_bytes;
  bo.grad_accum_bytes = timing.grad_accum_bytes;
  bo.dp_reduce_every_microbatch = timing.dp_reduce_every_microbatch;
  bo.zero2_reduce_every_microbatch = timing.zero2_reduce_every_microbatch;
  bo.param_gather = param_gather_for(timing, l);
  bo.zero3_per_tensor_sync = timing.zero3_per_tensor_sync;
  bo.zero3_call_overhead = timing.zero3_call_overhead;
  bo.zero3_list_copies = timing.zero3_list_copies;
  bo.dp_bucket_params = dp_bucket_params(timing, l);
  if (timing.pairs_overlap_only_with_ep && (l.ep == 1 || l.recompute != Recompute::kNone))
    bo.overlap_pairs = false;
  bo.host = options.host ? *options.host : framework_host_issue(options.framework);
  bo.tp_comm_overlap = options.tp_comm_overlap;
  bo.nanotron_kernels = options.framework == "nanotron";
  bo.torchtitan_kernels = is_torchtitan(options.framework);
  bo.torchtitan_composite_rmsnorm = options.framework == "torchtitan-2025";
  bo.fsdp2_copies = is_torchtitan(options.framework);
  bo.nanotron_zero_copies = options.framework == "nanotron";
  for (const auto& s : mem.stages)
    bo.stage_static_memory.push_back(s.weights + s.gradients + s.optimizer + s.fp8_weight_copies);

  // The cluster's own model (fitted when the profile is calibrated, roofline otherwise) unless the
  // caller gives one.
  std::unique_ptr<calibrate::KernelCostModel> own_kernels;
  const calibrate::KernelCostModel* kernels = options.kernels;
  if (!kernels) {
    SP_ASSIGN_OR_RETURN(own_kernels, calibrate::kernel_cost_model_for(cluster));
    kernels = own_kernels.get();
  }
  out.kernel_model = kernels->describe();
  // Merging compute runs shrinks the program (and the engine's work) and drops the per-kernel
  // trace (BuildOptions::merge_compute). Under a compute slowdown a merged run ends where the
  // chain would, but for the chain's per-op rounding to a tick (1 ps each).
  bo.merge_compute = !options.trace;
  const hw::CollectiveModel collectives(cluster);
  out.collective_model = collectives.describe();
  SP_RETURN_IF_ERROR(check_work(l, model.num_layers, options.all_ranks, options.trace));
  BuildInputs in{&model, &l, seq_len, &cluster, kernels, &collectives, options.placement};
  // The messages are built only for a caller that shows them (not for the planner's runs).
  const auto& progress = options.progress;
  if (progress)
    progress(options.all_ranks ? "building the program of all " + std::to_string(l.gpus()) + " GPUs"
                               : "building the program");
  SP_ASSIGN_OR_RETURN(Program program, build_program(in, bo));
  if (progress)
    progress("running " + std::to_string(program.num_ops()) + " ops on " +
             std::to_string(program.num_ranks()) + " simulated ranks");
  const Engine engine(program, {.compute_slowdown_under_comm = kernels->overlap_slowdown()});
  SP_ASSIGN_OR_RETURN(Timeline tl, engine.run());
  if (progress) progress("timeline done: " + std::to_string(tl.events) + " events");

  out.iteration = tl.makespan.since_start();
  // Times saturate at the int64 clock's ends (core/units.h) instead of wrapping; an iteration that
  // long is refused, not reported (a 405B model at seq 131072 and gbs 32767 reached it).
  if (out.iteration.to_seconds() > kMaxIterationSeconds) {
    return Status::invalid("the iteration would take more than " +
                           std::to_string(static_cast<int64_t>(kMaxIterationSeconds)) +
                           " s (11.6 days), past the range of the simulated clock; a smaller "
                           "batch, sequence or model");
  }
  out.ops = program.num_ops();
  out.events = tl.events;
  const double seconds = out.iteration.to_seconds();
  const double gpus = static_cast<double>(l.gpus());
  const double tokens = static_cast<double>(l.global_batch()) * static_cast<double>(seq_len);
  if (seconds > 0) {
    out.tokens_per_s = tokens / seconds;
    out.tokens_per_s_per_gpu = out.tokens_per_s / gpus;
    const auto fpt = models::flops_per_token(model, seq_len);
    const double peak = cluster.gpu.bf16_dense.value() * gpus;
    out.mfu = fpt.model() * out.tokens_per_s / peak;
    out.hfu = fpt.hardware(l.recompute, l.recompute_module_set()) * out.tokens_per_s / peak;
  }
  const auto br = breakdown(program, tl);
  for (int r = 0; r < program.num_ranks(); ++r) {
    const RankInfo& info = program.ranks()[r];
    StageResult s;
    s.stage = info.stage;
    s.global_rank = info.global_rank;
    s.breakdown = br[r];
    s.engine_peak_memory = tl.peak_memory[r];
    if (static_cast<size_t>(info.stage) < mem.stages.size()) {
      // The memory model's allocated peak (validated against measured peaks, docs/validation.md
      // "Memory model"); the engine's allocations only follow the schedule's activations.
      const models::StageMemory& sm = mem.stages[info.stage];
      s.peak_memory = sm.total;
      s.step_peak_memory = sm.step_peak;
    } else {
      s.peak_memory = s.engine_peak_memory;
    }
    out.stages.push_back(s);
  }
  out.peak_memory = mem.peak_allocated;
  out.peak_reserved = mem.peak_reserved + mem.overhead;
  out.fits = mem.fits;
  if (options.trace) out.trace = chrome_trace(program, tl, {.title = format_layout(l)});
  return out;
}

}  // namespace scaleplan::sim
