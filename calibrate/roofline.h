// RooflineCostModel: the default kernel cost model, from a GPU's datasheet peaks.
//
// Each kernel takes the longer of its compute time and its memory time (the roofline; Williams et
// al. 2009), where neither runs at the datasheet peak and small kernels run further below it:
//   GEMM        t = max((F/peak/q + t_half) / e_gemm, bytes / (e_mem·bw), t_min)
//               Efficiency rises with size towards the ceiling e_gemm: F/peak/(F/peak + t_half).
//               q is tile and wave quantization (NVIDIA, "Matrix Multiplication Background User's
//               Guide", Deep Learning Performance docs): the output is cut into tiles that run
//               in waves of one tile per SM, and a partial tile or a partial last wave costs as
//               much as a full one, so q = m·n·batch / (waves · SMs · tile_m · tile_n) with
//               waves = ceil(tiles / SMs). The guide's tiles are 256x128 and 128x128, and cuBLAS's
//               heuristic picks the better one: q is the larger of the two. It matters most
//               when a GEMM has a few waves (A100: 108 SMs, H100: 132). A GEMM launched on
//               fewer SMs (GemmShape::sm_margin) has sms = sm_count - margin in place of SMs
//               here and sms/sm_count of the peak.
//               e_gemm is the best cuBLAS matmul efficiency measured with a brute-force shape
//               search (Bekman, ML Engineering Open Book, mamf-finder: A100 0.869, H100 0.803,
//               GH200 0.838, B200 0.776, GB200 0.729 bf16; fp8 GEMMs have their own, from the same
//               table: H100 0.709, H200 0.734, B200 0.763, GB200 0.723: no cuBLAS fp8 matmul of the
//               shape search passed
//               them, and DeepGEMM's best H800 fp8 GEMM, 1426 TFLOP/s at 4096x7168x16384, is
//               0.72 of the fp8 peak). Where a GPU's GEMMs were timed at training shapes back to
//               back, the profile takes that rate instead of the burst: B300 bf16 0.674, fp8
//               0.666, NVFP4 0.455 (Transformer Engine's GEMM benchmark, 12 GEMMs of a layer at
//               15,872 tokens, 100 iterations each: 14% below mamf-finder's best;
//               docs/hw_profiles.md, "Blackwell Ultra GEMMs at training shapes"). NVFP4 GEMMs
//               (DType::kFp4) run at the profile's fp4_dense with gemm_fp4, or gemm_fp8 where no
//               NVFP4 matmul was measured (GB300: its fp8 ceiling times the B300's measured
//               0.455/0.666). t_half = 20 µs at peak (the work of a 40 GFLOP fp8 GEMM on H800) is
//               read off DeepGEMM's published H800 table: 0.33 of the fp8 peak at 128x7168x16384
//               (30 GFLOP), 0.72 at 4096x7168x16384 (962 GFLOP).
//   attention   t = max(F / (peak · e_attn · kv/(kv + kv_half)), bytes/(e_mem·bw), t_min)
//               FlashAttention-2's published H100 fwd+bwd curve (causal, head dim 128: 163 TFLOP/s
//               at 512 tokens, 265 at 2k, 294 at 4k, 328 at 16k) follows this form with
//               e_attn = 0.343 and kv_half = 552 tokens; on A100 FA2 reaches 73% of peak
//               (Dao 2023, FlashAttention-2 abstract: "up to 230 TFLOPs/s"), so e_attn = 0.72.
//               The tile-count effect is a property of the kernel, so kv_half is kept for all GPUs.
//               e_attn is that of head dim 128; smaller head dims d scale it by
//               [d/(d + d_half)] / [128/(128 + d_half)]: the MMA work per score grows with d while
//               the softmax and bookkeeping per score do not. d_half = 23.4 is read off FA2's two
//               published H100 causal curves: head dim 64 follows the same form with the same
//               kv_half and e_attn = 0.297 (141 TFLOP/s at 512 tokens, 232 at 2k, 257 at 4k, 284
//               at 16k), 0.866 of head dim 128's 0.343. Wider heads gain nothing: at head dim 256
//               FA2's H100 forward runs at 0.88-0.89 of its head-dim-128 speed and cuDNN's at
//               0.94-0.98 (FlashAttention-3 README figure), so the factor stops at 1.
//               That is FlashAttention-2. cuDNN's fused attention (Transformer Engine's
//               FusedAttention, PyTorch SDPA's cuDNN backend) has a curve of its own: on H100 its
//               forward runs 1.62x FA2's at head dim 128 (median of the twelve causal and
//               non-causal points, 512 to 16k tokens, of the FlashAttention-3 README's forward
//               figure; the FlashAttention-3 paper's backward figure gives 1.60), so e_attn =
//               0.343·1.62 = 0.556 with the same kv_half; its head dim 64 runs at 0.80 of head
//               dim 128 (fwd+bwd), d_half = 42.6. On B200 and GB200 both kernels have their own
//               curves, least-squares fits (1k-32k tokens) of cudnn-frontend's published SDPA
//               training benchmark (causal, head dim 128, fwd+bwd): B200 (PyTorch 2.8's cuDNN
//               and FA2 backends) cuDNN 0.628 / 4340 tokens, FA2 0.186 / 2370; GB200 (cuDNN
//               frontend, PyTorch's FA2) cuDNN 0.619 / 1870, FA2 0.156 / 790: FA2 does not use
//               Blackwell's tensor-core instructions. A100 has no published cuDNN curve at hand;
//               it takes FA2's.
//   unfused attention core (Megatron-LM before flash attention; cost_model.h): its GEMMs and its
//               softmax and dropout passes as above, except that every pass over the s×s scores
//               runs at e_scores = 0.68 of HBM peak instead of e_mem. Korthikanti et al. 2022,
//               Table 4: selective recompute, which re-runs exactly this core's forward, adds
//               1.3 ms per layer of the 22B at micro-batch 4 and tp 8 on A100 (20.9 − 19.6 ms; and
//               20.3 − 19.0 with sequence parallelism); that forward moves 13 bytes per score,
//               1.80 GB for 32 heads × 2048², which is 1.37 TB/s, 0.68 of 2.04 TB/s.
//   memory      t = max(t_overhead + bytes / (e_mem·bw), t_min): e_mem = 0.80 of HBM peak (element-
//               wise kernels, norms and Adam reach 80-90% in STREAM-like copies; norms with
//               reductions sit at the low end), t_overhead = 2 µs, t_min = 3 µs per kernel (launch
//               plus tail: back-to-back kernels cannot start faster than a few µs apart).
//               A kernel's implementation (MemoryBoundShape::path) may have its own e_mem, the
//               profile's gpu.efficiency.memory: PyTorch's non-vectorized dynamic-casting loop
//               (0.724 by default, H100), its row-reduction norm and its multi-tensor Adam.
//               The attention backward takes its curve's backward ceiling and half point where
//               the profile measured them apart from the forward.
//   SM clock    a clock-bound time (a GEMM's and a fused attention kernel's compute term, the
//               casting loop's rate) is stated at the clock its figure was measured at
//               (hw::SmClock); at_sm_clock(f) gives the model of a step that runs at clock f,
//               where each such term is multiplied by f_measured / f (hw_profiles/sm_clock.h).
//   overlap     while a communication kernel of the same GPU runs, compute progresses at
//               1/s_overlap of its speed (the engine's compute slowdown under communication):
//               NCCL kernels hold SMs and HBM bandwidth. s_overlap = 1.189: Lee et al. 2025
//               ("Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
//               Learning", arXiv:2507.03114) measured GPT and LLaMA training on 4 A100s, 4 H100s
//               and two AMD GPUs and found overlapped computation 18.9% slower on average than the
//               same computation alone (40.0% at most). A calibrated profile measures its own.
//               It is a figure for NCCL kernels (and kernels like them: userbuffers' bulk
//               overlap). Transformer Engine's userbuffers ring exchange moves its chunks on the
//               copy engine and its pipelined reduce-scatter runs on SMs its GEMM was launched
//               without (sim::Op::spares_compute: no slowdown); that GEMM runs on
//               sm_count - GemmShape::sm_margin SMs instead, at that share of the peak and with
//               waves of that many tiles (docs/simulator.md, "TP communication overlap").
// Every number above is a default of RooflineParams, chosen from a published measurement and
// never fitted to a validation record; docs/simulator.md lists them with their sources. The
// GPU-specific ones (e_gemm for bf16 and fp8, both attention curves) are the profile's
// gpu.efficiency (hw::GpuEfficiency): each bundled profile gives its GPU's with their sources.
//
// Immutable after construction; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "calibrate/cost_model.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::calibrate {

