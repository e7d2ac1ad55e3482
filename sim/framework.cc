#include "sim/framework.h"

#include <algorithm>

#include "sim/schedule.h"

namespace scaleplan::sim {
namespace {

FrameworkTiming framework_timing(FrameworkId id) {
  FrameworkTiming t;
  switch (id) {
    case FrameworkId::kMegatron:
      // Transformer Engine's DotProductAttention disables FlashAttention "to give FusedAttention
      // preference on Hopper+ for performance reasons" (dot_product_attention/utils.py,
      // get_attention_backend): cuDNN from sm90, flash-attn on A100.
      t.cudnn_from_sm = 90;
      // The distributed optimizer's parameter all-gather overlaps the next forward
      // (--overlap-param-gather, which the Megatron export passes with --overlap-grad-reduce where
      // param_gather_for overlaps it).
      t.param_gather = ParamGather::kFirstForwardFromStepStart;
      return t;
    case FrameworkId::kNanotron:
      t.dp_bucket_params = 25LL * 1024 * 1024 / 2;
      // FP32GradientAccumulator (src/nanotron/optim/gradient_accumulator.py): after every
      // micro-batch's backward, fp32_grad.add_(half_param.grad) for each parameter: read the fp32
      // buffer (4 B) and the bf16 gradient (2 B), write the buffer (4 B).
      t.grad_accum_bytes = 10;
      t.nanotron_zero_copies = true;
      return t;
    case FrameworkId::kTorchtitan:
    case FrameworkId::kTorchtitan2025:
      // torchtitan: FSDP2 / DDP overlap the gradient reduction with the backward and SDPA runs a
      // fused (cuDNN or flash) attention kernel: the defaults. Its eager kernels and host issue
      // are models::FrameworkOps and framework_host_issue. DualPipeV pairs: see
      // FrameworkTiming::pairs_overlap_only_with_ep.
      // torchtitan's ScaledDotProductAttention sets SDPA's backend priority: CUDNN_ATTENTION first
      // on every GPU today ("Always make CuDNN as the highest priority if available"); in 2025
      // (PR #1196, May 2025) first only on sm100 ("Use cudnn backend on B200"), FLASH_ATTENTION
      // (FlashAttention-2) elsewhere.
      t.cudnn_from_sm = id == FrameworkId::kTorchtitan2025 ? 100 : 80;
      // Gradient accumulation without no_sync: FSDP2 reduce-scatters (DDP all-reduces) after
      // every micro-batch's backward ("doing it by default makes the code simpler", torchtitan PR
      // #1710, closed; its train_step loops forward_backward_step over the micro-batches). Its
      // pipeline schedules turn the sync off but for each stage's last backward
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
      t.fsdp2_copies = true;
      return t;
    case FrameworkId::kMegatron2022:
    case FrameworkId::kDeepspeed2021:
      // Megatron-LM v2.x-v3.0, the code of Narayanan et al. 2021 and Korthikanti et al. 2022:
      // FlashAttention (Dao et al., May 2022) reached Megatron-LM as --use-flash-attn in 2023, so
      // the core ran unfused (ParallelAttention, FusedScaleMaskSoftmax); train_step all-reduces
      // the gradients after forward_backward_func returns (--overlap-grad-reduce came with
      // Megatron-core in 2023); p2p_communication._communicate synchronizes the device after
      // every send/receive.
      t.attention = AttentionKernel::kUnfused;
      t.dp_overlap = false;
      t.blocking_p2p = true;
      // --scatter-gather-tensors-in-pipeline defaulted to on (arguments.py).
      t.p2p_scatter_gather = true;
      // Their runs were fp16 mixed precision ("half precision", the --fp16 of the example
      // scripts; bf16 came later), whose loss scaler unscales the gradients every step.
      t.fp16_loss_scale = true;
      // ... and kept and all-reduced the main gradients in fp16:
      // --accumulate-allreduce-grads-in-fp32 is off unless given (forced only for --bf16,
      // arguments.py), DistributedDataParallel's buffer then takes the parameters' dtype, and the
      // paper's example script (examples/pretrain_gpt3_175B.sh) does not give it.
      t.dp_grad_bytes = 2;
      if (id == FrameworkId::kMegatron2022) {
        // ... and added every micro-batch's weight gradients into them with a kernel of its own:
        // gradient accumulation fusion (the weight-gradient GEMM accumulating into main_grad,
        // fused_weight_gradient_dense.cu, late 2021) ran only with fp32 gradient accumulation
        // ("supported only with fp32 gradient accumulation. Setting gradient_accumulation_fusion
        // to False", arguments.py), so an fp16 run adds each gradient into the fp16 buffer:
        // DistributedDataParallel's hook param.main_grad.add_(param.grad.data) with contiguous
        // buffers, autograd's in-place param.grad += grad without (the 2021 default, which skips
        // the first micro-batch's add). Read both, write one: 6 B per local parameter.
        t.grad_accum_bytes = 6;
      } else {
        // The DeepSpeed ZeRO-3 runs of Narayanan et al. 2021 (Table 2) trained the same fp16 GPT
        // code under DeepSpeed's ZeRO-3 of the time (FrameworkTiming::zero3_per_tensor_sync).
        t.zero3_per_tensor_sync = true;
        t.zero3_call_overhead = Duration::microseconds(380);
        // Its collectives were list-form (one tensor view per rank) through PyTorch 1.8's
        // ProcessGroupNCCL, which copies each view out of (all_gather) or into (reduce_scatter)
        // a flat buffer: one copy per rank of the group (FrameworkTiming::zero3_list_copies).
        t.zero3_list_copies = true;
      }
      return t;
  }
  return t;
}

}  // namespace

HostIssue framework_host_issue(FrameworkId id) {
  HostIssue h;
  if (id == FrameworkId::kNanotron) {
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
    // With the operator list's nanotron kernels (models::FrameworkOps::nanotron_kernels) the layout
    // copies are list ops of their own, issued once each: attn.qkv_layout and attn.out_layout
    // forward (-2), their backward and the GLU and gradient-accumulation ops backward (-4).
    h.glue_forward_kernels = 10 - 2;
    h.glue_backward_kernels = 16 - 4;
    h.blocking_recv = true;
  }
  if (is_torchtitan(id)) {
    // Eager PyTorch (no torch.compile), one Python thread per rank. Launches of its Llama block
    // (torchtitan/models/llama3/model.py) beyond the list's ops: RoPE's three kernels for each
    // of q and k where the list has one op (5), repeat_kv's two copies (2), separate wq, wk, wv
    // (2 more GEMMs than the list's fused projection) and w1, w3 (1 more), SiLU and the product
    // (1 more): forward +11, and on PyTorch <= 2.8 ("torchtitan-2025") the composite RMSNorm's 7
    // more per norm (2 norms: 14), +25; the backward's autograd chain about twice that. The list
    // ops that models::add_torchtitan_layer_kernels adds (RoPE's widening copy, complex product
    // and narrowing copy, repeat_kv and SiLU-product forward and backward, and the two composite
    // norms) are issued as ops of their own and come off.
    const bool composite = id == FrameworkId::kTorchtitan2025;
    const int forward = composite ? 25 : 11, list_ops = composite ? 7 : 5;
    h.per_launch = kEagerLaunchCost;
    h.glue_forward_kernels = forward - list_ops;
    h.glue_backward_kernels = 2 * forward - list_ops;
  }
  // Megatron is eager PyTorch too, but its model is left off by default: host ops double the
  // program (simulate_bench 77 -> 138 ms) and on every Megatron/Korthikanti record the host is
  // hidden under GPU work (< 0.01% change); SimulateOptions::host turns it on.
  return h;
}

HostIssue framework_host_issue(const Framework& f, Duration per_launch) {
  HostIssue h = f.host;
  h.per_launch = per_launch;
  return h;
}

Framework framework(FrameworkId id) {
  Framework f;
  f.id = id;
  f.memory = models::framework_memory(id);
  f.ops = models::framework_ops(id);
  f.timing = framework_timing(id);
  f.host = framework_host_issue(id);
  return f;
}

Result<Framework> parse_framework_value(std::string_view name) {
  SP_ASSIGN_OR_RETURN(FrameworkId id, parse_framework(name));
  return framework(id);
}

Framework run_framework(const RunConventions& run) {
  Framework f = framework(run.framework);
  if (run.attention_of) {
    const FrameworkTiming other = framework_timing(*run.attention_of);
    f.timing.attention = other.attention;
    f.timing.cudnn_from_sm = other.cudnn_from_sm;
  }
  return f;
}

Framework with_bf16_named(Framework f) {
  if (!f.timing.fp16_loss_scale) return f;
  f.timing.fp16_loss_scale = false;
  f.timing.dp_grad_bytes = 4;
  f.timing.grad_accum_bytes = 0;
  f.memory.fp32_grad_accum = true;
  return f;
}

Framework with_recipe(Framework f, const RecipeOptions& recipe) {
  f.ops.tp_comm_overlap = recipe.tp_comm_overlap;
  f.ops.tp_comm_overlap_preset = recipe.tp_comm_overlap_preset;
  if (recipe.grad_reduce_in_fp32) {
    f.memory.fp32_grad_accum = *recipe.grad_reduce_in_fp32;
    f.timing.dp_grad_bytes = *recipe.grad_reduce_in_fp32 ? 4 : 2;
  }
  f.memory.fp8_primary_weights = recipe.fp8_param_gather;
  f.ops.fp8_recipe = recipe.fp8_recipe;
  f.ops.router_fusion = recipe.moe_router_fusion;
  f.ops.router_force_balance = recipe.moe_router_force_load_balancing;
  if (recipe.moe_sequential_experts) f.ops.expert_gemm_streams = 1;
  f.ops.moe_core_r010 = recipe.moe_core_r010;
  if (recipe.no_fused_attention) f.timing.cudnn_from_sm = 0;
  return f;
}

Framework on_gpu(Framework f, const hw::GpuSpec& gpu) {
  // nvte_is_non_tn_fp8_gemm_supported (TransformerEngine d0067d0
  // common/transformer_engine.cpp:1191-1203): sm 10.x-11.x and 13.0 on; the quantizers then
  // write no transpose (pytorch/csrc/quantizer.cpp:375, 547, 689).
  const int sm = hw::sm_version(gpu);
  f.ops.fp8_gemm_any_layout =
      f.id == FrameworkId::kMegatron && ((sm >= 100 && sm < 120) || sm >= 130);
  return f;
}

Status check_fp8_recipe(const Framework& f, const Layout& layout, const hw::GpuSpec& gpu) {
  const models::Fp8Recipe r = f.ops.fp8_recipe;
  if (layout.dtype != DType::kFp8 ||
      (r != models::Fp8Recipe::kMxfp8 && r != models::Fp8Recipe::kNvfp4))
    return Status::ok();
  const int sm = hw::sm_version(gpu);
  const bool mx = r == models::Fp8Recipe::kMxfp8;
  if (sm >= 100 && (sm < 120 || !mx)) return Status::ok();
  return Status::invalid("fp8_recipe: '" + std::string(models::to_string(r)) +
                         "' needs Transformer Engine's block-scaled " +
                         (mx ? "MXFP8 GEMMs (compute capability 10.x or 11.x); "
                             : "NVFP4 GEMMs (compute capability 10.0 or higher); ") +
                         gpu.name + " has " +
                         (sm > 0 ? std::to_string(sm / 10) + "." + std::to_string(sm % 10)
                                 : std::string("none given")));
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

bool reduces_every_microbatch(const FrameworkTiming& timing, const Layout& layout) {
  return (timing.dp_reduce_every_microbatch && layout.pp == 1) ||
         (timing.zero2_reduce_every_microbatch && layout.zero == 2);
}

bool blocks_p2p(const FrameworkTiming& timing, Schedule schedule) {
  return timing.blocking_p2p || (timing.bidirectional_blocking_sends && bidirectional(schedule));
}

bool pairs_overlap(const FrameworkTiming& timing, const Layout& layout) {
  return !(timing.pairs_overlap_only_with_ep &&
           (layout.ep == 1 || layout.recompute != Recompute::kNone));
}

}  // namespace scaleplan::sim
