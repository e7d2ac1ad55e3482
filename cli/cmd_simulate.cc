// `scaleplan simulate`: one simulated iteration of a model under a layout on a cluster: time,
// tokens/s, MFU/HFU, per-stage breakdown, peak memory, and optionally a Perfetto trace.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/simulate.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "sim/simulate.h"

namespace scaleplan::cli {
namespace {

struct SimulateCliOptions {
  api::SimulateRequest request;
  std::string chakra;  // --chakra DIR: time Chakra traces instead of a model and layout
  bool json = false, quiet = false;
};

Status run_chakra(const SimulateCliOptions& c) {
  SP_ASSIGN_OR_RETURN(const api::ChakraSimulateOutcome out,
                      api::simulate_chakra(c.chakra, c.request.inputs.cluster));
  if (c.json) {
    print_json(out.to_json());
    return Status::ok();
  }
  fmt::print("Chakra traces {}  cluster {}: {} ranks, {} ops\niteration {:.4f} s\n", out.dir,
             out.cluster, out.ranks, out.ops, out.iteration.to_seconds());
  return Status::ok();
}

Status run(const SimulateCliOptions& c) {
  if (!c.chakra.empty()) return run_chakra(c);
  const api::SimulateRequest& o = c.request;
  api::Callbacks<std::string_view> callbacks;
  callbacks.note = [](const std::string& n) { std::fprintf(stderr, "simulate: %s\n", n.c_str()); };
  // Progress on stderr for --all-ranks, whose runs on thousands of GPUs take seconds (16,384
  // H100s, llama3.1-405b: ~27 s on two cores): each phase as it starts, with the time so far.
  const auto start = std::chrono::steady_clock::now();
  if (o.all_ranks && !c.quiet) {
    callbacks.progress = [start](std::string_view what) {
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start;
      std::fprintf(stderr, "simulate: %.*s (%.1f s)\n", static_cast<int>(what.size()), what.data(),
                   t.count());
    };
  }
  SP_ASSIGN_OR_RETURN(const api::SimulateOutcome outcome, api::simulate(o, callbacks));
  if (c.json) {
    print_json(outcome.to_json());
    return Status::ok();
  }
  const sim::SimulationResult& r = outcome.result;
  const models::ModelSpec* model = &outcome.inputs.model;
  const hw::Cluster* cluster = &outcome.inputs.cluster;
  const api::SimInputs& in = outcome.inputs;
  const std::optional<api::HowSure>& sure = outcome.how_sure;
  fmt::print("model {}  cluster {}  seq {}\nlayout {} ({} GPUs)\n\n", model->name, cluster->name,
             in.seq, format_layout(r.layout), r.layout.gpus());
  fmt::print("iteration {:.4f} s   tokens/s {:.0f} ({:.1f} per GPU)   MFU {:.1f}%   HFU {:.1f}%\n",
             r.iteration.to_seconds(), r.tokens_per_s, r.tokens_per_s_per_gpu, 100 * r.mfu,
             100 * r.hfu);
  fmt::print("peak memory {:.2f} GiB (reserved estimate {:.2f} GiB): {}\n\n", to_gib(r.peak_memory),
             to_gib(r.peak_reserved), r.fits ? "fits" : "DOES NOT FIT");
  // Every simulated rank is a row, with its global rank under --all-ranks; past kMaxRankRows
  // ranks, one row per stage: the rank that is busiest (compute and exposed communication), the
  // one a straggler study starts from. --json has every rank.
  constexpr size_t kMaxRankRows = 64;
  std::vector<const sim::StageResult*> rows;
  const bool per_stage = o.all_ranks && r.stages.size() > kMaxRankRows;
  auto busy = [](const sim::StageResult& x) {
    return x.breakdown.compute + x.breakdown.exposed_comm_total();
  };
  for (const auto& s : r.stages) {
    if (!per_stage) {
      rows.push_back(&s);
      continue;
    }
    if (rows.size() <= static_cast<size_t>(s.stage)) rows.resize(s.stage + 1, nullptr);
    const sim::StageResult*& best = rows[static_cast<size_t>(s.stage)];
    if (!best || busy(s) > busy(*best)) best = &s;
  }
  std::erase(rows, nullptr);
  fmt::print("{:>5} {}{:>9} {:>9} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9}\n", "stage",
             o.all_ranks ? fmt::format("{:>6} ", "rank") : "", "compute", "recomp", "tp", "dp",
             "pp", "cp", "ep", "bubble", "idle", "mem GiB");
  for (const sim::StageResult* s : rows) {
    const auto& b = s->breakdown;
    fmt::print(
        "{:>5} {}{:>9.4f} {:>9.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} {:>8.4f} "
        "{:>9.2f}\n",
        s->stage, o.all_ranks ? fmt::format("{:>6} ", s->global_rank) : "", b.compute.to_seconds(),
        b.recompute.to_seconds(), b.exposed_comm[0].to_seconds(), b.exposed_comm[1].to_seconds(),
        b.exposed_comm[2].to_seconds(), b.exposed_comm[3].to_seconds(),
        b.exposed_comm[4].to_seconds(), b.bubble.to_seconds(), b.idle.to_seconds(),
        to_gib(s->peak_memory));
  }
  if (per_stage) {
    fmt::print(
        "\none row per stage: its busiest rank (compute + exposed communication) of the {} "
        "simulated; every rank is in --json\n",
        r.stages.size());
  }
  fmt::print(
      "\nseconds; comm columns are exposed time (compute idle). attention: {}; kernels: {}; "
      "collectives: {}\n",
      to_string(r.attention), r.kernel_model, r.collective_model);
  if (sure) {
    fmt::print(
        "\nhow sure: the same layout with one resource off (docs/planner.md, \"How sure\")\n");
    for (const auto& [p, t] : sure->iterations) {
      fmt::print("  {:<14} {:.4f} s ({:+.1f}%)\n", p.name, t.to_seconds(),
                 100 * (t.to_seconds() / r.iteration.to_seconds() - 1));
    }
    fmt::print("  range {:.4f}-{:.4f} s around {:.4f} s\n", sure->min.to_seconds(),
               sure->max.to_seconds(), r.iteration.to_seconds());
  }
  if (!o.trace.empty())
    fmt::print("trace written to {} (open in https://ui.perfetto.dev)\n", o.trace);
  if (!o.emit_chakra.empty())
    fmt::print("Chakra traces written to {}: {} files, {} ops, {} dependencies\n", o.emit_chakra,
               outcome.chakra_files.size(), outcome.chakra_ops, outcome.chakra_deps);
  return Status::ok();
}

SCALEPLAN_COMMAND(
    simulate, "simulate", "Simulate one training iteration: time, tokens/s, MFU, breakdown, trace",
    [](CLI::App& sub) -> Runner {
      auto c = std::make_shared<SimulateCliOptions>();
      api::SimulateRequest* o = &c->request;
      add_fields(sub, api::simulate_fields(*o));
      sub.add_option("--chakra", c->chakra,
                     "time Chakra execution traces (<prefix>.<rank>.et files in this directory) "
                     "on --cluster instead of a model and layout");
      sub.add_flag("--json", c->json, "machine-readable output");
      sub.add_flag("--quiet,-q", c->quiet, "no progress on stderr (--all-ranks shows it)");
      return [c] { return run(*c); };
    },
    40);

}  // namespace
}  // namespace scaleplan::cli
