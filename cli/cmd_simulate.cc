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

#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sim_inputs.h"
#include "cli/sim_json.h"
#include "core/json_util.h"
#include "core/layout.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "planner/exporters.h"
#include "planner/robustness.h"
#include "sim/simulate.h"

namespace scaleplan::cli {
namespace {

struct SimulateCliOptions {
  SimInputOptions in;  // --plan, or --model, --cluster, --seq, --layout, ...
  std::string trace, attention;
  bool all_ranks = false, json = false, quiet = false, how_sure = false;
  bool tp_comm_overlap = false;  // --tp-comm-overlap
};

// One iteration per perturbation of the profile (planner/robustness.h), one rank per stage: how
// far the prediction moves when one resource is as far off as the model's component checks.
struct HowSure {
  std::vector<std::pair<planner::Perturbation, Duration>> iterations;
  Duration min, max;
};

Result<HowSure> how_sure(const models::ModelSpec& model, const hw::Cluster& cluster, int64_t seq,
                         const Layout& layout, sim::SimulateOptions so, Duration nominal) {
  so.all_ranks = false;
  so.trace = false;
  so.progress = nullptr;
  HowSure h;
  h.min = h.max = nominal;
  SP_ASSIGN_OR_RETURN(const auto perturbations, planner::perturbations_for(cluster));
  for (const auto& p : perturbations) {
    SP_ASSIGN_OR_RETURN(sim::SimulationResult r,
                        planner::simulate_perturbed(model, cluster, seq, layout, so, p));
    h.iterations.push_back({p, r.iteration});
    h.min = std::min(h.min, r.iteration);
    h.max = std::max(h.max, r.iteration);
  }
  return h;
}

Status run(const SimulateCliOptions& o) {
  SP_ASSIGN_OR_RETURN(SimInputs in, sim_inputs(o.in));
  const models::ModelSpec* model = &in.model;
  const hw::Cluster* cluster = &in.cluster;
  const Layout* layout = &in.layout;
  if (!o.attention.empty() && o.attention != "flash" && o.attention != "cudnn" &&
      o.attention != "unfused")
    return Status::invalid("--attention: expected flash, cudnn or unfused, got '" + o.attention +
                           "'");
  sim::SimulateOptions so;
  so.gpus = in.gpus;
  so.framework = in.framework;
  if (in.host_launch) so.host = sim::framework_host_issue(so.framework, *in.host_launch);
  so.all_ranks = o.all_ranks;
  so.trace = !o.trace.empty();
  so.framework.ops.tp_comm_overlap = o.tp_comm_overlap;
  so.trace_metadata = run_metadata(in);
  if (!o.attention.empty())
    so.attention = o.attention == "unfused" ? AttentionKernel::kUnfused
                   : o.attention == "cudnn" ? AttentionKernel::kCudnn
                                            : AttentionKernel::kFlash2;
  // Progress on stderr for --all-ranks, whose runs on thousands of GPUs take seconds (16,384
  // H100s, llama3.1-405b: ~27 s on two cores): each phase as it starts, with the time so far.
  const auto start = std::chrono::steady_clock::now();
  if (o.all_ranks && !o.quiet) {
    so.progress = [start](std::string_view what) {
      const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start;
      std::fprintf(stderr, "simulate: %.*s (%.1f s)\n", static_cast<int>(what.size()), what.data(),
                   t.count());
    };
  }
  SP_ASSIGN_OR_RETURN(sim::SimulationResult r,
                      sim::simulate(*model, *cluster, in.seq, *layout, so));
  if (std::string n = partial_node_note(r.layout.gpus(), cluster->gpus_per_node, cluster->name);
      !n.empty())
    std::fprintf(stderr, "simulate: %s\n", n.c_str());
  std::optional<HowSure> sure;
  if (o.how_sure) {
    SP_ASSIGN_OR_RETURN(sure, how_sure(*model, *cluster, in.seq, *layout, so, r.iteration));
  }
  if (!o.trace.empty()) SP_RETURN_IF_ERROR(write_output_file(o.trace, r.trace));
  if (o.json) {
    Json stages = Json::array();
    for (const auto& s : r.stages) stages.push_back(stage_breakdown_json(s));
    Json j = {
        {"model", model->name},
        {"cluster", cluster->name},
        {"layout", format_layout(r.layout)},
        {"gpus", r.layout.gpus()},
        {"seq", in.seq},
        {"iteration_s", r.iteration.to_seconds()},
        {"tokens_per_s", r.tokens_per_s},
        {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
        {"mfu", r.mfu},
        {"hfu", r.hfu},
        {"tp_comm_overlap", so.framework.ops.tp_comm_overlap},
        {"peak_memory_bytes", r.peak_memory.value()},
        {"peak_reserved_bytes", r.peak_reserved.value()},
        {"fits", r.fits},
        {"breakdown", stages},
        {"ops", r.ops},
        {"events", r.events},
        {"attention", std::string(to_string(r.attention))},
        {"moe", moe_options_json(*model)},
        {"host_per_launch_s", (so.host ? *so.host : so.framework.host).per_launch.to_seconds()},
        {"kernel_model", r.kernel_model},
        {"collective_model", r.collective_model}};
    // What the plan predicted, beside what this simulation gives (equal unless the profile or
    // scaleplan changed since the plan was made).
    if (in.plan_iteration_s) j["plan_iteration_s"] = *in.plan_iteration_s;
    if (sure) {
      Json list = Json::array();
      for (const auto& [p, t] : sure->iterations) {
        Json e = perturbation_json(p);
        e["iteration_s"] = t.to_seconds();
        list.push_back(e);
      }
      j["how_sure"] = {{"perturbations", list},
                       {"min_iteration_s", sure->min.to_seconds()},
                       {"max_iteration_s", sure->max.to_seconds()}};
    }
    print_json(j);
    return Status::ok();
  }
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
  return Status::ok();
}

SCALEPLAN_COMMAND(
    simulate, "simulate", "Simulate one training iteration: time, tokens/s, MFU, breakdown, trace",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<SimulateCliOptions>();
      sub.add_option("--plan", o->in.plan,
                     "a plan file (plan --emit json): its model, cluster, seq, layout, framework "
                     "and host cost, instead of the options for them");
      sub.add_option("--model", o->in.model, "preset name or HF config.json path");
      sub.add_option("--cluster", o->in.cluster, "bundled profile name or profile path");
      add_count(sub, "--seq", o->in.seq, "sequence length in tokens");
      sub.add_option("--layout", o->in.layout, "layout string (DESIGN.md)");
      add_count(sub, "--gpus", o->in.gpus, "GPU count (default: from the layout)");
      sub.add_option("--trace", o->trace, "write a Chrome/Perfetto trace JSON here");
      sub.add_option("--moe-imbalance", o->in.moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--moe-dispatcher", o->in.moe_dispatcher, kMoeDispatcherHelp);
      sub.add_option("--host-launch", o->in.host_launch, kHostLaunchHelp);
      add_choice(sub, "--framework", o->in.framework, kFrameworksWithHistoric,
                 "memory, timing and host conventions: megatron (default; Megatron-core), "
                 "megatron-2022 (Megatron-LM of its 2021-2022 papers), deepspeed-2021 (its GPT "
                 "under DeepSpeed's early-2021 ZeRO-3), nanotron, torchtitan (eager, no "
                 "torch.compile; torchtitan-2025: on PyTorch <= 2.8)");
      sub.add_option("--attention", o->attention,
                     "attention core: flash (FlashAttention-2), cudnn (cuDNN fused attention) "
                     "or unfused (default: what the framework runs on this GPU)");
      sub.add_flag("--all-ranks", o->all_ranks, "simulate every GPU, not one rank per stage");
      sub.add_flag("--tp-comm-overlap", o->tp_comm_overlap,
                   "Transformer Engine's TP communication overlap (Megatron-core "
                   "--tp-comm-overlap; NeMo and Megatron-Bridge performance recipes): each SP "
                   "all-gather and reduce-scatter runs beside the GEMM it is pipelined with "
                   "(docs/simulator.md \"TP communication overlap\")");
      sub.add_flag("--how-sure", o->how_sure,
                   "also simulate the layout with one resource off at a time (kernels +-10%, "
                   "NVLink -15%, network -30%, latency x2; docs/planner.md \"How sure\")");
      sub.add_flag("--json", o->json, "machine-readable output");
      sub.add_flag("--quiet,-q", o->quiet, "no progress on stderr (--all-ranks shows it)");
      return [o] { return run(*o); };
    },
    40);

}  // namespace
}  // namespace scaleplan::cli
