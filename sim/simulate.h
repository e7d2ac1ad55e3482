// simulate(): from (model, cluster, sequence length, layout) to one simulated iteration.
//
// Resolves the layout against the model and GPU count, builds the Program (sim/builder.h) with the
// kernel cost model (the roofline default from the cluster's GPU peaks unless one is given) and the
// cluster's collective model, runs the Engine, and summarizes:
//   iteration     the makespan of one optimizer step;
//   tokens/s      gbs·seq / iteration, and per GPU;
//   MFU, HFU      model FLOPs (no recompute) and hardware FLOPs (with recompute) per second over
//                 gpus × dense bf16 peak (Narayanan et al. 2021; Chowdhery et al. 2022, App. B);
//   breakdown     per simulated rank (sim/metrics.h);
//   memory        the allocated peak, the reserved peak and `fits` come from
//                 models::estimate_memory (validated on measured peaks); the engine's allocation
//                 peak per stage (static states plus the activations the schedule keeps in flight)
//                 is reported beside it for the timeline.
// Pure function of its inputs; thread-safe (the planner calls it from many threads), each call
// with its own SimulationScratch where it gives one.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/layout.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "models/memory.h"
#include "models/model_spec.h"
#include "sim/builder.h"
#include "sim/engine.h"
#include "sim/framework.h"
#include "sim/metrics.h"
#include "sim/timeline.h"
#include "sim/trace.h"

