#include "calibrate/roofline.h"

#include <gtest/gtest.h>

#include <memory>
#include <tuple>
#include <utility>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::calibrate {
namespace {

// The roofline parameters of a bundled profile's GPU (its gpu.efficiency).
RooflineParams bundled(const char* cluster) {
  auto c = hw::load_cluster(cluster);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? default_roofline_params(c->gpu) : RooflineParams{};
}

// `peaks` with the efficiencies of a bundled profile's GPU.
GpuPeaks with_efficiency_of(GpuPeaks peaks, const char* cluster) {
  auto c = hw::load_cluster(cluster);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  if (c.is_ok()) peaks.efficiency = c->gpu.efficiency;
  return peaks;
}

// Datasheet peaks (B200: 2.25 / 4.5 PFLOPS dense bf16 / fp8, GB200 2.5 / 5, both 8 TB/s and 148
// SMs) with their profiles' efficiencies.
GpuPeaks b200_peaks() {
  return with_efficiency_of(
      {"B200-180GB", FlopsPerSecond(2250e12), FlopsPerSecond(4500e12), BytesPerSecond(8e12), 148},
      "dgx-b200");
}
GpuPeaks gb200_peaks() {
  return with_efficiency_of({"GB200-B200-186GB", FlopsPerSecond(2500e12), FlopsPerSecond(5000e12),
                             BytesPerSecond(8e12), 148},
                            "gb200-nvl72");
}

// H100 SXM datasheet: 989 TFLOP/s dense bf16, 1979 fp8, 3.35 TB/s HBM3.
GpuPeaks h100() {
  return {"H100-SXM5-80GB", FlopsPerSecond(989e12), FlopsPerSecond(1979e12),
          BytesPerSecond(3.35e12)};
}

TEST(Roofline, LargeGemmApproachesTheCeiling) {
  // 8192³ bf16: 2·8192³ = 1.0995e12 FLOPs, 1.1117 ms at peak. With t_half = 20 µs and the H100
  // ceiling 0.803: (1.1117 + 0.020) / 0.803 = 1.4093 ms, i.e. 78.9% of peak.
  RooflineCostModel m(h100());
  GemmShape g{.m = 8192, .n = 8192, .k = 8192};
  const double ideal = 2.0 * 8192.0 * 8192.0 * 8192.0 / 989e12;
  EXPECT_NEAR(m.gemm(g).to_seconds(), (ideal + 20e-6) / 0.803, 1e-9);
  EXPECT_NEAR(ideal / m.gemm(g).to_seconds(), 0.789, 0.002);
}

TEST(Roofline, EfficiencyFallsWithSize) {
  // Halving every dimension divides the FLOPs by 8 but the fixed t_half does not shrink: the
  // achieved fraction of peak must drop.
  RooflineCostModel m(h100());
  auto eff = [&](int64_t d) {
    GemmShape g{.m = d, .n = d, .k = d};
    return g.flops().value() / 989e12 / m.gemm(g).to_seconds();
  };
  EXPECT_GT(eff(8192), eff(4096));
  EXPECT_GT(eff(4096), eff(1024));
  EXPECT_LT(eff(8192), 0.803);
}

TEST(Roofline, SkinnyGemmIsMemoryBound) {
  // m=1, n=k=16384 bf16: 537 MB of weights to read (2·16384²), 0.54 GFLOPs. Memory time at 80%
  // of 3.35 TB/s = 200 µs dominates the compute time (~21 µs).
  RooflineCostModel m(h100());
  GemmShape g{.m = 1, .n = 16384, .k = 16384};
  EXPECT_NEAR(m.gemm(g).to_seconds(), g.bytes().value() / (3.35e12 * 0.8), 1e-9);
}

TEST(Roofline, Fp8RunsAtTheFp8PeakUnderItsOwnCeiling) {
  // A large fp8 GEMM runs at the fp8 peak (1979 vs 989 TFLOP/s) times the best fp8 efficiency
  // mamf-finder found on H100, 0.709 (1402.6 TFLOP/s; bf16: 0.803): 2 · 0.709 / 0.803 = 1.77 times
  // the bf16 speed (t_half, the same work at either peak, is small beside 16384³).
  RooflineCostModel m(h100());
  GemmShape b{.m = 16384, .n = 16384, .k = 16384};
  GemmShape f = b;
  f.dtype = DType::kFp8;
  EXPECT_NEAR(m.gemm(b) / m.gemm(f), 2.0 * 0.709 / 0.803, 0.03);
  // DeepGEMM's best dense fp8 GEMM on H800 (H100-class tensor cores; README, commit 55ab91f):
  // 1426 TFLOP/s at 4096x7168x16384, within 10% (the bf16-derived ceiling gave 1482).
  GemmShape dg{.m = 4096, .n = 7168, .k = 16384, .dtype = DType::kFp8};
  RooflineCostModel h800(with_efficiency_of({"H800-SXM5-80GB", FlopsPerSecond(989e12),
                                             FlopsPerSecond(1979e12), BytesPerSecond(3.35e12), 132},
                                            "dgx-h800"));
  EXPECT_NEAR(dg.flops().value() / h800.gemm(dg).to_seconds() / 1e12, 1426.0, 0.10 * 1426.0);
  // The ceilings by GPU: H200 0.734, B200 0.763 (the same table); A100 has no fp8 at all.
  EXPECT_DOUBLE_EQ(bundled("hgx-h200").gemm_ceiling_fp8, 0.734);
  EXPECT_DOUBLE_EQ(bundled("dgx-b200").gemm_ceiling_fp8, 0.763);
}

// Each Blackwell part takes its own mamf-finder row (ML Engineering Open Book, commit 744d01e),
// not the B200's: GB200 1822.0 of 2500 TFLOP/s bf16 (0.729) and 3615.6 of 5000 fp8 (0.723), where
// the B200 reaches 1745.0 of 2250 (0.776) and 3432.5 of 4500 (0.763). A large GEMM on GB200 then
// runs at 2500 · 0.729 / (2250 · 0.776) = 1.044 times the B200's speed, not 2500 / 2250 = 1.111.
TEST(Roofline, EachBlackwellTakesItsOwnPublishedCeilings) {
  EXPECT_NEAR(bundled("gb200-nvl72").gemm_ceiling, 1822.0 / 2500, 0.0005);
  EXPECT_NEAR(bundled("gb200-nvl72").gemm_ceiling_fp8, 3615.6 / 5000, 0.0005);
  EXPECT_NEAR(bundled("dgx-b200").gemm_ceiling, 1745.0 / 2250, 0.0005);
  // B300 (Blackwell Ultra): since 2026-11-30 what Transformer Engine's GEMM benchmark measured at
  // training shapes (B300GemmsAtTrainingShapesTakeTheirMeasuredTimes, below), not its mamf-finder
  // row; the GB300 has no measurement of its own and takes the GB200's bf16 and fp8 ceilings (the
  // same peaks). Neither falls back to the H100's. Attention: the B300 keeps the B200's curve (no
  // B300 measurement); the GB300 has its own
  // (Gb300AttentionIsFasterThanGb200ByTheMeasuredRatioPerPass).
  EXPECT_DOUBLE_EQ(bundled("gb300-nvl72").gemm_ceiling, bundled("gb200-nvl72").gemm_ceiling);
  EXPECT_DOUBLE_EQ(bundled("gb300-nvl72").gemm_ceiling_fp8,
                   bundled("gb200-nvl72").gemm_ceiling_fp8);
  EXPECT_DOUBLE_EQ(bundled("dgx-b300").cudnn.ceiling, bundled("dgx-b200").cudnn.ceiling);
  const RooflineCostModel b200(b200_peaks()), gb200(gb200_peaks());
  const GemmShape g{.m = 16384, .n = 16384, .k = 16384};
  EXPECT_NEAR(b200.gemm(g) / gb200.gemm(g), 2500.0 * 0.729 / (2250.0 * 0.776), 0.01);
}

// NVFP4 GEMMs run at the profile's dense FP4 peak (datasheets, halved from "with sparsity":
// GB300 NVL72 1,080 PFLOPS dense for 72 GPUs = 15 PFLOPS; GB200 NVL72 1,440 sparse = 10; DGX B200
// 144 sparse for 8 = 9; HGX B300 105 dense for 8 = 13.125) under gemm_fp4's ceiling, or gemm_fp8's
// where no NVFP4 matmul was measured (Blackwell: GB200, B200). t = (F/peak/q + t_half)/e, so with
// the same shape (same q) and ceiling, (t·e - t_half) scales as 1/peak: GB200's fp4 GEMM does that
// part in half the fp8 time. A GPU without an fp4 rate (H100) runs fp4 at its fp8 rate.
TEST(Roofline, Nvfp4RunsAtTheFp4PeakUnderTheFp8Ceiling) {
  for (const auto& [name, fp4] : {std::pair<const char*, double>{"gb200-nvl72", 10000e12},
                                  {"gb300-nvl72", 15000e12},
                                  {"dgx-b200", 9000e12},
                                  {"dgx-b300", 13125e12}}) {
    auto c = hw::load_cluster(name);
    ASSERT_TRUE(c.is_ok());
    EXPECT_DOUBLE_EQ(c->gpu.fp4_dense.value(), fp4) << name;
  }
  auto gb200 = hw::load_cluster("gb200-nvl72");
  ASSERT_TRUE(gb200.is_ok());
  const RooflineParams p = default_roofline_params(gb200->gpu);
  EXPECT_DOUBLE_EQ(p.gemm_ceiling_fp4, p.gemm_ceiling_fp8);
  const RooflineCostModel m(peaks_of(*gb200));
  const GemmShape f8{.m = 8192, .n = 8192, .k = 8192, .dtype = DType::kFp8};
  GemmShape f4 = f8;
  f4.dtype = DType::kFp4;
  const double e = p.gemm_ceiling_fp8, half = 20e-6;
  EXPECT_NEAR((m.gemm(f8).to_seconds() * e - half) / (m.gemm(f4).to_seconds() * e - half),
              10000.0 / 5000.0, 1e-6);
  // Its operands: half a byte and one E4M3 scale per 16 elements each; C in bf16.
  EXPECT_EQ(f4.bytes().value(), int64_t{2} * 8192 * 8192 * 9 / 16 + int64_t{2} * 8192 * 8192);
  RooflineCostModel h(h100());
  GemmShape h4 = f4;
  EXPECT_DOUBLE_EQ(h.gemm(h4).to_seconds(), h.gemm(f8).to_seconds());
}

// The 12 GEMMs of one transformer layer as Transformer Engine's GEMM benchmark derives them from a
// model config (hidden 4096, intermediate 16384, micro-batch 31 x sequence 512 = 15,872 tokens;
// benchmarks/gemm/benchmark_gemm.py, shapes written MxKxN): per linear (K, N) = QKV (4096, 12288),
// attention out (4096, 4096), MLP up (4096, 16384), MLP down (16384, 4096); fprop M x K -> M x N,
// dgrad M x N -> M x K, wgrad K x M -> K x N. The model's time of each pass (its 4 GEMMs).
std::vector<double> te_layer_pass_ms(const RooflineCostModel& m, DType d) {
  constexpr int64_t kTokens = 15872;
  const std::pair<int64_t, int64_t> linears[] = {
      {4096, 12288}, {4096, 4096}, {4096, 16384}, {16384, 4096}};
  std::vector<double> pass(3, 0.0);
  for (const auto& [k, n] : linears) {
    pass[0] += m.gemm({.m = kTokens, .n = n, .k = k, .dtype = d}).to_seconds() * 1e3;
    pass[1] += m.gemm({.m = kTokens, .n = k, .k = n, .dtype = d}).to_seconds() * 1e3;
    pass[2] += m.gemm({.m = k, .n = n, .k = kTokens, .dtype = d}).to_seconds() * 1e3;
  }
  return pass;
}

// Transformer Engine's GEMM profiling guide (NVIDIA/TransformerEngine 1609c890,
// docs/examples/gemm_profiling/gemm_profiling.rst, "Autocast vs Pre-quantized") timed that layer's
// GEMMs on an "NVIDIA B300 SXM6 AC" with CUDA events, 10 warm-up and 100 timed iterations back to
// back per shape, inputs quantized before the timed loop (kernel time only). Fprop / dgrad / wgrad
// (ms): BF16 4.250 / 4.434 / 4.418; FP8 current scaling 2.158 / 2.329 / 2.325; NVFP4 1.254 / 1.305
// / 1.205. dgx-b300's ceilings are the ones at which the roofline gives each precision's 12 GEMMs
// their measured total (0.674, 0.666, 0.455), so the layer comes out within 0.5% and each pass
// within 6%. mamf-finder's best shapes (0.786, 0.745), which the profile took before 2026-11-30,
// gave the layer 11.24 / 6.09 ms in bf16 / fp8 (1.17x / 1.12x too fast), and NVFP4 at the fp8
// fraction 2.30 ms (1.64x too fast).
TEST(Roofline, B300GemmsAtTrainingShapesTakeTheirMeasuredTimes) {
  auto b300 = hw::load_cluster("dgx-b300");
  ASSERT_TRUE(b300.is_ok());
  const RooflineCostModel m(peaks_of(*b300));
  struct Measured {
    DType dtype;
    double fprop, dgrad, wgrad;  // ms
  };
  for (const Measured& x :
       {Measured{DType::kBf16, 4.250, 4.434, 4.418}, Measured{DType::kFp8, 2.158, 2.329, 2.325},
        Measured{DType::kFp4, 1.254, 1.305, 1.205}}) {
    const std::vector<double> pass = te_layer_pass_ms(m, x.dtype);
    const double measured[] = {x.fprop, x.dgrad, x.wgrad};
    double model_total = 0, measured_total = 0;
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(pass[i], measured[i], 0.06 * measured[i])
          << static_cast<int>(x.dtype) << " " << i;
      model_total += pass[i];
      measured_total += measured[i];
    }
    EXPECT_NEAR(model_total, measured_total, 0.005 * measured_total) << static_cast<int>(x.dtype);
  }
}

