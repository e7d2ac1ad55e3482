// `collective` as a library call; contract in collective.h.
#include "api/collective.h"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/layout.h"
#include "hw_profiles/nccl_tests.h"

namespace scaleplan::api {
namespace {

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

}  // namespace

Result<CollectiveOutcome> collective(const CollectiveRequest& o, const Callbacks<int>& callbacks) {
  if (o.cluster.empty())
    return Status::invalid("--cluster: required (a bundled name or a profile path)");
  SP_ASSIGN_OR_RETURN(hw::Cluster cluster, hw::load_cluster(o.cluster));
  SP_ASSIGN_OR_RETURN(CollectiveOp op, parse_collective_op(o.op));
  SP_ASSIGN_OR_RETURN(hw::AlgorithmChoice choice, hw::parse_algorithm_choice(o.algo));
  if (o.concurrent < 1 || o.concurrent > kMaxGpus)
    return Status::invalid("--concurrent: " + std::to_string(o.concurrent) +
                           " is not between 1 and " + std::to_string(kMaxGpus));

  CollectiveOutcome out;
  out.request = o;
  out.op = op;
  std::optional<hw::NcclTestLog> log;
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
      callbacks.notify("warning: " + gpu.message() + " (--force-base)");
    }
    SP_ASSIGN_OR_RETURN(hw::NcclFit fit, hw::fit_to_nccl_log(cluster, l, o.nccl_log));
    for (const std::string& w : fit.warnings) callbacks.notify("warning: " + w);
    cluster = fit.cluster;
    out.fit_report = fit.report;
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
  out.cluster_name = cluster.name;
  out.placement = g;
  out.bus_factor = hw::bus_factor(op, g.size);
  out.collective_model = model.describe();
  out.measured = log.has_value();
  for (Bytes b : sizes) {
    hw::CollectiveEstimate e = model.estimate(op, b, g, choice);
    CollectiveRow row;
    row.bytes = b;
    row.time = e.time;
    row.algbw_gbps = hw::algbw(b, e.time).value() / 1e9;
    row.busbw_gbps = hw::busbw(op, g.size, b, e.time).value() / 1e9;
    row.algorithm = std::string(e.algorithm);
    if (auto m = measured.find(b.value()); m != measured.end()) row.measured_busbw_gbps = m->second;
    out.rows.push_back(std::move(row));
  }
  return out;
}

Json CollectiveOutcome::to_json() const {
  Json rows_json = Json::array();
  for (const CollectiveRow& r : rows) {
    Json row = {{"bytes", r.bytes.value()},
                {"time_s", r.time.to_seconds()},
                {"algbw_gbps", r.algbw_gbps},
                {"busbw_gbps", r.busbw_gbps},
                {"algorithm", r.algorithm}};
    if (r.measured_busbw_gbps) row["measured_busbw_gbps"] = *r.measured_busbw_gbps;
    rows_json.push_back(row);
  }
  Json out = {{"cluster", cluster_name},
              {"op", std::string(to_string(op))},
              {"ranks", placement.size},
              {"bus_factor", bus_factor},
              {"algorithm_choice", request.algo},
              {"placement", placement_json(placement)},
              {"collective_model", collective_model},
              {"results", rows_json}};
  if (!fit_report.empty()) out["fit"] = fit_report;
  return out;
}

}  // namespace scaleplan::api
