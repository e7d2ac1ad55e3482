#include "hw_profiles/collectives.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>

#include "hw_profiles/placement.h"

namespace scaleplan::hw {
namespace {

enum Proto { kLL = 0, kLL128 = 1, kSimple = 2 };

// NCCL's latency model (src/graph/tuning.cc, NCCL 2.19-2.23), in seconds: base latency per
// collective, and per-step latency over NVLink and over the network, for LL / LL128 / Simple.
struct LatencyTable {
  double base[3];
  double nvlink[3];
  double net[3];
};
constexpr LatencyTable kRingLat = {
    {6.6e-6, 14.0e-6, 8.4e-6}, {0.6e-6, 1.9e-6, 3.4e-6}, {2.7e-6, 4.0e-6, 14.0e-6}};
constexpr LatencyTable kTreeLat = {
    {6.8e-6, 14.0e-6, 8.4e-6}, {0.6e-6, 1.25e-6, 4.0e-6}, {5.0e-6, 8.5e-6, 14.0e-6}};
constexpr double kNvlsNvlinkLat = 25e-6;       // NCCL hwLat NVLink/NVLS/Simple
constexpr double kTreeBwFactor = 0.92;         // NCCL: tree all-reduce busBw *= .92
constexpr double kLLTreeFraction = 1.0 / 3.8;  // NCCL: tree LL busBw *= 1/3.8

// The NCCL defaults that the profile's Simple latencies are compared with: a profile (or a fit)
// that changes them scales every protocol's latency by the same ratio.
constexpr double kDefaultBase = 8.4e-6, kDefaultNvStep = 3.4e-6, kDefaultNetStep = 14.0e-6;

constexpr std::string_view kNames[] = {"ring/LL",     "ring/LL128",  "ring/Simple", "tree/LL",
                                       "tree/LL128",  "tree/Simple", "hier/LL",     "hier/LL128",
                                       "hier/Simple", "nvls/Simple", "direct/LL",   "direct/Simple",
                                       "local"};
enum Algo { kRing = 0, kTree = 3, kHier = 6, kNvls = 9, kDirect = 10, kLocal = 12 };

std::string_view algo_name(int algo, int proto) {
  if (algo == kNvls || algo == kLocal) return kNames[algo];
  if (algo == kDirect) return kNames[kDirect + (proto == kSimple ? 1 : 0)];
  return kNames[algo + proto];
}

// What one estimate needs, derived from the cluster and the placement.
struct Ctx {
  int n, r, d;                 // ranks, ranks per NVLink domain, domains
  double bnv;                  // achieved NVLink bytes/s per GPU (Simple)
  double bnet;                 // achieved network bytes/s of the group per domain (Simple)
  double ramp;                 // bytes in flight before the pipeline runs at full rate (Simple)
  double frac[3];              // protocol bandwidth fractions
  double base_s, nv_s, net_s;  // latency scales relative to NCCL's defaults
  bool ll128;
};

double ring_time(const Ctx& c, const LatencyTable& lat, int p, double bytes, double factor,
                 int steps, int inter_steps, double bw) {
  // Pipeline fill: up to `ramp` bytes cross the ring once more before it streams; a message smaller
  // than that pays its own size again. LL's buffer is 1/8 of Simple's (NCCL defaults).
  const double ramp = std::min(bytes, p == kLL ? c.ramp / 8 : c.ramp);
  return lat.base[p] * c.base_s + (steps - inter_steps) * lat.nvlink[p] * c.nv_s +
         inter_steps * lat.net[p] * c.net_s + (bytes + ramp) * factor / (bw * c.frac[p]);
}

struct Best {
  double t = INFINITY;
  int algo = kLocal, proto = kSimple;
  void offer(double time, int a, int p) {
    if (time < t) {
      t = time;
      algo = a;
      proto = p;
    }
  }
};

// The bottleneck rate of a ring over the group: NVLink per GPU inside a domain, the group's NICs
// between domains.
double ring_bw(const Ctx& c) {
  double bw = INFINITY;
  if (c.r > 1) bw = std::min(bw, c.bnv);
  if (c.d > 1) bw = std::min(bw, c.bnet);
  return std::isfinite(bw) ? bw : c.bnv;
}

void protocols(const Ctx& c, auto&& fn) {
  fn(kLL);
  if (c.ll128) fn(kLL128);
  fn(kSimple);
}

}  // namespace

Result<AlgorithmChoice> parse_algorithm_choice(std::string_view text) {
  if (text == "nccl" || text == "auto") return AlgorithmChoice::kNccl;
  if (text == "fastest") return AlgorithmChoice::kFastest;
  if (text == "ring") return AlgorithmChoice::kRing;
  if (text == "tree") return AlgorithmChoice::kTree;
  if (text == "nvls") return AlgorithmChoice::kNvls;
  if (text == "hier" || text == "hierarchical") return AlgorithmChoice::kHierarchical;
  return Status::invalid("algorithm: '" + std::string(text) +
                         "' is not one of nccl, fastest, ring, tree, nvls, hier");
}

double bus_factor(CollectiveOp op, int n) {
  if (n <= 1)
    return op == CollectiveOp::kBarrier
               ? 0.0
               : (op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce ||
                          op == CollectiveOp::kSendRecv
                      ? 1.0
                      : 0.0);
  const double nn = n;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return 2.0 * (nn - 1) / nn;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kGather:
    case CollectiveOp::kScatter:
      return (nn - 1) / nn;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
    case CollectiveOp::kSendRecv:
      return 1.0;
    case CollectiveOp::kBarrier:
      return 0.0;
  }
  return 0.0;
}

