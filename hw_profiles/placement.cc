#include "hw_profiles/placement.h"

#include <algorithm>
#include <numeric>
#include <optional>
#include <tuple>
#include <utility>

namespace scaleplan::hw {
namespace {

// Splits "tp-cp-dp-pp" into axis names and checks it is a permutation of `axes`.
Result<std::vector<std::string>> parse_order(const std::string& order,
                                             std::vector<std::string> axes, std::string_view what) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : order + "-") {
    if (ch == '-' || ch == ',') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  auto sorted_out = out;
  std::sort(sorted_out.begin(), sorted_out.end());
  std::sort(axes.begin(), axes.end());
  if (sorted_out != axes) {
    std::string want;
    for (const auto& a : axes) want += (want.empty() ? "" : ", ") + a;
    return Status::invalid(std::string(what) + ": '" + order + "' must order each of " + want +
                           " once");
  }
  return out;
}

// A mixed-radix grid: coordinates of a rank along named axes, first axis fastest.
struct Grid {
  std::vector<std::string> names;
  std::vector<int> sizes;
  int axis(std::string_view name) const {
    for (size_t i = 0; i < names.size(); ++i) {
      if (names[i] == name) return static_cast<int>(i);
    }
    return -1;
  }
  int index(const std::vector<int>& c) const {
    int idx = 0;
    for (size_t i = sizes.size(); i-- > 0;) idx = idx * sizes[i] + c[i];
    return idx;
  }
  int total() const {
    int t = 1;
    for (int s : sizes) t *= s;
    return t;
  }
};

// Groups of ranks that differ only along `vary` axes of `grid`, all of one size, stored flat:
// group g is members[g·size, (g+1)·size), groups ordered by their first rank, each ascending.
// `translates`: group g is group 0 (whose first rank is 0) shifted by its own first rank, so its
// placement repeats wherever that shift is a whole number of the map's periods (place_layout).
// Two allocations per kind: the planner places 16k-GPU grids thousands of times.
struct FlatGroups {
  int size = 1;
  std::vector<int> members;
  bool translates = false;
  size_t count() const { return members.size() / static_cast<size_t>(size); }
  int* begin(size_t g) { return members.data() + g * static_cast<size_t>(size); }
  const int* begin(size_t g) const { return members.data() + g * static_cast<size_t>(size); }
  const int* end(size_t g) const { return begin(g) + size; }
};

// The first ranks (`bases`) and the members' offsets from them (`offsets`) of the groups along
// `vary`, both ascending: each is a sum of coordinates times strides over its axes (the vary axes,
// or the others), enumerated fastest axis first. An axis's stride exceeds the largest sum over the
// faster axes, so each axis's blocks follow one another in ascending order.
struct Translates {
  std::vector<int> bases{0}, offsets{0};
};
Translates translates_along(const Grid& grid, const std::vector<int>& vary) {
  Translates t;
  int stride = 1;
  for (size_t a = 0; a < grid.sizes.size(); ++a) {
    const bool varies = std::find(vary.begin(), vary.end(), static_cast<int>(a)) != vary.end();
    std::vector<int>& v = varies ? t.offsets : t.bases;
    const size_t m = v.size();
    v.reserve(m * static_cast<size_t>(grid.sizes[a]));
    for (int c = 1; c < grid.sizes[a]; ++c) {
      for (size_t j = 0; j < m; ++j) v.push_back(v[j] + c * stride);
    }
    stride *= grid.sizes[a];
  }
  return t;
}

FlatGroups flatten(const Translates& t) {
  FlatGroups out;
  out.size = static_cast<int>(t.offsets.size());
  out.translates = true;
  out.members.reserve(t.bases.size() * t.offsets.size());
  for (int b : t.bases) {
    for (int o : t.offsets) out.members.push_back(b + o);
  }
  return out;
}

FlatGroups groups_along(const Grid& grid, const std::vector<int>& vary) {
  return flatten(translates_along(grid, vary));
}

// The dense grid in `options.order` and the expert grid inside a stage in `options.expert_order`.
// The expert order is read only where an expert kind is asked for (its error after the check
// that ep·etp divides a stage, as group_members reports them).
struct Grids {
  Grid dense, expert;
  bool expert_divides = false;  // ep·etp divides the tp·cp·dp ranks of a stage
  Status expert_order = Status::ok();
};
Result<Grids> grids(const Layout& layout, const PlacementOptions& options) {
  SP_ASSIGN_OR_RETURN(auto order,
                      parse_order(options.order, {"tp", "cp", "dp", "pp"}, "placement order"));
  Grids g;
  auto eorder_or =
      parse_order(options.expert_order, {"etp", "ep", "edp"}, "expert placement order");
  g.expert_order = eorder_or.status();
  const std::vector<std::string> eorder =
      eorder_or.is_ok() ? std::move(eorder_or).value() : std::vector<std::string>{};
  for (const auto& a : order) {
    g.dense.names.push_back(a);
    g.dense.sizes.push_back(a == "tp"   ? layout.tp
                            : a == "cp" ? layout.cp
                            : a == "dp" ? *layout.dp
                                        : layout.pp);
  }
  const int per_stage = layout.tp * layout.cp * *layout.dp;
  g.expert_divides = per_stage % (layout.ep * layout.etp) == 0;
  for (const auto& a : eorder) {
    g.expert.names.push_back(a);
    g.expert.sizes.push_back(a == "etp" ? layout.etp
                             : a == "ep"
                                 ? layout.ep
                                 : (g.expert_divides ? per_stage / (layout.ep * layout.etp) : 1));
  }
  return g;
}

// The groups of one of the grid's kinds (kTp..kDpCp), as group_members lists them.
Result<FlatGroups> grid_groups(const Layout& layout, GroupKind kind, const Grids& g) {
  const Grid& dense = g.dense;
  switch (kind) {
    case GroupKind::kTp:
      return groups_along(dense, {dense.axis("tp")});
    case GroupKind::kCp:
      return groups_along(dense, {dense.axis("cp")});
    case GroupKind::kDp:
      return groups_along(dense, {dense.axis("dp")});
    case GroupKind::kPp:
      return groups_along(dense, {dense.axis("pp")});
    case GroupKind::kDpCp:
      return groups_along(dense, {dense.axis("dp"), dense.axis("cp")});
    default:
      break;
  }
  // Expert grid: Megatron builds it over the tp·cp·dp ranks of each stage. With pp outermost (the
  // default order) those are contiguous; otherwise the stage's ranks are taken in rank order.
  const int per_stage = layout.tp * layout.cp * *layout.dp;
  if (!g.expert_divides) {
    return Status::invalid("layout: ep*etp=" + std::to_string(layout.ep * layout.etp) +
                           " does not divide tp*cp*dp=" + std::to_string(per_stage));
  }
  SP_RETURN_IF_ERROR(g.expert_order);
  const int pp_axis = dense.axis("pp");
  int pp_stride = 1;  // the rank's pp coordinate is (r / pp_stride) % pp
  for (int a = 0; a < pp_axis; ++a) pp_stride *= dense.sizes[static_cast<size_t>(a)];
  const int expert_axis = g.expert.axis(kind == GroupKind::kEp    ? "ep"
                                        : kind == GroupKind::kEtp ? "etp"
                                                                  : "edp");
  if (pp_axis + 1 == static_cast<int>(dense.sizes.size())) {
    // pp outermost: stage s is ranks s·per_stage onwards, so its groups are the expert grid's
    // shifted by s·per_stage, in order of their first ranks as the stages are.
    Translates t = translates_along(g.expert, {expert_axis});
    const size_t in_stage = t.bases.size();
    for (int s = 1; s < layout.pp; ++s) {
      for (size_t j = 0; j < in_stage; ++j) t.bases.push_back(t.bases[j] + s * per_stage);
    }
    return flatten(t);
  }
  // The stages' ranks, stage by stage, each ascending.
  std::vector<int> stage_ranks(static_cast<size_t>(dense.total()));
  {
    std::vector<int> next(static_cast<size_t>(layout.pp));
    for (int s = 0; s < layout.pp; ++s) next[static_cast<size_t>(s)] = s * per_stage;
    for (int r = 0; r < dense.total(); ++r)
      stage_ranks[static_cast<size_t>(next[static_cast<size_t>((r / pp_stride) % layout.pp)]++)] =
          r;
  }
  const FlatGroups in_stage = groups_along(g.expert, {expert_axis});
  FlatGroups out;
  out.size = in_stage.size;
  out.members.reserve(stage_ranks.size());
  for (int s = 0; s < layout.pp; ++s) {
    const int* ranks = stage_ranks.data() + static_cast<size_t>(s) * static_cast<size_t>(per_stage);
    for (size_t i = 0; i < in_stage.count(); ++i) {
      const size_t at = out.members.size();
      for (const int* m = in_stage.begin(i); m != in_stage.end(i); ++m)
        out.members.push_back(ranks[*m]);
      std::sort(out.members.begin() + static_cast<std::ptrdiff_t>(at), out.members.end());
    }
  }
  // Ordered by first rank: the groups are disjoint, so this is their lexicographic order.
  std::vector<size_t> order(out.count());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return *out.begin(a) < *out.begin(b); });
  FlatGroups sorted;
  sorted.size = out.size;
  sorted.members.reserve(out.members.size());
  for (size_t i : order)
    sorted.members.insert(sorted.members.end(), std::as_const(out).begin(i), out.end(i));
  return sorted;
}

