// The robust fit recovers known parameters from synthetic measurements, ignores outliers, and the
// calibration built on it round-trips through JSON into a KernelCostModel.
#include "calibrate/fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "calibrate/roofline.h"

namespace scaleplan::calibrate {
namespace {

// A latency-bandwidth-compute model: t = 5 µs + flops / 100 GFLOP/s + bytes / 20 GB/s.
const std::vector<double> kTrue = {5e-6, 1e-11, 5e-11};

struct Data {
  std::vector<std::vector<double>> x;
  std::vector<double> t;
};

// Sizes spread over four decades so that each term dominates somewhere. `noise` is the relative
// standard deviation of multiplicative Gaussian noise; every `outlier_every`-th point is slowed
// 3-10× (a context switch during the measurement).
Data synthetic(int n, double noise, int outlier_every, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> eps(0.0, 1.0);
  std::uniform_real_distribution<double> decade(0.0, 4.0), slow(3.0, 10.0);
  Data d;
  for (int i = 0; i < n; ++i) {
    const double flops = 1e5 * std::pow(10.0, decade(gen)),
                 bytes = 1e4 * std::pow(10.0, decade(gen));
    std::vector<double> f = {1.0, flops, bytes};
    double t = kTrue[0] + kTrue[1] * flops + kTrue[2] * bytes;
    t *= 1.0 + noise * eps(gen);
    if (outlier_every > 0 && i % outlier_every == 0) t *= slow(gen);
    d.x.push_back(f);
    d.t.push_back(t);
  }
  return d;
}

void expect_recovered(const std::vector<double>& got, double tol) {
  for (size_t j = 0; j < kTrue.size(); ++j) {
    EXPECT_NEAR(got[j] / kTrue[j], 1.0, tol) << "coefficient " << j;
  }
}

TEST(FitTest, ExactMeasurementsRecoverTheParameters) {
  const Data d = synthetic(40, 0.0, 0, 1);
  auto fit = fit_relative(d.x, d.t, "synthetic");
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  expect_recovered(fit->coef, 1e-6);
}

TEST(FitTest, NoisyMeasurementsRecoverTheParametersWithinTheNoise) {
  // 2% noise on 200 points: each coefficient is determined to well under 2%; allow 3%.
  const Data d = synthetic(200, 0.02, 0, 2);
  auto fit = fit_relative(d.x, d.t, "synthetic");
  ASSERT_TRUE(fit.is_ok());
  expect_recovered(fit->coef, 0.03);
}

TEST(FitTest, OutliersDoNotMoveTheRobustFit) {
  // One point in 7 is 3-10× too slow, with 1% noise on the rest. The robust fit stays within 1.5%
  // of the truth; plain (relative) least squares is pulled at least three times further off, which
  // shows the outliers are strong enough to matter.
  const Data d = synthetic(200, 0.01, 7, 3);
  auto robust = fit_relative(d.x, d.t, "synthetic");
  ASSERT_TRUE(robust.is_ok());
  expect_recovered(robust->coef, 0.015);
  FitOptions plain;
  plain.robust = false;
  auto ls = fit_relative(d.x, d.t, "synthetic", plain);
  ASSERT_TRUE(ls.is_ok());
  double worst_ls = 0, worst_robust = 0;
  for (size_t j = 0; j < kTrue.size(); ++j) {
    worst_ls = std::max(worst_ls, std::abs(ls->coef[j] / kTrue[j] - 1));
    worst_robust = std::max(worst_robust, std::abs(robust->coef[j] / kTrue[j] - 1));
  }
  EXPECT_GT(worst_ls, 3 * worst_robust)
      << "least squares " << worst_ls << ", robust " << worst_robust;
  // The outliers got zero weight from the biweight step.
  for (size_t i = 0; i < d.t.size(); i += 7) EXPECT_EQ(robust->weights[i], 0.0) << i;
}

TEST(FitTest, CoefficientsStayNonNegative) {
  // t = 1 ms + bytes / 1 GB/s, fitted with a useless third feature that noise would push below 0.
  std::mt19937 gen(4);
  std::normal_distribution<double> eps(0.0, 0.02);
  std::vector<std::vector<double>> x;
  std::vector<double> t;
  for (int i = 1; i <= 60; ++i) {
    const double bytes = 1e5 * i;
    x.push_back({1.0, bytes, std::sin(i) + 1.5});
    t.push_back((1e-3 + bytes * 1e-9) * (1 + eps(gen)));
  }
  auto fit = fit_relative(x, t, "nonneg");
  ASSERT_TRUE(fit.is_ok());
  for (double c : fit->coef) EXPECT_GE(c, 0.0);
  EXPECT_NEAR(fit->coef[1] / 1e-9, 1.0, 0.1);
}

TEST(FitTest, TooFewMeasurementsIsAnErrorNamingTheModel) {
  auto fit = fit_relative({{1.0, 2.0, 3.0}}, {1.0}, "gemm");
  ASSERT_FALSE(fit.is_ok());
  EXPECT_EQ(fit.status().message(), "gemm: 1 measurements cannot determine 3 coefficients");
  auto bad = fit_relative({{1.0}, {2.0}}, {1.0, -1.0}, "gemm");
  EXPECT_NE(bad.status().message().find("not a positive time"), std::string::npos);
}

TEST(FitTest, CrossValidationOnExactDataHasNoError) {
  const Data d = synthetic(50, 0.0, 0, 5);
  auto cv = cross_validate(d.x, d.t, 5, "synthetic");
  ASSERT_TRUE(cv.is_ok());
  EXPECT_EQ(cv->n, 50);
  EXPECT_LT(cv->max, 1e-6);
}

TEST(FitTest, CrossValidationReportsTheNoiseLevel) {
  // 5% multiplicative noise: the median absolute relative error of a good model is about
  // 0.674 · 5% ≈ 3.4% (the median of |N(0, σ)| is 0.674σ); accept 2-5%.
  const Data d = synthetic(300, 0.05, 0, 6);
  auto cv = cross_validate(d.x, d.t, 5, "synthetic");
  ASSERT_TRUE(cv.is_ok());
  EXPECT_GT(cv->median, 0.02);
  EXPECT_LT(cv->median, 0.05);
}

Measurements synthetic_measurements() {
  // GEMM: t = 4 µs + flops / 1 TFLOP/s + bytes / 100 GB/s (no quantization term: units = 1, tile
  // 1). Attention fwd/bwd: 10 µs + flops / 500 GFLOP/s. Memory: 3 µs + bytes / 50 GB/s. all_reduce
  // on 4 ranks: 20 µs + size / 10 GB/s -> busbw = 10 · 2·3/4 = 15 GB/s.
  Measurements m;
  for (int64_t m_ : {64, 256, 1024, 4096}) {
    for (int64_t n : {128, 512, 2048}) {
      for (int64_t k : {64, 1024}) {
        KernelSample s;
        s.kind = KernelKind::kGemm;
        s.gemm = GemmShape{m_, n, k};
        s.time =
            Duration::seconds(4e-6 + s.gemm.flops().value() / 1e12 + s.gemm.bytes().value() / 1e11);
        s.holdout = (m_ == 1024 && n == 512);
        m.kernels.push_back(s);
      }
    }
  }
  for (int64_t seq : {128, 256, 512, 1024, 2048}) {
    for (int64_t heads : {4, 16}) {
      for (bool bwd : {false, true}) {
        KernelSample s;
        s.kind = bwd ? KernelKind::kAttentionBwd : KernelKind::kAttentionFwd;
        s.attention = AttentionShape{1, heads, heads, seq, seq, 64, 64, true};
        const double f =
            bwd ? s.attention.backward_flops().value() : s.attention.forward_flops().value();
        s.time = Duration::seconds(1e-5 + f / 5e11);
        m.kernels.push_back(s);
      }
    }
  }
  for (int i = 0; i < 12; ++i) {
    KernelSample s;
    s.kind = KernelKind::kMemoryBound;
    s.memory = MemoryBoundShape{Bytes(int64_t{1} << (12 + i)), Flops(0)};
    s.time = Duration::seconds(3e-6 + s.memory.bytes.value() / 5e10);
    m.kernels.push_back(s);
  }
  for (int i = 0; i < 12; ++i) {
    const Bytes size(int64_t{1} << (10 + 2 * i));
    m.collectives.push_back({"all_reduce", 4, "host", size,
                             Duration::seconds(2e-5 + size.value() / 1e10), 0.0, "profile"});
  }
  m.overlap_slowdown = 1.25;
  return m;
}

TEST(CalibrationTest, FitRecoversKernelAndCollectiveParameters) {
  auto c = fit_calibration(synthetic_measurements(), TileParams{1, 1});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_NEAR(c->gemm.coef[0], 4e-6, 4e-9);
  EXPECT_NEAR(c->gemm.coef[1] + c->gemm.coef[2], 1e-12, 1e-15);  // flops and padded flops coincide
  EXPECT_NEAR(c->gemm.coef[3], 1e-11, 1e-14);
  EXPECT_LT(c->gemm.cv.max, 1e-6);
  EXPECT_EQ(c->gemm.holdout.n, 2);  // 1024×512 with k 64 and 1024
  EXPECT_LT(c->gemm.holdout.max, 1e-6);
  EXPECT_NEAR(c->attention_backward.coef[1], 2e-12, 2e-15);
  EXPECT_NEAR(c->memory_bound.coef[1], 2e-11, 2e-14);
  ASSERT_EQ(c->collectives.size(), 1u);
  EXPECT_NEAR(c->collectives[0].latency.to_seconds(), 2e-5, 2e-8);
  EXPECT_NEAR(c->collectives[0].busbw_gbps, 15.0, 1e-3);
  EXPECT_DOUBLE_EQ(c->overlap_slowdown, 1.25);
}

// A profile times its GEMMs on every SM. A GEMM launched on fewer (GemmShape::sm_margin:
// Transformer Engine's pipelined overlap, comm_gemm_overlap.cpp _math_sms) takes the fitted time
// scaled by what the roofline's wave model says the margin costs: on 116 of an H100's 132 SMs an
// 8192 x 8192 x 8192 GEMM's roofline time grows by the ratio RooflineCostModel gives, and the
// fitted time by the same ratio; without a margin the fitted time is unchanged.
TEST(CalibrationTest, FittedGemmOnFewerSmsScalesByTheRooflinesRatio) {
  auto c = fit_calibration(synthetic_measurements(), TileParams{1, 1});
  ASSERT_TRUE(c.is_ok());
  auto roofline = std::make_shared<RooflineCostModel>(
      GpuPeaks{"H100-SXM5-80GB", FlopsPerSecond(989e12), FlopsPerSecond(1979e12),
               BytesPerSecond(3.35e12), 132});
  auto model = fitted_kernel_model(to_json(*c), "p.json", roofline);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const GemmShape all{8192, 8192, 8192};
  GemmShape fewer = all;
  fewer.sm_margin = 16;
  const double ratio = roofline->gemm(fewer) / roofline->gemm(all);
  EXPECT_GT(ratio, 1.10);
  EXPECT_NEAR((*model)->gemm(fewer) / (*model)->gemm(all), ratio, 1e-6);
  auto without = fitted_kernel_model(to_json(*c), "p.json");
  ASSERT_TRUE(without.is_ok());
  EXPECT_EQ((*model)->gemm(all), (*without)->gemm(all));
}

TEST(CalibrationTest, FittedModelRoundTripsThroughJson) {
  auto c = fit_calibration(synthetic_measurements(), TileParams{1, 1});
  ASSERT_TRUE(c.is_ok());
  c->backend = "host";
  const Json j = to_json(*c);
  auto model = fitted_kernel_model(Json::parse(j.dump()), "test.json");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  // 1024×1024×1024: 2.147 GFLOP / 1 TFLOP/s = 2147.5 µs, 6 MiB / 100 GB/s = 62.9 µs, + 4 µs.
  const GemmShape g{1024, 1024, 1024};
  const double want = 4e-6 + g.flops().value() / 1e12 + g.bytes().value() / 1e11;
  EXPECT_NEAR((*model)->gemm(g).to_seconds(), want, want * 1e-6);
  EXPECT_DOUBLE_EQ((*model)->overlap_slowdown(), 1.25);
  EXPECT_EQ((*model)->describe(), "fitted(host, test.json)");
  const auto t = fitted_collective_time(*c, "all_reduce", 4, "host", Bytes(1 << 20));
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(t->to_seconds(), 2e-5 + (1 << 20) / 1e10, 1e-9);
  EXPECT_FALSE(fitted_collective_time(*c, "all_reduce", 8, "host", Bytes(1)).has_value());
}

TEST(CalibrationTest, MeasurementsRoundTripAndBadFieldsAreNamed) {
  const Measurements m = synthetic_measurements();
  auto back = measurements_from_json(Json::parse(to_json(m).dump()), "p.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->kernels.size(), m.kernels.size());
  EXPECT_EQ(back->collectives.size(), m.collectives.size());
  EXPECT_EQ(back->kernels[3].gemm.k, m.kernels[3].gemm.k);
  Json bad = to_json(m);
  bad["kernels"][2]["time_s"] = -1;
  EXPECT_EQ(measurements_from_json(bad, "p.json").status().message(),
            "p.json: kernels[2]: time_s: -1 is not between 0 and 3600 seconds");
  Json cal = to_json(*fit_calibration(m, TileParams{1, 1}));
  cal["gemm"]["coefficients"].erase("seconds_per_byte");
  EXPECT_NE(fitted_kernel_model(cal, "p.json")
                .status()
                .message()
                .find("gemm: coefficients: seconds_per_byte"),
            std::string::npos);
}

TEST(CalibrationTest, AModelWithTooFewMeasurementsIsRefused) {
  Measurements m = synthetic_measurements();
  std::erase_if(m.kernels,
                [](const KernelSample& s) { return s.kind == KernelKind::kAttentionBwd; });
  auto c = fit_calibration(m, TileParams{1, 1});
  ASSERT_TRUE(c.is_ok());
  auto model = fitted_kernel_model(to_json(*c), "p.json");
  ASSERT_FALSE(model.is_ok());
  EXPECT_NE(model.status().message().find("attention_backward: fitted on 0 measurements"),
            std::string::npos);
}

// The synthetic measurements with every attention sample named as timed by `impl`.
Measurements with_attention_implementation(Measurements m, const std::string& impl) {
  for (KernelSample& s : m.kernels) {
    if (s.kind == KernelKind::kAttentionFwd || s.kind == KernelKind::kAttentionBwd)
      s.implementation = impl;
  }
  return m;
}

TEST(CalibrationTest, AttentionTimedOnTheReferenceKernelsIsNotFitted) {
  // `profile --backend cuda` with LaunchOptions::reference_attention tags its attention samples
  // "reference": kernels no framework runs (~1 TFLOP/s on an H200 against cuDNN's ~550,
  // measured/h200-2026-11-28). A profile fitted to them predicted 6.41 s for a 0.32 s step, so
  // the fit refuses them, naming how many and why, and writes no calibration.
  Measurements m = with_attention_implementation(synthetic_measurements(), "cudnn");
  int tagged = 0;
  for (KernelSample& s : m.kernels) {
    if (s.kind == KernelKind::kAttentionFwd && s.attention.q_len == 512) {
      s.implementation = std::string(kReferenceAttention);
      ++tagged;
    }
  }
  ASSERT_EQ(tagged, 2);  // heads 4 and 16 at seq 512
  auto c = fit_calibration(m, TileParams{1, 1});
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(c.status().message().find("attention: 2 measurements were timed on the cuda "
                                      "backend's reference kernels"),
            std::string::npos)
      << c.status().message();
  // The same samples read back from a measurements file are refused the same way.
  auto back = measurements_from_json(Json::parse(to_json(m).dump()), "p.json");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_FALSE(fit_calibration(*back, TileParams{1, 1}).is_ok());
  // And a profile naming a 'reference' attention curve is not loaded.
  Json cal = to_json(*fit_calibration(
      with_attention_implementation(synthetic_measurements(), "cudnn"), TileParams{1, 1}));
  cal["attention_kernels"][0]["kernel"] = "reference";
  EXPECT_NE(fitted_kernel_model(cal, "p.json")
                .status()
                .message()
                .find("attention_kernels[0]: kernel: 'reference'"),
            std::string::npos);
}

TEST(CalibrationTest, EachAttentionKernelGetsItsOwnCurve) {
  // Two implementations timed at the same shapes: cudnn at 10 µs + flops / 500 GFLOP/s (the
  // synthetic set), unfused at 20 µs + flops / 100 GFLOP/s. One curve each: each predicts its own
  // kernel's samples exactly, and a shape is timed by the curve of its AttentionShape::kernel.
  Measurements m = with_attention_implementation(synthetic_measurements(), "cudnn");
  const size_t n = m.kernels.size();
  for (size_t i = 0; i < n; ++i) {
    KernelSample s = m.kernels[i];
    if (s.kind != KernelKind::kAttentionFwd && s.kind != KernelKind::kAttentionBwd) continue;
    s.implementation = "unfused";
    s.attention.kernel = AttentionKernel::kUnfused;
    const double f = s.kind == KernelKind::kAttentionBwd ? s.attention.backward_flops().value()
                                                         : s.attention.forward_flops().value();
    s.time = Duration::seconds(2e-5 + f / 1e11);
    m.kernels.push_back(s);
  }
  auto c = fit_calibration(m, TileParams{1, 1});
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->attention_kernels.size(), 2u);
  EXPECT_EQ(c->attention_kernels[0].kernel, "cudnn");
  EXPECT_EQ(c->attention_kernels[1].kernel, "unfused");
  EXPECT_NEAR(c->attention_kernels[0].forward.coef[1], 2e-12, 2e-15);  // 1 / 500 GFLOP/s
  EXPECT_NEAR(c->attention_kernels[1].forward.coef[1], 1e-11, 1e-14);  // 1 / 100 GFLOP/s
  EXPECT_NEAR(c->attention_kernels[1].backward.coef[0], 2e-5, 2e-8);
  auto model = fitted_kernel_model(Json::parse(to_json(*c).dump()), "p.json");
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  AttentionShape a{1, 8, 8, 4096, 4096, 128, 128, true, AttentionKernel::kCudnn};
  EXPECT_NEAR((*model)->attention_forward(a).to_seconds(), 1e-5 + a.forward_flops().value() / 5e11,
              1e-9);
  a.kernel = AttentionKernel::kUnfused;
  EXPECT_NEAR((*model)->attention_backward(a).to_seconds(),
              2e-5 + a.backward_flops().value() / 1e11, 1e-8);
}

}  // namespace
}  // namespace scaleplan::calibrate
