#include "calibrate/refit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>

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

ModelFit* model_of(Calibration& c, KernelKind k) {
  switch (k) {
    case KernelKind::kGemm:
      return &c.gemm;
    case KernelKind::kAttentionFwd:
      return &c.attention_forward;
    case KernelKind::kAttentionBwd:
      return &c.attention_backward;
    case KernelKind::kMemoryBound:
      return &c.memory_bound;
  }
  return nullptr;
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
                          const KernelCostModel* old_model) {
  if (!(o.holdout >= 0 && o.holdout < 1))
    return Status::invalid("--holdout: expected a fraction in [0, 1), got " +
                           std::to_string(o.holdout));
  RefitResult r;
  r.measured_ops = static_cast<int>(measured_ops.size());
  std::vector<KernelSample> shapes = group_by_shape(measured_ops);
  std::vector<KernelSample> test;
  r.measurements = own;
  int fitted_by_kind[4] = {0, 0, 0, 0};
  for (KernelSample& s : shapes) {
    if (s.time <= Duration::zero()) continue;  // a zero-long op: nothing to fit in relative error
    s.holdout = held_out(s, o.holdout);
    if (s.holdout) {
      test.push_back(s);
      ++r.held_out_shapes;
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
  for (int k = 0; k < 4; ++k) {
    const auto kind = static_cast<KernelKind>(k);
    ModelFit* nf = model_of(fresh, kind);
    const std::string name(to_string(kind));
    if (fitted_by_kind[k] == 0) {
      r.kept.push_back(name + ": no measured shape to fit" +
                       (old_model != nullptr && model_of(c, kind)->samples == 0
                            ? " (none before: the roofline times it)"
                            : ""));
    } else if (nf->samples < static_cast<int>(nf->names.size())) {
      r.kept.push_back(name + ": " + std::to_string(nf->samples) + " samples for " +
                       std::to_string(nf->names.size()) + " coefficients");
    } else {
      *model_of(c, kind) = *nf;
    }
  }
  // Memory-bound ops: the refitted bandwidth curve of each op the fit has, the old one of the
  // others.
  for (const BandwidthFit& f : fresh.memory_families) {
    auto it = std::find_if(c.memory_families.begin(), c.memory_families.end(),
                           [&](const BandwidthFit& x) { return x.family == f.family; });
    if (it == c.memory_families.end()) {
      c.memory_families.push_back(f);
    } else {
      *it = f;
    }
  }
  std::sort(c.memory_families.begin(), c.memory_families.end(),
            [](const BandwidthFit& a, const BandwidthFit& b) { return a.family < b.family; });
  r.calibration = c;

  std::unique_ptr<KernelCostModel> old_fitted;
  if (old_model == nullptr) {
    old_fitted = fitted_kernel_model(old, "old");
    old_model = old_fitted.get();
  }
  const auto new_model = fitted_kernel_model(c, "new");
  std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> errs;
  std::map<std::string, std::vector<double>> noise;
  for (const KernelSample& s : test) {
    const double t = s.time.to_seconds();
    const double eo = std::abs(model_seconds(*old_model, s) - t) / t;
    // A kind the refit left without a model (a roofline profile whose traces did not fit it)
    // is still timed by the old model.
    const bool has_new = model_of(c, s.kind)->samples > 0;
    const double en = std::abs(model_seconds(has_new ? *new_model : *old_model, s) - t) / t;
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