// The GB300 has no NVFP4 measurement of its own; it is the B300's die (Blackwell Ultra) at a
// higher power, and takes the ratio of the two fractions that die reached in the benchmark above,
// NVFP4 0.455 of its 13,125 TFLOP/s over FP8 0.666 of its 4,500: gemm_fp4 = 0.723 · 0.455 / 0.666.
// So the layer's NVFP4 GEMMs run faster than its FP8 ones by the B300's measured 6.812 / 3.764 =
// 1.81x scaled by the two parts' peak ratios, (15000 / 5000) / (13125 / 4500) = 1.029: 1.86x,
// within 3% (t_half weighs a little more at the faster rate); before, 2.69x.
TEST(Roofline, Gb300Nvfp4GemmsKeepTheB300sMeasuredNvfp4ToFp8Ratio) {
  auto gb300 = hw::load_cluster("gb300-nvl72");
  ASSERT_TRUE(gb300.is_ok());
  const RooflineParams p = default_roofline_params(gb300->gpu);
  EXPECT_NEAR(p.gemm_ceiling_fp4, p.gemm_ceiling_fp8 * 0.455 / 0.666, 5e-4);
  const RooflineCostModel m(peaks_of(*gb300));
  double fp8 = 0, fp4 = 0;
  for (double t : te_layer_pass_ms(m, DType::kFp8)) fp8 += t;
  for (double t : te_layer_pass_ms(m, DType::kFp4)) fp4 += t;
  const double b300_measured = (2.158 + 2.329 + 2.325) / (1.254 + 1.305 + 1.205);
  const double expected = b300_measured * (15000.0 / 5000) / (13125.0 / 4500);
  EXPECT_NEAR(fp8 / fp4, expected, 0.03 * expected);
}

