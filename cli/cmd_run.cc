// `scaleplan run`: execute a layout's Program for real (runtime/executor.h) on the host or the cuda
// backend, one process or one per rank under mpirun, and print what it measured beside what the
// simulator predicts for the same layout on the same profile: iteration time (median and spread),
// tokens/s, MFU, time per op class, and peak memory per rank and stage. --trace writes the
// measured timeline in simulate --trace's format; --json is self-describing (inputs, steps, and
// every op's predicted and measured times), so that a later comparison can match op for op.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "api/options.h"
#include "api/sim_inputs.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "runtime/executor.h"
#include "runtime/launch.h"
#include "sim/metrics.h"
#include "sim/simulate.h"
#include "sim/trace.h"

namespace scaleplan::cli {
namespace {

struct RunCliOptions {
  api::SimInputOptions in;
  std::string backend = "host", trace;
  int steps = 5, warmup = 1;
  double timeout_s = 120;
  int inject_stall = -1;
  bool json = false, quiet = false;
};

double error_of(double predicted, double measured) {
  return measured > 0 ? predicted / measured - 1 : 0;
}

std::string pct(double e) { return fmt::format("{:+.1f}%", 100 * e); }
double mib(Bytes b) { return static_cast<double>(b.value()) / (1 << 20); }

// Per op: its duration in a timeline (end - start).
std::vector<Duration> durations(const sim::Timeline& t) {
  std::vector<Duration> d(t.end.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = t.end[i] - t.start[i];
  return d;
}

// The memory model's terms of one stage, for the comparison with what the executor allocated.
Bytes model_states(const models::StageMemory& s) {
  return s.weights + s.gradients + s.optimizer + s.fp8_weight_copies;
}

Json ops_json(const sim::Program& p, const sim::Timeline& pred, const runtime::ExecutionResult& e) {
  Json ops = Json::array();
  for (sim::OpId i = 0; i < p.num_ops(); ++i) {
    const sim::Op& op = p.op(i);
    Json j = {{"op", i},
              {"rank", p.ranks()[op.rank].global_rank},
              {"name", p.label(i).name},
              {"class", sim::op_class(p, i)},
              {"kind", std::string(to_string(op.kind))},
              {"stream", std::string(to_string(op.stream))},
              {"phase", std::string(to_string(op.phase))},
              {"chunk", op.chunk},
              {"predicted_start_s", pred.start[i].to_seconds()},
              {"predicted_end_s", pred.end[i].to_seconds()},
              {"measured_start_s", e.timeline.start[i].to_seconds()},
              {"measured_end_s", e.timeline.end[i].to_seconds()},
              {"measured_median_s", e.op_median[i].to_seconds()}};
    if (op.microbatch >= 0) j["microbatch"] = op.microbatch;
    ops.push_back(std::move(j));
  }
  return ops;
}

Status run(const RunCliOptions& o) {
  SP_ASSIGN_OR_RETURN(const runtime::BackendKind kind, runtime::parse_backend_kind(o.backend));
  if (o.steps < 1) return Status::invalid("--steps: must be >= 1, got " + std::to_string(o.steps));
  if (o.warmup < 0)
    return Status::invalid("--warmup: must be >= 0, got " + std::to_string(o.warmup));
  if (!(o.timeout_s > 0)) return Status::invalid("--timeout: must be a positive number of seconds");
  SP_ASSIGN_OR_RETURN(api::SimInputs in, api::sim_inputs(o.in));
  const bool reporter = runtime::launched_rank() == 0;
  const bool progress = !o.quiet && reporter;
  // Which backend calibrated the prediction's profile ("" when none): a comparison means
  // something only when it is the backend that runs.
  std::string calibrated;
  if (in.cluster.calibration) calibrated = in.cluster.calibration->backend;
  if (progress && calibrated != o.backend) {
    std::fprintf(stderr,
                 "run: note: the prediction is for %s (%s), %s; for a like-for-like comparison "
                 "calibrate this machine (scaleplan profile --backend %s --out P.json) and pass "
                 "--cluster P.json\n",
                 in.cluster.gpu.name.c_str(), in.cluster_name.c_str(),
                 calibrated.empty() ? "not calibrated"
                                    : ("calibrated on the " + calibrated + " backend").c_str(),
                 o.backend.c_str());
  }
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };

  // The prediction, and the Program the executor runs: every rank, every kernel. No host issue
  // model: the executor issues its ops itself, in C++, not through a framework's Python.
  sim::SimulateOptions so;
  so.gpus = in.gpus;
  so.framework = in.framework;
  so.host = sim::HostIssue{};
  so.all_ranks = true;
  so.keep_program = true;
  SP_ASSIGN_OR_RETURN(sim::SimulationResult pred,
                      sim::simulate(in.model, in.cluster, in.seq, in.layout, so));
  const sim::Program& program = *pred.program;
  if (kind == runtime::BackendKind::kCuda && !pred.fits && progress) {
    std::fprintf(stderr, "run: warning: the memory model says this layout does not fit in %s\n",
                 in.cluster.gpu.name.c_str());
  }

  runtime::LaunchOptions lo;
  lo.kind = kind;
  lo.timeout = Duration::seconds(o.timeout_s);
  runtime::ExecuteOptions eo;
  eo.steps = o.steps;
  eo.warmup = o.warmup;
  eo.stall_rank = o.inject_stall;
  // Progress on stderr once the run has taken a couple of seconds.
  if (progress) {
    eo.progress = [&](int done, int total) {
      if (elapsed() < 2.0 && done < total) return;
      std::fprintf(stderr, "run: step %d/%d (%.1f s)\n", done, total, elapsed());
    };
    std::fprintf(stderr, "run: %zu ops on %d ranks, %d warm-up + %d timed steps\n",
                 program.num_ops(), program.num_ranks(), o.warmup, o.steps);
  }
  // A step of a large layout on few cores takes long: a line every 10 s while one runs.
  std::atomic<int> steps_done{0};
  if (progress) {
    auto step_done = eo.progress;
    eo.progress = [&, step_done](int done, int total) {
      steps_done = done;
      step_done(done, total);
    };
  }
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::thread heartbeat;
  if (progress) {
    heartbeat = std::thread([&] {
      std::unique_lock lock(mu);
      while (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return finished; })) {
        std::fprintf(stderr, "run: in step %d/%d (%.0f s)\n", steps_done.load() + 1,
                     o.warmup + o.steps, elapsed());
      }
    });
  }
  auto executed = runtime::execute(program, lo, eo);
  if (heartbeat.joinable()) {
    {
      std::lock_guard lock(mu);
      finished = true;
    }
    cv.notify_all();
    heartbeat.join();
  }
  SP_ASSIGN_OR_RETURN(runtime::ExecutionResult e, std::move(executed));
  if (!e.reporter) return Status::ok();  // another process of the job reports