namespace scaleplan::sim {

// Bounds of one simulation (docs/reliability.md, "Bounded work"): layer passes (simulated ranks x
// micro-batches x layers per stage) whose ops the program holds, and the longest iteration the
// int64 picosecond clock reports (it holds ~106 days and saturates beyond). Measured on Llama-3-8B,
// tp=8,pp=4,dp=16,gbs=128 --all-ranks (36,864 passes): 105 MB and 0.55 s without a trace; with
// --trace 455 MB, 3.9 s and a 284 MB trace (33 ops per pass). So 2^20 passes take ~3 GB, and a
// trace of 2^16 passes ~0.5 GB on disk and ~0.8 GB in memory.
inline constexpr int64_t kMaxLayerPasses = int64_t{1} << 20;
inline constexpr int64_t kMaxTracedLayerPasses = int64_t{1} << 16;
inline constexpr double kMaxIterationSeconds = 1e6;

// The memory one simulation's program, engine and timeline leave behind, for the next simulation
// to fill again (SimulateOptions::scratch). A 405B program of the planner is 0.2-0.5 M ops at about
// 120 bytes an op in those arrays; allocated afresh, every page of them is faulted in and zeroed by
// the kernel (a tenth of the 405B plan's CPU time). The scratch holds no result: each simulation
// writes every entry it reads, so a result does not depend on what ran before. Its memory stays at
// the largest program it has held. One simulation at a time may use it (not thread-safe).
struct SimulateOptions;
struct SimulationResult;
class SimulationScratch {
 private:
  friend Result<SimulationResult> simulate(const models::ModelSpec&, const hw::Cluster&, int64_t,
                                           const Layout&, const SimulateOptions&);
  Program program_;
  Engine::Storage engine_;
};

struct SimulateOptions {
  int64_t gpus = 0;                                 // 0: derive from the layout (dp must be set)
  bool all_ranks = false;                           // simulate every GPU, not one per stage
  bool trace = false;                               // fill SimulationResult::trace
  std::vector<TraceOptions::Entry> trace_metadata;  // more otherData entries for the trace
  // Keep the Program (every kernel, not merged) and its Timeline in the result: what the runtime
  // executes and what its measurement is compared with (scaleplan run).
  bool keep_program = false;
  const calibrate::KernelCostModel* kernels = nullptr;  // nullptr: roofline from the cluster
  // The framework whose conventions apply (sim/framework.h): memory, timing, kernels and host
  // issue. A run that names dtype=bf16 under fp16-era conventions passes with_bf16_named(...).
  Framework framework = sim::framework(FrameworkId::kMegatron);
  // Decoder layers per model chunk (pp·vpp entries, in chunk order) where the framework splits
  // them its own way (nanotron balances compute, models::nanotron_chunk_layers); empty: the
  // default split (stage_layer_counts). Used by both the memory model and the program.
  std::vector<int> chunk_layers;
  // The attention core's kernel (core/kernel_shapes.h); unset: the framework's on the cluster's
  // GPU (framework_attention).
  std::optional<AttentionKernel> attention;
  // The host issue model (sim/framework.h HostIssue); unset: the framework's.
  std::optional<HostIssue> host;
  // The layout's placement, hw::place_layout(resolved layout, cluster) with default options, where
  // the caller keeps one (the planner caches one per parallel grid: for 16k GPUs computing it
  // costs about as much as building and running the program); nullptr: computed here.
  const hw::LayoutPlacement* placement = nullptr;
  // The caller's memory estimator for this model and sequence under options.framework on the
  // cluster's GPU (the planner keeps one, with its caches); nullptr, or with chunk_layers set:
  // models::estimate_memory. Both give the same result.
  const models::MemoryEstimator* memory = nullptr;
  // Memory a previous simulation left (SimulationScratch), reused for this one's arrays; nullptr:
  // allocated here. The results are the same.
  SimulationScratch* scratch = nullptr;
  // DualPipe's forward-backward pairs overlapped (BuildOptions::overlap_pairs); false runs each
  // pair's passes one after the other, to see what the overlap hides.
  bool overlap_pairs = true;
  // Whether a pass waits for the previous pass's sends (BuildOptions::blocking_p2p); unset: the
  // framework's (blocks_p2p), set to see what blocking sends cost.
  std::optional<bool> blocking_sends;
  // Whether the per-rank breakdowns (StageResult::breakdown, sim/metrics.h) are wanted, asked with
  // the simulated iteration once the timeline is done; empty: always. false leaves them zero. The
  // planner asks for them only where the result can still reach its top K (its sweep over every
  // op's start and end is about a tenth of a simulation; docs/planner.md, "Issue 45's figures").
  std::function<bool(Duration iteration)> breakdown_wanted;
  // Called between the phases of a run (placement, program, timeline) with what comes next, for
  // a caller that shows progress on long runs (--all-ranks on thousands of GPUs); may be empty.
  std::function<void(std::string_view)> progress;
};

struct StageResult {
  int stage = 0;
  int64_t global_rank = 0;
  RankBreakdown breakdown;
  Bytes peak_memory;         // allocated peak of the stage: models::estimate_memory `total`
  Bytes step_peak_memory;    // allocated peak of the optimizer phase (`step_peak`)
  Bytes engine_peak_memory;  // the engine's allocation peak (static states + activations in
                             // flight, no transients): follows the timeline, not the verdict
};

struct SimulationResult {
  Layout layout;  // resolved
  Duration iteration;
  double tokens_per_s = 0;
  double tokens_per_s_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  std::vector<StageResult> stages;  // one per simulated rank
  Bytes peak_memory;                // memory model: max over stages of the allocated peak
  Bytes peak_reserved;              // memory model: allocator reserve + context + NCCL
  bool fits = false;
  size_t ops = 0;
  uint64_t events = 0;
  AttentionKernel attention = AttentionKernel::kFlash2;  // the attention core the program ran
  std::string kernel_model;                              // describe() of the kernel cost model
  std::string collective_model;                          // describe() of the collective cost model
  std::string trace;                                     // Perfetto JSON when requested
  models::MemoryResult memory;  // the memory model's estimate of every stage, by term
  // With SimulateOptions::keep_program: the Program that was timed and its Timeline.
  std::shared_ptr<const Program> program;
  Timeline timeline;
};

// What the simulator cannot time, refused by name before anything runs (simulate, and `plan`
// before it searches): attention-logit soft-capping (Gemma-2's attn_logit_softcapping), which
// Transformer Engine's fused attention does not apply (NeMo runs Gemma-2 through its own unfused
// core) and whose FlashAttention-2 kernel (softcap, flash-attn >= 2.6) has no measured cost here.
Status check_simulable(const models::ModelSpec& model);

Result<SimulationResult> simulate(const models::ModelSpec& model, const hw::Cluster& cluster,
                                  int64_t seq_len, const Layout& layout,
                                  const SimulateOptions& options = {});

}  // namespace scaleplan::sim
