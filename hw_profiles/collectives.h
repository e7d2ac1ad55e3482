// Collective cost model: how long a NCCL-style collective takes on a placed group.
//
// One definition of the nccl-tests metrics (bus_factor, algbw, busbw; nccl-tests
// doc/PERFORMANCE.md) used by the model, the nccl-tests importer, calibrate, sim and the CLI.
//
// The model follows NCCL's own tuning model (src/graph/tuning.cc): for every algorithm (ring,
// tree, NVLS, and a hierarchical NVLink+network scheme that NCCL does not implement) and protocol
// (LL, LL128, Simple), time = base latency + steps x per-step latency (NVLink or network) +
// (bytes x bus factor + ramp) / bandwidth, where the bandwidth is the bottleneck of the group:
// NVLink per GPU inside an NVLink domain, and the NICs the group gets on a node across domains,
// shared with the groups of the same kind that communicate at the same time. docs/hw_profiles.md
// ("Collective cost model") derives each term and cites its source.
//
// CollectiveModel is an immutable value built from a Cluster; estimate() is allocation-free,
// thread-safe, and costs tens of nanoseconds: the simulator calls it millions of times.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/comm.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::hw {

// The collectives are core/comm.h's CollectiveOp, with their nccl-tests names.

// nccl-tests bus-bandwidth factor for n ranks: all-reduce 2(n-1)/n; all-gather, reduce-scatter,
// all-to-all, gather, scatter (n-1)/n; broadcast, reduce, send/recv 1; barrier 0.
double bus_factor(CollectiveOp op, int n);
// algbw = bytes / time (nccl-tests: size / 1e9 / seconds in GB/s). `bytes` is the nccl-tests size:
// the whole buffer for all-reduce, broadcast, reduce; the gathered (total) buffer for all-gather,
// reduce-scatter, gather, scatter; the per-rank send buffer for all-to-all; the message for
// send/recv.
BytesPerSecond algbw(Bytes bytes, Duration time);
BytesPerSecond busbw(CollectiveOp op, int n, Bytes bytes, Duration time);

// Where one group of a layout sits on the cluster (see placement.h, which computes it).
struct GroupPlacement {
  int size = 1;                  // ranks in the group
  int ranks_per_node = 1;        // members on the busiest node
  int nodes = 1;                 // nodes spanned
  bool in_nvlink_domain = true;  // all members inside one NVLink domain
  int ranks_per_domain = 1;      // members in the busiest NVLink domain
  int domains = 1;               // NVLink domains spanned
  int nic_sharing = 1;           // members of this group that send through the same NIC
  int concurrent_groups = 1;     // groups (this one included) sending over this node's NICs at once

  // n ranks packed onto consecutive GPUs, as nccl-tests places them (mpirun -N gpus_per_node).
  static GroupPlacement packed(const Cluster& c, int n);
  bool operator==(const GroupPlacement&) const = default;
};

// Which algorithm to use. kNccl: the one NCCL's tuner would pick (ring, tree, NVLS; the fastest of
// those by this model, as NCCL picks the fastest by its own); kFastest: also the hierarchical one.
enum class AlgorithmChoice { kNccl, kFastest, kRing, kTree, kNvls, kHierarchical };
Result<AlgorithmChoice> parse_algorithm_choice(std::string_view text);

struct CollectiveEstimate {
  Duration time;
  std::string_view algorithm;  // "ring/LL128", "tree/Simple", "nvls/Simple", "hier/Simple",
                               // "direct/Simple", "local"; points at static storage
};

class CollectiveModel {
 public:
  // kUse: where the profile carries measured collectives (Cluster::measured_collectives), every
  // estimate of a measured op is scaled by measured / modelled time at the measured group nearest
  // to the one asked about (same kind: inside one node, one rank per node, or packed over nodes;
  // nearest size), at the same message size. "Measured" is the measurements interpolated log-log
  // between sizes, with the ratio at the nearest measured size held outside them (the fit where
  // there are no points). At a measured group and size the estimate is the measurement;
  // elsewhere the model carries what changes (other sizes, NIC sharing, concurrent groups,
  // network scaling) and the measurement its level. Ops and group kinds without a measurement
  // keep the model. kModelOnly ignores the measurements (the nccl-tests fits, which fit the
  // model's own parameters).
  enum class Measured { kUse, kModelOnly };
  explicit CollectiveModel(const Cluster& cluster, Measured measured = Measured::kUse);