// The GB300 keeps the GB200's bf16 ceiling (0.729) as its short-burst rate: tritonbench's cuBLAS
// bf16 matmul on a GB300 (facebookexperimental/triton PR #740, 2025-12-17) ran 8192 x 8192 x 8192
// in 0.640230 ms (1717 TFLOP/s) and 8192 x 8192 x 16384 in 1.213527 ms (1812); the roofline at
// 0.729 of 2500 TFLOP/s gives both within 3%.
TEST(Roofline, Gb300BurstGemmsRunAtTheGb200Ceiling) {
  auto gb300 = hw::load_cluster("gb300-nvl72");
  ASSERT_TRUE(gb300.is_ok());
  const RooflineCostModel m(peaks_of(*gb300));
  for (const auto& [k, ms] :
       {std::pair<int64_t, double>{8192, 0.640230}, std::pair<int64_t, double>{16384, 1.213527}}) {
    const double t = m.gemm({.m = 8192, .n = 8192, .k = k}).to_seconds() * 1e3;
    EXPECT_NEAR(t, ms, 0.03 * ms) << k;
  }
}

// Fused attention forward + backward TFLOP/s in FlashAttention-2's benchmark setup: hidden 2048
// (2048 / head_dim heads), batch 16k / seq sequences.
double fa2_tflops(const RooflineCostModel& m, int64_t seq, int64_t head_dim,
                  AttentionKernel kernel = AttentionKernel::kFlash2) {
  const int64_t heads = 2048 / head_dim;
  AttentionShape a{.batch = 16384 / seq,
                   .heads = heads,
                   .kv_heads = heads,
                   .q_len = seq,
                   .kv_len = seq,
                   .head_dim = head_dim,
                   .kernel = kernel};
  const double flops = a.forward_flops().value() + a.backward_flops().value();
  return flops / (m.attention_forward(a) + m.attention_backward(a)).to_seconds() / 1e12;
}

TEST(Roofline, AttentionFollowsThePublishedFlashAttention2Curve) {
  // FA2 on H100, causal, head dim 128, hidden 2048 (16 heads), batch 16k/seq: published fwd+bwd
  // 265 TFLOP/s at 2k, 294 at 4k, 328 at 16k. The model's efficiency 0.343·kv/(kv+552) gives 267,
  // 299 and 328: within 2%.
  RooflineCostModel m(h100());
  for (auto [seq, tflops] : {std::pair{2048, 265.0}, {4096, 294.0}, {16384, 328.0}}) {
    EXPECT_NEAR(fa2_tflops(m, seq, 128), tflops, 0.02 * tflops) << seq;
  }
}

