// How sure is a ranking: the planner's top layouts re-simulated on perturbed cluster profiles.
//
// A plan ranks layouts by the times of one cost model; the model's errors are not uniform (kernel
// efficiencies, NVLink and network bandwidths and latencies are each off by their own amounts on
// a given machine), and layouts that differ in how much they lean on each can swap places when one
// is wrong. assess_robustness() re-simulates the ranked layouts under a few perturbations of the
// profile, each changing one resource, and reports for each which layout comes first and by how
// much; a ranking that survives all of them does not hinge on that resource being exactly as
// modelled. The perturbations and their sizes (default_perturbations) come from the spread of the
// model's component checks (docs/planner.md, "How sure").
//
// Only the layouts given are compared: a layout the search bounded out under the nominal profile
// is not re-considered, so "stays first" means first among those. Memory does not depend on the
// perturbations, so the fitting set is the same. Deterministic: results are stored by
// (perturbation, layout) index, whatever the thread count.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "planner/evaluator.h"
#include "planner/planner.h"
#include "sim/simulate.h"

namespace scaleplan::planner {

// One change to the profile. Multipliers of 1 leave a resource as it is.
struct Perturbation {
  std::string name;              // "network -30%", as printed
  double kernel_time = 1;        // every compute kernel's time
  double nvlink_bandwidth = 1;   // NodeSpec::nvlink_bandwidth (NVLS follows it)
  double network_bandwidth = 1;  // NetworkSpec::nic_bandwidth
  double latency = 1;            // the collective and point-to-point latencies (CostModelParams)
};

// Kernels 10% slower and 10% faster, NVLink 15% slower, the network 30% slower, latencies doubled
// (docs/planner.md, "How sure", says where each size comes from).
const std::vector<Perturbation>& default_perturbations();

// The perturbations for `cluster`: default_perturbations(), except that a profile with fitted
// kernels (`scaleplan profile`) perturbs kernel time by its fits' own error
// (calibrate::fitted_kernel_error: the largest 90th-percentile error on shapes not fitted) instead
// of 10%. An error for a calibration that does not parse.
Result<std::vector<Perturbation>> perturbations_for(const hw::Cluster& cluster);

// `cluster` with the perturbation's bandwidths and latencies applied. Kernel time is not a
// profile field: the caller scales the kernel model (calibrate::ScaledKernelModel). Collectives
// the profile measured (Cluster::measured_collectives) keep their measured level: the
// perturbations stand for what the profile does not know.
hw::Cluster perturbed(const hw::Cluster& cluster, const Perturbation& p);

// The kernel model of `cluster` (already perturbed) under `p`: the profile's own (fitted or
// roofline, calibrate::kernel_cost_model_for) with every kernel time multiplied by p.kernel_time.
Result<std::unique_ptr<const calibrate::KernelCostModel>> perturbed_kernel_model(
    const hw::Cluster& cluster, const Perturbation& p);

// One simulation of `layout` on `cluster` under `p`: the perturbed profile and kernel model, the
// rest of `options` as given (its `kernels` is replaced).
Result<sim::SimulationResult> simulate_perturbed(const models::ModelSpec& model,
                                                 const hw::Cluster& cluster, int64_t seq_len,
                                                 const Layout& layout, sim::SimulateOptions options,
                                                 const Perturbation& p);

struct PerturbedRanking {
  Perturbation perturbation;
  // Per layout, in the order given: the iteration under the perturbation; nullopt where the
  // simulation failed (`errors` says why).
  std::vector<std::optional<Duration>> iteration;
  int first = -1;  // index of the fastest layout (the earlier on a tie); -1: none simulated
  std::vector<std::string> errors;
};

struct Robustness {
  std::vector<PerturbedRanking> rankings;  // one per perturbation, in order
  int stays_first = 0;                     // perturbations under which layout 0 is still first
  // One sentence: whether the first layout stays first, and where it does not, which layout
  // overtakes it, in which keys it differs and by how much.
  std::string summary;
};

// An Evaluator on the perturbed cluster (and kernel model); it need only simulate.
using PerturbedEvaluator =
    std::function<Result<std::unique_ptr<const Evaluator>>(const Perturbation&)>;

// Re-simulates `plans` (best first, as plan() ranks them) under each perturbation, on up to
// `threads` threads (0: hardware concurrency). An error building an evaluator is returned; a
// failed simulation is recorded in its ranking.
Result<Robustness> assess_robustness(const std::vector<RankedPlan>& plans,
                                     const std::vector<Perturbation>& perturbations,
                                     const PerturbedEvaluator& make_evaluator, int threads = 0);

}  // namespace scaleplan::planner
