// `scaleplan plan`: search every layout of a job, keep those that fit, simulate them, rank them,
// and export the best one for a framework (docs/planner.md). The work is api::plan; this file
// parses the options and prints the outcome.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "api/plan.h"
#include "cli/command.h"
#include "cli/html_report.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/sweep_output.h"
#include "core/json_util.h"
#include "core/units.h"

namespace scaleplan::cli {
namespace {

struct PlanCliOptions {
  api::PlanRequest request;
  std::string html;
  bool json = false, csv = false, quiet = false, no_robustness = false, gpus_given = false;
};

std::string secs(Duration d) { return fmt::format("{:.3f}", d.to_seconds()); }

std::string breakdown_line(const planner::Breakdown& b) {
  std::string s = "compute " + secs(b.compute) + " s";
  if (b.recompute > Duration::zero()) s += " (recompute " + secs(b.recompute) + ")";
  s += ", bubble " + secs(b.bubble);
  std::string comm;
  for (int k = 0; k < kNumCommClasses; ++k) {
    if (b.exposed[k] <= Duration::zero()) continue;
    comm += fmt::format("{}{} {}", comm.empty() ? "" : " ", to_string(static_cast<CommClass>(k)),
                        secs(b.exposed[k]));
  }
  s += ", exposed comm " + (comm.empty() ? std::string("0") : comm);
  if (b.other > Duration::zero()) s += ", other " + secs(b.other);
  return s + " (s)";
}

void print_progress(const planner::Progress& p) {
  if (std::string_view(p.phase) == "enumerate") {
    std::fprintf(
        stderr, "plan: enumerate | listed %lld layouts so far, memory-checked %lld, fitting %lld\n",
        static_cast<long long>(p.candidates), static_cast<long long>(p.seen),
        static_cast<long long>(p.fitting));
    return;
  }
  std::fprintf(
      stderr,
      "plan: %s | candidates %lld, memory-checked %lld, fitting %lld, simulated %lld, "
      "bounded out %lld | best %s\n",
      p.phase, static_cast<long long>(p.candidates), static_cast<long long>(p.seen),
      static_cast<long long>(p.fitting), static_cast<long long>(p.simulated),
      static_cast<long long>(p.bounded),
      p.best_layout.empty()
          ? "-"
          : fmt::format("{:.0f} tok/s/GPU {}", p.best_tokens_per_s_per_gpu, p.best_layout).c_str());
}

// One line per perturbation: who comes first, #1's time and its change, and the runner-up.
void print_robustness(std::FILE* table, const planner::Robustness& r,
                      const std::vector<planner::RankedPlan>& plans) {
  fmt::print(table,
             "how sure: the plans above re-simulated with one resource off (docs/planner.md, \"How "
             "sure\")\n");
  fmt::print(table, "  {:<14} {:<6} {:<22} {}\n", "perturbation", "first", "#1 iteration",
             "runner-up");
  const Duration t_nominal = plans.front().prediction.iteration;
  for (const auto& pr : r.rankings) {
    std::string first = pr.first < 0 ? "-" : "#" + std::to_string(pr.first + 1);
    std::string t1 = "failed";
    if (pr.iteration[0]) {
      t1 = fmt::format("{} ({:+.1f}%)", format_duration(*pr.iteration[0]),
                       100 * (pr.iteration[0]->to_seconds() / t_nominal.to_seconds() - 1));
    }
    // The second fastest, and how far behind the first it is.
    int second = -1;
    for (size_t i = 0; i < pr.iteration.size(); ++i) {
      if (!pr.iteration[i] || static_cast<int>(i) == pr.first) continue;
      if (second < 0 || *pr.iteration[i] < *pr.iteration[static_cast<size_t>(second)])
        second = static_cast<int>(i);
    }
    std::string runner_up = "-";
    if (second >= 0 && pr.first >= 0) {
      const double tf = pr.iteration[static_cast<size_t>(pr.first)]->to_seconds();
      const double ts = pr.iteration[static_cast<size_t>(second)]->to_seconds();
      runner_up = fmt::format("#{} {:.1f}% slower", second + 1, 100 * (ts / tf - 1));
    }
    fmt::print(table, "  {:<14} {:<6} {:<22} {}\n", pr.perturbation.name, first, t1, runner_up);
    for (const auto& e : pr.errors) fmt::print(table, "    error: {}\n", e);
  }
  fmt::print(table, "  {}\n\n", r.summary);
}

Status run_plan(const PlanCliOptions& cli) {
  api::PlanRequest request = cli.request;
  request.robustness = !cli.no_robustness;
  // Whether --gpus was given is the command line's business: the request takes 0 as "not given".
  if (request.deadline.empty() && !cli.gpus_given)
    return Status::invalid(
        "--gpus is required (or --deadline with --train-tokens: the smallest GPU count that "
        "trains them in time)");
  if (!request.deadline.empty() && cli.gpus_given)
    return Status::invalid("--gpus " + std::to_string(request.gpus) + " with --deadline " +
                           request.deadline +
                           ": --deadline searches the GPU count; leave out --gpus (--max-gpus "
                           "bounds the search)");
  if (cli.csv && !request.emit.empty() && request.out.empty())
    return Status::invalid("--csv with --emit " + request.emit +
                           ": stdout holds the CSV; write the export with --out FILE");
  api::Callbacks<planner::Progress> callbacks;
  callbacks.note = [](const std::string& n) { std::fprintf(stderr, "plan: %s\n", n.c_str()); };
  // Progress (docs/planner.md, "Explanations"): each phase's line once a second and at its end,
  // and the closing line. With -q nothing for a search that ends within a second, and after that
  // a line once every 10 seconds (and the closing line), so that a long search is never silent.
  const auto start = std::chrono::steady_clock::now();
  auto last = start;
  bool printed = false;
  callbacks.progress = [&](const planner::Progress& p) {
    if (cli.quiet) {
      const auto now = std::chrono::steady_clock::now();
      const bool done = std::string_view(p.phase) == "done";
      if (done ? !printed
               : now - start < std::chrono::seconds(1) ||
                     (printed && now - last < std::chrono::seconds(10)))
        return;
      last = now;
      printed = true;
    }
    print_progress(p);
  };
  SP_ASSIGN_OR_RETURN(const api::PlanOutcome outcome, api::plan(request, callbacks));
  const api::PlanRequest& o = outcome.request;
  const planner::PlanResult& r = outcome.result;
  const std::optional<planner::Export>& exported = outcome.exported;
  const std::optional<planner::Robustness>& robustness = outcome.robustness;

  if (cli.json || cli.csv || !cli.html.empty()) {
    const Json j = outcome.to_json();
    if (!cli.html.empty())
      SP_RETURN_IF_ERROR(write_output_file(cli.html, plan_html(j, command_line())));
    if (cli.json) {
      print_json(j);
      return outcome.export_status();
    }
    if (cli.csv) {
      std::vector<std::string> columns = {"rank",
                                          "layout",
                                          "iteration_s",
                                          "tokens_per_s_per_gpu",
                                          "mfu",
                                          "peak_memory_bytes",
                                          "memory_capacity_bytes",
                                          "headroom_bytes"};
      if (o.train_tokens > 0)
        for (const char* k : {"time_to_train_s", "days_to_train", "gpu_hours"})
          columns.push_back(k);
      if (outcome.budget.gpu_hour_cost) columns.push_back("cost");
      print_csv(columns, j["plans"]);
      return outcome.export_status();
    }
  }

  // --emit without -o: stdout is the exported file alone (redirect it, pipe it), the table goes
  // to stderr.
  std::FILE* table = exported && o.out.empty() ? stderr : stdout;
  const double tokens = static_cast<double>(o.gbs) * static_cast<double>(o.seq);
  fmt::print(table, "plan {} on {} x {} ({} per node), seq {}, gbs {} ({} tokens per step)\n",
             outcome.model.name, outcome.gpus, outcome.cluster_name, outcome.gpus_per_node, o.seq,
             o.gbs, format_count(tokens));
  if (!outcome.fixes.empty()) fmt::print(table, "fixed: {}\n", outcome.fixes);
  if (outcome.deadline)
    print_deadline(table, *outcome.deadline, outcome.deadline_s, outcome.budget,
                   outcome.gpus_per_node);
  fmt::print(
      table,
      "{} layouts searched; {} fit with a {} margin; {} simulated ({} failed), {} bounded out "
      "(a lower bound on their time exceeds the #{} simulated) in {:.2f} s on {} threads\n",
      r.candidates, r.fit, format_bytes(outcome.memory_margin), r.simulated, r.failed, r.bounded,
      o.top + 1, r.search_s, r.threads);
  if (r.cross_node_tp_fallback) {
    fmt::print(table, "nothing fitted with TP inside a node, so TP across nodes was allowed\n");
  }
  if (!r.no_fit.empty()) fmt::print(table, "{}\n", r.no_fit);
  if (!r.budget_note.empty()) fmt::print(table, "{}\n", r.budget_note);
  if (r.failed > 0) {
    // A layout that could not be simulated is not ranked; say which and why, above the ranking.
    fmt::print(table, "{} layout{} failed to simulate{}:\n", r.failed, r.failed == 1 ? "" : "s",
               static_cast<int64_t>(r.errors.size()) < r.failed
                   ? fmt::format(" (the first {})", r.errors.size())
                   : "");
    for (const auto& e : r.errors) fmt::print(table, "  error: {}\n", e);
  }
  fmt::print(table, "\n");
  for (size_t i = 0; i < r.plans.size(); ++i) {
    const auto& p = r.plans[i];
    fmt::print(table, "#{:<2} {}\n", p.rank, format_layout(p.layout));
    fmt::print(table,
               "    iteration {} s, {:.0f} tokens/s/GPU, MFU {:.1f}%, peak {} (reserved {}) of {} "
               "(headroom {})",
               secs(p.prediction.iteration), p.prediction.tokens_per_s_per_gpu,
               100 * p.prediction.mfu, format_bytes(p.memory.allocated),
               format_bytes(p.memory.peak), format_bytes(p.memory.capacity),
               format_bytes(p.memory.headroom()));
    if (auto c = planner::training_cost(p.prediction.tokens_per_s_per_gpu, outcome.gpus,
                                        o.train_tokens, outcome.budget.gpu_hour_cost)) {
      fmt::print(table, "\n    {} days to train {} tokens, {} GPU-hours", format_amount(c->days),
                 format_count(o.train_tokens), format_amount(c->gpu_hours));
      if (c->cost) fmt::print(table, ", cost {}", format_amount(*c->cost));
    }
    fmt::print(table, "\n    {}\n    {}\n", breakdown_line(p.prediction.breakdown), p.reason);
    // Without --emit, which frameworks run this layout as simulated (and why not the others).
    if (o.emit.empty() && i < outcome.frameworks.size()) {
      std::string runs, not_runs;
      for (const auto& v : outcome.frameworks[i]) {
        // Two torchtitan targets: the release pinned for the TOML export is named.
        const std::string name = std::string(planner::framework_name(v.format)) +
                                 (v.format == planner::ExportFormat::kTorchtitan ? " 0.2.2" : "");
        if (v.runs())
          runs += (runs.empty() ? "" : ", ") + name;
        else
          not_runs += (not_runs.empty() ? "" : ", ") + name + " (needs " + v.rule + ")";
      }
      fmt::print(table, "    runs on: {}{}\n",
                 runs.empty() ? "none of the exported frameworks" : runs,
                 not_runs.empty() ? "" : "; not on " + not_runs);
    }
    fmt::print(table, "\n");
  }
  if (robustness) print_robustness(table, *robustness, r.plans);
  if (r.explanation) {
    const auto& e = *r.explanation;
    fmt::print(table, "--explain {}\n    {}\n", e.layout ? format_layout(*e.layout) : e.layout_text,
               e.why);
    if (e.prediction) {
      fmt::print(table, "    iteration {} s, {:.0f} tokens/s/GPU, MFU {:.1f}%\n    {}\n",
                 secs(e.prediction->iteration), e.prediction->tokens_per_s_per_gpu,
                 100 * e.prediction->mfu, breakdown_line(e.prediction->breakdown));
    }
    fmt::print(table, "\n");
  }
  if (!r.pruned.empty()) {
    fmt::print(table, "not searched (policy rules; each is lifted as it says):\n");
    for (const auto& p : r.pruned) fmt::print(table, "  {:>10}  {}\n", p.candidates, p.rule);
  }
  if (exported && o.out.empty()) fmt::print(stdout, "{}", exported->content);
  if (exported && !o.out.empty()) fmt::print(table, "\nwrote {} ({})\n", o.out, o.emit);
  if (!cli.html.empty()) fmt::print(table, "report written to {}\n", cli.html);
  return outcome.export_status();
}

}  // namespace

SCALEPLAN_COMMAND(
    plan, "plan", "Rank the parallel layouts that fit, fastest first, and export the best",
    [](CLI::App& sub) -> Runner {
      auto c = std::make_shared<PlanCliOptions>();
      api::PlanRequest* o = &c->request;
      sub.add_option("--model,-m", o->model, "Preset name or path to a HF config.json");
      sub.add_option("--cluster,-c", o->cluster, "Bundled cluster profile name or profile path");
      CLI::Option* gpus = add_count(sub, "--gpus", o->gpus, "GPUs of the job");
      add_count(sub, "--seq", o->seq, "Sequence length in tokens")->required();
      add_count(sub, "--gbs", o->gbs, "Global batch in sequences")->required();
      sub.add_option("--top", o->top, "Plans to show (default 5)");
      sub.add_option("--emit", o->emit,
                     "Export the best plan: megatron, megatron-bridge, torchtitan (main), "
                     "torchtitan-0.2.2, deepspeed, nanotron or json");
      sub.add_option("--out,-o", o->out, "With --emit: write the export to this file");
      sub.add_option("--explain", o->explain, "A layout string: where it ranks and why");
      sub.add_option("--memory-margin", o->memory_margin,
                     "Memory kept free on every GPU (default 4GiB; docs/planner.md)");
      sub.add_option("--fix", o->fixes,
                     "Restrict a layout key: KEY=V1|V2... (repeatable), e.g. --fix zero=0|1");
      add_choice(sub, "--framework", o->framework, kFrameworks,
                 "Memory and timing conventions (torchtitan-2025: PyTorch <= 2.8); default: the "
                 "--emit target's (megatron for megatron, deepspeed and json)");
      sub.add_option("--moe-imbalance", o->moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--moe-dispatcher", o->moe_dispatcher, kMoeDispatcherHelp);
      sub.add_option("--host-launch", o->host_launch, kHostLaunchHelp);
      sub.add_option("--threads", o->threads, "Worker threads (default: all cores)");
      add_count(sub, "--max-simulations", o->max_simulations,
                "Cap on simulations (default 0: none; the search stops exactly where lower "
                "bounds prove the rest slower)",
                CountSuffix::kDecimal);
      add_count(sub, "--train-tokens", o->train_tokens,
                "Also report the days, GPU-hours (and cost) to train this many tokens",
                CountSuffix::kDecimal);
      sub.add_option(
          "--gpu-hour-cost", o->gpu_hour_cost,
          "With --train-tokens: price of one GPU-hour (any currency), to report the cost");
      sub.add_option(
          "--deadline", o->deadline,
          "With --train-tokens: find the smallest GPU count (whole nodes) that trains "
          "them within this wall-clock time, e.g. 60d, 8w, 1440h; --gpus is then left out");
      add_count(sub, "--max-gpus", o->max_gpus,
                "With --deadline: the largest GPU count to try (default 131072)");
      sub.add_flag("--allow-cross-node-tp", o->allow_cross_node_tp,
                   "Search TP degrees above the GPUs of one node");
      sub.add_flag("--tp-comm-overlap", o->tp_comm_overlap,
                   "Predict with Transformer Engine's TP communication overlap (Megatron-core "
                   "--tp-comm-overlap, written into --emit megatron) wherever TP runs with SP; "
                   "Megatron-core conventions only");
      sub.add_option("--compile", o->compile,
                     "torchtitan's torch.compile components: model, loss or model,loss "
                     "(written into --emit torchtitan as [compile]); the search keeps to tp=1, "
                     "cp=1, recompute=none, where the compiled block is modelled");
      sub.add_flag("--no-robustness", c->no_robustness,
                   "Do not re-simulate the ranked plans on perturbed profiles (the \"how sure\" "
                   "table)");
      sub.add_flag("--quiet,-q", c->quiet,
                   "Progress on stderr once every 10 s instead of every second, and none for a "
                   "search that ends within a second");
      sub.add_option("--html", c->html,
                     "Write a self-contained HTML report of the ranking here (charts of "
                     "tokens/s/GPU, MFU, breakdown, memory; the how-sure table)");
      CLI::Option* json = sub.add_flag("--json", c->json, "Machine-readable output on stdout");
      sub.add_flag("--csv", c->csv, "The ranked table as CSV on stdout (one row per plan)")
          ->excludes(json);
      return [c, gpus] {
        c->gpus_given = gpus->count() > 0;
        return run_plan(*c);
      };
    },
    50);

}  // namespace scaleplan::cli