// Datasheet peaks of one GPU and its measured efficiencies (fill from hw::Cluster::gpu: peaks_of).
struct GpuPeaks {
  std::string name;                 // "H100-SXM5-80GB", for describe()
  FlopsPerSecond bf16_dense;        // dense bf16 tensor-core peak
  FlopsPerSecond fp8_dense;         // dense fp8 peak; 0 = none (fp8 then runs at the bf16 rate)
  BytesPerSecond memory_bandwidth;  // HBM peak
  int sm_count = 0;                 // streaming multiprocessors; 0 = no wave quantization
  hw::GpuEfficiency efficiency;     // the profile's gpu.efficiency: the default RooflineParams
  FlopsPerSecond fp4_dense;         // dense NVFP4 peak; 0 = none (fp4 then runs at the fp8 rate)
};

// The efficiency curve of one fused attention kernel (the header comment's attention line).
using AttentionCurve = hw::AttentionCurve;

struct RooflineParams {
  double gemm_ceiling = 0.80;                       // e_gemm (see the header comment)
  double gemm_ceiling_fp8 = 0.709;                  // e_gemm of fp8 GEMMs (H100)
  double gemm_ceiling_fp4 = 0.709;                  // e_gemm of NVFP4 GEMMs (fp8's if unmeasured)
  Duration gemm_half = Duration::microseconds(20);  // t_half
  AttentionCurve flash2;                            // FlashAttention-2 (H100)
  AttentionCurve cudnn{0.556, 552, 42.6};           // cuDNN fused attention (H100)
  double memory_efficiency = 0.80;                  // e_mem
  hw::MemoryPathEfficiency memory_paths;            // e_mem by implementation (0: e_mem)
  double unfused_score_efficiency = 0.68;           // e_scores: the unfused core's score passes
  Duration memory_overhead = Duration::microseconds(2);
  Duration min_kernel = Duration::microseconds(3);  // t_min
  double overlap_slowdown = 1.189;  // s_overlap: compute slowdown beside NCCL kernels
  // The clocks the GPU-specific figures were measured at and the power-limit ends (the profile's
  // gpu.efficiency.sm_clock; disabled: nothing depends on the clock).
  hw::SmClock sm_clock;
  // The SM clock the kernels run at (at_sm_clock); 0: each figure at the clock it was measured at.
  double step_hz = 0;
};