TEST(Roofline, AttentionHeadDim64FollowsItsOwnPublishedCurve) {
  // FA2 on H100, head dim 64 (hidden 2048, 32 heads), the panel beside the head-dim-128 one:
  // published fwd+bwd 141 TFLOP/s at 512 tokens, 192 at 1k, 232 at 2k, 257 at 4k, 273 at 8k, 284
  // at 16k. The head-dim-128 ceiling scaled by (64/(64+23.4)) / (128/(128+23.4)) = 0.866 must
  // reproduce every point within 2%, and the short end checks that kv_half carries over.
  RooflineCostModel m(h100());
  for (auto [seq, tflops] : {std::pair{512, 141.0},
                             {1024, 192.0},
                             {2048, 232.0},
                             {4096, 257.0},
                             {8192, 273.0},
                             {16384, 284.0}}) {
    EXPECT_NEAR(fa2_tflops(m, seq, 64), tflops, 0.02 * tflops) << seq;
  }
  // Wider heads do more MMA work per score: efficiency rises with the head dim up to 128. Beyond
  // it nothing is gained: FA2's H100 forward at head dim 256 runs at 0.88-0.89 of its head-dim-128
  // speed (causal 298 vs 335, non-causal 326 vs 370 TFLOP/s at 16k; FlashAttention-3 README
  // figure), cuDNN's at 0.94-0.98.
  EXPECT_DOUBLE_EQ(m.attention_head_dim_factor(128), 1.0);
  EXPECT_LT(m.attention_head_dim_factor(64), m.attention_head_dim_factor(96));
  EXPECT_DOUBLE_EQ(m.attention_head_dim_factor(256), 1.0);
  EXPECT_DOUBLE_EQ(m.attention_head_dim_factor(192, AttentionKernel::kCudnn), 1.0);
}

// cuDNN's fused attention on H100, head dim 128: the FlashAttention-3 README's forward figure
// (causal) gives 518, 529 and 539 TFLOP/s at 4k, 8k and 16k tokens, the FlashAttention-3 paper's
// backward figure 499, 518 and 516; with the backward doing 2.5x the forward's FLOPs that is
// 3.5 / (1/fwd + 2.5/bwd) = 504, 521 and 522 TFLOP/s forward and backward together. The model's
// cuDNN ceiling is FA2's times the forward figure's cuDNN/FA2 ratio (1.62), so the backward
// figure is a check of it, as are the absolute values. Head dim 64 (fwd 363, 379, 388; bwd 417,
// 432, 433) comes to 409, 416, 421: 0.81, 0.80, 0.81 of head dim 128, where FA2's head-dim
// factor would give 0.87.
TEST(Roofline, CudnnAttentionFollowsItsPublishedH100Speed) {
  RooflineCostModel m(h100());
  for (auto [seq, hd128, hd64] :
       {std::tuple{4096, 504.0, 409.0}, {8192, 521.0, 416.0}, {16384, 522.0, 421.0}}) {
    const double model128 = fa2_tflops(m, seq, 128, AttentionKernel::kCudnn);
    EXPECT_NEAR(model128, hd128, 0.05 * hd128) << seq;
    EXPECT_NEAR(fa2_tflops(m, seq, 64, AttentionKernel::kCudnn) / model128, hd64 / hd128, 0.02)
        << seq;
  }
  // The kernel is part of the shape: FlashAttention-2 stays on its own curve.
  EXPECT_NEAR(fa2_tflops(m, 16384, 128), 328.0, 0.02 * 328.0);
}

// B200 and GB200 (cudnn-frontend's benchmark/sdpa_benchmark_training artifacts: causal, head dim
// 128, batch 1, 128 query and 8 KV heads; forward and backward TFLOP/s combined as above):
// B200 (PyTorch 2.8, cuDNN 9.10.2) cuDNN 739, 998, 1138 and FA2 290, 338, 358 at 4k, 8k, 16k;
// GB200 (cuDNN frontend) cuDNN 1132, 1298, 1391 and PyTorch's FA2 330, 357, 371. Each GPU's curves
// are least-squares fits of its own benchmark (1k-32k tokens), so this checks the fit and that
// the profile carries the curve: FlashAttention-2 runs at a sixth of a Blackwell GPU's peak, not
// at Hopper's third.
TEST(Roofline, BlackwellAttentionFollowsTheCudnnFrontendBenchmarks) {
  const RooflineCostModel b200(b200_peaks()), gb200(gb200_peaks());
  struct Point {
    const RooflineCostModel* m;
    int64_t seq;
    double cudnn, flash2;
  };
  for (const Point& p : {Point{&b200, 4096, 739, 290}, Point{&b200, 8192, 998, 338},
                         Point{&b200, 16384, 1138, 358}, Point{&gb200, 4096, 1132, 330},
                         Point{&gb200, 8192, 1298, 357}, Point{&gb200, 16384, 1391, 371}}) {
    EXPECT_NEAR(fa2_tflops(*p.m, p.seq, 128, AttentionKernel::kCudnn), p.cudnn, 0.10 * p.cudnn)
        << p.seq;
    EXPECT_NEAR(fa2_tflops(*p.m, p.seq, 128), p.flash2, 0.10 * p.flash2) << p.seq;
  }
}

