// `scaleplan run`: execute a layout's Program for real (runtime/executor.h) on the host or the cuda
// backend, one process or one per rank under mpirun, and print what it measured beside what the
// simulator predicts for the same layout on the same profile: iteration time (median and spread),
// tokens/s, MFU, time per op class, and peak memory per rank and stage. --trace writes the
// measured timeline in simulate --trace's format; --json is self-describing (inputs, steps, and
// every op's predicted and measured times), so that a later comparison can match op for op.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "api/run.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"

namespace scaleplan::cli {
namespace {

struct RunCliOptions {
  api::RunRequest request;
  bool json = false, quiet = false;
};

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }
double mib(Bytes b) { return static_cast<double>(b.value()) / (1 << 20); }

// Progress on stderr: each step once the run has taken a couple of seconds, and, since a step of
// a large layout on few cores takes long, a line every 10 s while one runs.
class RunProgressPrinter {
 public:
  explicit RunProgressPrinter(int total_steps) : total_steps_(total_steps) {}
  ~RunProgressPrinter() { stop(); }

  void operator()(const api::RunProgress& p) {
    if (p.phase == api::RunProgress::kExecuting) {
      heartbeat_ = std::thread([this] {
        std::unique_lock lock(mu_);
        while (!cv_.wait_for(lock, std::chrono::seconds(10), [this] { return finished_; })) {
          std::fprintf(stderr, "run: in step %d/%d (%.0f s)\n", steps_done_.load() + 1,
                       total_steps_, elapsed());
        }
      });
      return;
    }
    steps_done_ = p.done;
    if (elapsed() < 2.0 && p.done < p.total) return;
    std::fprintf(stderr, "run: step %d/%d (%.1f s)\n", p.done, p.total, elapsed());
  }

  void stop() {
    if (!heartbeat_.joinable()) return;
    {
      std::lock_guard lock(mu_);
      finished_ = true;
    }
    cv_.notify_all();
    heartbeat_.join();
  }