  // Iteration: median and spread of the timed steps.
  std::vector<Duration> its = e.iterations;
  std::sort(its.begin(), its.end());
  const double measured = e.iterations[static_cast<size_t>(e.median_step)].to_seconds();
  const double predicted = pred.iteration.to_seconds();
  const double tokens = static_cast<double>(pred.layout.global_batch()) * in.seq;
  const double mfu = predicted > 0 ? pred.mfu * predicted / measured : 0;
  const auto classes = sim::times_by_class(program, durations(pred.timeline), e.op_median);
  int64_t checked = 0;
  for (const auto& r : e.ranks) checked += r.checked;

  if (!o.trace.empty()) {
    sim::TraceOptions to;
    to.title = format_layout(pred.layout);
    to.generator = "scaleplan run";
    to.metadata = api::run_metadata(in);
    to.metadata.push_back({"backend", e.backend});
    to.metadata.push_back({"device", e.device});
    to.metadata.push_back({"steps", std::to_string(o.steps), true});
    to.metadata.push_back({"warmup", std::to_string(o.warmup), true});
    to.metadata.push_back({"step", std::to_string(e.median_step), true});
    to.metadata.push_back({"iteration_s", fmt::format("{:.9g}", measured), true});
    to.metadata.push_back({"predicted_iteration_s", fmt::format("{:.9g}", predicted), true});
    SP_RETURN_IF_ERROR(write_output_file(o.trace, sim::chrome_trace(program, e.timeline, to)));
  }

