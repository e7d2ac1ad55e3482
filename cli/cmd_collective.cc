// `scaleplan collective`: time, algbw and busbw of one collective on a cluster, as an
// nccl-tests-like table (or JSON), from the collective cost model of hw_profiles/collectives.h.
//   scaleplan collective --cluster dgx-h100 --op all_reduce --ranks 16 --sweep 8B:8GiB
// --nccl-log FILE fits the model to a measured nccl-tests log first and prints the measured busbw
// beside the model's.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cstdio>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/nccl_tests.h"

namespace scaleplan::cli {
namespace {

struct CollectiveOptions {
  std::string cluster, op = "all_reduce", bytes, sweep, algo = "nccl", nccl_log;
  bool force_base = false;
  int ranks = 0;
  int ranks_per_node = 0;
  int concurrent = 1;
  bool json = false;
};

// "8B:8GiB" or "8B:8GiB:2" (multiplication factor, nccl-tests -f).
Result<std::vector<Bytes>> parse_sweep(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ':') {
      parts.push_back(s.substr(start, i - start));
      start = i + 1;
    }
  }
  if (parts.size() < 2 || parts.size() > 3)
    return Status::invalid("--sweep: '" + s + "' is not MIN:MAX[:FACTOR]");
  SP_ASSIGN_OR_RETURN(Bytes lo, parse_bytes(parts[0], "--sweep"));
  SP_ASSIGN_OR_RETURN(Bytes hi, parse_bytes(parts[1], "--sweep"));
  int64_t f = 2;
  if (parts.size() == 3) {
    // The whole field must be the integer ("2x" is not 2).
    const std::string& t = parts[2];
    auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), f);
    if (ec != std::errc() || end != t.data() + t.size() || f < 2)
      return Status::invalid("--sweep: factor '" + text_brief(t) + "' must be an integer >= 2");
  }
  if (lo.value() <= 0 || hi < lo)
    return Status::invalid("--sweep: need 0 < MIN <= MAX, got '" + text_brief(s) + "'");
  // MAX is at most 1 EiB (parse_bytes), so there are at most 61 sizes; the loop stops before
  // b * f could overflow.
  std::vector<Bytes> out;
  for (int64_t b = lo.value();; b *= f) {
    out.push_back(Bytes(b));
    if (b > hi.value() / f) break;
  }
  return out;
}

Json placement_json(const hw::GroupPlacement& g) {
  return {{"size", g.size},
          {"ranks_per_node", g.ranks_per_node},
          {"nodes", g.nodes},
          {"in_nvlink_domain", g.in_nvlink_domain},
          {"ranks_per_domain", g.ranks_per_domain},
          {"domains", g.domains},
          {"nic_sharing", g.nic_sharing},
          {"concurrent_groups", g.concurrent_groups}};
}