BytesPerSecond algbw(Bytes bytes, Duration time) {
  if (time.count() <= 0) return BytesPerSecond(0);
  return bytes / time;
}

BytesPerSecond busbw(CollectiveOp op, int n, Bytes bytes, Duration time) {
  return algbw(bytes, time) * bus_factor(op, n);
}

GroupPlacement GroupPlacement::packed(const Cluster& c, int n) {
  GroupPlacement g;
  g.size = std::max(1, n);
  g.ranks_per_node = std::min(g.size, c.gpus_per_node);
  g.nodes = (g.size + c.gpus_per_node - 1) / c.gpus_per_node;
  g.ranks_per_domain = std::min(g.size, c.gpus_per_domain());
  g.domains = (g.size + c.gpus_per_domain() - 1) / c.gpus_per_domain();
  g.in_nvlink_domain = g.domains == 1;
  g.nic_sharing = std::max(
      1, (g.ranks_per_node + c.network.nics_per_node - 1) / std::max(1, c.network.nics_per_node));
  g.concurrent_groups = 1;
  return g;
}

CollectiveModel::CollectiveModel(const Cluster& cluster, Measured measured) : cluster_(cluster) {
  const auto& cm = cluster_.cost;
  nvlink_bw_ = cluster_.node.nvlink_bandwidth.value() * cm.nvlink_efficiency;
  nvls_bw_ = cluster_.node.nvlink_bandwidth.value() * cm.nvls_efficiency;
  nic_bw_ = cluster_.network.nic_bandwidth.value() * cm.network_efficiency;
  for (int op = 0; op < kNumCollectiveOps; ++op)
    scaling_[op] = cm.network_scaling_for(to_string(static_cast<CollectiveOp>(op)));
  p2p_scaling_ = cm.network_scaling_for(to_string(CollectiveOp::kSendRecv));
  if (measured == Measured::kModelOnly) return;
  const int gpn = std::max(1, cluster_.gpus_per_node);
  for (const MeasuredCollective& m : cluster_.measured_collectives) {
    const auto op = parse_collective_op(m.op);
    if (!op || m.ranks < 2) continue;
    // The group it was measured on: consecutive GPUs (one node, or packed over several), or the
    // same GPU of consecutive nodes.
    std::vector<int> members(static_cast<size_t>(m.ranks));
    const bool strided = m.placement == "inter_node";
    for (int i = 0; i < m.ranks; ++i) members[static_cast<size_t>(i)] = strided ? i * gpn : i;
    Reference ref;
    ref.group = describe_group(members, cluster_, 1);
    ref.kind = kind_of(ref.group);
    // A one-node measurement with more ranks than the cluster has GPUs per node describes
    // another machine.
    if ((m.placement == "intra_node" || m.placement == "host") && ref.kind != 0) continue;
    ref.ranks = m.ranks;
    ref.latency_s = m.latency.to_seconds();
    ref.seconds_per_byte = m.seconds_per_byte;
    for (const auto& [b, t] : m.points)
      ref.points.emplace_back(static_cast<double>(b.value()), t.to_seconds());
    if (ref.points.empty() && ref.latency_s + ref.seconds_per_byte <= 0) continue;
    auto& refs = measured_[static_cast<size_t>(*op)];
    const bool seen = std::any_of(refs.begin(), refs.end(), [&](const Reference& r) {
      return r.kind == ref.kind && r.ranks == ref.ranks;
    });
    if (seen) continue;
    refs.push_back(ref);
    ++measured_count_;
  }
}

