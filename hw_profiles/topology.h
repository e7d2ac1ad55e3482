// Topology: the cluster as a graph of devices and links, for routes and bottlenecks.
//
// Vertices are GPUs, NVSwitches (one vertex per NVLink domain, standing for its switch chips),
// NICs, leaf switches and spine switches; edges are full-duplex links with a per-direction
// bandwidth and a latency. GPU g of node k connects to its domain's NVSwitch (NVLink, per-GPU
// bandwidth) and over PCIe to NIC g*nics/gpus_per_node; NIC i of a node connects to the leaf of
// rail i of its group of nodes_per_leaf nodes when the network is rail-optimized (else to the
// node's leaf); every leaf connects to every spine with its downlink bandwidth divided by the
// oversubscription. Routes are shortest by latency (Dijkstra).
//
// The Boost.Graph representation lives in topology.cc only. A Topology is immutable after
// build() and safe to query from several threads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::hw {

enum class VertexKind { kGpu, kNvSwitch, kNic, kLeaf, kSpine };

struct Link {
  int id = 0;
  int from = 0, to = 0;      // vertex ids
  BytesPerSecond bandwidth;  // per direction
  Duration latency;
  std::string kind;  // "nvlink", "pcie", "ib", "uplink"
};

struct Route {
  std::vector<int> links;    // link ids from source to destination
  Duration latency;          // sum of link and switch latencies
  BytesPerSecond bandwidth;  // narrowest link
};

// The narrowest point of a group's traffic pattern (a ring over its members, in order).
struct Bottleneck {
  int link = -1;            // link id, -1 if the group is one GPU
  int flows = 0;            // ring hops crossing that link in one direction
  BytesPerSecond per_flow;  // bandwidth / flows
  std::string description;  // "ib nic3(node0) -> leaf rail3"
};

class Topology {
 public:
  static Result<Topology> build(const Cluster& cluster, int nodes);
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  ~Topology();

  int num_vertices() const;
  int num_links() const;
  int num_gpus() const;
  VertexKind kind(int vertex) const;
  std::string vertex_name(int vertex) const;
  const Link& link(int id) const;
  int gpu_vertex(int rank) const;

  // Shortest-latency route between two GPUs (by global rank).
  Route route(int rank_a, int rank_b) const;
  // Bottleneck of a ring over `members` (in the given order): each hop's route adds one flow to
  // each link it uses, per direction; the link with the least bandwidth per flow wins.
  Bottleneck ring_bottleneck(const std::vector<int>& members) const;

 private:
  struct Impl;
  explicit Topology(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaleplan::hw