// The defaults for a GPU: its profile's efficiencies (GEMM ceilings and attention curves, which
// each bundled profile cites; hw::GpuEfficiency's defaults are the H100's), the other parameters'
// defaults.
RooflineParams default_roofline_params(const hw::GpuEfficiency& efficiency);
inline RooflineParams default_roofline_params(const hw::GpuSpec& gpu) {
  return default_roofline_params(gpu.efficiency);
}

// The head dim at which RooflineParams::attention_ceiling is stated (FlashAttention-2's curves).
inline constexpr double kAttentionReferenceHeadDim = 128;

class RooflineCostModel : public KernelCostModel {
 public:
  explicit RooflineCostModel(GpuPeaks peaks)
      : RooflineCostModel(peaks, default_roofline_params(peaks.efficiency)) {}
  RooflineCostModel(GpuPeaks peaks, RooflineParams params);

  Duration gemm(const GemmShape& s) const override;
  Duration attention_forward(const AttentionShape& s) const override;
  Duration attention_backward(const AttentionShape& s) const override;
  Duration memory_bound(const MemoryBoundShape& s) const override;
  Duration unfused_attention_forward(const AttentionShape& s) const override;
  Duration unfused_attention_backward(const AttentionShape& s) const override;
  double overlap_slowdown() const override { return params_.overlap_slowdown; }
  std::string describe() const override;
  const hw::SmClock* sm_clock() const override {
    return params_.sm_clock.enabled() ? &params_.sm_clock : nullptr;
  }
  std::shared_ptr<const KernelCostModel> at_sm_clock(double hz) const override;

  const RooflineParams& params() const { return params_; }
  // e_mem of a memory-bound kernel's implementation: the profile's figure, else e_mem.
  double memory_path_efficiency(MemPath path) const;

  // e_attn(d) / e_attn(128) of the header comment for a kernel; 1 for d >= 128 (and for an
  // unknown d <= 0).
  double attention_head_dim_factor(double head_dim,
                                   AttentionKernel kernel = AttentionKernel::kFlash2) const;
  const AttentionCurve& attention_curve(AttentionKernel kernel) const {
    return kernel == AttentionKernel::kCudnn ? params_.cudnn : params_.flash2;
  }

 private:
  Duration attention(const AttentionShape& s, Flops f, Bytes b, bool backward) const;
  FlopsPerSecond peak(DType d) const;
  // The tensor rate and e_gemm of a GEMM of dtype d (fp4 at fp8's where the GPU has no fp4 rate,
  // fp8 at bf16's where it has no fp8 rate).
  std::pair<FlopsPerSecond, double> gemm_rate(DType d) const;
  Duration memory_time(Bytes b) const;
  Duration memory_time(Bytes b, double efficiency) const;
  Duration gemm(const GemmShape& s, double memory_efficiency) const;
  Duration unfused_attention(const AttentionShape& s, bool backward) const;
  // f_measured / f for a figure measured at `measured_hz`, at the model's step clock; 1 without.
  double clock_factor(double measured_hz) const;

 public:
  // q of the header comment, in (0, 1], on the SMs the GEMM runs on (gemm_sms); 1 when
  // sm_count is 0.
  double quantization_efficiency(const GemmShape& s) const;
  // The SMs a GEMM runs on: sm_count less its GemmShape::sm_margin (at least 1); 0 when sm_count
  // is 0 (then no margin applies: the model does not know the GPU's SMs).
  int gemm_sms(const GemmShape& s) const;

 private:
  GpuPeaks peaks_;
  RooflineParams params_;
};

}  // namespace scaleplan::calibrate