std::vector<std::vector<int>> nested(const FlatGroups& f) {
  std::vector<std::vector<int>> out;
  out.reserve(f.count());
  for (size_t g = 0; g < f.count(); ++g) out.emplace_back(f.begin(g), f.end(g));
  return out;
}

// describe_group over the ascending members [b, e).
GroupPlacement describe_sorted(const int* b, const int* e, const Cluster& cluster,
                               int concurrent_groups) {
  GroupPlacement g;
  g.size = static_cast<int>(e - b);
  const int gpn = cluster.gpus_per_node;
  const int gpd = cluster.gpus_per_domain();
  const int nics = std::max(1, cluster.network.nics_per_node);
  // Node, NVLink domain and NIC of a rank are non-decreasing in the rank, so over sorted members
  // each is counted as a run. GPU i of a node uses NIC i*nics/gpn (the NIC on its PCIe switch).
  auto count_runs = [&](auto id_of, int* distinct, int* largest) {
    int prev = -1, run = 0;
    *distinct = 0;
    *largest = 0;
    for (const int* r = b; r != e; ++r) {
      const int id = id_of(*r);
      if (id != prev) {
        ++*distinct;
        prev = id;
        run = 0;
      }
      *largest = std::max(*largest, ++run);
    }
  };
  count_runs([&](int r) { return r / gpn; }, &g.nodes, &g.ranks_per_node);
  count_runs([&](int r) { return r / gpd; }, &g.domains, &g.ranks_per_domain);
  int nic_count = 0;
  count_runs([&](int r) { return (r / gpn) * nics + (r % gpn) * nics / gpn; }, &nic_count,
             &g.nic_sharing);
  g.in_nvlink_domain = g.domains <= 1;
  g.concurrent_groups = std::max(1, concurrent_groups);
  return g;
}

}  // namespace