int CollectiveModel::kind_of(const GroupPlacement& g) {
  if (g.nodes <= 1) return 0;
  return g.ranks_per_node <= 1 ? 1 : 2;
}

const CollectiveModel::Reference* CollectiveModel::reference(CollectiveOp op, int kind,
                                                             int ranks) const {
  const Reference* best = nullptr;
  double best_gap = INFINITY;
  for (const Reference& r : measured_[static_cast<size_t>(op)]) {
    if (r.kind != kind) continue;
    const double gap = std::abs(std::log(static_cast<double>(ranks) / r.ranks));
    if (gap < best_gap - 1e-12) {
      best = &r;
      best_gap = gap;
    }
  }
  return best;
}

double CollectiveModel::correction(const Reference& ref, CollectiveOp op, Bytes bytes) const {
  auto ratio = [&](double measured, double at_bytes) {
    const double modelled =
        model_estimate(op, Bytes(static_cast<int64_t>(at_bytes)), ref.group, AlgorithmChoice::kNccl)
            .time.to_seconds();
    return modelled > 0 && measured > 0 ? measured / modelled : 1.0;
  };
  const double S = static_cast<double>(bytes.value());
  const auto& p = ref.points;
  // The fit where nothing but the fit was given.
  if (p.empty()) return ratio(ref.latency_s + ref.seconds_per_byte * S, S);
  // Outside the measured sizes: the ratio at the nearest one.
  if (S <= p.front().first) return ratio(p.front().second, p.front().first);
  if (S >= p.back().first) return ratio(p.back().second, p.back().first);
  // Inside: log-log between the two measured sizes around it.
  const auto hi = std::lower_bound(p.begin(), p.end(), S,
                                   [](const auto& pt, double b) { return pt.first < b; });
  const auto lo = hi - 1;
  const double w = std::log(S / lo->first) / std::log(hi->first / lo->first);
  return ratio(std::exp(std::log(lo->second) + w * (std::log(hi->second) - std::log(lo->second))),
               S);
}

std::string CollectiveModel::describe() const {
  if (measured_count_ == 0) return "nccl-model";
  std::string ops;
  for (int op = 0; op < kNumCollectiveOps; ++op) {
    if (measured_[static_cast<size_t>(op)].empty()) continue;
    ops += (ops.empty() ? "" : ", ") + std::string(to_string(static_cast<CollectiveOp>(op)));
  }
  return "nccl-model x measured (" + std::to_string(measured_count_) +
         (measured_count_ == 1 ? " group: " : " groups: ") + ops + ")";
}

CollectiveEstimate CollectiveModel::estimate(CollectiveOp op, Bytes bytes, const GroupPlacement& g,
                                             AlgorithmChoice choice) const {
  return scaled_by_measurement(model_estimate(op, bytes, g, choice), op, bytes, g);
}

