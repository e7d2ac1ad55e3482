// Robust least squares for cost models: t ≈ Σ c_j · x_j with c ≥ 0, in relative error.
//
// Every model calibrate fits is linear in its coefficients once its features are chosen (a fixed
// overhead, seconds per FLOP, seconds per byte, ...; calibrate/features.h), so one solver serves
// them all. It minimizes a robust loss of the *relative* residual r_i = (x_i·c − t_i) / t_i, so a
// 5 µs kernel counts as much as a 50 ms one, and keeps every coefficient non-negative (a negative
// seconds-per-byte has no physical meaning and extrapolates badly). The loss is Huber's, solved by
// iteratively reweighted least squares, then a few Tukey-biweight steps that give gross outliers
// (a measurement hit by a context switch, a throttled clock) zero weight; the residual scale is the
// median absolute deviation (Huber 1964; Holland & Welsch 1977; Hampel et al. 1986). The
// non-negativity constraint is an active set over the few features (Lawson & Hanson 1974, ch. 23).
//
// Pure functions of their inputs; thread-safe. Eigen is used in fit.cc only.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hw_profiles/calibration.h"

namespace scaleplan::calibrate {

struct FitOptions {
  double huber_k = 1.345;   // Huber threshold in robust standard deviations (95% efficiency)
  double tukey_c = 4.685;   // biweight cut-off in robust standard deviations (95% efficiency)
  double min_scale = 0.01;  // floor of the robust relative scale: 1% noise is "exact"
  int max_iterations = 50;
  bool robust = true;  // false: plain relative least squares (for comparison in tests)
};

struct LinearFit {
  std::vector<double> coef;     // one per feature, >= 0
  std::vector<double> weights;  // final robust weight of each sample (0: rejected as an outlier)
  double scale = 0;             // robust scale of the relative residuals (1.4826 · MAD)
  int iterations = 0;
};

// Fits rows `x` (samples × features) to positive targets `t`. Errors name `what` when there are
// fewer samples than features, a target is not positive, or a row has the wrong width.
Result<LinearFit> fit_relative(const std::vector<std::vector<double>>& x,
                               const std::vector<double>& t, std::string_view what,
                               const FitOptions& options = {});

double predict(const LinearFit& fit, const std::vector<double>& features);

// Cross-validated error: k folds (sample i in fold i % k after a seeded shuffle), each fitted on
// the others and evaluated on itself. Relative errors |predicted − measured| / measured.
using ErrorSummary = hw::ErrorSummary;
ErrorSummary summarize_errors(std::vector<double> relative_errors);
Result<ErrorSummary> cross_validate(const std::vector<std::vector<double>>& x,
                                    const std::vector<double>& t, int folds, std::string_view what,
                                    const FitOptions& options = {});

}  // namespace scaleplan::calibrate