Result<std::vector<std::vector<int>>> group_members(const Layout& layout, GroupKind kind,
                                                    const PlacementOptions& options) {
  if (!layout.dp) return Status::invalid("layout: dp is not resolved");
  SP_ASSIGN_OR_RETURN(const Grids g, grids(layout, options));
  switch (kind) {
    case GroupKind::kWorld: {
      std::vector<int> all(static_cast<size_t>(g.dense.total()));
      for (int r = 0; r < g.dense.total(); ++r) all[static_cast<size_t>(r)] = r;
      return std::vector<std::vector<int>>{std::move(all)};
    }
    case GroupKind::kEmbedding:
    case GroupKind::kPpMirror: {
      // Stage s of each pipeline is its pp group's member s (members ascend with the stage).
      std::vector<std::vector<int>> out;
      const int pp = layout.pp;
      SP_ASSIGN_OR_RETURN(const FlatGroups pipes, grid_groups(layout, GroupKind::kPp, g));
      for (size_t i = 0; i < pipes.count(); ++i) {
        const int* pipe = pipes.begin(i);
        if (kind == GroupKind::kEmbedding) {
          out.push_back(pp > 1 ? std::vector<int>{pipe[0], pipe[pp - 1]}
                               : std::vector<int>{pipe[0]});
          continue;
        }
        for (int st = 0; st <= (pp - 1) / 2; ++st) {
          out.push_back(st == pp - 1 - st ? std::vector<int>{pipe[st]}
                                          : std::vector<int>{pipe[st], pipe[pp - 1 - st]});
        }
      }
      std::sort(out.begin(), out.end());
      return out;
    }
    default:
      break;
  }
  SP_ASSIGN_OR_RETURN(const FlatGroups flat, grid_groups(layout, kind, g));
  return nested(flat);
}