CollectiveEstimate CollectiveModel::scaled_by_measurement(CollectiveEstimate e, CollectiveOp op,
                                                          Bytes bytes,
                                                          const GroupPlacement& g) const {
  if (measured_count_ == 0 || g.size <= 1) return e;
  // A barrier is a 4-byte all-reduce (model_estimate).
  const bool barrier = op == CollectiveOp::kBarrier;
  const CollectiveOp key = barrier ? CollectiveOp::kAllReduce : op;
  if (const Reference* r = reference(key, kind_of(g), g.size)) {
    e.time =
        Duration::seconds(e.time.to_seconds() * correction(*r, key, barrier ? Bytes(4) : bytes));
  }
  return e;
}

Duration CollectiveModel::p2p_time(Bytes bytes, bool same_domain, int concurrent) const {
  const Duration t = model_p2p_time(bytes, same_domain, concurrent);
  if (measured_count_ == 0) return t;
  // Measured send/recv between two GPUs of a node, or of two nodes.
  const Reference* r = reference(CollectiveOp::kSendRecv, same_domain ? 0 : 1, 2);
  if (!r && !same_domain) r = reference(CollectiveOp::kSendRecv, 2, 2);
  if (!r) return t;
  return Duration::seconds(t.to_seconds() * correction(*r, CollectiveOp::kSendRecv, bytes));
}

CollectiveEstimate CollectiveModel::estimate_deduplicated_all_to_all(Bytes bytes,
                                                                     const GroupPlacement& g,
                                                                     double network_share) const {
  return scaled_by_measurement(
      model_estimate(CollectiveOp::kAllToAll, bytes, g, AlgorithmChoice::kNccl, network_share),
      CollectiveOp::kAllToAll, bytes, g);
}

