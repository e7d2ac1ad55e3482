// The host quick profile end to end: sweep, fit, load the fitted model as the simulator does (from
// the JSON section), and predict host kernels that were never fitted; plus --resume semantics.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "runtime/profile.h"

namespace scaleplan::runtime {
namespace {

TEST(HostProfileTimed, QuickProfilePredictsUnseenHostKernels) {
  ProfileState state;
  ASSERT_TRUE(run_profile({BackendKind::kHost, 2, true}, state, {}).is_ok());
  EXPECT_FALSE(state.device.empty());
  auto cal = calibrate::fit_calibration(state.measurements, calibrate::TileParams{1, 1});
  ASSERT_TRUE(cal.is_ok()) << cal.status().message();
  cal->backend = "host";
  // The profile carries its own hold-out error, on shapes it measured but did not fit.
  EXPECT_GT(cal->gemm.holdout.n, 0);
  EXPECT_GT(cal->attention_forward.holdout.n, 0);
  EXPECT_FALSE(cal->collectives.empty());
  auto model = calibrate::fitted_kernel_model(
      nlohmann::json::parse(calibrate::to_json(*cal).dump()), "host");
  ASSERT_TRUE(model.is_ok()) << model.status().message();

  // Kernels of a model the sweep never saw (hidden 320, 160 tokens; 5 heads of 48 at 160 tokens),
  // measured now with the same protocol and predicted by the loaded model.
  std::vector<SweepPoint> unseen;
  for (const GemmShape g :
       {GemmShape{160, 960, 320}, GemmShape{160, 320, 320}, GemmShape{160, 1280, 320},
        GemmShape{160, 320, 1280}, GemmShape{320, 960, 160}}) {
    SweepPoint p;
    p.kind = PointKind::kGemm;
    p.gemm = g;
    unseen.push_back(p);
  }
  for (bool bwd : {false, true}) {
    SweepPoint p;
    p.kind = bwd ? PointKind::kAttentionBwd : PointKind::kAttentionFwd;
    p.attention = AttentionShape{1, 5, 5, 160, 160, 48, 48, true};
    unseen.push_back(p);
  }
  // CI's two cores are shared with other processes whose load drifts by 2x within seconds (we
  // measured it), which no model of the kernels can predict. So each unseen kernel is measured
  // between two measurements of a kernel the model *was* fitted on (a control, the same kind), and
  // its error is taken relative to the control's: |(pred/meas)_unseen / (pred/meas)_control - 1|.
  // That removes the machine's speed change since the fit and leaves the model's shape error.
  auto predict = [&](const calibrate::KernelSample& k) {
    return k.kind == KernelKind::kGemm           ? (*model)->gemm(k.gemm)
           : k.kind == KernelKind::kAttentionFwd ? (*model)->attention_forward(k.attention)
                                                 : (*model)->attention_backward(k.attention);
  };
  SweepPoint gemm_control;
  gemm_control.kind = PointKind::kGemm;
  gemm_control.gemm =
      GemmShape{256, 768, 256};  // the QKV GEMM of hidden 256, 256 tokens: in the grid
  SweepPoint attn_control;
  attn_control.attention = AttentionShape{1, 8, 8, 128, 128, 64, 64, true};  // in the grid
  std::vector<double> errors;
  const MeasureOptions mo = profile_measure_options(BackendKind::kHost, true);
  const Status st = run_host_ranks(1, [&](Backend& be) -> Status {
    for (const SweepPoint& p : unseen) {
      SweepPoint control = p.kind == PointKind::kGemm ? gemm_control : attn_control;
      control.kind = p.kind;
      SP_ASSIGN_OR_RETURN(const calibrate::KernelSample before, run_kernel_point(be, control, mo));
      SP_ASSIGN_OR_RETURN(const calibrate::KernelSample k, run_kernel_point(be, p, mo));
      SP_ASSIGN_OR_RETURN(const calibrate::KernelSample after, run_kernel_point(be, control, mo));
      const double control_ratio =
          0.5 * (predict(before) / before.time + predict(after) / after.time);
      errors.push_back(std::abs(predict(k) / k.time / control_ratio - 1.0));
    }
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  std::sort(errors.begin(), errors.end());
  const double median = errors[errors.size() / 2];
  // Stated tolerance: median drift-corrected relative error <= 25%. The fits cross-validate at a
  // few percent (GEMM) to ~20% (attention, whose host kernel's efficiency varies with the query-
  // block remainder); the control removes slow drifts but not a burst during one measurement, and
  // the median over seven kernels keeps one such burst from failing the test.
  EXPECT_LE(median, 0.25) << "median relative error " << median;
  std::printf(
      "unseen host kernels: median relative error %.1f%%, max %.1f%% (gemm cv median %.1f%%)\n",
      100 * median, 100 * errors.back(), 100 * cal->gemm.cv.median);
}

TEST(HostProfileTest, AnInterruptedProfileResumesWithoutRepeatingPoints) {
  // Interrupt after 10 points by failing the checkpoint, as a killed process would stop; then run
  // again from the saved state: every kernel point is measured exactly once in total.
  ProfileState state;
  int calls = 0;
  ProfileCallbacks cb;
  cb.checkpoint = [&](const ProfileState&) {
    return ++calls >= 10 ? Status::internal("interrupted") : Status::ok();
  };
  const Status first = run_profile({BackendKind::kHost, 1, true}, state, cb);
  ASSERT_FALSE(first.is_ok());
  EXPECT_EQ(state.done.size(), 10u);
  const auto json = calibrate::to_json(state.measurements);  // what --resume reads back
  ProfileState resumed;
  resumed.measurements = *calibrate::measurements_from_json(json, "partial");
  resumed.done = state.done;
  ASSERT_TRUE(run_profile({BackendKind::kHost, 1, true}, resumed, {}).is_ok());
  const size_t points = kernel_points({BackendKind::kHost, true}).size();
  EXPECT_EQ(resumed.measurements.kernels.size(), points);
  EXPECT_EQ(resumed.done.size(), points);
}

}  // namespace
}  // namespace scaleplan::runtime
