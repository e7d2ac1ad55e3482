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

#include "cli/command.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/nccl_tests.h"

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
  SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(o.cluster));
  if (o.json) {
    SP_ASSIGN_OR_RETURN(Json j, parse_json(hw::cluster_to_json(c), "cluster"));
    j["path"] = c.path;
    print_json(j);
  } else {
    print_cluster(c);
  }
  return Status::ok();
}

// `cluster list`: the bundled profiles, in the listing style of `model list` (a table of name and
// what tells them apart; JSON {"clusters": [{"name", ...}]}).
Status run_list(bool json) {
  Json out = Json::array();
  if (!json) fmt::print("{:<18} {:<18} {:>9}  {}\n", "name", "gpu", "per node", "description");
  for (const auto& n : hw::bundled_cluster_names()) {
    auto c = hw::load_cluster(n);
    if (!c) return Status::internal("bundled profile " + n + ": " + c.status().message());
    if (json) {
      out.push_back({{"name", n},
                     {"gpu", c->gpu.name},
                     {"gpus_per_node", c->gpus_per_node},
                     {"description", c->description}});
    } else {
      fmt::print("{:<18} {:<18} {:>9}  {}\n", n, c->gpu.name, c->gpus_per_node, c->description);
    }
  }
  if (json) print_json(Json{{"clusters", out}});
  return Status::ok();
}

// Writes the profile that extends `base` with the fitted cost_model, then reports.
Status write_fit(const ClusterOptions& o, const hw::Cluster& base, const hw::NcclFit& fit,
                 const std::string& source) {
  SP_ASSIGN_OR_RETURN(Json full, parse_json(hw::cluster_to_json(fit.cluster), "cluster"));
  Json out = {{"extends", o.cluster},
              {"name", o.name.empty() ? base.name + "-calibrated" : o.name},
              {"description", base.description + " (cost model fitted to " + source + ")"},
              {"cost_model", full["cost_model"]}};
  SP_RETURN_IF_ERROR(write_output_file(o.out, out.dump(2) + "\n"));
  if (o.json) {
    print_json(Json{{"profile", o.out},
                    {"report", fit.report},
                    {"warnings", fit.warnings},
                    {"cost_model", full["cost_model"]}});
  } else {
    fmt::print("{}wrote {}\n", fit.report, o.out);
  }
  return Status::ok();
}

Status run_import(const ClusterOptions& o) {
  if (o.log.empty()) return Status::invalid("--log: required (an nccl-tests output file)");
  if (o.out.empty()) return Status::invalid("--out: required (the profile to write)");
  SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(o.cluster));
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(o.log));
  SP_ASSIGN_OR_RETURN(hw::NcclTestLog log, hw::parse_nccl_tests_log(text, o.log));
  if (!o.op.empty()) {
    SP_ASSIGN_OR_RETURN(log.op, parse_collective_op(o.op));
  }
  if (o.ranks > 0) log.ranks = o.ranks;
  bool unchecked = false;
  if (Status gpu = hw::check_log_gpu(log, c, o.cluster, o.log, &unchecked); !gpu.is_ok()) {
    if (!o.force_base) return gpu;
    std::fprintf(stderr, "cluster import-nccl: warning: %s (--force-base)\n",
                 gpu.message().c_str());
  }
  SP_ASSIGN_OR_RETURN(hw::NcclFit fit, hw::fit_to_nccl_log(c, log, o.log));
  if (unchecked)
    fit.warnings.push_back("the log names no GPU on its '# Rank' lines: that it was measured on " +
                           c.gpu.name + " is not checked");
  for (const std::string& w : fit.warnings)
    std::fprintf(stderr, "cluster import-nccl: warning: %s\n", w.c_str());
  return write_fit(o, c, fit, o.log);
}

Status run_scaling(const ClusterOptions& o) {
  if (o.points.empty())
    return Status::invalid("--points: required (a JSON file of measured busbw)");
  if (o.out.empty()) return Status::invalid("--out: required (the profile to write)");
  SP_ASSIGN_OR_RETURN(hw::Cluster c, hw::load_cluster(o.cluster));
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(o.points));
  SP_ASSIGN_OR_RETURN(auto points, hw::parse_measured_busbw(text, o.points));
  SP_ASSIGN_OR_RETURN(hw::NcclFit fit, hw::fit_network_scaling(c, points, o.points));
  return write_fit(o, c, fit, o.points);
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