CollectiveEstimate CollectiveModel::model_estimate(CollectiveOp op, Bytes bytes,
                                                   const GroupPlacement& g, AlgorithmChoice choice,
                                                   double network_share) const {
  if (g.size <= 1) return {Duration::zero(), kNames[kLocal]};
  if (op == CollectiveOp::kBarrier) {
    // NCCL has no barrier; frameworks all-reduce one element (torch.distributed.barrier).
    return model_estimate(CollectiveOp::kAllReduce, Bytes(4), g, choice);
  }
  if (op == CollectiveOp::kSendRecv) {
    // The message crosses NVLink or the sender's NIC once; nccl-tests sendrecv has every rank send
    // to its neighbour, so the NIC is shared like a ring's.
    const bool same = g.in_nvlink_domain;
    Duration t = model_p2p_time(bytes, same,
                                std::max(1, g.concurrent_groups) * std::max(1, g.ranks_per_node));
    return {t, kNames[kDirect + 1]};
  }

  const auto& cm = cluster_.cost;
  const auto& net = cluster_.network;
  Ctx c;
  c.n = g.size;
  c.d = std::max(1, g.domains);
  c.r = std::max(1, std::min(g.ranks_per_domain, g.size));
  c.bnv = nvlink_bw_;
  // The NICs of one node this group gets: a fair share among the groups sending at once, and no
  // more than the NICs next to its members (a GPU uses the NIC on its PCIe switch; NCCL's PXN can
  // borrow others, which this model does not assume). Traffic that leaves a leaf switch pays the
  // oversubscription. A domain of several nodes (NVL72) has the NICs of each node the group uses.
  const double q = std::max(1, g.ranks_per_node);
  const double fair = net.nics_per_node * nic_bw_ / std::max(1, g.concurrent_groups);
  const double near = nic_bw_ * std::max(1.0, q * net.nics_per_node / cluster_.gpus_per_node);
  double node_bw = std::min(fair, near);
  if (g.nodes > net.nodes_per_leaf) node_bw /= net.oversubscription;
  // What the fabric delivers at this span, where the profile carries a measured scaling.
  node_bw *= interpolate_network_fraction(scaling_[static_cast<int>(op)], g.nodes);
  const int nodes_in_domain = std::max(1, static_cast<int>(std::ceil(c.r / q)));
  c.bnet = node_bw * nodes_in_domain;
  c.ramp = static_cast<double>(cm.ramp_bytes.value());
  c.frac[kLL] = cm.ll_bandwidth_fraction;
  c.frac[kLL128] = cm.ll128_bandwidth_fraction;
  c.frac[kSimple] = 1.0;
  c.base_s = cm.base_latency.to_seconds() / kDefaultBase;
  c.nv_s = cm.nvlink_step_latency.to_seconds() / kDefaultNvStep;
  c.net_s = cm.network_step_latency.to_seconds() / kDefaultNetStep;
  c.ll128 = cm.ll128_enabled;

  const double S = static_cast<double>(bytes.value());
  const int n = c.n, d = c.d, r = c.r;
  const double f = bus_factor(op, n);
  Best best;

  switch (op) {
    case CollectiveOp::kAllReduce: {
      const bool ring_ok = choice == AlgorithmChoice::kNccl ||
                           choice == AlgorithmChoice::kFastest || choice == AlgorithmChoice::kRing;
      const bool tree_ok =
          d > 1 && (choice == AlgorithmChoice::kNccl || choice == AlgorithmChoice::kFastest ||
                    choice == AlgorithmChoice::kTree);
      const bool nvls_ok =
          d == 1 && cluster_.node.nvls && n > 2 &&
          (choice == AlgorithmChoice::kNccl || choice == AlgorithmChoice::kFastest ||
           choice == AlgorithmChoice::kNvls);
      const bool hier_ok =
          d > 1 && r > 1 &&
          (choice == AlgorithmChoice::kFastest || choice == AlgorithmChoice::kHierarchical);
      const double bw = ring_bw(c);
      if (ring_ok || !(tree_ok || nvls_ok || hier_ok)) {
        protocols(c, [&](int p) {
          best.offer(ring_time(c, kRingLat, p, S, f, 2 * (n - 1), d > 1 ? 2 * d : 0, bw), kRing, p);
        });
      }
      if (tree_ok) {
        // Double binary tree between domains, a chain inside each (NCCL): log2(d) network hops and
        // r-1 NVLink hops, up and down.
        const double tree_bw = std::min(c.r > 1 ? c.bnv : INFINITY, c.bnet) * kTreeBwFactor;
        const int up = static_cast<int>(std::ceil(std::log2(d)));
        protocols(c, [&](int p) {
          Ctx ct = c;
          if (p == kLL) ct.frac[kLL] = kLLTreeFraction;
          const double lat =
              kTreeLat.base[p] * c.base_s +
              2 * ((r - 1) * kTreeLat.nvlink[p] * c.nv_s + up * kTreeLat.net[p] * c.net_s);
          const double ramp = std::min(S, p == kLL ? c.ramp / 8 : c.ramp);
          best.offer(lat + (S + ramp) * f / (tree_bw * ct.frac[p]), kTree, p);
        });
      }
      if (nvls_ok) {
        // NVLink SHARP: the switch reduces; every GPU sends and receives the buffer once, so time
        // is algbw-bound: bytes / (NVLS efficiency x line rate).
        best.offer(kNvlsNvlinkLat * c.nv_s + (S + std::min(S, c.ramp)) / nvls_bw_, kNvls, kSimple);
      }
      if (hier_ok) {
        // Reduce-scatter inside each domain, all-reduce of the 1/r shard across domains (each GPU
        // on its share of the NICs), all-gather inside the domain.
        protocols(c, [&](int p) {
          const double rf = (r - 1.0) / r;
          const double intra =
              2 * ring_time(c, kRingLat, p, S, rf, r - 1, 0, c.bnv) - kRingLat.base[p] * c.base_s;
          const double inter = ring_time(c, kRingLat, p, S / r, 2.0 * (d - 1) / d, 2 * (d - 1),
                                         2 * (d - 1), c.bnet / r) -
                               kRingLat.base[p] * c.base_s;
          best.offer(intra + inter, kHier, p);
        });
      }
      break;
    }
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter: {
      const double bw = ring_bw(c);
      protocols(c, [&](int p) {
        best.offer(ring_time(c, kRingLat, p, S, f, n - 1, d > 1 ? d : 0, bw), kRing, p);
      });
      break;
    }
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce: {
      // Pipelined chain (NCCL's ring algorithm for these): every link carries the whole buffer.
      const double bw = ring_bw(c);
      protocols(c, [&](int p) {
        best.offer(ring_time(c, kRingLat, p, S, 1.0, n - 1, d - 1, bw), kRing, p);
      });
      break;
    }
    case CollectiveOp::kGather:
    case CollectiveOp::kScatter:
    case CollectiveOp::kAllToAll: {
      // Direct sends, all at once. Per rank: (r-1)/n of the buffer over NVLink and (n-r)/n over its
      // share of the NICs (all-to-all); the root of gather/scatter receives or sends (n-1)/n of the
      // buffer, the off-domain part through its node's NICs.
      const bool a2a = op == CollectiveOp::kAllToAll;
      const bool dedup = a2a && network_share >= 0;
      const double nv_bytes = dedup ? S * (r - 1.0) / r : S * (r - 1.0) / n;
      const double net_bytes = dedup ? S * network_share : S * (n - r) / static_cast<double>(n);
      const double net_rate = a2a ? c.bnet / r : c.bnet;
      for (int p : {static_cast<int>(kLL), static_cast<int>(kSimple)}) {
        const double ramp = std::min(S, p == kLL ? c.ramp / 8 : c.ramp);
        double t_bw = (nv_bytes + (r > 1 ? ramp : 0)) / (c.bnv * c.frac[p]);
        if (d > 1) t_bw = std::max(t_bw, (net_bytes + ramp) / (net_rate * c.frac[p]));
        const double lat = kRingLat.base[p] * c.base_s + kRingLat.nvlink[p] * c.nv_s +
                           (d > 1 ? kRingLat.net[p] * c.net_s : 0.0);
        best.offer(lat + t_bw, kDirect, p);
      }
      break;
    }
    case CollectiveOp::kBarrier:
    case CollectiveOp::kSendRecv:
      break;  // handled above
  }
  return {Duration::seconds(best.t), algo_name(best.algo, best.proto)};
}