Result<RankMap> rank_map(const Layout& layout, const Cluster& cluster,
                         const PlacementOptions& options) {
  if (!layout.dp) return Status::invalid("layout: dp is not resolved");
  RankMap m;
  m.gpus_per_domain = std::max(1, cluster.gpus_per_domain());
  m.gpus_per_node = std::max(1, cluster.gpus_per_node);
  m.per_domain = m.gpus_per_domain;
  // A job inside one domain is placed alike either way.
  if (layout.placement() == Placement::kLinear || layout.gpus() <= m.gpus_per_domain) return m;
  SP_ASSIGN_OR_RETURN(auto order,
                      parse_order(options.order, {"tp", "cp", "dp", "pp"}, "placement order"));
  // Blocks of consecutive ranks that hold whole groups: the dense grid's prefix products (first
  // axis fastest), and inside a stage, when pp is outermost (stages contiguous), the expert grid's
  // etp and etp·ep where they hold whole groups of the dense axes they cover.
  std::vector<int64_t> dense_blocks;
  int64_t prod = 1;
  for (const auto& a : order) {
    prod *= a == "tp" ? layout.tp : a == "cp" ? layout.cp : a == "dp" ? *layout.dp : layout.pp;
    dense_blocks.push_back(prod);
  }
  std::vector<int64_t> blocks = dense_blocks;
  if (order.back() == "pp") {
    SP_ASSIGN_OR_RETURN(auto eorder, parse_order(options.expert_order, {"etp", "ep", "edp"},
                                                 "expert placement order"));
    int64_t e = 1;
    for (const auto& a : eorder) {
      if (a == "edp") break;
      e *= a == "etp" ? layout.etp : layout.ep;
      const bool whole = std::all_of(dense_blocks.begin(), dense_blocks.end(),
                                     [&](int64_t q) { return q > e || e % q == 0; });
      if (whole) blocks.push_back(e);
    }
  }
  int64_t unit = 1;
  for (int64_t b : blocks) {
    if (b <= m.gpus_per_domain) unit = std::max(unit, b);
  }
  const int64_t step = std::lcm(unit, static_cast<int64_t>(m.gpus_per_node));
  if (step > m.gpus_per_domain) return m;  // no whole groups on whole nodes fit: linear
  const int64_t ranks = layout.gpus();
  int64_t per = 0;
  for (int64_t p = m.gpus_per_domain / step * step; p >= step && per == 0; p -= step) {
    if (ranks % p == 0) per = p;
  }
  if (per == 0) per = m.gpus_per_domain / step * step;
  m.per_domain = static_cast<int>(per);
  return m;
}

