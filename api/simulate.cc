// `simulate` as a library call; contract in simulate.h.
#include "api/simulate.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/options.h"
#include "api/sim_json.h"
#include "calibrate/kernel_model.h"
#include "hw_profiles/collectives.h"
#include "export/exporters.h"
#include "sim/chakra.h"
#include "sim/engine.h"

namespace scaleplan::api {
namespace {

Result<HowSure> how_sure(const models::ModelSpec& model, const hw::Cluster& cluster, int64_t seq,
                         const Layout& layout, sim::SimulateOptions so, Duration nominal) {
  so.all_ranks = false;
  so.trace = false;
  so.keep_program = false;
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

}  // namespace

Result<SimulateOutcome> simulate(const SimulateRequest& o,
                                 const Callbacks<std::string_view>& callbacks) {
  SimulateOutcome out;
  out.request = o;
  SP_ASSIGN_OR_RETURN(out.inputs, sim_inputs(o.inputs));
  const SimInputs& in = out.inputs;
  if (!o.attention.empty() && o.attention != "flash" && o.attention != "cudnn" &&
      o.attention != "unfused")
    return Status::invalid("--attention: expected flash, cudnn or unfused, got '" + o.attention +
                           "'");
  // Transformer Engine's userbuffer overlap is Megatron-core's --tp-comm-overlap (validate_args
  // asserts sequence parallelism with it); torchtitan, nanotron and the 2021-2022 codes have no
  // such option, so simulating it for them would predict a run they cannot make.
  if (o.tp_comm_overlap && in.framework.id != FrameworkId::kMegatron)
    return Status::invalid(
        "--tp-comm-overlap: Transformer Engine's TP communication overlap is "
        "Megatron-core's; --framework " +
        in.framework_name + " has no such option");
  // A bad --emit-chakra directory fails before anything is simulated or written.
  std::error_code ec;
  if (!o.emit_chakra.empty() && !std::filesystem::is_directory(o.emit_chakra, ec))
    return Status::invalid("--emit-chakra: '" + o.emit_chakra + "' is not an existing directory");
  sim::SimulateOptions so;
  so.gpus = in.gpus;
  so.keep_program = !o.emit_chakra.empty();
  so.framework = in.framework;
  if (in.host_launch) so.host = sim::framework_host_issue(so.framework, *in.host_launch);
  so.all_ranks = o.all_ranks;
  so.trace = !o.trace.empty();
  so.framework.ops.tp_comm_overlap = o.tp_comm_overlap || in.framework.ops.tp_comm_overlap;
  so.trace_metadata = run_metadata(in);
  if (!o.attention.empty())
    so.attention = o.attention == "unfused" ? AttentionKernel::kUnfused
                   : o.attention == "cudnn" ? AttentionKernel::kCudnn
                                            : AttentionKernel::kFlash2;
  if (callbacks.progress) {
    so.progress = [&callbacks](std::string_view what) { callbacks.progress(what); };
  }
  SP_ASSIGN_OR_RETURN(out.result, sim::simulate(in.model, in.cluster, in.seq, in.layout, so));
  const sim::SimulationResult& r = out.result;
  if (std::string n = partial_node_note(r.layout.gpus(), in.cluster.gpus_per_node, in.cluster.name,
                                        /*from_option=*/o.inputs.gpus != 0);
      !n.empty())
    callbacks.notify(n);
  out.tp_comm_overlap = so.framework.ops.tp_comm_overlap;
  out.host_per_launch = (so.host ? *so.host : so.framework.host).per_launch;
  if (o.how_sure) {
    SP_ASSIGN_OR_RETURN(out.how_sure,
                        how_sure(in.model, in.cluster, in.seq, in.layout, so, r.iteration));
  }
  if (!o.trace.empty()) SP_RETURN_IF_ERROR(write_file_atomic(o.trace, r.trace));
  if (!o.emit_chakra.empty()) {
    if (!r.program) return Status::internal("simulate: the program was not kept for Chakra");
    SP_ASSIGN_OR_RETURN(const sim::ChakraTraces t, sim::to_chakra(*r.program));
    SP_RETURN_IF_ERROR(sim::write_chakra(t, o.emit_chakra));
    for (const auto& f : t.ranks) out.chakra_files.push_back(f.file);
    out.chakra_files.push_back("scaleplan.json");
    out.chakra_ops = r.program->num_ops();
    out.chakra_deps = r.program->all_deps().size();
  }
  return out;
}

Json SimulateOutcome::to_json() const {
  const sim::SimulationResult& r = result;
  Json stages = Json::array();
  for (const auto& s : r.stages) stages.push_back(stage_breakdown_json(s));
  Json j = {{"model", inputs.model.name},
            {"cluster", inputs.cluster.name},
            {"layout", format_layout(r.layout)},
            {"gpus", r.layout.gpus()},
            {"seq", inputs.seq},
            {"iteration_s", r.iteration.to_seconds()},
            {"tokens_per_s", r.tokens_per_s},
            {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
            {"mfu", r.mfu},
            {"hfu", r.hfu},
            {"tp_comm_overlap", tp_comm_overlap},
            {"peak_memory_bytes", r.peak_memory.value()},
            {"peak_reserved_bytes", r.peak_reserved.value()},
            {"fits", r.fits},
            {"breakdown", stages},
            {"ops", r.ops},
            {"events", r.events},
            {"attention", std::string(to_string(r.attention))},
            {"moe", moe_options_json(inputs.model)},
            {"host_per_launch_s", host_per_launch.to_seconds()},
            {"kernel_model", r.kernel_model},
            {"collective_model", r.collective_model}};
  // What the plan predicted, beside what this simulation gives (equal unless the profile or
  // scaleplan changed since the plan was made).
  if (inputs.plan_iteration_s) j["plan_iteration_s"] = *inputs.plan_iteration_s;
  if (how_sure) {
    Json list = Json::array();
    for (const auto& [p, t] : how_sure->iterations) {
      Json e = perturbation_json(p);
      e["iteration_s"] = t.to_seconds();
      list.push_back(e);
    }
    j["how_sure"] = {{"perturbations", list},
                     {"min_iteration_s", how_sure->min.to_seconds()},
                     {"max_iteration_s", how_sure->max.to_seconds()}};
  }
  if (!request.emit_chakra.empty())
    j["chakra"] = {{"dir", request.emit_chakra},
                   {"files", chakra_files},
                   {"ops", chakra_ops},
                   {"deps", chakra_deps}};
  return j;
}

Result<ChakraSimulateOutcome> simulate_chakra(const std::string& dir, const std::string& cluster) {
  if (cluster.empty()) return Status::invalid("--chakra: needs --cluster to time the traces on");
  SP_ASSIGN_OR_RETURN(const hw::Cluster c, hw::load_cluster(cluster));
  const hw::CollectiveModel collectives(c);
  SP_ASSIGN_OR_RETURN(const sim::Program program, sim::read_chakra(dir, &collectives));
  SP_ASSIGN_OR_RETURN(const auto kernels, calibrate::kernel_cost_model_for(c));
  const sim::Engine engine(program, {.compute_slowdown_under_comm = kernels->overlap_slowdown()});
  SP_ASSIGN_OR_RETURN(const sim::Timeline tl, engine.run());
  ChakraSimulateOutcome out;
  out.dir = dir;
  out.cluster = c.name;
  out.ranks = program.num_ranks();
  out.ops = program.num_ops();
  out.iteration = tl.makespan.since_start();
  return out;
}

Json ChakraSimulateOutcome::to_json() const {
  return {{"chakra", dir},
          {"cluster", cluster},
          {"ranks", ranks},
          {"ops", ops},
          {"iteration_s", iteration.to_seconds()}};
}

}  // namespace scaleplan::api