// Blackwell Ultra's attention: one run of cudnn-frontend's SDPA training benchmark timed both GPUs
// on the same software (fb682ce7, results/llama3.1/{gb200,gb300}/*_20260424_*.csv: cuDNN 9.22,
// Llama-3.1 heads 64/8, head dim 128, causal, batch 2, bf16). GB300 over GB200, TFLOP/s at 2k, 4k,
// 8k, 16k, 32k tokens: forward 1373/1097, 1703/1408, 1856/1574, 1915/1708, 1953/1622; backward
// 967/885, 1248/1148, 1435/1332, 1507/1328, 1490/1226. Both GPUs have the same 2.5 PFLOPS peak, so
// the GB300 profile's kernels must be faster than the GB200's by these ratios, pass by pass (within
// the 5% of its two-parameter fit).
TEST(Roofline, Gb300AttentionIsFasterThanGb200ByTheMeasuredRatioPerPass) {
  const RooflineCostModel gb200(gb200_peaks());
  const RooflineCostModel gb300(with_efficiency_of(
      {"GB300-288GB", FlopsPerSecond(2500e12), FlopsPerSecond(5000e12), BytesPerSecond(8e12), 148},
      "gb300-nvl72"));
  struct Point {
    int64_t seq;
    double fwd, bwd;  // GB300 TFLOP/s over GB200's
  };
  for (const Point& p :
       {Point{2048, 1373.0 / 1097, 967.0 / 885}, Point{4096, 1703.0 / 1408, 1248.0 / 1148},
        Point{8192, 1856.0 / 1574, 1435.0 / 1332}, Point{16384, 1915.0 / 1708, 1507.0 / 1328},
        Point{32768, 1953.0 / 1622, 1490.0 / 1226}}) {
    const AttentionShape a{.batch = 2,
                           .heads = 64,
                           .kv_heads = 8,
                           .q_len = p.seq,
                           .kv_len = p.seq,
                           .head_dim = 128,
                           .kernel = AttentionKernel::kCudnn};
    const double fwd =
        gb200.attention_forward(a).to_seconds() / gb300.attention_forward(a).to_seconds();
    const double bwd =
        gb200.attention_backward(a).to_seconds() / gb300.attention_backward(a).to_seconds();
    EXPECT_NEAR(fwd, p.fwd, 0.05 * p.fwd) << p.seq;
    EXPECT_NEAR(bwd, p.bwd, 0.05 * p.bwd) << p.seq;
  }
}

// The unfused core of the 22B GPT (Korthikanti et al. 2022) at micro-batch 4 and tp 8 on A100:
// 32 head-batches of 2048 x 2048 scores, head dim 96. Every kernel is bound by the scores: the
// forward moves 13 B per score (QK^T writes 2, softmax 4, dropout 5 with its mask, PV reads 2)
// plus Q, K, V and O (4 x 32·2048·96·2 B); the backward 19 B per score (dP writes 2, dV reads 2,
// dropout 5, softmax 6, dQ and dK read 2 each) plus the 8 head-dim operands of its four GEMMs.
// All at 0.68 of 2039 GB/s, plus 2 µs for each of the two passes. The forward comes to the 1.3 ms
// that selective recompute adds to one layer in the paper's Table 4.
TEST(Roofline, UnfusedAttentionCoreMovesItsScoreBytesAtTheMeasuredBandwidth) {
  GpuPeaks a100 = with_efficiency_of(
      {"A100-SXM4-80GB", FlopsPerSecond(312e12), FlopsPerSecond(0), BytesPerSecond(2039e9), 108},
      "dgx-a100-80g");
  RooflineCostModel m(a100);
  AttentionShape a{
      .batch = 4, .heads = 8, .kv_heads = 8, .q_len = 2048, .kv_len = 2048, .head_dim = 96};
  const double scores = 32.0 * 2048 * 2048, operand = 32.0 * 2048 * 96 * 2;
  const double bw = 0.68 * 2039e9;
  EXPECT_NEAR(m.unfused_attention_forward(a).to_seconds(),
              (13 * scores + 4 * operand) / bw + 2 * 2e-6, 1e-8);
  EXPECT_NEAR(m.unfused_attention_backward(a).to_seconds(),
              (19 * scores + 8 * operand) / bw + 2 * 2e-6, 1e-8);
  EXPECT_NEAR(m.unfused_attention_forward(a).to_seconds(), 1.3e-3, 0.05 * 1.3e-3);
}

TEST(Roofline, MemoryBoundIsBandwidthPlusOverheadWithAFloor) {
  // 1 GiB at 0.8 · 3.35 TB/s = 400.6 µs, plus 2 µs. A 1 KiB op takes the 3 µs floor.
  RooflineCostModel m(h100());
  EXPECT_NEAR(m.memory_bound({.bytes = 1_GiB, .flops = Flops(0)}).to_seconds(),
              2e-6 + (1 << 30) / (3.35e12 * 0.8), 1e-9);
  EXPECT_EQ(m.memory_bound({.bytes = 1_KiB, .flops = Flops(0)}), Duration::microseconds(3));
}

// H200 SXM datasheet: 989 TFLOP/s dense bf16, 4.8 TB/s HBM3e, 132 SMs; hgx-h200's efficiencies.
GpuPeaks h200() {
  return with_efficiency_of({"H200-SXM-141GB", FlopsPerSecond(989e12), FlopsPerSecond(1979e12),
                             BytesPerSecond(4.8e12), 132},
                            "hgx-h200");
}