Status run_collective(const CollectiveOptions& o) {
  if (o.cluster.empty())
    return Status::invalid("--cluster: required (a bundled name or a profile path)");
  SP_ASSIGN_OR_RETURN(hw::Cluster cluster, hw::load_cluster(o.cluster));
  SP_ASSIGN_OR_RETURN(CollectiveOp op, parse_collective_op(o.op));
  SP_ASSIGN_OR_RETURN(hw::AlgorithmChoice choice, hw::parse_algorithm_choice(o.algo));
  if (o.concurrent < 1 || o.concurrent > kMaxGpus)
    return Status::invalid("--concurrent: " + std::to_string(o.concurrent) +
                           " is not between 1 and " + std::to_string(kMaxGpus));

  std::optional<hw::NcclTestLog> log;
  std::string fit_report;
  int ranks = o.ranks;
  if (!o.nccl_log.empty()) {
    SP_ASSIGN_OR_RETURN(std::string text, read_text_file(o.nccl_log));
    SP_ASSIGN_OR_RETURN(hw::NcclTestLog l, hw::parse_nccl_tests_log(text, o.nccl_log));
    l.op = op;
    if (ranks > 0) l.ranks = ranks;
    if (ranks <= 0) ranks = l.ranks;
    // The same check as cluster import-nccl: a log of another GPU fits another machine.
    if (Status gpu = hw::check_log_gpu(l, cluster, o.cluster, o.nccl_log); !gpu.is_ok()) {
      if (!o.force_base) return gpu;
      std::fprintf(stderr, "collective: warning: %s (--force-base)\n", gpu.message().c_str());
    }
    SP_ASSIGN_OR_RETURN(hw::NcclFit fit, hw::fit_to_nccl_log(cluster, l, o.nccl_log));
    for (const std::string& w : fit.warnings)
      std::fprintf(stderr, "collective: warning: %s\n", w.c_str());
    cluster = fit.cluster;
    fit_report = fit.report;
    log = std::move(l);
  }
  if (ranks < 1) return Status::invalid("--ranks: required, a positive number of ranks");
  if (ranks > kMaxGpus)
    return Status::invalid("--ranks: " + std::to_string(ranks) + " is more than the " +
                           std::to_string(kMaxGpus) + " GPUs scaleplan models");

  hw::GroupPlacement g = hw::GroupPlacement::packed(cluster, ranks);
  if (o.ranks_per_node > 0) {
    if (o.ranks_per_node > cluster.gpus_per_node) {
      return Status::invalid(fmt::format("--ranks-per-node: {} exceeds gpus_per_node={}",
                                         o.ranks_per_node, cluster.gpus_per_node));
    }
    g.ranks_per_node = std::min(o.ranks_per_node, ranks);
    g.nodes = (ranks + g.ranks_per_node - 1) / g.ranks_per_node;
    const int nodes_per_domain = cluster.gpus_per_domain() / cluster.gpus_per_node;
    g.domains = (g.nodes + nodes_per_domain - 1) / nodes_per_domain;
    g.ranks_per_domain = std::min(ranks, g.ranks_per_node * nodes_per_domain);
    g.in_nvlink_domain = g.domains == 1;
  }
  if (log && log->nodes > 1 && o.ranks_per_node == 0) {
    g.nodes = log->nodes;
    g.ranks_per_node = (ranks + log->nodes - 1) / log->nodes;
  }
  g.concurrent_groups = o.concurrent;

  std::vector<Bytes> sizes;
  if (!o.bytes.empty()) {
    SP_ASSIGN_OR_RETURN(Bytes b, parse_bytes(o.bytes, "--bytes"));
    sizes.push_back(b);
  } else if (log) {
    for (const auto& r : log->rows) sizes.push_back(r.size);
  } else {
    SP_ASSIGN_OR_RETURN(sizes, parse_sweep(o.sweep.empty() ? "8B:8GiB" : o.sweep));
  }
  std::map<int64_t, double> measured;
  if (log) {
    for (const auto& r : log->rows) measured[r.size.value()] = r.busbw_gbps;
  }

  hw::CollectiveModel model(cluster);
  Json rows = Json::array();
  if (!o.json) {
    fmt::print(
        "# {} on {}: {} ranks, {} per node, {} node(s), {} NVLink domain(s), {} concurrent "
        "group(s); algorithm {}; {}\n",
        to_string(op), cluster.name, g.size, g.ranks_per_node, g.nodes, g.domains,
        g.concurrent_groups, o.algo, model.describe());
    if (!fit_report.empty()) {
      fmt::print("# fitted to {}:\n", o.nccl_log);
      size_t start = 0;
      for (size_t nl; (nl = fit_report.find('\n', start)) != std::string::npos; start = nl + 1) {
        fmt::print("#   {}\n", fit_report.substr(start, nl - start));
      }
    }
    fmt::print("#{:>14} {:>14} {:>12} {:>12} {:>12}  {:<14}{}\n", "size(B)", "count(bf16)",
               "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm",
               log ? "  measured busbw" : "");
  }
  for (Bytes b : sizes) {
    hw::CollectiveEstimate e = model.estimate(op, b, g, choice);
    const double alg = hw::algbw(b, e.time).value() / 1e9;
    const double bus = hw::busbw(op, g.size, b, e.time).value() / 1e9;
    Json row = {{"bytes", b.value()},
                {"time_s", e.time.to_seconds()},
                {"algbw_gbps", alg},
                {"busbw_gbps", bus},
                {"algorithm", std::string(e.algorithm)}};
    auto m = measured.find(b.value());
    if (m != measured.end()) row["measured_busbw_gbps"] = m->second;
    rows.push_back(row);
    if (!o.json) {
      std::string meas = m != measured.end() ? fmt::format("  {:>10.2f}", m->second) : "";
      fmt::print("{:>15} {:>14} {:>12.2f} {:>12.2f} {:>12.2f}  {:<14}{}\n", b.value(),
                 b.value() / 2, e.time.to_microseconds(), alg, bus, e.algorithm, meas);
    }
  }
  if (o.json) {
    Json out = {{"cluster", cluster.name},
                {"op", std::string(to_string(op))},
                {"ranks", g.size},
                {"bus_factor", hw::bus_factor(op, g.size)},
                {"algorithm_choice", o.algo},
                {"placement", placement_json(g)},
                {"collective_model", model.describe()},
                {"results", rows}};
    if (!fit_report.empty()) out["fit"] = fit_report;
    print_json(out);
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    collective, "collective", "Time, algbw and busbw of a collective (nccl-tests style)",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<CollectiveOptions>();
      sub.add_option("--cluster,-c", o->cluster, "Bundled profile name or path to a profile JSON");
      sub.add_option("--op", o->op,
                     "all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, gather, "
                     "scatter, "
                     "barrier, sendrecv")
          ->default_val("all_reduce");
      add_count(sub, "--ranks,-n", o->ranks, "Ranks in the group");
      sub.add_option("--bytes,-b", o->bytes, "One size (nccl-tests convention), e.g. 1GiB");
      sub.add_option("--sweep", o->sweep, "MIN:MAX[:FACTOR] sizes, e.g. 8B:8GiB (the default)");
      sub.add_option("--algo", o->algo, "nccl (NCCL's pick), fastest, ring, tree, nvls, hier")
          ->default_val("nccl");
      sub.add_option("--ranks-per-node", o->ranks_per_node,
                     "Spread the group: this many ranks per node");
      sub.add_option("--concurrent", o->concurrent, "Groups sharing the NICs at the same time")
          ->default_val(1);
      sub.add_option("--nccl-log", o->nccl_log, "Fit the model to this nccl-tests log first");
      sub.add_flag("--force-base", o->force_base,
                   "Fit --nccl-log even when the GPU it names is not the cluster's");
      sub.add_flag("--json", o->json, "Machine-readable output on stdout");
      return [o] { return run_collective(*o); };
    },
    30);

}  // namespace scaleplan::cli
