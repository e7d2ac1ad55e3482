#include "hw_profiles/topology.h"

#include <algorithm>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <map>

namespace scaleplan::hw {

struct Topology::Impl {
  struct VertexProps {
    VertexKind kind;
    std::string name;
    Duration latency;  // switching latency when traversed
  };
  struct EdgeProps {
    int link;       // index into links
    double weight;  // seconds, for Dijkstra
  };
  using Graph =
      boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS, VertexProps, EdgeProps>;
  Graph g;
  std::vector<Link> links;
  std::vector<int> gpu_vertices;

  int add_vertex(VertexKind kind, std::string name, Duration latency = Duration::zero()) {
    return static_cast<int>(boost::add_vertex(VertexProps{kind, std::move(name), latency}, g));
  }
  void add_link(int a, int b, BytesPerSecond bw, Duration lat, std::string kind) {
    Link l;
    l.id = static_cast<int>(links.size());
    l.from = a;
    l.to = b;
    l.bandwidth = bw;
    l.latency = lat;
    l.kind = std::move(kind);
    const double w =
        lat.to_seconds() + g[b].latency.to_seconds() + g[a].latency.to_seconds() + 1e-12;
    boost::add_edge(a, b, EdgeProps{l.id, w}, g);
    links.push_back(std::move(l));
  }
};

Topology::Topology(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

Result<Topology> Topology::build(const Cluster& c, int nodes) {
  if (nodes < 1)
    return Status::invalid("topology: nodes must be positive, got " + std::to_string(nodes));
  auto impl = std::make_unique<Impl>();
  const int gpn = c.gpus_per_node;
  const int nodes_per_domain = c.gpus_per_domain() / gpn;
  const int nics = c.network.nics_per_node;
  const int per_leaf = std::max(1, c.network.nodes_per_leaf);
  const int groups = (nodes + per_leaf - 1) / per_leaf;
  const bool multi_tier = c.network.switch_tiers >= 2 && (groups > 1 || c.network.rail_optimized);
  // Leaves: one per rail per group of nodes (rail-optimized) or one per group.
  const int leaves_per_group = c.network.rail_optimized ? std::max(1, nics) : 1;
  std::vector<int> leaf(groups * leaves_per_group);
  for (int gi = 0; gi < groups; ++gi) {
    for (int l = 0; l < leaves_per_group; ++l) {
      leaf[gi * leaves_per_group + l] =
          impl->add_vertex(VertexKind::kLeaf,
                           "leaf" + std::to_string(gi) +
                               (c.network.rail_optimized ? ".rail" + std::to_string(l) : ""),
                           c.network.switch_latency);
    }
  }
  std::vector<int> spine;
  if (multi_tier) {
    const int spines = std::max(1, leaves_per_group);
    for (int s = 0; s < spines; ++s) {
      spine.push_back(impl->add_vertex(VertexKind::kSpine, "spine" + std::to_string(s),
                                       c.network.switch_latency));
    }
    // Each leaf's uplink capacity = its downlink capacity / oversubscription, spread over spines.
    const double down =
        c.network.nic_bandwidth.value() * per_leaf * (c.network.rail_optimized ? 1 : nics);
    const BytesPerSecond up(down / c.network.oversubscription / spines);
    for (int l : leaf) {
      for (int s : spine) impl->add_link(l, s, up, Duration::zero(), "uplink");
    }
  }
  int nvswitch = -1;
  for (int n = 0; n < nodes; ++n) {
    if (n % nodes_per_domain == 0) {
      nvswitch =
          impl->add_vertex(VertexKind::kNvSwitch, "nvswitch" + std::to_string(n / nodes_per_domain),
                           Duration::zero());
    }
    std::vector<int> nic(nics);
    for (int i = 0; i < nics; ++i) {
      nic[i] = impl->add_vertex(VertexKind::kNic,
                                "nic" + std::to_string(i) + "(node" + std::to_string(n) + ")",
                                c.network.nic_latency);
      const int l = leaf[(n / per_leaf) * leaves_per_group + (c.network.rail_optimized ? i : 0)];
      impl->add_link(nic[i], l, c.network.nic_bandwidth, Duration::zero(), "ib");
    }
    for (int gpu = 0; gpu < gpn; ++gpu) {
      const int v = impl->add_vertex(VertexKind::kGpu, "gpu" + std::to_string(n * gpn + gpu));
      impl->gpu_vertices.push_back(v);
      impl->add_link(v, nvswitch, c.node.nvlink_bandwidth, c.node.nvlink_latency / 2, "nvlink");
      if (nics > 0)
        impl->add_link(v, nic[gpu * nics / gpn], c.node.pcie_bandwidth, Duration::zero(), "pcie");
    }
  }
  return Topology(std::move(impl));
}

int Topology::num_vertices() const { return static_cast<int>(boost::num_vertices(impl_->g)); }
int Topology::num_links() const { return static_cast<int>(impl_->links.size()); }
int Topology::num_gpus() const { return static_cast<int>(impl_->gpu_vertices.size()); }
VertexKind Topology::kind(int v) const { return impl_->g[v].kind; }
std::string Topology::vertex_name(int v) const { return impl_->g[v].name; }
const Link& Topology::link(int id) const { return impl_->links.at(id); }
int Topology::gpu_vertex(int rank) const { return impl_->gpu_vertices.at(rank); }

Route Topology::route(int rank_a, int rank_b) const {
  Route r;
  r.bandwidth = BytesPerSecond(INFINITY);
  const auto& g = impl_->g;
  const int src = gpu_vertex(rank_a), dst = gpu_vertex(rank_b);
  if (src == dst) return r;
  std::vector<Impl::Graph::vertex_descriptor> pred(boost::num_vertices(g));
  std::vector<double> dist(boost::num_vertices(g));
  boost::dijkstra_shortest_paths(g, src,
                                 boost::weight_map(boost::get(&Impl::EdgeProps::weight, g))
                                     .predecessor_map(boost::make_iterator_property_map(
                                         pred.begin(), boost::get(boost::vertex_index, g)))
                                     .distance_map(boost::make_iterator_property_map(
                                         dist.begin(), boost::get(boost::vertex_index, g))));
  for (auto v = static_cast<Impl::Graph::vertex_descriptor>(dst);
       v != static_cast<Impl::Graph::vertex_descriptor>(src); v = pred[v]) {
    const auto u = pred[v];
    if (u == v) return Route{};  // unreachable
    auto [e, ok] = boost::edge(u, v, g);
    const Link& l = impl_->links[g[e].link];
    r.links.push_back(l.id);
    r.latency += l.latency + g[v].latency;
    r.bandwidth = std::min(r.bandwidth, l.bandwidth);
  }
  std::reverse(r.links.begin(), r.links.end());
  return r;
}

Bottleneck Topology::ring_bottleneck(const std::vector<int>& members) const {
  Bottleneck b;
  if (members.size() < 2) return b;
  // Flows per (link, direction): a ring sends from each member to the next.
  std::map<std::pair<int, bool>, int> flows;
  for (size_t i = 0; i < members.size(); ++i) {
    const int a = members[i], c = members[(i + 1) % members.size()];
    Route r = route(a, c);
    int at = gpu_vertex(a);
    for (int id : r.links) {
      const Link& l = impl_->links[id];
      const bool forward = l.from == at;
      flows[{id, forward}]++;
      at = forward ? l.to : l.from;
    }
  }
  double best = INFINITY;
  for (const auto& [key, count] : flows) {
    const Link& l = impl_->links[key.first];
    const double per = l.bandwidth.value() / count;
    if (per < best) {
      best = per;
      b.link = l.id;
      b.flows = count;
      b.per_flow = BytesPerSecond(per);
      const int from = key.second ? l.from : l.to, to = key.second ? l.to : l.from;
      b.description = l.kind + " " + vertex_name(from) + " -> " + vertex_name(to);
    }
  }
  return b;
}

}  // namespace scaleplan::hw
