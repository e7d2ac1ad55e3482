#include "calibrate/refit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>

#include "calibrate/features.h"
#include "calibrate/fit.h"
#include "calibrate/fitted_model.h"

namespace scaleplan::calibrate {
namespace {

// The quantile q of sorted values, linearly interpolated.
double quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (pos - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

// The time the simulator gives the shape under calibration `c`.
double model_seconds(const KernelCostModel& m, const KernelSample& s) {
  switch (s.kind) {
    case KernelKind::kGemm:
      return m.gemm(s.gemm).to_seconds();
    case KernelKind::kAttentionFwd:
      return m.attention(s.attention, false).to_seconds();
    case KernelKind::kAttentionBwd:
      return m.attention(s.attention, true).to_seconds();
    case KernelKind::kMemoryBound:
      return m.memory_bound(s.memory).to_seconds();
  }
  return 0;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * x);
  return buf;
}

// The mean of `v` and its standard error (sample standard deviation / sqrt(n)).
std::pair<double, double> mean_and_standard_error(const std::vector<double>& v) {
  const double n = static_cast<double>(v.size());
  double mean = 0;
  for (const double x : v) mean += x / n;
  double ss = 0;
  for (const double x : v) ss += (x - mean) * (x - mean);
  return {mean, v.size() > 1 ? std::sqrt(ss / (n - 1) / n) : 0.0};
}

// The model a refitted memory-bound model must beat: what times its training shapes if the fit is
// not taken. A roofline profile's (or a model an earlier refit marked) is the roofline; a
// calibrated profile's is its own fitted model. Its error needs no cross-validation: no parameter
// of the roofline is fitted to these shapes, and a calibrated profile's were fitted before them
// (on its own sweeps, which are among the shapes: in sample for it, a bias towards keeping it).
struct BaseModel {
  const KernelCostModel* model;
  const char* name;        // "roofline", "profile's": "needs 3 to check ... (<name> 5.0%)"
  const char* possessive;  // "roofline's", "profile's": "against the <possessive> 5.0%"
};

// Whether a model fitted on rows `x` (times `t`, each the median of ops whose relative spread is
// `noise`) predicts them better than the base model, which timed them `prior`. Each shape is
// predicted by the model refitted without it (leave-one-out cross-validation, Stone 1974); the
// fit replaces the base only when its mean relative error is below the base's mean relative
// error on the same shapes by more than the larger of
// - one standard error of that leave-one-out mean: the one-standard-error rule (Breiman et al.
//   1984, CART §3.4.3; Hastie, Tibshirani and Friedman, The Elements of Statistical Learning,
//   2nd ed., §7.10), which keeps the simpler model unless the other is better by more than its
//   error estimate is uncertain; the base has no parameter fitted to the shapes left out;
// - the median spread of the shapes' own timings (IQR / median of each shape's ops; RefitError's
//   noise_median): two errors closer than the measurements scatter are not told apart.
// A curve has 3-6 shapes from one trace; a bare comparison of the two errors chose fits that
// then timed held-out shapes worse than the roofline (docs/calibration.md). Fewer shapes than
// coefficients + 1 leave no fit to check.
struct LooChoice {
  bool fit_wins = false;
  bool checked = false;  // whether there were shapes enough to leave one out
  std::string reason;
};
LooChoice choose_by_leave_one_out(const std::vector<std::vector<double>>& x,
                                  const std::vector<double>& t, const std::vector<double>& noise,
                                  const std::vector<double>& prior, size_t coefficients,
                                  std::string_view what, const BaseModel& base) {
  const size_t n = t.size();
  std::vector<double> prior_err;
  for (size_t i = 0; i < n; ++i) prior_err.push_back(std::abs(prior[i] - t[i]) / t[i]);
  const double base_error = mean_and_standard_error(prior_err).first;
  const std::string shapes = std::to_string(n) + (n == 1 ? " shape" : " shapes");
  if (n < coefficients + 1) {
    return {false, false,
            shapes + ", needs " + std::to_string(coefficients + 1) +
                " to check a fit by leave-one-out (" + base.name + " " + percent(base_error) + ")"};
  }
  std::vector<double> loo;
  for (size_t i = 0; i < n; ++i) {
    std::vector<std::vector<double>> xi;
    std::vector<double> ti;
    for (size_t j = 0; j < n; ++j) {
      if (j == i) continue;
      xi.push_back(x[j]);
      ti.push_back(t[j]);
    }
    const auto fit = fit_relative(xi, ti, what);
    if (!fit.is_ok()) return {false, true, "leave-one-out fit failed: " + fit.status().message()};
    loo.push_back(std::abs(predict(*fit, x[i]) - t[i]) / t[i]);
  }
  const auto [fitted, se] = mean_and_standard_error(loo);
  const double spread = summarize_errors(noise).median;
  return {fitted + std::max(se, spread) < base_error, true,
          "leave-one-out " + percent(fitted) + " (standard error " + percent(se) +
              ", timings' spread " + percent(spread) + ") against the " + base.possessive + " " +
              percent(base_error) + " on " + shapes};
}

}  // namespace

std::string shape_key(const KernelSample& s) {
  std::string key(to_string(s.kind));
  char buf[256];
  switch (s.kind) {
    case KernelKind::kGemm:
      std::snprintf(buf, sizeof buf, " m=%lld n=%lld k=%lld batch=%lld dtype=%s",
                    (long long)s.gemm.m, (long long)s.gemm.n, (long long)s.gemm.k,
                    (long long)s.gemm.batch, std::string(to_string(s.gemm.dtype)).c_str());
      break;
    case KernelKind::kAttentionFwd:
    case KernelKind::kAttentionBwd: {
      const AttentionShape& a = s.attention;
      std::snprintf(buf, sizeof buf,
                    " b=%lld heads=%lld kv_heads=%lld q=%lld kv=%lld d=%lld dv=%lld causal=%d "
                    "window=%lld kernel=%s",
                    (long long)a.batch, (long long)a.heads, (long long)a.kv_heads,
                    (long long)a.q_len, (long long)a.kv_len, (long long)a.head_dim,
                    (long long)a.v_head_dim, a.causal ? 1 : 0, (long long)a.window,
                    std::string(to_string(a.kernel)).c_str());
      break;
    }
    case KernelKind::kMemoryBound:
      std::snprintf(buf, sizeof buf, " op=%s bytes=%lld flops=%.17g",
                    std::string(to_string(s.memory.op)).c_str(), (long long)s.memory.bytes.value(),
                    s.memory.flops.value());
      // Two implementations of one op and size (a bf16 <-> fp32 copy either way moves the same
      // bytes) are two shapes; the vectorized one keeps the key it had before paths were read.
      if (s.memory.path != MemPath::kVectorized)
        return key + buf + " path=" + std::string(mem_path_name(s.memory.path));
      break;
  }
  return key + buf;
}

bool held_out(const KernelSample& s, double fraction) {
  // FNV-1a, 64 bit (Fowler, Noll, Vo): stable across runs, machines and file orders.
  uint64_t h = 14695981039346656037ull;
  for (const unsigned char ch : shape_key(s)) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return static_cast<double>(h >> 11) / 9007199254740992.0 < fraction;  // top 53 bits / 2^53
}

std::vector<KernelSample> group_by_shape(const std::vector<KernelSample>& ops) {
  std::map<std::string, std::vector<const KernelSample*>> by_key;
  for (const KernelSample& s : ops) by_key[shape_key(s)].push_back(&s);
  std::vector<KernelSample> out;
  for (const auto& [key, group] : by_key) {
    std::vector<double> t;
    for (const KernelSample* s : group) t.push_back(s->time.to_seconds());
    std::sort(t.begin(), t.end());
    KernelSample s = *group.front();
    const double med = quantile(t, 0.5);
    s.time = Duration::seconds(med);
    s.noise = med > 0 ? (quantile(t, 0.75) - quantile(t, 0.25)) / med : 0;
    s.holdout = false;
    out.push_back(s);
  }
  return out;
}

Result<RefitResult> refit(const Calibration& old, const Measurements& own,
                          const std::vector<KernelSample>& measured_ops, const RefitOptions& o,
                          std::shared_ptr<const KernelCostModel> roofline) {
  if (!(o.holdout >= 0 && o.holdout < 1))
    return Status::invalid("--holdout: expected a fraction in [0, 1), got " +
                           std::to_string(o.holdout));
  // A profile without kernel models is timed by its roofline, before and (where the measured
  // shapes do not support a fit) after.
  const bool from_roofline = !old.kernel_models;
  if ((from_roofline || uses_roofline(old)) && roofline == nullptr)
    return Status::internal("refit: a profile timed in part by its roofline needs the roofline");
  RefitResult r;
  r.measured_ops = static_cast<int>(measured_ops.size());
  std::vector<KernelSample> shapes = group_by_shape(measured_ops);
  std::vector<KernelSample> test;
  r.measurements = own;
  int fitted_by_kind[4] = {0, 0, 0, 0}, held_by_kind[4] = {0, 0, 0, 0};
  for (KernelSample& s : shapes) {
    if (s.time <= Duration::zero()) continue;  // a zero-long op: nothing to fit in relative error
    s.holdout = held_out(s, o.holdout);
    if (s.holdout) {
      test.push_back(s);
      ++r.held_out_shapes;
      ++held_by_kind[static_cast<int>(s.kind)];
    } else {
      ++r.fitted_shapes;
      ++fitted_by_kind[static_cast<int>(s.kind)];
    }
    r.measurements.kernels.push_back(s);
  }
  if (r.fitted_shapes == 0)
    return Status::invalid("--measured: no measured kernel shape is left to fit (" +
                           std::to_string(r.held_out_shapes) +
                           " held out); lower --holdout or give more traces");

  SP_ASSIGN_OR_RETURN(Calibration fresh, fit_calibration(r.measurements, old.tiles, o.folds));
  Calibration c = old;
  c.kernel_models = true;
  auto keep = [&](const std::string& model, const std::string& source, int shapes,
                  const std::string& reason) {
    r.choices.push_back({model, source, shapes, reason});
    if (source == "old") r.kept.push_back(model + ": kept the profile's: " + reason);
    if (source == "roofline") r.kept.push_back(model + ": kept the roofline: " + reason);
  };
  // What each memory-bound model is chosen against (BaseModel): the family-blind model against
  // the profile's family-blind model (its curves aside), each curve against how the profile timed
  // its shapes (its own curve, else its family-blind model). For a roofline profile both are the
  // roofline; the report below times the old profile with old_model too.
  std::unique_ptr<KernelCostModel> old_fitted, old_blind;
  const KernelCostModel* old_model = roofline.get();
  const KernelCostModel* old_blind_model = roofline.get();
  if (!from_roofline) {
    old_fitted = fitted_kernel_model(old, "old", roofline);
    old_model = old_fitted.get();
    Calibration blind = old;
    blind.memory_families.clear();
    old_blind = fitted_kernel_model(blind, "old", roofline);
    old_blind_model = old_blind.get();
  }
  auto base_of = [](const KernelCostModel* model, bool is_roofline) {
    return is_roofline ? BaseModel{model, "roofline", "roofline's"}
                       : BaseModel{model, "profile's", "profile's"};
  };
  // The training shapes of the memory-bound models (as fit_calibration fits them): the
  // family-blind model's (vectorized), and each curve's by family key.
  std::vector<const KernelSample*> vectorized;
  std::map<std::string, std::vector<const KernelSample*>> by_family;
  std::map<std::string, int> measured_by_family;  // of them, shapes from the traces
  for (size_t i = 0; i < r.measurements.kernels.size(); ++i) {
    const KernelSample& s = r.measurements.kernels[i];
    if (s.kind != KernelKind::kMemoryBound || s.holdout) continue;
    if (s.memory.path == MemPath::kVectorized) vectorized.push_back(&s);
    const std::string key = memory_family_key(s.family, s.memory.path);
    by_family[key].push_back(&s);
    if (i >= own.kernels.size()) ++measured_by_family[key];
  }
  auto base_seconds = [&](const BaseModel& base, const std::vector<const KernelSample*>& group) {
    std::vector<double> t;
    for (const KernelSample* s : group) t.push_back(model_seconds(*base.model, *s));
    return t;
  };
  bool blind_kept = false;  // the profile's own family-blind model, kept with its families

  for (int k = 0; k < 4; ++k) {
    const auto kind = static_cast<KernelKind>(k);
    ModelFit* nf = &kernel_model(fresh, kind);
    ModelFit* current = &kernel_model(c, kind);
    const std::string name = kernel_model_key(kind);
    const int needed = static_cast<int>(nf->names.size());
    const bool enough = fitted_by_kind[k] > 0 && nf->samples >= needed;
    // The roofline is this kind's model before the refit: a roofline profile, or one an earlier
    // refit marked.
    const bool prior_roofline = from_roofline || current->roofline;
    if (enough && kind == KernelKind::kMemoryBound) {
      std::vector<std::vector<double>> x;
      std::vector<double> t, noise;
      for (const KernelSample* s : vectorized) {
        x.push_back(memory_features(s->memory));
        t.push_back(s->time.to_seconds());
        noise.push_back(s->noise);
      }
      const BaseModel base = base_of(old_blind_model, prior_roofline);
      const LooChoice choice = choose_by_leave_one_out(x, t, noise, base_seconds(base, vectorized),
                                                       nf->names.size(), name, base);
      if (choice.fit_wins || prior_roofline) {
        *current = *nf;
        current->roofline = !choice.fit_wins;
        current->reason = choice.fit_wins ? "" : choice.reason;
        keep(name, choice.fit_wins ? "fitted" : "roofline", nf->samples, choice.reason);
      } else {
        blind_kept = true;
        keep(name, "old", current->samples, choice.reason);
      }
    } else if (enough) {
      *current = *nf;
      keep(name, "fitted", nf->samples, std::to_string(nf->samples) + " shapes");
    } else if (prior_roofline) {
      const int n = nf->samples;
      std::string reason = fitted_by_kind[k] == 0 && held_by_kind[k] == 0
                               ? "no measured shape"
                               : std::to_string(n) + (n == 1 ? " shape" : " shapes") + ", needs " +
                                     std::to_string(needed);
      if (held_by_kind[k] > 0) reason += " (" + std::to_string(held_by_kind[k]) + " held out)";
      *current = *nf;  // its counts; the coefficients are not used
      current->roofline = true;
      current->reason = reason;
      keep(name, "roofline", nf->samples, reason);
    } else if (fitted_by_kind[k] == 0) {
      keep(name, "old", current->samples, "no measured shape to fit");
    } else {
      keep(
          name, "old", current->samples,
          std::to_string(nf->samples) + " samples for " + std::to_string(needed) + " coefficients");
    }
  }
  // The family-blind model of a roofline profile's refit times the families it was fitted on;
  // the roofline keeps the others (ops the traces do not read: norms, the loss, the optimizer).
  if ((from_roofline || !old.memory_bound.families.empty()) && !blind_kept) {
    std::vector<std::string>& covered = c.memory_bound.families;
    covered.clear();
    for (const KernelSample* s : vectorized) covered.push_back(s->family);
    std::sort(covered.begin(), covered.end());
    covered.erase(std::unique(covered.begin(), covered.end()), covered.end());
  }
  // Memory-bound ops: the refitted bandwidth curve of each op the fit has, the old one of the
  // others. A curve replaces what timed its shapes before (the roofline, or the profile's own
  // model) only when it predicts them better, left out one at a time. A curve of too few shapes
  // to check keeps the profile's model; where that is the roofline, the family-blind model times
  // the shapes on the vectorized path and the roofline keeps them on another.
  for (const auto& entry : by_family) {
    // Named, not bound: clang before 16 refuses a lambda's reference to a structured binding.
    const std::string& family = entry.first;
    const auto& group = entry.second;
    auto old_it = std::find_if(c.memory_families.begin(), c.memory_families.end(),
                               [&](const BandwidthFit& x) { return x.family == family; });
    const bool prior_roofline =
        from_roofline || (old_it != c.memory_families.end() && old_it->roofline);
    auto f_it = std::find_if(fresh.memory_families.begin(), fresh.memory_families.end(),
                             [&](const BandwidthFit& x) { return x.family == family; });
    BandwidthFit f;
    if (f_it != fresh.memory_families.end()) {
      f = *f_it;
    } else if (prior_roofline) {
      f.family = family;  // too few shapes for a curve
      f.samples = static_cast<int>(group.size());
    } else {
      continue;  // as before: the old curve, or the op's or the family-blind model
    }
    const std::string model = "memory_families: " + family;
    if (measured_by_family[family] == 0) {
      // The profile's own shapes alone: the fit is the curve the profile already has.
      keep(model, "old", old_it != c.memory_families.end() ? old_it->samples : f.samples,
           "no measured shape to fit");
      continue;
    }
    std::vector<std::vector<double>> x;
    std::vector<double> t, noise;
    for (const KernelSample* s : group) {
      x.push_back(collective_features(s->memory.bytes));
      t.push_back(s->time.to_seconds());
      noise.push_back(s->noise);
    }
    const BaseModel base = base_of(old_model, prior_roofline);
    const LooChoice choice =
        choose_by_leave_one_out(x, t, noise, base_seconds(base, group), 2, family, base);
    if (!choice.fit_wins && !prior_roofline) {
      keep(model, "old", f.samples, choice.reason);  // its curve, or none as before
      continue;
    }
    if (prior_roofline) {
      if (!choice.checked && group.front()->memory.path == MemPath::kVectorized) {
        // Too few shapes to check a curve: the family-blind model times them, chosen against
        // the roofline by the same rule on every vectorized shape.
        r.choices.push_back({model, "memory_bound", f.samples, choice.reason});
        if (old_it != c.memory_families.end()) c.memory_families.erase(old_it);
        continue;
      }
      f.roofline = !choice.fit_wins;
      f.reason = choice.fit_wins ? "" : choice.reason;
      keep(model, choice.fit_wins ? "fitted" : "roofline", f.samples, choice.reason);
    } else {
      keep(model, "fitted", f.samples, choice.reason);
    }
    if (old_it == c.memory_families.end()) {
      c.memory_families.push_back(f);
    } else {
      *old_it = f;
    }
  }
  std::sort(c.memory_families.begin(), c.memory_families.end(),
            [](const BandwidthFit& a, const BandwidthFit& b) { return a.family < b.family; });
  r.calibration = c;

  const auto new_model = fitted_kernel_model(c, "new", roofline);
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> errs;
  std::map<std::string, std::vector<double>> noise;
  for (const KernelSample& s : test) {
    const double t = s.time.to_seconds();
    const double eo = std::abs(model_seconds(*old_model, s) - t) / t;
    const double en = std::abs(model_seconds(*new_model, s) - t) / t;
    for (const std::string& k : {std::string(to_string(s.kind)), std::string("all")}) {
      errs[k].first.push_back(eo);
      errs[k].second.push_back(en);
      noise[k].push_back(s.noise);
    }
  }
  for (const char* k : {"gemm", "attention_fwd", "attention_bwd", "memory_bound", "all"}) {
    const auto it = errs.find(k);
    if (it == errs.end()) continue;
    r.errors.push_back(
        {k, static_cast<int>(it->second.first.size()), summarize_errors(it->second.first).median,
         summarize_errors(it->second.second).median, summarize_errors(noise[k]).median});
  }
  return r;
}

}  // namespace scaleplan::calibrate