Result<std::vector<Placement>> distinct_placements(const Layout& layout, const Cluster& cluster) {
  Layout packed = layout;
  packed.place = Placement::kPacked;
  SP_ASSIGN_OR_RETURN(const RankMap m, rank_map(packed, cluster));
  const int ranks = static_cast<int>(layout.gpus());
  const int linear_domains = (ranks + m.gpus_per_domain - 1) / m.gpus_per_domain;
  if (m.linear() || m.domains(ranks) > linear_domains) return std::vector{Placement::kLinear};
  return std::vector{Placement::kLinear, Placement::kPacked};
}

GroupPlacement describe_group(const std::vector<int>& members, const Cluster& cluster,
                              int concurrent_groups) {
  if (std::is_sorted(members.begin(), members.end()))
    return describe_sorted(members.data(), members.data() + members.size(), cluster,
                           concurrent_groups);
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  return describe_sorted(sorted.data(), sorted.data() + sorted.size(), cluster, concurrent_groups);
}

Result<LayoutPlacement> place_layout(const Layout& layout, const Cluster& cluster,
                                     const PlacementOptions& options) {
  if (!layout.dp) return Status::invalid("layout: dp is not resolved");
  LayoutPlacement out;
  out.gpus = layout.tp * layout.cp * *layout.dp * layout.pp;
  SP_ASSIGN_OR_RETURN(out.map, rank_map(layout, cluster, options));
  out.nodes = out.map.gpu(out.gpus - 1) / cluster.gpus_per_node + 1;
  // The orders are checked here, since a kind of one-rank groups below does not read them.
  SP_ASSIGN_OR_RETURN(const Grids grid, grids(layout, options));
  SP_RETURN_IF_ERROR(grid.expert_order);
  const int per_stage = layout.tp * layout.cp * *layout.dp;
  const bool expert_grid = grid.expert_divides;
  // A rank's stage: its pp coordinate in the dense grid, (r / pp_stride) % pp.
  int pp_stride = 1;
  for (size_t a = 0; grid.dense.names[a] != "pp"; ++a) pp_stride *= grid.dense.sizes[a];
  auto stage_of = [&](int rank) { return (rank / pp_stride) % layout.pp; };
  std::vector<std::array<GroupPlacement, kNumPlacedGroupKinds>> stages;
  auto key = [](const GroupPlacement& p) {
    return std::make_tuple(p.domains, p.concurrent_groups, p.nic_sharing, p.nodes);
  };
  for (int k = 0; k < kNumPlacedGroupKinds; ++k) {
    // A kind whose groups have one rank each (tp=1, ep=1, ...) is one rank's placement wherever
    // the rank is: nothing to enumerate (the planner places thousands of grids).
    const auto kind = static_cast<GroupKind>(k);
    const int size = kind == GroupKind::kTp    ? layout.tp
                     : kind == GroupKind::kCp  ? layout.cp
                     : kind == GroupKind::kDp  ? *layout.dp
                     : kind == GroupKind::kPp  ? layout.pp
                     : kind == GroupKind::kEp  ? layout.ep
                     : kind == GroupKind::kEtp ? layout.etp
                     : kind == GroupKind::kEdp
                         ? (expert_grid ? per_stage / (layout.ep * layout.etp) : 0)
                         : *layout.dp * layout.cp;  // kDpCp
    if (size == 1) {
      out.groups[k] = describe_group({0}, cluster, 1);
      continue;
    }
    SP_ASSIGN_OR_RETURN(FlatGroups groups, grid_groups(layout, kind, grid));
    const size_t count = groups.count();
    // From job ranks to cluster GPUs (in order: the map is increasing). The stage of a group is
    // read from its first rank, kept below as `first`.
    std::vector<int> first(count);
    for (size_t i = 0; i < count; ++i) first[i] = *groups.begin(i);
    if (!out.map.linear()) {
      for (int& r : groups.members) r = out.map.gpu(r);
    }
    // Every group of a kind communicates at the same time (all TP groups all-reduce together, all
    // DP groups reduce gradients together): count, per node, the groups that leave their NVLink
    // domain from it.
    // leaving[node]: how many groups that leave their NVLink domain have a member on the node
    // (members ascend, so a group's nodes do too and each is counted once).
    std::vector<int> leaving(static_cast<size_t>(out.nodes), 0);
    bool any_leaving = false;
    // A group's description and its distinct nodes, relative to its first member's node.
    // Translates (FlatGroups::translates) whose first ranks differ by a multiple of `period` lie
    // on GPUs that differ by a multiple of lcm(gpus_per_node, gpus_per_domain) (RankMap::gpu adds
    // gpus_per_domain per per_domain ranks): the same counts of nodes, domains and NICs with the
    // same members on each, and the same nodes relative to the first, so each residue of the first
    // rank is described once; other groups each once.
    struct Described {
      GroupPlacement placement;
      std::vector<int> nodes;
    };
    const int gpn = cluster.gpus_per_node;
    const int64_t lcm_gpus =
        std::lcm(int64_t{out.map.gpus_per_node}, int64_t{out.map.gpus_per_domain});
    const int64_t period = out.map.per_domain * (lcm_gpus / out.map.gpus_per_domain);
    std::vector<std::optional<Described>> described(
        groups.translates ? static_cast<size_t>(std::min<int64_t>(period, out.gpus)) : count);
    auto describe_at = [&](size_t i) -> const Described& {
      auto& d = described[groups.translates ? static_cast<size_t>(first[i] % period) : i];
      if (!d) {
        d.emplace();
        d->placement = describe_sorted(groups.begin(i), groups.end(i), cluster, 1);
        const int base = *groups.begin(i) / gpn;
        for (const int* r = groups.begin(i); r != groups.end(i); ++r) {
          if (d->nodes.empty() || *r / gpn - base != d->nodes.back())
            d->nodes.push_back(*r / gpn - base);
        }
      }
      return *d;
    };
    std::vector<GroupPlacement> placed;
    placed.reserve(count);
    for (size_t i = 0; i < count; ++i) {
      const Described& d = describe_at(i);
      placed.push_back(d.placement);
      if (d.placement.domains > 1) {
        any_leaving = true;
        const int base = *groups.begin(i) / gpn;
        for (int node : d.nodes) ++leaving[static_cast<size_t>(base + node)];
      }
    }
    GroupPlacement worst = placed.front();
    // The worst group of this kind inside each stage (kPp groups cross every stage).
    std::vector<std::optional<GroupPlacement>> stage_worst(
        kind == GroupKind::kPp ? 0 : static_cast<size_t>(layout.pp));
    for (size_t i = 0; i < count; ++i) {
      int conc = 1;  // where no group leaves its domain every count is 0
      if (any_leaving) {
        const int base = *groups.begin(i) / gpn;
        for (int node : describe_at(i).nodes)
          conc = std::max(conc, leaving[static_cast<size_t>(base + node)]);
      }
      placed[i].concurrent_groups = conc;
      if (i == 0 || key(placed[i]) > key(worst)) worst = placed[i];
      if (!stage_worst.empty()) {
        auto& sw = stage_worst[static_cast<size_t>(stage_of(first[i]))];
        if (!sw || key(placed[i]) > key(*sw)) sw = placed[i];
      }
    }
    out.groups[k] = worst;
    for (size_t s = 0; s < stage_worst.size(); ++s) {
      if (!stage_worst[s] || *stage_worst[s] == worst) continue;
      if (stages.empty()) stages.assign(static_cast<size_t>(layout.pp), {});
      stages[s][static_cast<size_t>(k)] = *stage_worst[s];
    }
  }
  // Kinds a stage did not differ in take the layout-wide group.
  if (!stages.empty()) {
    for (auto& st : stages) {
      for (int k = 0; k < kNumPlacedGroupKinds; ++k) {
        if (st[static_cast<size_t>(k)].size == 1 && out.groups[static_cast<size_t>(k)].size != 1)
          st[static_cast<size_t>(k)] = out.groups[static_cast<size_t>(k)];
      }
    }
  }
  out.stages = std::move(stages);
  return out;
}

}  // namespace scaleplan::hw
