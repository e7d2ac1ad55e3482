#include "sim/simulate.h"

#include <algorithm>
#include <cstdio>

#include "calibrate/kernel_model.h"
#include "hw_profiles/collectives.h"
#include "models/accounting.h"
#include "models/memory.h"
#include "sim/builder.h"
#include "sim/engine.h"
#include "sim/schedule.h"
#include "sim/trace.h"

namespace scaleplan::sim {

Status check_simulable(const models::ModelSpec& model) {
  if (model.attn_softcap > 0) {
    char cap[32];
    std::snprintf(cap, sizeof cap, "%g", model.attn_softcap);
    return Status::invalid(
        "model_type '" + model.model_type +
        "': attention-logit soft-capping (attn_logit_softcapping " + cap +
        ") is not timed: Transformer Engine's fused attention does not apply it and the "
        "soft-capping FlashAttention-2 kernel has not been measured (`model` and `memory` "
        "work)");
  }
  return Status::ok();
}

namespace {

// Bounded work (docs/reliability.md): the program holds every op of every simulated rank, about
// kOpsPerLayerPass ops for each layer of each micro-batch on each rank, so its memory (and the
// trace's) grows as ranks x micro-batches x layers per stage. Refused up front past
// kMaxLayerPasses, with the numbers, instead of exhausting memory.
Status check_work(const Layout& l, int64_t num_layers, bool all_ranks, bool trace) {
  const int64_t ranks = all_ranks ? l.gpus() : l.pp;
  const int64_t layers_per_rank = (num_layers + l.pp - 1) / l.pp + 1;  // + embedding/head
  const double passes = static_cast<double>(ranks) * static_cast<double>(l.num_microbatches()) *
                        static_cast<double>(layers_per_rank);
  const int64_t limit = trace ? kMaxTracedLayerPasses : kMaxLayerPasses;
  if (passes <= static_cast<double>(limit)) return Status::ok();
  return Status::invalid(
      "layout: " + std::to_string(ranks) + (all_ranks ? " simulated GPUs" : " pipeline stages") +
      " x " + std::to_string(l.num_microbatches()) + " micro-batches x " +
      std::to_string(layers_per_rank) + " layers per stage = " +
      std::to_string(static_cast<int64_t>(passes)) + " layer passes, more than the " +
      std::to_string(limit) + (trace ? " one trace holds" : " one simulation holds in memory") +
      (all_ranks ? " (leave out --all-ranks: one rank per stage gives the same iteration time "
                   "for symmetric layouts)"
                 : " (a smaller global batch or a larger micro-batch)"));
}

}  // namespace

Result<SimulationResult> simulate(const models::ModelSpec& model, const hw::Cluster& cluster,
                                  int64_t seq_len, const Layout& layout,
                                  const SimulateOptions& options) {
  SP_RETURN_IF_ERROR(check_simulable(model));
  SP_ASSIGN_OR_RETURN(
      Layout l, resolve_layout(layout, models::layout_constraints(model, seq_len), options.gpus));
  // The kernel model would run fp8 at the bf16 rate on a GPU without fp8: a number for a run that
  // cannot exist.
  SP_RETURN_IF_ERROR(hw::check_dtype_supported(cluster, l.dtype, "layout"));
  SP_RETURN_IF_ERROR(check_fp8_recipe(options.framework, l, cluster.gpu));
  SimulationResult out;
  out.layout = l;

  // Memory model: static model states per stage for the program, transients, and the verdict.
  const Framework& framework = options.framework;
  models::MemoryOptions mo;
  mo.framework = framework.memory;
  mo.ops = framework.ops;
  mo.gpu_memory = cluster.gpu.memory;
  if (!options.chunk_layers.empty()) mo.chunk_layers = options.chunk_layers;
  SP_ASSIGN_OR_RETURN(models::MemoryResult mem,
                      options.memory != nullptr && options.chunk_layers.empty()
                          ? options.memory->estimate(l)
                          : models::estimate_memory(model, l, seq_len, mo));
  BuildOptions bo = build_options(framework, l, cluster.gpu);
  bo.all_ranks = options.all_ranks;
  bo.chunk_layers = options.chunk_layers;
  if (options.attention) bo.attention = *options.attention;
  out.attention = bo.attention;
  if (options.blocking_sends) bo.blocking_p2p = *options.blocking_sends;
  bo.overlap_pairs = bo.overlap_pairs && options.overlap_pairs;
  if (options.host) bo.host = *options.host;
  for (const auto& s : mem.stages)
    bo.stage_static_memory.push_back(s.weights + s.gradients + s.optimizer + s.fp8_weight_copies);

  // The cluster's own model (fitted when the profile is calibrated, roofline otherwise) unless the
  // caller gives one.
  std::unique_ptr<calibrate::KernelCostModel> own_kernels;
  const calibrate::KernelCostModel* kernels = options.kernels;
  if (!kernels) {
    SP_ASSIGN_OR_RETURN(own_kernels, calibrate::kernel_cost_model_for(cluster));
    kernels = own_kernels.get();
  }
  out.kernel_model = kernels->describe();
  // Merging compute runs shrinks the program (and the engine's work) and drops the per-kernel
  // trace (BuildOptions::merge_compute). Under a compute slowdown a merged run ends where the
  // chain would, but for the chain's per-op rounding to a tick (1 ps each).
  bo.merge_compute = !options.trace && !options.keep_program;
  const hw::CollectiveModel collectives(cluster);
  out.collective_model = collectives.describe();
  SP_RETURN_IF_ERROR(check_work(l, model.num_layers, options.all_ranks, options.trace));
  BuildInputs in{&model, &l, seq_len, &cluster, kernels, &collectives, options.placement};
  // A kept program leaves with the result; otherwise it goes back to the scratch at the end.
  SimulationScratch* const scratch = options.keep_program ? nullptr : options.scratch;
  if (scratch != nullptr) in.storage = &scratch->program_;
  // The messages are built only for a caller that shows them (not for the planner's runs).
  const auto& progress = options.progress;
  if (progress)
    progress(options.all_ranks ? "building the program of all " + std::to_string(l.gpus()) + " GPUs"
                               : "building the program");
  SP_ASSIGN_OR_RETURN(Program program, build_program(in, bo));
  if (progress)
    progress("running " + std::to_string(program.num_ops()) + " ops on " +
             std::to_string(program.num_ranks()) + " simulated ranks");
  const Engine engine(program, {.compute_slowdown_under_comm = kernels->overlap_slowdown()},
                      scratch != nullptr ? &scratch->engine_ : nullptr);
  SP_ASSIGN_OR_RETURN(Timeline tl, engine.run());
  if (progress) progress("timeline done: " + std::to_string(tl.events) + " events");

  out.iteration = tl.makespan.since_start();
  // Times saturate at the int64 clock's ends (core/units.h) instead of wrapping; an iteration that
  // long is refused, not reported (a 405B model at seq 131072 and gbs 32767 reached it).
  if (out.iteration.to_seconds() > kMaxIterationSeconds) {
    return Status::invalid("the iteration would take more than " +
                           std::to_string(static_cast<int64_t>(kMaxIterationSeconds)) +
                           " s (11.6 days), past the range of the simulated clock; a smaller "
                           "batch, sequence or model");
  }
  out.ops = program.num_ops();
  out.events = tl.events;
  const double seconds = out.iteration.to_seconds();
  const double gpus = static_cast<double>(l.gpus());
  const double tokens = static_cast<double>(l.global_batch()) * static_cast<double>(seq_len);
  if (seconds > 0) {
    out.tokens_per_s = tokens / seconds;
    out.tokens_per_s_per_gpu = out.tokens_per_s / gpus;
    const auto fpt = models::flops_per_token(model, seq_len);
    const double peak = cluster.gpu.bf16_dense.value() * gpus;
    out.mfu = fpt.model() * out.tokens_per_s / peak;
    out.hfu = fpt.hardware(l.recompute, l.recompute_module_set()) * out.tokens_per_s / peak;
  }
  const std::vector<RankBreakdown> br =
      !options.breakdown_wanted || options.breakdown_wanted(out.iteration)
          ? breakdown(program, tl)
          : std::vector<RankBreakdown>(static_cast<size_t>(program.num_ranks()));
  for (int r = 0; r < program.num_ranks(); ++r) {
    const RankInfo& info = program.ranks()[r];
    StageResult s;
    s.stage = info.stage;
    s.global_rank = info.global_rank;
    s.breakdown = br[r];
    s.engine_peak_memory = tl.peak_memory[r];
    if (static_cast<size_t>(info.stage) < mem.stages.size()) {
      // The memory model's allocated peak (validated against measured peaks, docs/validation.md
      // "Memory model"); the engine's allocations only follow the schedule's activations.
      const models::StageMemory& sm = mem.stages[info.stage];
      s.peak_memory = sm.total;
      s.step_peak_memory = sm.step_peak;
    } else {
      s.peak_memory = s.engine_peak_memory;
    }
    out.stages.push_back(s);
  }
  out.peak_memory = mem.peak_allocated;
  out.peak_reserved = mem.peak_reserved + mem.overhead;
  out.fits = mem.fits;
  if (options.trace) {
    TraceOptions to;
    to.title = format_layout(l);
    to.metadata = options.trace_metadata;
    // The model and cluster, unless the caller's metadata names them already (`compare` reads
    // both from otherData).
    // (No structured bindings here: clang 14, the sanitizer builds' compiler, cannot capture them.)
    for (const std::pair<std::string, std::string>& kv :
         {std::pair<std::string, std::string>{"model", model.name}, {"cluster", cluster.name}}) {
      if (std::none_of(to.metadata.begin(), to.metadata.end(),
                       [&kv](const TraceOptions::Entry& e) { return e.key == kv.first; }))
        to.metadata.push_back({kv.first, kv.second});
    }
    for (const StageResult& s : out.stages) to.peak_memory_bytes.push_back(s.peak_memory.value());
    out.trace = chrome_trace(program, tl, to);
  }
  out.memory = std::move(mem);
  if (options.keep_program) {
    out.program = std::make_shared<const Program>(std::move(program));
    out.timeline = std::move(tl);
  } else if (scratch != nullptr) {
    scratch->program_ = std::move(program);
    scratch->engine_.recycle(std::move(tl));
  }
  return out;
}

}  // namespace scaleplan::sim
