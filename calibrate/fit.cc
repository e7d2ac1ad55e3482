#include "calibrate/fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace scaleplan::calibrate {
namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double m = v[mid];
  if (v.size() % 2 == 0) m = 0.5 * (m + *std::max_element(v.begin(), v.begin() + mid));
  return m;
}

// Weighted least squares of the relative residual with c >= 0 on the free set: columns scaled to
// unit norm for conditioning, then an active-set loop that pins the most negative coefficient to 0.
Eigen::VectorXd solve_nonneg(const Eigen::MatrixXd& a, const Eigen::VectorXd& b,
                             const Eigen::VectorXd& w) {
  const int p = static_cast<int>(a.cols());
  std::vector<bool> free(p, true);
  Eigen::VectorXd c = Eigen::VectorXd::Zero(p);
  const Eigen::VectorXd sw = w.cwiseSqrt();
  for (int round = 0; round <= p; ++round) {
    std::vector<int> cols;
    for (int j = 0; j < p; ++j) {
      if (free[j]) cols.push_back(j);
    }
    if (cols.empty()) break;
    Eigen::MatrixXd sub(a.rows(), cols.size());
    Eigen::VectorXd norms(cols.size());
    for (size_t j = 0; j < cols.size(); ++j) {
      sub.col(j) = sw.cwiseProduct(a.col(cols[j]));
      norms(j) = sub.col(j).norm();
      if (norms(j) > 0) sub.col(j) /= norms(j);
    }
    const Eigen::VectorXd sol = sub.colPivHouseholderQr().solve(sw.cwiseProduct(b));
    c.setZero();
    int worst = -1;
    double worst_value = 0;
    for (size_t j = 0; j < cols.size(); ++j) {
      const double v = norms(j) > 0 ? sol(j) / norms(j) : 0.0;
      c(cols[j]) = v;
      if (v < worst_value) {
        worst_value = v;
        worst = cols[j];
      }
    }
    if (worst < 0) return c;
    free[worst] = false;
  }
  return c.cwiseMax(0.0);
}

}  // namespace

Result<LinearFit> fit_relative(const std::vector<std::vector<double>>& x,
                               const std::vector<double>& t, std::string_view what,
                               const FitOptions& o) {
  const std::string ctx(what);
  if (x.size() != t.size())
    return Status::internal(ctx + ": " + std::to_string(x.size()) + " rows, " +
                            std::to_string(t.size()) + " targets");
  if (x.empty()) return Status::invalid(ctx + ": no measurements to fit");
  const int p = static_cast<int>(x[0].size());
  const int n = static_cast<int>(x.size());
  if (n < p) {
    return Status::invalid(ctx + ": " + std::to_string(n) + " measurements cannot determine " +
                           std::to_string(p) + " coefficients");
  }
  // Relative residual: divide each row and its target by the target, so the target becomes 1.
  Eigen::MatrixXd a(n, p);
  Eigen::VectorXd b = Eigen::VectorXd::Ones(n);
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(x[i].size()) != p) return Status::internal(ctx + ": ragged feature rows");
    if (!(t[i] > 0) || !std::isfinite(t[i])) {
      return Status::invalid(ctx + ": measurement " + std::to_string(i) +
                             " is not a positive time");
    }
    for (int j = 0; j < p; ++j) a(i, j) = x[i][j] / t[i];
  }
  Eigen::VectorXd w = Eigen::VectorXd::Ones(n);
  Eigen::VectorXd c = solve_nonneg(a, b, w);
  LinearFit fit;
  int it = 0;
  auto robust_scale = [&](const Eigen::VectorXd& r) {
    std::vector<double> abs_r(n);
    for (int i = 0; i < n; ++i) abs_r[i] = std::abs(r(i));
    return std::max(1.4826 * median_of(abs_r), o.min_scale);
  };
  if (o.robust) {
    // Huber IRLS to convergence, then biweight steps from the Huber solution (a redescending loss
    // needs a good start).
    for (int phase = 0; phase < 2; ++phase) {
      const int limit = phase == 0 ? o.max_iterations : 10;
      for (int k = 0; k < limit; ++k, ++it) {
        const Eigen::VectorXd r = a * c - b;
        const double s = robust_scale(r);
        for (int i = 0; i < n; ++i) {
          const double u = std::abs(r(i)) / s;
          if (phase == 0) {
            w(i) = u <= o.huber_k ? 1.0 : o.huber_k / u;
          } else {
            const double z = u / o.tukey_c;
            w(i) = z < 1 ? (1 - z * z) * (1 - z * z) : 0.0;
          }
        }
        const Eigen::VectorXd next = solve_nonneg(a, b, w);
        const double change = (next - c).norm() / std::max(c.norm(), 1e-300);
        c = next;
        if (change < 1e-9) break;
      }
    }
  }
  fit.coef.assign(c.data(), c.data() + p);
  fit.weights.assign(w.data(), w.data() + n);
  fit.scale = robust_scale(a * c - b);
  fit.iterations = it;
  return fit;
}

double predict(const LinearFit& fit, const std::vector<double>& f) {
  double s = 0;
  for (size_t j = 0; j < f.size() && j < fit.coef.size(); ++j) s += fit.coef[j] * f[j];
  return s;
}

ErrorSummary summarize_errors(std::vector<double> e) {
  ErrorSummary s;
  s.n = static_cast<int>(e.size());
  if (e.empty()) return s;
  std::sort(e.begin(), e.end());
  s.median = median_of(e);
  s.p90 = e[std::min(e.size() - 1, static_cast<size_t>(std::ceil(0.9 * e.size())) - 1)];
  s.max = e.back();
  return s;
}

Result<ErrorSummary> cross_validate(const std::vector<std::vector<double>>& x,
                                    const std::vector<double>& t, int folds, std::string_view what,
                                    const FitOptions& o) {
  const int n = static_cast<int>(x.size());
  if (folds < 2 || n < folds)
    return Status::invalid(std::string(what) + ": too few measurements to cross-validate");
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937 gen(12345);  // fixed seed: the same measurements give the same reported error
  std::shuffle(order.begin(), order.end(), gen);
  std::vector<double> errors;
  for (int f = 0; f < folds; ++f) {
    std::vector<std::vector<double>> fx;
    std::vector<double> ft;
    for (int i = 0; i < n; ++i) {
      if (i % folds != f) {
        fx.push_back(x[order[i]]);
        ft.push_back(t[order[i]]);
      }
    }
    auto fit = fit_relative(fx, ft, what, o);
    if (!fit.is_ok()) return fit.status();
    for (int i = f; i < n; i += folds) {
      errors.push_back(std::abs(predict(*fit, x[order[i]]) - t[order[i]]) / t[order[i]]);
    }
  }
  return summarize_errors(std::move(errors));
}

}  // namespace scaleplan::calibrate