 private:
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  const int total_steps_;
  std::atomic<int> steps_done_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool finished_ = false;
  std::thread heartbeat_;
};

Status run(const RunCliOptions& cli) {
  const api::RunRequest& o = cli.request;
  RunProgressPrinter printer(o.warmup + o.steps);
  api::Callbacks<api::RunProgress> callbacks;
  if (!cli.quiet) {
    callbacks.note = [](const std::string& n) { std::fprintf(stderr, "run: %s\n", n.c_str()); };
    callbacks.progress = [&printer](const api::RunProgress& p) { printer(p); };
  }
  Result<api::RunOutcome> result = api::run(o, callbacks);
  printer.stop();
  if (!result) return result.status();
  const api::RunOutcome& out = *result;
  if (!out.reporter) return Status::ok();  // another process of the job reports
  if (cli.json) {
    print_json(out.to_json());
    return Status::ok();
  }
  const api::SimInputs& in = out.inputs;
  const sim::SimulationResult& pred = out.prediction;
  const runtime::ExecutionResult& e = out.execution;
  const double measured = out.measured_s, predicted = pred.iteration.to_seconds();
  const double mfu = out.mfu;
  const auto& classes = out.classes;

  fmt::print("model {}  cluster {}  seq {}\nlayout {} ({} ranks, {} process{})\n", in.model.name,
             in.cluster.name, in.seq, format_layout(pred.layout), pred.layout.gpus(), e.processes,
             e.processes == 1 ? "" : "es");
  fmt::print(
      "backend {} ({}), {} warm-up + {} timed steps; {} collectives and transfers checked\n\n",
      e.backend, e.device, e.warmup_steps, o.steps, out.checked);
  fmt::print("{:<16} {:>14} {:>14} {:>9}\n", "", "measured", "predicted", "error");
  fmt::print("{:<16} {:>12.4f} s {:>12.4f} s {:>9}\n", "iteration", measured, predicted,
             pct(api::run_error(predicted, measured)));
  fmt::print("{:<16} {:>14.0f} {:>14.0f} {:>9}\n", "tokens/s", out.tokens_per_s, pred.tokens_per_s,
             pct(api::run_error(pred.tokens_per_s, out.tokens_per_s)));
  fmt::print("{:<16} {:>13.2f}% {:>13.2f}% {:>9}\n", "MFU", 100 * mfu, 100 * pred.mfu,
             pct(api::run_error(pred.mfu, mfu)));
  fmt::print(
      "iteration over {} steps: median {:.4f} s, min {:.4f} s, max {:.4f} s (spread {:.1f}%)\n\n",
      o.steps, measured, out.min_s, out.max_s, 100 * (out.max_s - out.min_s) / measured);
  fmt::print("time per op class, summed over ranks (median step per op)\n");
  fmt::print("{:<28} {:>6} {:>12} {:>12} {:>9}\n", "class", "ops", "measured s", "predicted s",
             "error");
  for (const auto& c : classes) {
    fmt::print("{:<28} {:>6} {:>12.5f} {:>12.5f} {:>9}\n", c.name, c.ops, c.measured.to_seconds(),
               c.predicted.to_seconds(),
               pct(api::run_error(c.predicted.to_seconds(), c.measured.to_seconds())));
  }
  fmt::print("\npeak memory per rank, MiB (measured: the backend's high-water mark)\n");
  fmt::print("{:>5} {:>5} {:>9} {:>9} {:>8}   {:>8} {:>8} {:>9}   {:>8} {:>8} {:>8}\n", "rank",
             "stage", "peak", "model", "error", "states", "activ.", "workspace", "m.states",
             "m.activ.", "m.buffers");
  for (const runtime::RankMeasurement& r : e.ranks) {
    const models::StageMemory& sm = pred.memory.stages.at(static_cast<size_t>(r.stage));
    fmt::print(
        "{:>5} {:>5} {:>9.2f} {:>9.2f} {:>8}   {:>8.2f} {:>8.2f} {:>9.2f}   {:>8.2f} {:>8.2f} "
        "{:>8.2f}\n",
        r.global_rank, r.stage, mib(r.peak), mib(sm.total),
        pct(api::run_error(static_cast<double>(sm.total.value()),
                           static_cast<double>(r.peak.value()))),
        mib(r.static_memory), mib(r.activations), mib(r.workspace), mib(api::model_states(sm)),
        mib(sm.activations), mib(sm.buffers));
  }
  fmt::print(
      "\nerror: predicted / measured - 1. Predicted: {}; {}. The model's buffers are a framework's "
      "transients; the workspace is the executor's own operand and communication buffers.\n",
      pred.kernel_model, pred.collective_model);
  if (!o.trace.empty())
    fmt::print("measured trace written to {} (open in https://ui.perfetto.dev)\n", o.trace);
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    run, "run",
    "Execute a layout for real (host or cuda backend): measured vs predicted time, memory, trace",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<RunCliOptions>();
      api::RunRequest& r = o->request;
      sub.add_option("--plan", r.inputs.plan,
                     "a plan file (plan --emit json): its model, cluster, seq, layout and "
                     "framework, instead of the options for them");
      sub.add_option("--model", r.inputs.model, "preset name or HF config.json path");
      sub.add_option("--cluster", r.inputs.cluster,
                     "bundled profile name or profile path: the prediction's profile (a "
                     "calibrated one from scaleplan profile for a meaningful comparison)");
      add_count(sub, "--seq", r.inputs.seq, "sequence length in tokens");
      sub.add_option("--layout", r.inputs.layout,
                     "layout string (docs/architecture.md, \"The layout string\")");
      add_choice(sub, "--framework", r.inputs.framework, kFrameworksWithHistoric, kFrameworkHelp);
      sub.add_option("--moe-imbalance", r.inputs.moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--moe-dispatcher", r.inputs.moe_dispatcher, kMoeDispatcherHelp);
      sub.add_option("--backend", r.backend,
                     "host (CPU threads, or one process per rank under mpirun) or cuda (one rank "
                     "per GPU, or per process under mpirun); default host");
      sub.add_option("--steps", r.steps, "timed steps (default 5)");
      sub.add_option("--warmup", r.warmup,
                     "untimed steps before them (default 1; the first step checks every "
                     "collective)");
      sub.add_option("--warmup-s", r.warmup_s,
                     "then more untimed steps until this many seconds have passed, so that a "
                     "GPU's clock has settled under its power limit (default 5 on cuda, 0 on "
                     "host)");
      sub.add_option("--timeout", r.timeout_s,
                     "seconds a collective or receive may wait for its peers before the run "
                     "fails naming them (default 120)");
      sub.add_option("--trace", r.trace,
                     "write the measured timeline here (simulate --trace's format)");
      sub.add_option("--inject-stall", r.inject_stall,
                     "testing: this global rank never arrives at its first communication, to see "
                     "the others time out")
          ->group("");
      sub.add_flag("--json", o->json, "machine-readable output (with every op's times)");
      sub.add_flag("--quiet,-q", o->quiet, "no progress on stderr");
      return [o] { return run(*o); };
    },
    45);

}  // namespace scaleplan::cli
