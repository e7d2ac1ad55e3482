#include "planner/robustness.h"

#include <algorithm>
#include <cstdio>
#include <utility>

#include "calibrate/kernel_model.h"
#include "planner/parallel.h"

namespace scaleplan::planner {
namespace {

// "#1", "#2", ...: a layout by its rank in the nominal plan.
std::string rank_name(int index) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "#%d", index + 1);
  return buf;
}

std::string summarize(const std::vector<RankedPlan>& plans, const Robustness& r) {
  const int n = static_cast<int>(r.rankings.size());
  if (plans.size() < 2) {
    return "only one layout was ranked, so there is no order to check (--top 2 or more).";
  }
  // The layouts that overtake #1, in rank order, each with the perturbations under which it does.
  std::string lost;
  double widest = 0;  // the largest margin by which a layout overtakes #1
  for (size_t w = 1; w < plans.size(); ++w) {
    std::string under;
    for (const auto& pr : r.rankings) {
      if (pr.first != static_cast<int>(w)) continue;
      const Duration tw = *pr.iteration[w];
      const double margin =
          pr.iteration[0] ? (*pr.iteration[0] - tw).to_seconds() / pr.iteration[0]->to_seconds()
                          : 1.0;
      widest = std::max(widest, margin);
      const std::string by = pr.iteration[0] ? "by " + percent(margin) : "#1 failed to simulate";
      under += (under.empty() ? "" : ", ") + pr.perturbation.name + " (" + by + ")";
    }
    if (under.empty()) continue;
    const std::string diff = layout_diff(plans[0].layout, plans[w].layout);
    lost += "; " + rank_name(static_cast<int>(w)) + (diff.empty() ? "" : " (" + diff + ")") +
            " is faster under " + under;
  }
  if (lost.empty()) {
    return n == 1 ? "#1 stays first under the one perturbation."
                  : "#1 stays first under all " + std::to_string(n) + " perturbations.";
  }
  // Within 1% the order is below what the model can tell apart (docs/planner.md, "How sure").
  const std::string tie =
      widest < 0.01 ? " Every margin is under 1%: a tie as far as the model can tell." : "";
  return "#1 stays first under " + std::to_string(r.stays_first) + " of " + std::to_string(n) +
         " perturbations" + lost + "." + tie;
}

}  // namespace

const std::vector<Perturbation>& default_perturbations() {
  static const std::vector<Perturbation> kPerturbations = {
      {.name = "kernels +10%", .kernel_time = 1.10},
      {.name = "kernels -10%", .kernel_time = 0.90},
      {.name = "NVLink -15%", .nvlink_bandwidth = 0.85},
      {.name = "network -30%", .network_bandwidth = 0.70},
      {.name = "latency x2", .latency = 2.0},
  };
  return kPerturbations;
}

Result<std::vector<Perturbation>> perturbations_for(const hw::Cluster& cluster) {
  std::vector<Perturbation> out = default_perturbations();
  SP_ASSIGN_OR_RETURN(const std::optional<double> error, calibrate::fitted_kernel_error(cluster));
  if (!error) return out;
  // Slower by the error, and faster by the same ratio (1 / (1 + error): never zero or negative).
  for (Perturbation& p : out) {
    if (p.kernel_time == 1.0) continue;
    p.kernel_time = p.kernel_time > 1.0 ? 1.0 + *error : 1.0 / (1.0 + *error);
    char name[48];
    std::snprintf(name, sizeof name, "kernels %+.1f%%", 100 * (p.kernel_time - 1.0));
    p.name = name;
  }
  return out;
}

hw::Cluster perturbed(const hw::Cluster& cluster, const Perturbation& p) {
  hw::Cluster c = cluster;
  c.node.nvlink_bandwidth = c.node.nvlink_bandwidth * p.nvlink_bandwidth;
  c.network.nic_bandwidth = c.network.nic_bandwidth * p.network_bandwidth;
  c.cost.base_latency = c.cost.base_latency * p.latency;
  c.cost.nvlink_step_latency = c.cost.nvlink_step_latency * p.latency;
  c.cost.network_step_latency = c.cost.network_step_latency * p.latency;
  return c;
}

Result<std::unique_ptr<const calibrate::KernelCostModel>> perturbed_kernel_model(
    const hw::Cluster& cluster, const Perturbation& p) {
  SP_ASSIGN_OR_RETURN(auto base, calibrate::kernel_cost_model_for(cluster));
  std::unique_ptr<const calibrate::KernelCostModel> kernels = std::move(base);
  if (p.kernel_time == 1.0) return kernels;
  return std::unique_ptr<const calibrate::KernelCostModel>(
      std::make_unique<const calibrate::ScaledKernelModel>(
          std::shared_ptr<const calibrate::KernelCostModel>(std::move(kernels)), p.kernel_time));
}

Result<sim::SimulationResult> simulate_perturbed(const models::ModelSpec& model,
                                                 const hw::Cluster& cluster, int64_t seq_len,
                                                 const Layout& layout, sim::SimulateOptions options,
                                                 const Perturbation& p) {
  const hw::Cluster c = perturbed(cluster, p);
  SP_ASSIGN_OR_RETURN(auto kernels, perturbed_kernel_model(c, p));
  options.kernels = kernels.get();
  return sim::simulate(model, c, seq_len, layout, options);
}

Result<Robustness> assess_robustness(const std::vector<RankedPlan>& plans,
                                     const std::vector<Perturbation>& perturbations,
                                     const PerturbedEvaluator& make_evaluator, int threads) {
  Robustness r;
  const size_t np = perturbations.size(), nl = plans.size();
  std::vector<std::unique_ptr<const Evaluator>> evaluators;
  evaluators.reserve(np);
  for (const auto& p : perturbations) {
    SP_ASSIGN_OR_RETURN(auto ev, make_evaluator(p));
    evaluators.push_back(std::move(ev));
  }
  // One slot per (perturbation, layout), each written by one worker only.
  std::vector<std::optional<Duration>> times(np * nl);
  std::vector<std::string> errors(np * nl);
  ParallelOptions options;
  options.threads = threads;
  options.item = "perturbed layout";
  SP_RETURN_IF_ERROR(parallel_for(static_cast<int64_t>(np * nl), options, [&](int64_t k) {
                       const size_t i = static_cast<size_t>(k);
                       const size_t ip = i / nl, il = i % nl;
                       Result<Prediction> pred = evaluators[ip]->simulate(plans[il].layout);
                       if (pred) {
                         times[i] = pred->iteration;
                       } else {
                         errors[i] =
                             rank_name(static_cast<int>(il)) + ": " + pred.status().message();
                       }
                     }).with_context("how sure"));

  for (size_t ip = 0; ip < np; ++ip) {
    PerturbedRanking pr;
    pr.perturbation = perturbations[ip];
    for (size_t il = 0; il < nl; ++il) {
      const size_t i = ip * nl + il;
      pr.iteration.push_back(times[i]);
      if (!errors[i].empty()) pr.errors.push_back(errors[i]);
      if (times[i] && (pr.first < 0 || *times[i] < *pr.iteration[static_cast<size_t>(pr.first)])) {
        pr.first = static_cast<int>(il);
      }
    }
    if (pr.first == 0) ++r.stays_first;
    r.rankings.push_back(std::move(pr));
  }
  r.summary = summarize(plans, r);
  return r;
}

}  // namespace scaleplan::planner