Duration CollectiveModel::model_p2p_time(Bytes bytes, bool same_domain, int concurrent) const {
  const auto& cm = cluster_.cost;
  const double S = static_cast<double>(bytes.value());
  const double base_s = cm.base_latency.to_seconds() / kDefaultBase;
  const double nv_s = cm.nvlink_step_latency.to_seconds() / kDefaultNvStep;
  const double net_s = cm.network_step_latency.to_seconds() / kDefaultNetStep;
  // A GPU sends through its nearest NIC at full rate unless more transfers leave the node at once
  // than it has NICs; then they share the node's NICs evenly.
  const double nics = cluster_.network.nics_per_node;
  // Off the domain the transfer spans two nodes: the profile's measured scaling at 2 applies.
  const double bw = same_domain ? nvlink_bw_
                                : std::min(nic_bw_, nics * nic_bw_ / std::max(1, concurrent)) *
                                      interpolate_network_fraction(p2p_scaling_, 2);
  const double ramp = static_cast<double>(cm.ramp_bytes.value());
  double best = INFINITY;
  for (int p : {static_cast<int>(kLL), static_cast<int>(kSimple)}) {
    const double frac = p == kLL ? cm.ll_bandwidth_fraction : 1.0;
    const double r = std::min(S, p == kLL ? ramp / 8 : ramp);
    const double lat = kRingLat.base[p] * base_s +
                       (same_domain ? kRingLat.nvlink[p] * nv_s : kRingLat.net[p] * net_s);
    best = std::min(best, lat + (S + r) / (bw * frac));
  }
  return Duration::seconds(best);
}

}  // namespace scaleplan::hw