  // Time of `op` on `bytes` (nccl-tests size convention, see algbw) over the placed group.
  // A forced algorithm that does not apply (tree inside one domain, NVLS without NVLS) falls back
  // to the NCCL choice.
  CollectiveEstimate estimate(CollectiveOp op, Bytes bytes, const GroupPlacement& group,
                              AlgorithmChoice choice = AlgorithmChoice::kNccl) const;

  // An all-to-all whose traffic between NVLink domains is `network_share` of `bytes` (what a rank
  // sends), the rest crossing NVLink inside the domains: (r-1)/r of it, as a dispatcher that sends
  // each token once per destination node and forwards it there over NVLink does (DeepEP's
  // internode kernels). Scaled by a measured all-to-all like estimate().
  CollectiveEstimate estimate_deduplicated_all_to_all(Bytes bytes, const GroupPlacement& group,
                                                      double network_share) const;

  // Pipeline-parallel send/recv of one message between two ranks: over NVLink when both are in
  // one NVLink domain, else over the sender's NIC; `concurrent` transfers leaving the same node at
  // once share its NICs.
  Duration p2p_time(Bytes bytes, bool same_domain, int concurrent = 1) const;

  const Cluster& cluster() const { return cluster_; }
  // Measured collectives in use (0 without, or with Measured::kModelOnly).
  int measured_count() const { return measured_count_; }
  // "nccl-model", or "nccl-model x measured (N groups: all_reduce, ...)" when measurements scale
  // it.
  std::string describe() const;

 private:
  // A measurement in use: its group kind, size and the group it was measured on.
  struct Reference {
    int kind = 0;  // 0: inside one node, 1: one rank per node, 2: packed over several nodes
    int ranks = 0;
    GroupPlacement group;
    double latency_s = 0, seconds_per_byte = 0;
    std::vector<std::pair<double, double>> points;  // (bytes, seconds), ascending
  };
  static int kind_of(const GroupPlacement& g);
  const Reference* reference(CollectiveOp op, int kind, int ranks) const;
  // measured / modelled at `ref` for `bytes`.
  double correction(const Reference& ref, CollectiveOp op, Bytes bytes) const;
  // `e` times the correction of the measured `op` nearest to `g` (estimate()'s rule); `e` where
  // none is measured.
  CollectiveEstimate scaled_by_measurement(CollectiveEstimate e, CollectiveOp op, Bytes bytes,
                                           const GroupPlacement& g) const;
  // `network_share` >= 0: an all-to-all as estimate_deduplicated_all_to_all models it.
  CollectiveEstimate model_estimate(CollectiveOp op, Bytes bytes, const GroupPlacement& group,
                                    AlgorithmChoice choice, double network_share = -1) const;
  Duration model_p2p_time(Bytes bytes, bool same_domain, int concurrent) const;

  Cluster cluster_;
  std::array<std::vector<Reference>, kNumCollectiveOps> measured_;
  int measured_count_ = 0;
  // Derived once: seconds per byte and seconds, so that estimate() is pure arithmetic.
  double nvlink_bw_;  // achieved NVLink bytes/s per GPU per direction
  double nvls_bw_;    // NVLS all-reduce algbw
  double nic_bw_;     // achieved bytes/s of one NIC
  // The profile's measured network scaling resolved per op (CostModelParams::network_scaling_for),
  // and for pipeline sends.
  std::array<std::vector<NetworkScalingPoint>, kNumCollectiveOps> scaling_;
  std::vector<NetworkScalingPoint> p2p_scaling_;
};

}  // namespace scaleplan::hw
