// `scaleplan collective`: time, algbw and busbw of one collective on a cluster, as an
// nccl-tests-like table (or JSON), from the collective cost model of hw_profiles/collectives.h.
//   scaleplan collective --cluster dgx-h100 --op all_reduce --ranks 16 --sweep 8B:8GiB
// --nccl-log FILE fits the model to a measured nccl-tests log first and prints the measured busbw
// beside the model's.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/collective.h"
#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::cli {
namespace {

struct CollectiveOptions {
  api::CollectiveRequest request;
  bool json = false;
};

Status run_collective(const CollectiveOptions& c) {
  api::Callbacks<int> callbacks;
  callbacks.note = [](const std::string& n) {
    std::fprintf(stderr, "collective: %s\n", n.c_str());
  };
  SP_ASSIGN_OR_RETURN(const api::CollectiveOutcome out, api::collective(c.request, callbacks));
  if (c.json) {
    print_json(out.to_json());
    return Status::ok();
  }
  const hw::GroupPlacement& g = out.placement;
  fmt::print(
      "# {} on {}: {} ranks, {} per node, {} node(s), {} NVLink domain(s), {} concurrent "
      "group(s); algorithm {}; {}\n",
      to_string(out.op), out.cluster_name, g.size, g.ranks_per_node, g.nodes, g.domains,
      g.concurrent_groups, c.request.algo, out.collective_model);
  if (!out.fit_report.empty()) {
    fmt::print("# fitted to {}:\n", c.request.nccl_log);
    const std::string& report = out.fit_report;
    size_t start = 0;
    for (size_t nl; (nl = report.find('\n', start)) != std::string::npos; start = nl + 1) {
      fmt::print("#   {}\n", report.substr(start, nl - start));
    }
  }
  fmt::print("#{:>14} {:>14} {:>12} {:>12} {:>12}  {:<14}{}\n", "size(B)", "count(bf16)",
             "time(us)", "algbw(GB/s)", "busbw(GB/s)", "algorithm",
             out.measured ? "  measured busbw" : "");
  for (const api::CollectiveRow& r : out.rows) {
    std::string meas =
        r.measured_busbw_gbps ? fmt::format("  {:>10.2f}", *r.measured_busbw_gbps) : "";
    fmt::print("{:>15} {:>14} {:>12.2f} {:>12.2f} {:>12.2f}  {:<14}{}\n", r.bytes.value(),
               r.bytes.value() / 2, r.time.to_microseconds(), r.algbw_gbps, r.busbw_gbps,
               r.algorithm, meas);
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    collective, "collective", "Time, algbw and busbw of a collective (nccl-tests style)",
    [](CLI::App& sub) -> Runner {
      auto c = std::make_shared<CollectiveOptions>();
      api::CollectiveRequest* o = &c->request;
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
      sub.add_flag("--json", c->json, "Machine-readable output on stdout");
      return [c] { return run_collective(*c); };
    },
    30);

}  // namespace scaleplan::cli
