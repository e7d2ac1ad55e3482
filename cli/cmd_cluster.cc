// `scaleplan cluster`: the bundled and user cluster profiles.
//   cluster list                      bundled profile names
//   cluster show C [--json]           every field with its unit
//   cluster import-nccl C --log F --out P [--op OP] [--ranks N] [--force-base]
//                                     fit the collective model to an nccl-tests log and write a
//                                     profile that extends C with the fitted cost_model; a log
//                                     of another GPU than C's is refused, doubtful fits warned
//   cluster import-scaling C --points F --out P
//                                     fit the network's scaling with node count to measured bus
//                                     bandwidths at several node counts
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/cluster.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::cli {
namespace {

struct ClusterOptions {
  std::string cluster;
  bool json = false;
  std::string log, out, op, points, name;
  int ranks = 0;
  bool force_base = false;
  CLI::App* list = nullptr;
  CLI::App* show = nullptr;
  CLI::App* import = nullptr;
  CLI::App* scaling = nullptr;
};

void print_cluster(const hw::Cluster& c) {
  auto row = [](std::string_view k, const std::string& v) { fmt::print("  {:<22} {}\n", k, v); };
  fmt::print("cluster {}  ({})\n{}\n\ngpu\n", c.name, c.path, c.description);
  row("name", c.gpu.name);
  row("bf16_dense", format_flop_rate(c.gpu.bf16_dense));
  row("fp8_dense", c.gpu.fp8_dense.value() > 0 ? format_flop_rate(c.gpu.fp8_dense) : "none");
  row("memory", format_bytes(c.gpu.memory) + fmt::format(" ({} B)", c.gpu.memory.value()));
  row("memory_bandwidth", format_bandwidth(c.gpu.memory_bandwidth));
  row("sm_count", std::to_string(c.gpu.sm_count));
  fmt::print("node\n");
  row("gpus_per_node", std::to_string(c.gpus_per_node));
  row("nvlink", c.node.nvlink_generation + ", " + format_bandwidth(c.node.nvlink_bandwidth) +
                    " per GPU per direction");
  row("nvlink_domain_gpus", std::to_string(c.node.nvlink_domain_gpus));
  row("nvswitches", std::to_string(c.node.nvswitches));
  row("nvls", c.node.nvls ? "yes" : "no");
  row("nvlink_latency", format_duration(c.node.nvlink_latency));
  row("pcie_bandwidth", format_bandwidth(c.node.pcie_bandwidth));
  fmt::print("network\n");
  row("fabric", c.network.fabric);
  row("nics", fmt::format("{} x {} per direction ({} per GPU)", c.network.nics_per_node,
                          format_bandwidth(c.network.nic_bandwidth),
                          format_bandwidth(c.nic_bandwidth_per_gpu())));
  row("rail_optimized", c.network.rail_optimized ? "yes" : "no");
  row("switch_tiers", std::to_string(c.network.switch_tiers));
  row("nodes_per_leaf", std::to_string(c.network.nodes_per_leaf));
  row("oversubscription", fmt::format("{:.2f}:1", c.network.oversubscription));
  row("nic_latency", format_duration(c.network.nic_latency));
  row("switch_latency", format_duration(c.network.switch_latency));
  row("sharp", c.network.sharp ? "yes" : "no");
  fmt::print("cost_model\n");
  row("nvlink_efficiency", fmt::format("{:.3f}", c.cost.nvlink_efficiency));
  row("nvls_efficiency", fmt::format("{:.3f}", c.cost.nvls_efficiency));
  row("network_efficiency", fmt::format("{:.3f}", c.cost.network_efficiency));
  row("base_latency", format_duration(c.cost.base_latency));
  row("nvlink_step_latency", format_duration(c.cost.nvlink_step_latency));
  row("network_step_latency", format_duration(c.cost.network_step_latency));
  row("ramp_bytes", format_bytes(c.cost.ramp_bytes));
  row("ll_bandwidth_fraction", fmt::format("{:.3f}", c.cost.ll_bandwidth_fraction));
  row("ll128_bandwidth_fraction", fmt::format("{:.3f}", c.cost.ll128_bandwidth_fraction));
  row("ll128_enabled", c.cost.ll128_enabled ? "yes" : "no");
  for (const auto& p : c.cost.network_scaling)
    row(fmt::format("network {} x{}", p.op.empty() ? "(other)" : p.op, p.nodes),
        fmt::format("{:.3f}", p.fraction));
  if (!c.cost.calibrated_from.empty()) row("calibrated_from", c.cost.calibrated_from);
}

Status run_show(const ClusterOptions& o) {
  SP_ASSIGN_OR_RETURN(const api::ClusterShow shown, api::cluster_show(o.cluster));
  if (o.json) {
    SP_ASSIGN_OR_RETURN(const Json j, shown.to_json());
    print_json(j);
  } else {
    print_cluster(shown.cluster);
  }
  return Status::ok();
}

// `cluster list`: the bundled profiles, in the listing style of `model list` (a table of name and
// what tells them apart; JSON {"clusters": [{"name", ...}]}).
Status run_list(bool json) {
  SP_ASSIGN_OR_RETURN(const api::ClusterList list, api::cluster_list());
  if (json) {
    print_json(list.to_json());
    return Status::ok();
  }
  fmt::print("{:<18} {:<18} {:>9}  {}\n", "name", "gpu", "per node", "description");
  for (const api::ClusterSummary& c : list.clusters)
    fmt::print("{:<18} {:<18} {:>9}  {}\n", c.name, c.gpu, c.gpus_per_node, c.description);
  return Status::ok();
}

Status print_fit(const ClusterOptions& o, const Result<api::ClusterFitOutcome>& out) {
  if (!out) return out.status();
  if (o.json)
    print_json(out->to_json());
  else
    fmt::print("{}wrote {}\n", out->fit.report, out->request.out);
  return Status::ok();
}

Status run_import(const ClusterOptions& o) {
  api::Callbacks<int> callbacks;
  callbacks.note = [](const std::string& n) {
    std::fprintf(stderr, "cluster import-nccl: %s\n", n.c_str());
  };
  return print_fit(
      o, api::cluster_import_nccl({o.cluster, o.log, o.out, o.name, o.op, o.ranks, o.force_base},
                                  callbacks));
}

Status run_scaling(const ClusterOptions& o) {
  return print_fit(o, api::cluster_import_scaling({o.cluster, o.points, o.out, o.name}));
}

}  // namespace

SCALEPLAN_COMMAND(
    cluster, "cluster",
    "Cluster hardware profiles: list, show, import nccl-tests logs and measured busbw",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<ClusterOptions>();
      sub.require_subcommand(1);
      o->list = sub.add_subcommand("list", "List the bundled profiles");
      o->list->add_flag("--json", o->json, "Machine-readable output on stdout");
      o->show = sub.add_subcommand("show", "Print a profile with units");
      o->show->add_option("cluster", o->cluster, "Bundled profile name or path to a profile JSON")
          ->required();
      o->show->add_flag("--json", o->json, "Machine-readable output on stdout");
      o->import =
          sub.add_subcommand("import-nccl", "Fit the collective model to an nccl-tests log");
      o->import->add_option("cluster", o->cluster, "Profile the log was measured on")->required();
      o->import->add_option("--log", o->log, "nccl-tests output file")->required();
      o->import->add_option("--out", o->out, "Profile to write (extends the cluster)")->required();
      o->import->add_option("--op", o->op, "Collective of the log when the log does not name it");
      o->import->add_option("--ranks", o->ranks, "Ranks of the log when it has no '# Rank' lines");
      o->import->add_option("--name", o->name,
                            "Name of the written profile (default: C-calibrated)");
      o->import->add_flag("--force-base", o->force_base,
                          "Fit the log even when the GPU it names is not the cluster's");
      o->import->add_flag("--json", o->json, "Machine-readable output on stdout");
      o->scaling = sub.add_subcommand(
          "import-scaling",
          "Fit how the network's bandwidth falls with node count to measured bus bandwidths");
      o->scaling->add_option("cluster", o->cluster, "Profile the points were measured on")
          ->required();
      o->scaling
          ->add_option("--points", o->points,
                       "JSON file: {\"points\": [{\"op\", \"nodes\", \"ranks_per_node\", "
                       "\"bytes\", \"busbw_gbps\"}, ...]}")
          ->required();
      o->scaling->add_option("--out", o->out, "Profile to write (extends the cluster)")->required();
      o->scaling->add_option("--name", o->name,
                             "Name of the written profile (default: C-calibrated)");
      o->scaling->add_flag("--json", o->json, "Machine-readable output on stdout");
      return [o] {
        if (o->list->parsed()) return run_list(o->json);
        if (o->show->parsed()) return run_show(*o);
        if (o->scaling->parsed()) return run_scaling(*o);
        return run_import(*o);
      };
    },
    20);

}  // namespace scaleplan::cli