// Each memory-bound implementation runs at its own fraction of HBM, and the profile's figures
// give back the kernel benchmarks they come from (../shared/measured/h200-2026-11-28/
// torch_4l_s4096_gas4.json "kernels", triton do_bench on the H200; not the step's trace):
// F.silu(u) * u over bf16 [4096, 14336] is two vectorized kernels, SiLU 4 B and the product 6 B
// per element: 0.1491 ms; F.rms_norm over bf16 [4096, 4096], 4 B per element: 27.80 us; fused
// AdamW over 1,923,125,248 fp32 parameters, 28 B each: 15.49 ms. The dynamic-casting loop's
// default is H100's (PR pytorch#137053: 536,870,912 fp32 -> fp16 copies, 6 B each, 2.225 ms on a
// 2.0 TB/s H100 PCIe before the PR vectorized them).
TEST(Roofline, MemoryBoundKernelsRunAtTheirImplementationsSpeed) {
  RooflineCostModel h(h200());
  const int64_t ffn = 4096LL * 14336;
  auto t = [&](const RooflineCostModel& m, int64_t bytes, MemPath path) {
    return m.memory_bound({.bytes = Bytes(bytes), .flops = Flops(0), .path = path}).to_seconds();
  };
  EXPECT_NEAR(t(h, 4 * ffn, MemPath::kVectorized) + t(h, 6 * ffn, MemPath::kVectorized), 0.1491e-3,
              0.01 * 0.1491e-3);
  EXPECT_NEAR(t(h, 4 * 4096LL * 4096, MemPath::kRowNorm), 27.80e-6, 0.01 * 27.80e-6);
  EXPECT_NEAR(t(h, 28 * 1'923'125'248LL, MemPath::kMultiTensor), 15.49e-3, 0.01 * 15.49e-3);
  GpuPeaks pcie = h100();
  pcie.memory_bandwidth = BytesPerSecond(2.0e12);
  EXPECT_NEAR(t(RooflineCostModel(pcie), 6 * 536'870'912LL, MemPath::kCastLoop), 2.225e-3,
              0.01 * 2.225e-3);
  // A figure the profile does not give is e_mem's: H100 states none but the cast loop.
  RooflineCostModel plain(h100());
  for (MemPath p : {MemPath::kVectorized, MemPath::kRowNorm, MemPath::kMultiTensor})
    EXPECT_DOUBLE_EQ(plain.memory_path_efficiency(p), 0.80);
  EXPECT_DOUBLE_EQ(plain.memory_path_efficiency(MemPath::kCastLoop), 0.724);
}

// PyTorch's dynamic-casting loop (unrolled_elementwise_kernel with a run-time dtype switch per
// element, c10/core/DynamicCast.h fetch_and_cast / cast_and_store) is bound by its instructions per
// element, not by HBM. Measured on the H200 on 2026-11-30 (docs/measured/h200-2026-11-30/
// call2_memory_paths.json, at 1,980 MHz): the loss's pred.float(), 4096 x 128256 bf16 -> fp32
// (6 B per element), in 1,475.2 us; hgx-h200's cast_loop reproduces it. The two published
// timings of other GPUs (pytorch/pytorch PR #195542: A100, 108 SMs at 1,410 MHz, 67,108,864 bf16
// -> fp32 copies in 362.46 us; PR #137053: H100 PCIe, 114 SMs at 1,755 MHz, 536,870,912 fp32 ->
// fp16 copies in 2.225 ms) agree with each other on elements per SM clock, and the H200 runs
// within 15% of that figure, far below the vectorized loop over the same bytes.
TEST(Roofline, CastLoopRunsAtItsMeasuredRateOnTheH200) {
  const double a100 = 67'108'864 / 362.46e-6 / (108 * 1.410e9);
  const double pcie = 536'870'912 / 2.22479e-3 / (114 * 1.755e9);
  EXPECT_NEAR(pcie / a100, 1.0, 0.02);
  RooflineCostModel h(h200());
  const int64_t n = 4096LL * 128256;
  const double seconds =
      h.memory_bound({.bytes = Bytes(6 * n), .flops = Flops(0), .path = MemPath::kCastLoop})
          .to_seconds();
  EXPECT_NEAR(seconds, 1475.2e-6, 0.01 * 1475.2e-6);
  const double h200_per_sm_clock = n / 1475.2e-6 / (132 * 1.980e9);
  EXPECT_NEAR(h200_per_sm_clock / a100, 1.0, 0.15);
  // The same run's vectorized fp32 -> bf16 copy of those elements took 729.2 us: half the time.
  EXPECT_GT(
      seconds,
      1.5 * h.memory_bound({.bytes = Bytes(6 * n), .flops = Flops(0), .path = MemPath::kVectorized})
                .to_seconds());
}

// torchtitan's other eager kernels on the H200 (docs/measured/h200-2026-11-30/
// call2_memory_paths.json, memory_paths.py: CUDA events around one Python call, median of 50, at
// 1,980 MHz; bytes as that script counts them). Each time holds a fixed per-call part besides the
// kernel's bytes: RoPE's complex product at two sizes gives it as the intercept of time against
// bytes, and the file's vectorized fp32 -> bf16 copy at three sizes gives about the same, so
// the kernels timed at one size are read less the file's median intercept, 9.61 us (of which the
// model's own 2 us overhead is the kernel's). hgx-h200's figures give back:
//   RoPE's product, [1, 4096, 32, 64] complex64 times the broadcast freqs_cis: 16 B per element,
//   134,217,728 B in 49.072 us; [1, 4096, 8, 64]: 33,554,432 B in 18.480 us;
//   repeat_kv's copy, [1, 4096, 8, 128] bf16 expanded to 32 heads: 41,943,040 B in 47.504 us;
//   its backward's sum over the repeats: 41,943,040 B in 26.240 us;
//   embedding_dense_backward, 4096 ids of 128,256 rows, fp32 [4096, 4096] gradient: the zero fill
//   4 B x 128,256 x 4096 plus 16 B per gradient element, in 803.344 us.
TEST(Roofline, TorchtitanEagerExtrasRunAtTheirMeasuredRatesOnTheH200) {
  RooflineCostModel h(h200());
  auto t = [&](int64_t bytes, MemPath path) {
    return h.memory_bound({.bytes = Bytes(bytes), .flops = Flops(0), .path = path}).to_seconds();
  };
  // The per-call part, from the two RoPE sizes and from the three vectorized copies.
  const double b32 = 134'217'728, b8 = 33'554'432, t32 = 49.072e-6, t8 = 18.480e-6;
  const double rope_intercept = t32 - b32 * (t32 - t8) / (b32 - b8);
  const double copy_small = 32.800e-6, copy_mid = 89.808e-6, b_small = 6.0 * 4096 * 4096,
               b_mid = 6.0 * 14336 * 4096;
  const double copy_intercept = copy_small - b_small * (copy_mid - copy_small) / (b_mid - b_small);
  EXPECT_NEAR(rope_intercept, 8.28e-6, 0.05e-6);
  EXPECT_NEAR(copy_intercept, 10.0e-6, 0.05e-6);
  const double call = 9.61e-6 - 2e-6;  // the median intercept less the kernel's own overhead
  // The product's rate is the difference of its two sizes: both times, less the call's part.
  EXPECT_NEAR(t(b32, MemPath::kStrided) - t(b8, MemPath::kStrided), t32 - t8, 0.01 * (t32 - t8));
  EXPECT_NEAR(t(b32, MemPath::kStrided), t32 - (rope_intercept - 2e-6), 0.01 * t32);
  EXPECT_NEAR(t(b8, MemPath::kStrided), t8 - (rope_intercept - 2e-6), 0.02 * t8);
  EXPECT_NEAR(t(41'943'040, MemPath::kStridedCopy), 47.504e-6 - call, 0.01 * 47.504e-6);
  EXPECT_NEAR(t(41'943'040, MemPath::kReduce), 26.240e-6 - call, 0.01 * 26.240e-6);
  const int64_t fill = 4LL * 128256 * 4096, segments = 16LL * 4096 * 4096;
  EXPECT_NEAR(t(fill, MemPath::kVectorized) + t(segments, MemPath::kSegmentSum), 803.344e-6 - call,
              0.005 * 803.344e-6);
  // Each is slower per byte than the vectorized loop; the strided copy of 2-byte elements most.
  for (MemPath p :
       {MemPath::kStrided, MemPath::kStridedCopy, MemPath::kReduce, MemPath::kSegmentSum})
    EXPECT_LT(h.memory_path_efficiency(p), h.memory_path_efficiency(MemPath::kVectorized));
  // Other GPUs state none of them: e_mem's 0.80, as their vectorized loop.
  RooflineCostModel plain(h100());
  for (MemPath p :
       {MemPath::kStrided, MemPath::kStridedCopy, MemPath::kReduce, MemPath::kSegmentSum})
    EXPECT_DOUBLE_EQ(plain.memory_path_efficiency(p), 0.80);
}

// cuDNN's SDPA on the H200 (../shared/measured/h200-2026-11-28/attention_backends_and_clock.json:
// causal, 32 heads, head dim 128, 16k tokens per call): forward 562 and 603 TFLOP/s at 4k and 16k
// tokens, backward 467 and 530 (2.5x the forward's FLOPs): the backward has its own curve.
TEST(Roofline, H200CudnnAttentionBackwardFollowsItsOwnMeasuredCurve) {
  RooflineCostModel m(h200());
  for (auto [seq, fwd, bwd] : {std::tuple{4096, 562.0, 467.0}, {16384, 603.0, 530.0}}) {
    AttentionShape a{.batch = 16384 / seq,
                     .heads = 32,
                     .kv_heads = 32,
                     .q_len = seq,
                     .kv_len = seq,
                     .head_dim = 128,
                     .kernel = AttentionKernel::kCudnn};
    const double f = a.forward_flops().value();
    EXPECT_NEAR(f / m.attention_forward(a).to_seconds() / 1e12, fwd, 0.02 * fwd) << seq;
    EXPECT_NEAR(2.5 * f / m.attention_backward(a).to_seconds() / 1e12, bwd, 0.02 * bwd) << seq;
  }
}

// Compute beside a communication kernel runs 18.9% slower: the average slowdown Lee et al. 2025
// (arXiv:2507.03114) measured for overlapped GPT and LLaMA training on A100s and H100s. It is the
// same for every GPU (the paper publishes one average); a calibrated profile measures its own.
TEST(Roofline, ComputeBesideCommunicationRunsAtThePublishedAverageSlowdown) {
  for (const std::string& cluster : hw::bundled_cluster_names())
    EXPECT_DOUBLE_EQ(bundled(cluster.c_str()).overlap_slowdown, 1.189) << cluster;
  EXPECT_DOUBLE_EQ(RooflineCostModel(h100()).overlap_slowdown(), 1.189);
}

TEST(Roofline, A100GetsItsPublishedCeilings) {
  RooflineParams p = bundled("dgx-a100-80g");
  EXPECT_DOUBLE_EQ(p.gemm_ceiling, 0.869);
  EXPECT_DOUBLE_EQ(p.flash2.ceiling, 0.72);
  EXPECT_DOUBLE_EQ(p.cudnn.ceiling, 0.72);  // no A100 cuDNN curve at hand: FA2's
}

// Tile and wave quantization (NVIDIA matmul performance guide), A100 with 108 SMs. m = n = 2304,
// 256x128 tiles: 9·18 = 162 tiles = 1.5 waves -> 2 waves: q = 2304² / (2·108·256·128) = 0.75;
// 128x128 tiles: 18·18 = 324 tiles = exactly 3 waves: q = 2304² / (3·108·128²) = 1.0 -> the
// heuristic picks 128x128, q = 1. m = n = 2048: 256x128 gives 8·16 = 128 tiles, 2 waves,
// q = 2048² / (2·108·32768) = 0.593; 128x128 gives 256 tiles, 3 waves, q = 2048² /
// (3·108·16384) = 0.790: q = 0.790. Without an SM count there is no quantization.
TEST(Roofline, TileAndWaveQuantization) {
  GpuPeaks a100 = with_efficiency_of(
      {"A100-SXM4-80GB", FlopsPerSecond(312e12), FlopsPerSecond(0), BytesPerSecond(2039e9), 108},
      "dgx-a100-80g");
  RooflineCostModel m(a100);
  EXPECT_NEAR(m.quantization_efficiency(GemmShape{2304, 2304, 4096}), 1.0, 1e-9);
  EXPECT_NEAR(m.quantization_efficiency(GemmShape{2048, 2048, 4096}),
              2048.0 * 2048 / (3.0 * 108 * 128 * 128), 1e-9);
  // The compute time grows by 1/q on the ideal part: (F/peak/q + t_half) / e_gemm.
  const GemmShape s{2048, 2048, 8192};
  const double ideal = s.flops().value() / 312e12;
  const double q = 2048.0 * 2048 / (3.0 * 108 * 128 * 128);
  EXPECT_NEAR(m.gemm(s).to_seconds(), (ideal / q + 20e-6) / 0.869, 1e-9);
  a100.sm_count = 0;
  EXPECT_EQ(RooflineCostModel(a100).quantization_efficiency(GemmShape{2048, 2048, 4096}), 1.0);
}

// Transformer Engine launches a GEMM beside a pipelined userbuffers reduce-scatter on
// sm_count - num_sm SMs (comm_gemm_overlap.cpp, _math_sms; num_sm 16 by default). On 116 of an
// H100's 132 SMs the peak is 116/132 of the GPU's: an 8192 x 8192 x 8192 bf16 GEMM (32 x 64 =
// 2048 tiles of 256x128; 4096 of 128x128 give the same q) runs ceil(2048/116) = 18 waves,
// q = 2048/(18·116) = 0.981, on 116 SMs where it ran 16 waves, q = 2048/(16·132) = 0.970, on 132:
// its ideal part takes (132/116)·(0.970/0.981) of the time; the fixed t_half does not grow. A
// GEMM of one wave (32 tiles) takes the same time on either: each tile has an SM. A margin on a
// model without an SM count changes nothing.
TEST(Roofline, AGemmWithAnSmMarginRunsOnTheSmsItIsLeft) {
  GpuPeaks h = h100();
  h.sm_count = 132;
  RooflineCostModel m(h);
  GemmShape all{.m = 8192, .n = 8192, .k = 8192};
  GemmShape fewer = all;
  fewer.sm_margin = 16;
  EXPECT_EQ(m.gemm_sms(all), 132);
  EXPECT_EQ(m.gemm_sms(fewer), 116);
  const double q132 = 2048.0 / (16 * 132), q116 = 2048.0 / (18 * 116);
  EXPECT_NEAR(m.quantization_efficiency(all), q132, 1e-9);
  EXPECT_NEAR(m.quantization_efficiency(fewer), q116, 1e-9);
  const double ideal = all.flops().value() / 989e12;
  EXPECT_NEAR(m.gemm(fewer).to_seconds(), (ideal * 132.0 / 116 / q116 + 20e-6) / 0.803, 1e-9);
  const double ratio = m.gemm(fewer) / m.gemm(all);
  EXPECT_GT(ratio, 1.10);
  EXPECT_LT(ratio, 132.0 / 116);
  // The ideal part alone grows by 132/116 · q132/q116.
  const double grown =
      (m.gemm(fewer).to_seconds() * 0.803 - 20e-6) / (m.gemm(all).to_seconds() * 0.803 - 20e-6);
  EXPECT_NEAR(grown, 132.0 / 116 * q132 / q116, 1e-9);
  GemmShape skinny{.m = 16, .n = 8192, .k = 8192};
  GemmShape skinny_fewer = skinny;
  skinny_fewer.sm_margin = 16;
  EXPECT_EQ(m.gemm(skinny_fewer), m.gemm(skinny));
  GpuPeaks unknown = h100();  // sm_count 0
  EXPECT_EQ(RooflineCostModel(unknown).gemm(fewer), RooflineCostModel(unknown).gemm(all));
}

// The GEMMs of a real training step on the GH100 die under its 700 W limit
// (../shared/measured/h200-2026-11-28/: one H200 SXM, Llama-3-8B cut to 4 layers, seq 4096, four
// micro-batches of one sequence, torchtitan's eager single-GPU step). Per aten::mm input shape
// (m x k by k x n) and its count in one step, from the Kineto trace with `record_shapes`
// (kineto_4l_s4096_gas4_shapes_memory.json.gz): the cuBLAS kernels total 184.68 ms there and
// 175.36 ms in the trace without shapes (the same 348 kernels, each ~5% faster: run-to-run
// clock). The step keeps the tensor cores busy ~60% of its time, the rest memory-bound kernels.
// The bundled ceiling (mamf-finder's best shape, 0.803) must give these GEMMs their measured time:
// docs/hw_profiles.md, "GH100 under its 700 W limit", says why the back-to-back rate measured on
// the same card (0.68-0.69 of peak) is not the ceiling of such a step.
TEST(Roofline, BundledH200CeilingGivesTheGemmsOfAMeasuredStepTheirTime) {
  const GpuPeaks h200 = with_efficiency_of({"H200-SXM-141GB", FlopsPerSecond(989e12),
                                            FlopsPerSecond(1979e12), BytesPerSecond(4.8e12), 132},
                                           "hgx-h200");
  RooflineCostModel m(h200);
  struct Mm {
    int64_t m, k, n;
    int count;
  };
  // m, k, n of each aten::mm (A is m x k, B is k x n) and how often the step runs it.
  const Mm step[] = {{4096, 4096, 14336, 64}, {4096, 14336, 4096, 48}, {128256, 4096, 4096, 4},
                     {4096, 4096, 128256, 4}, {4096, 128256, 4096, 4}, {14336, 4096, 4096, 32},
                     {4096, 4096, 4096, 96},  {4096, 1024, 4096, 32},  {1024, 4096, 4096, 32},
                     {4096, 4096, 1024, 32}};
  double predicted = 0;
  for (const Mm& g : step)
    predicted += g.count * m.gemm(GemmShape{.m = g.m, .n = g.n, .k = g.k}).to_seconds();
  EXPECT_GE(predicted, 0.97 * 175.36e-3);
  EXPECT_LE(predicted, 1.03 * 184.68e-3);
}

}  // namespace
}  // namespace scaleplan::calibrate