  if (o.json) {
    Json steps = Json::array();
    for (Duration d : e.iterations) steps.push_back(d.to_seconds());
    Json kinds = Json::array();
    for (const auto& c : classes) {
      kinds.push_back({{"class", c.name},
                       {"ops", c.ops},
                       {"predicted_s", c.predicted.to_seconds()},
                       {"measured_s", c.measured.to_seconds()},
                       {"error", error_of(c.predicted.to_seconds(), c.measured.to_seconds())}});
    }
    Json memory = Json::array();
    for (const runtime::RankMeasurement& r : e.ranks) {
      const models::StageMemory& sm = pred.memory.stages.at(static_cast<size_t>(r.stage));
      memory.push_back(
          {{"rank", r.global_rank},
           {"stage", r.stage},
           {"peak_bytes", r.peak.value()},
           {"static_bytes", r.static_memory.value()},
           {"activation_bytes", r.activations.value()},
           {"workspace_bytes", r.workspace.value()},
           {"checked", r.checked},
           {"predicted_bytes", sm.total.value()},
           {"predicted_states_bytes", model_states(sm).value()},
           {"predicted_activation_bytes", sm.activations.value()},
           {"predicted_buffer_bytes", sm.buffers.value()},
           {"error",
            error_of(static_cast<double>(sm.total.value()), static_cast<double>(r.peak.value()))},
           {"states_activations_error",
            error_of(static_cast<double>((model_states(sm) + sm.activations).value()),
                     static_cast<double>((r.static_memory + r.activations).value()))}});
    }
    print_json({{"model", in.model.name},
                {"cluster", in.cluster.name},
                {"cluster_source", in.cluster_name},
                {"seq", in.seq},
                {"layout", format_layout(pred.layout)},
                {"gpus", pred.layout.gpus()},
                {"framework", in.framework_name},
                {"backend", e.backend},
                {"device", e.device},
                {"processes", e.processes},
                {"warmup", o.warmup},
                {"steps", o.steps},
                {"median_step", e.median_step},
                {"measured",
                 {{"iteration_s", measured},
                  {"iteration_min_s", its.front().to_seconds()},
                  {"iteration_max_s", its.back().to_seconds()},
                  {"iterations_s", steps},
                  {"tokens_per_s", tokens / measured},
                  {"mfu", mfu}}},
                {"predicted",
                 {{"iteration_s", predicted},
                  {"tokens_per_s", pred.tokens_per_s},
                  {"mfu", pred.mfu},
                  {"kernel_model", pred.kernel_model},
                  {"calibrated_backend", calibrated},
                  {"collective_model", pred.collective_model}}},
                {"iteration_error", error_of(predicted, measured)},
                {"op_classes", kinds},
                {"memory", memory},
                {"checked", checked},
                {"op_runs",
                 {{"ops", program.num_ops()},
                  {"min", *std::min_element(e.runs.begin(), e.runs.end())},
                  {"max", *std::max_element(e.runs.begin(), e.runs.end())}}},
                {"ops", ops_json(program, pred.timeline, e)}});
    return Status::ok();
  }

