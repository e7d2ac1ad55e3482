// `simulate` as a library call; contract in simulate.h.
#include "api/simulate.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "api/options.h"
#include "api/sim_json.h"
#include "calibrate/kernel_model.h"
#include "export/exporters.h"
#include "hw_profiles/collectives.h"
#include "models/inductor.h"
#include "sim/chakra.h"
#include "sim/engine.h"

namespace scaleplan::api {
namespace {

// `f` running `kernel` as its attention core on every GPU (`--attention`) instead of its own
// choice by GPU generation: sim::framework_attention then returns `kernel`.
sim::Framework with_attention(sim::Framework f, AttentionKernel kernel) {
  f.timing.attention = kernel;
  f.timing.cudnn_from_sm = 0;
  return f;
}

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
  // --attention is part of the framework value from here on, like --host-launch.
  if (!o.attention.empty())
    out.inputs.framework = with_attention(std::move(out.inputs.framework),
                                          o.attention == "unfused" ? AttentionKernel::kUnfused
                                          : o.attention == "cudnn" ? AttentionKernel::kCudnn
                                                                   : AttentionKernel::kFlash2);
  // Transformer Engine's userbuffer overlap is Megatron-core's --tp-comm-overlap (validate_args
  // asserts sequence parallelism with it); torchtitan, nanotron and the 2021-2022 codes have no
  // such option, so simulating it for them would predict a run they cannot make.
  if (o.tp_comm_overlap && in.framework.id != FrameworkId::kMegatron)
    return Status::invalid(
        "--tp-comm-overlap: Transformer Engine's TP communication overlap is "
        "Megatron-core's; --framework " +
        in.framework_name + " has no such option");
  // Transformer Engine's recipe quantizes the fp8 linears of Megatron-core; other frameworks' fp8
  // (torchao's float8 linears) and bf16 layouts have no such option.
  if (!o.fp8_recipe.empty()) {
    if (in.framework.id != FrameworkId::kMegatron || in.layout.dtype != DType::kFp8)
      return Status::invalid(
          "--fp8-recipe: Transformer Engine's fp8 recipe applies to dtype=fp8 "
          "under --framework megatron; this run is dtype=" +
          std::string(to_string(in.layout.dtype)) + " under " + in.framework_name);
    SP_ASSIGN_OR_RETURN(out.inputs.framework.ops.fp8_recipe,
                        models::parse_fp8_recipe(o.fp8_recipe));
  }
  // torchtitan's torch.compile is part of the framework value from here on.
  if (!o.compile.empty()) {
    SP_RETURN_IF_ERROR(models::set_compile_components(out.inputs.framework.ops, o.compile));
    SP_RETURN_IF_ERROR(models::check_compile(in.model, in.layout));
  }
  // A bad --emit-chakra directory fails before anything is simulated or written.
  std::error_code ec;
  if (!o.emit_chakra.empty() && !std::filesystem::is_directory(o.emit_chakra, ec))
    return Status::invalid("--emit-chakra: '" + o.emit_chakra + "' is not an existing directory");
  sim::SimulateOptions so;
  so.gpus = in.gpus;
  so.keep_program = !o.emit_chakra.empty();
  so.framework = in.framework;
  so.all_ranks = o.all_ranks;
  so.trace = !o.trace.empty();
  so.framework.ops.tp_comm_overlap = o.tp_comm_overlap || in.framework.ops.tp_comm_overlap;
  so.trace_metadata = run_metadata(in);
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
  out.compile = models::compile_components(so.framework.ops);
  if (!o.fp8_recipe.empty()) out.fp8_recipe = std::string(to_string(so.framework.ops.fp8_recipe));
  out.host_per_launch = so.framework.host.per_launch;
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
  if (!compile.empty()) j["compile"] = compile;
  if (!fp8_recipe.empty()) j["fp8_recipe"] = fp8_recipe;
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

std::vector<Field> simulate_fields(SimulateRequest& r) {
  SimInputOptions& in = r.inputs;
  return {
      {"plan", &in.plan,
       "a plan file (plan --emit json): its model, cluster, seq, layout, framework and host cost, "
       "instead of the options for them"},
      {"model", &in.model, "preset name or HF config.json path"},
      {"cluster", &in.cluster, "bundled profile name or profile path"},
      {"seq", &in.seq, "sequence length in tokens"},
      {"layout", &in.layout, "layout string (docs/architecture.md, \"The layout string\")"},
      {"gpus", &in.gpus, "GPU count (default: from the layout)"},
      {"trace", &r.trace, "write a Chrome/Perfetto trace JSON here"},
      {"emit_chakra", &r.emit_chakra,
       "write Chakra execution traces (one <prefix>.<rank>.et per simulated rank) into this "
       "existing directory"},
      {"moe_imbalance", &in.moe_imbalance, kMoeImbalanceHelp},
      {"moe_dispatcher", &in.moe_dispatcher, kMoeDispatcherHelp},
      {"host_launch", &in.host_launch, kHostLaunchHelp},
      Field("framework", &in.framework,
            "memory, timing and host conventions: megatron (default; Megatron-core), "
            "megatron-2022 (Megatron-LM of its 2021-2022 papers), deepspeed-2021 (its GPT under "
            "DeepSpeed's early-2021 ZeRO-3), nanotron, torchtitan (eager, no torch.compile; "
            "torchtitan-2025: on PyTorch <= 2.8)")
          .one_of(kFrameworksWithHistoric),
      {"attention", &r.attention,
       "attention core: flash (FlashAttention-2), cudnn (cuDNN fused attention) or unfused "
       "(default: what the framework runs on this GPU)"},
      {"all_ranks", &r.all_ranks, "simulate every GPU, not one rank per stage"},
      {"tp_comm_overlap", &r.tp_comm_overlap,
       "Transformer Engine's TP communication overlap (Megatron-core --tp-comm-overlap; NeMo and "
       "Megatron-Bridge performance recipes): each SP all-gather and reduce-scatter runs beside "
       "the GEMM it is pipelined with (docs/simulator.md \"TP communication overlap\")"},
      Field("fp8_recipe", &r.fp8_recipe,
            "Transformer Engine's fp8 recipe under dtype=fp8 (Megatron-core --fp8-recipe): "
            "delayed (default), tensorwise (per-tensor current scaling: an amax pass before each "
            "cast), mxfp8 (1x32 E8M0 block scales, Blackwell only) or nvfp4 (e2m1 GEMMs at the "
            "profile's fp4 rate with E4M3 scales per 16, Blackwell only); docs/simulator.md "
            "\"fp8 recipes\"")
          .one_of({"delayed", "tensorwise", "mxfp8", "nvfp4"}),
      {"compile", &r.compile,
       "torchtitan's torch.compile ([compile] enable, compile.components): model (each "
       "TransformerBlock), loss, or model,loss (torchtitan's components when enabled); Inductor's "
       "fused kernels in place of the eager ones (docs/simulator.md \"torchtitan with "
       "torch.compile\"); default: off, as torchtitan's"},
      {"how_sure", &r.how_sure,
       "also simulate the layout with one resource off at a time (kernels +-10%, NVLink -15%, "
       "network -30%, latency x2; docs/planner.md \"How sure\")"},
  };
}

}  // namespace scaleplan::api