namespace scaleplan::calibrate {
namespace {

TEST(ScaledKernelModel, MultipliesEveryKernelAndKeepsTheSlowdown) {
  auto base = std::make_shared<const RooflineCostModel>(h100());
  ScaledKernelModel scaled(base, 1.1);
  const GemmShape g{.m = 4096, .n = 4096, .k = 4096};
  const AttentionShape a{.batch = 1,
                         .heads = 32,
                         .kv_heads = 8,
                         .q_len = 4096,
                         .kv_len = 4096,
                         .head_dim = 128,
                         .v_head_dim = 128};
  const MemoryBoundShape mb{Bytes(1 << 30), Flops(0)};
  auto near = [](Duration x, Duration base_time) {
    EXPECT_NEAR(x.to_seconds(), 1.1 * base_time.to_seconds(), 1e-11);
  };
  near(scaled.gemm(g), base->gemm(g));
  near(scaled.attention_forward(a), base->attention_forward(a));
  near(scaled.attention_backward(a), base->attention_backward(a));
  near(scaled.memory_bound(mb), base->memory_bound(mb));
  near(scaled.unfused_attention_forward(a), base->unfused_attention_forward(a));
  near(scaled.unfused_attention_backward(a), base->unfused_attention_backward(a));
  EXPECT_EQ(scaled.overlap_slowdown(), base->overlap_slowdown());
  EXPECT_EQ(scaled.describe(), base->describe() + " x 1.1");
}

}  // namespace
}  // namespace scaleplan::calibrate