  fmt::print("model {}  cluster {}  seq {}\nlayout {} ({} ranks, {} process{})\n", in.model.name,
             in.cluster.name, in.seq, format_layout(pred.layout), pred.layout.gpus(), e.processes,
             e.processes == 1 ? "" : "es");
  fmt::print(
      "backend {} ({}), {} warm-up + {} timed steps; {} collectives and transfers checked\n\n",
      e.backend, e.device, o.warmup, o.steps, checked);
  fmt::print("{:<16} {:>14} {:>14} {:>9}\n", "", "measured", "predicted", "error");
  fmt::print("{:<16} {:>12.4f} s {:>12.4f} s {:>9}\n", "iteration", measured, predicted,
             pct(error_of(predicted, measured)));
  fmt::print("{:<16} {:>14.0f} {:>14.0f} {:>9}\n", "tokens/s", tokens / measured, pred.tokens_per_s,
             pct(error_of(pred.tokens_per_s, tokens / measured)));
  fmt::print("{:<16} {:>13.2f}% {:>13.2f}% {:>9}\n", "MFU", 100 * mfu, 100 * pred.mfu,
             pct(error_of(pred.mfu, mfu)));
  fmt::print(
      "iteration over {} steps: median {:.4f} s, min {:.4f} s, max {:.4f} s (spread {:.1f}%)\n\n",
      o.steps, measured, its.front().to_seconds(), its.back().to_seconds(),
      100 * (its.back() - its.front()).to_seconds() / measured);
  fmt::print("time per op class, summed over ranks (median step per op)\n");
  fmt::print("{:<28} {:>6} {:>12} {:>12} {:>9}\n", "class", "ops", "measured s", "predicted s",
             "error");
  for (const auto& c : classes) {
    fmt::print("{:<28} {:>6} {:>12.5f} {:>12.5f} {:>9}\n", c.name, c.ops, c.measured.to_seconds(),
               c.predicted.to_seconds(),
               pct(error_of(c.predicted.to_seconds(), c.measured.to_seconds())));
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
        pct(error_of(static_cast<double>(sm.total.value()), static_cast<double>(r.peak.value()))),
        mib(r.static_memory), mib(r.activations), mib(r.workspace), mib(model_states(sm)),
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
      sub.add_option("--plan", o->in.plan,
                     "a plan file (plan --emit json): its model, cluster, seq, layout and "
                     "framework, instead of the options for them");
      sub.add_option("--model", o->in.model, "preset name or HF config.json path");
      sub.add_option("--cluster", o->in.cluster,
                     "bundled profile name or profile path: the prediction's profile (a "
                     "calibrated one from scaleplan profile for a meaningful comparison)");
      add_count(sub, "--seq", o->in.seq, "sequence length in tokens");
      sub.add_option("--layout", o->in.layout,
                     "layout string (docs/architecture.md, \"The layout string\")");
      add_choice(sub, "--framework", o->in.framework, kFrameworksWithHistoric, kFrameworkHelp);
      sub.add_option("--moe-imbalance", o->in.moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--moe-dispatcher", o->in.moe_dispatcher, kMoeDispatcherHelp);
      sub.add_option("--backend", o->backend,
                     "host (CPU threads, or one process per rank under mpirun) or cuda (one rank "
                     "per GPU, or per process under mpirun); default host");
      sub.add_option("--steps", o->steps, "timed steps (default 5)");
      sub.add_option("--warmup", o->warmup,
                     "untimed steps before them (default 1; the first step checks every "
                     "collective)");
      sub.add_option("--timeout", o->timeout_s,
                     "seconds a collective or receive may wait for its peers before the run "
                     "fails naming them (default 120)");
      sub.add_option("--trace", o->trace,
                     "write the measured timeline here (simulate --trace's format)");
      sub.add_option("--inject-stall", o->inject_stall,
                     "testing: this global rank never arrives at its first communication, to see "
                     "the others time out")
          ->group("");
      sub.add_flag("--json", o->json, "machine-readable output (with every op's times)");
      sub.add_flag("--quiet,-q", o->quiet, "no progress on stderr");
      return [o] { return run(*o); };
    },
    45);

}  // namespace scaleplan::cli
