// `run` as a library call; contract in run.h.
#include "api/run.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "runtime/launch.h"
#include "sim/trace.h"

namespace scaleplan::api {
namespace {

// Per op: its duration in a timeline (end - start).
std::vector<Duration> durations(const sim::Timeline& t) {
  std::vector<Duration> d(t.end.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = t.end[i] - t.start[i];
  return d;
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

}  // namespace

double run_error(double predicted, double measured) {
  return measured > 0 ? predicted / measured - 1 : 0;
}

Bytes model_states(const models::StageMemory& s) {
  return s.weights + s.gradients + s.optimizer + s.fp8_weight_copies;
}

Json RunOutcome::to_json() const {
  const RunRequest& o = request;
  const SimInputs& in = inputs;
  const sim::SimulationResult& pred = prediction;
  const runtime::ExecutionResult& e = execution;
  const sim::Program& program = *pred.program;
  const double predicted = pred.iteration.to_seconds();
  Json steps = Json::array();
  for (Duration d : e.iterations) steps.push_back(d.to_seconds());
  Json kinds = Json::array();
  for (const auto& c : classes) {
    kinds.push_back({{"class", c.name},
                     {"ops", c.ops},
                     {"predicted_s", c.predicted.to_seconds()},
                     {"measured_s", c.measured.to_seconds()},
                     {"error", run_error(c.predicted.to_seconds(), c.measured.to_seconds())}});
  }
  Json memory = Json::array();
  for (const runtime::RankMeasurement& r : e.ranks) {
    const models::StageMemory& sm = pred.memory.stages.at(static_cast<size_t>(r.stage));
    memory.push_back({{"rank", r.global_rank},
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
                      {"error", run_error(static_cast<double>(sm.total.value()),
                                          static_cast<double>(r.peak.value()))},
                      {"states_activations_error",
                       run_error(static_cast<double>((model_states(sm) + sm.activations).value()),
                                 static_cast<double>((r.static_memory + r.activations).value()))}});
  }
  return {{"model", in.model.name},
          {"cluster", in.cluster.name},
          {"cluster_source", in.cluster_name},
          {"seq", in.seq},
          {"layout", format_layout(pred.layout)},
          {"gpus", pred.layout.gpus()},
          {"framework", in.framework_name},
          {"backend", e.backend},
          {"device", e.device},
          {"processes", e.processes},
          {"warmup", e.warmup_steps},
          {"steps", o.steps},
          {"median_step", e.median_step},
          {"measured",
           {{"iteration_s", measured_s},
            {"iteration_min_s", min_s},
            {"iteration_max_s", max_s},
            {"iterations_s", steps},
            {"tokens_per_s", tokens_per_s},
            {"mfu", mfu}}},
          {"predicted",
           {{"iteration_s", predicted},
            {"tokens_per_s", pred.tokens_per_s},
            {"mfu", pred.mfu},
            {"kernel_model", pred.kernel_model},
            {"calibrated_backend", calibrated_backend},
            {"collective_model", pred.collective_model}}},
          {"iteration_error", run_error(predicted, measured_s)},
          {"op_classes", kinds},
          {"memory", memory},
          {"checked", checked},
          {"op_runs",
           {{"ops", program.num_ops()},
            {"min", *std::min_element(e.runs.begin(), e.runs.end())},
            {"max", *std::max_element(e.runs.begin(), e.runs.end())}}},
          {"ops", ops_json(program, pred.timeline, e)}};
}

Result<RunOutcome> run(const RunRequest& o, const Callbacks<RunProgress>& callbacks) {
  SP_ASSIGN_OR_RETURN(const runtime::BackendKind kind, runtime::parse_backend_kind(o.backend));
  if (o.steps < 1) return Status::invalid("--steps: must be >= 1, got " + std::to_string(o.steps));
  if (o.warmup < 0)
    return Status::invalid("--warmup: must be >= 0, got " + std::to_string(o.warmup));
  if (o.warmup_s >= 0 && o.warmup == 0 && o.warmup_s > 0)
    return Status::invalid(
        "--warmup-s: needs at least one --warmup step to pace the rest, got "
        "--warmup 0");
  if (std::isnan(o.warmup_s)) return Status::invalid("--warmup-s: must be a number of seconds");
  if (!(o.timeout_s > 0)) return Status::invalid("--timeout: must be a positive number of seconds");
  RunOutcome out;
  out.request = o;
  SP_ASSIGN_OR_RETURN(out.inputs, sim_inputs(o.inputs));
  const SimInputs& in = out.inputs;
  // The executor's AdamW keeps fp32 moments and its activations in the Program's own dtypes: a
  // run of these keys would measure something other than what was predicted.
  if (in.layout.moments != MomentDtype::kFp32 || in.layout.act_cache != ActCache::kDefault) {
    return Status::invalid(
        "layout: " +
        std::string(in.layout.moments != MomentDtype::kFp32 ? "moments=bf16" : "act_cache=fp8") +
        " is not run by scaleplan's runtime (its AdamW keeps fp32 moments and bf16/fp8 "
        "activations as the Program stores them); simulate it instead");
  }
  // Only the reporting process speaks: under mpirun every rank runs this.
  Callbacks<RunProgress> heard;
  if (runtime::launched_rank() == 0) heard = callbacks;
  // Which backend calibrated the prediction's profile ("" when none): a comparison means
  // something only when it is the backend that runs.
  std::string& calibrated = out.calibrated_backend;
  if (in.cluster.calibration) calibrated = in.cluster.calibration->backend;
  if (calibrated != o.backend) {
    heard.notify(fmt::format(
        "note: the prediction is for {} ({}), {}; for a like-for-like comparison calibrate this "
        "machine (scaleplan profile --backend {} --out P.json) and pass --cluster P.json",
        in.cluster.gpu.name, in.cluster_name,
        calibrated.empty() ? "not calibrated" : "calibrated on the " + calibrated + " backend",
        o.backend));
  }

  // The prediction, and the Program the executor runs: every rank, every kernel. No host issue
  // model: the executor issues its ops itself, in C++, not through a framework's Python.
  sim::SimulateOptions so;
  so.gpus = in.gpus;
  so.framework = in.framework;
  so.host = sim::HostIssue{};
  so.all_ranks = true;
  so.keep_program = true;
  SP_ASSIGN_OR_RETURN(out.prediction, sim::simulate(in.model, in.cluster, in.seq, in.layout, so));
  const sim::SimulationResult& pred = out.prediction;
  const sim::Program& program = *pred.program;
  if (kind == runtime::BackendKind::kCuda && !pred.fits) {
    heard.notify("warning: the memory model says this layout does not fit in " +
                 in.cluster.gpu.name);
  }

  runtime::LaunchOptions lo;
  lo.kind = kind;
  lo.timeout = Duration::seconds(o.timeout_s);
  runtime::ExecuteOptions eo;
  eo.steps = o.steps;
  eo.warmup = o.warmup;
  eo.warmup_seconds = o.warmup_s >= 0                       ? o.warmup_s
                      : kind == runtime::BackendKind::kCuda ? kCudaWarmupSeconds
                                                            : 0.0;
  eo.stall_rank = o.inject_stall;
  if (heard.progress) {
    eo.progress = [&heard](int done, int total) {
      heard.progress(RunProgress{RunProgress::kStep, done, total});
    };
  }
  heard.notify(fmt::format("{} ops on {} ranks, {} warm-up + {} timed steps", program.num_ops(),
                           program.num_ranks(), o.warmup, o.steps));
  if (heard.progress) heard.progress(RunProgress{RunProgress::kExecuting, 0, o.warmup + o.steps});
  SP_ASSIGN_OR_RETURN(out.execution, runtime::execute(program, lo, eo));
  const runtime::ExecutionResult& e = out.execution;
  out.reporter = e.reporter;
  if (!e.reporter) return out;  // another process of the job reports

  // Iteration: median and spread of the timed steps.
  std::vector<Duration> its = e.iterations;
  std::sort(its.begin(), its.end());
  out.measured_s = e.iterations[static_cast<size_t>(e.median_step)].to_seconds();
  out.min_s = its.front().to_seconds();
  out.max_s = its.back().to_seconds();
  const double predicted = pred.iteration.to_seconds();
  const double tokens = static_cast<double>(pred.layout.global_batch()) * in.seq;
  out.tokens_per_s = tokens / out.measured_s;
  out.mfu = predicted > 0 ? pred.mfu * predicted / out.measured_s : 0;
  out.classes = sim::times_by_class(program, durations(pred.timeline), e.op_median);
  for (const auto& r : e.ranks) out.checked += r.checked;

  if (!o.trace.empty()) {
    sim::TraceOptions to;
    to.title = format_layout(pred.layout);
    to.generator = "scaleplan run";
    to.metadata = run_metadata(in);
    to.metadata.push_back({"backend", e.backend});
    to.metadata.push_back({"device", e.device});
    to.metadata.push_back({"steps", std::to_string(o.steps), true});
    to.metadata.push_back({"warmup", std::to_string(e.warmup_steps), true});
    to.metadata.push_back({"step", std::to_string(e.median_step), true});
    to.metadata.push_back({"iteration_s", fmt::format("{:.9g}", out.measured_s), true});
    to.metadata.push_back({"predicted_iteration_s", fmt::format("{:.9g}", predicted), true});
    SP_RETURN_IF_ERROR(write_file_atomic(o.trace, sim::chrome_trace(program, e.timeline, to)));
  }
  return out;
}

}  // namespace scaleplan::api
