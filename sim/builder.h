// build_program: one training iteration of a model under a layout, as a sim::Program.
//
// The builder only places ops; it derives no shapes and no structure. Which rank runs which chunk
// with which layers, the pass order, the parameters each chunk holds and the pipeline transfer come
// from the pass plan (sim/pass_plan.h, sim::pass_plan), the operator lists from
// sim::operator_lists: the plan the planner's lower bound sums. Ops of one collective or transfer
// on different ranks find their match instance by a typed key (sim/match_table.h). Every compute
// op and every communication
// point of a layer, the embedding, the LM head and the optimizer comes from the operator list
// (models/operators.h); the builder times them once per distinct layer with the kernel cost model
// (calibrate/cost_model.h) and the collective model (hw_profiles/collectives.h) on the layout's
// placement (hw_profiles/placement.h), then lays them out per rank:
//   - pipeline: the pass order of sim/schedule.h; a send/recv pair carries each activation and
//     gradient between neighbouring model chunks; the embedding runs in the first chunk and the LM
//     head with the loss in the last;
//   - TP/SP, EP and ETP communication sits on the critical path in operator-list order (their own
//     streams, but the next op waits for them); a CP K/V ring transfer overlaps the attention
//     kernel next to it (ring attention hides each K/V step behind the current chunk's attention);
//   - DP: the gradients of the last micro-batch are reduced in buckets of `dp_bucket_params`
//     parameters (Megatron-LM's DDP default, 40 M) as the backward produces them, on the DP stream,
//     so they overlap the rest of the backward; no reduction runs for earlier micro-batches (no
//     sync during gradient accumulation). ZeRO-0 all-reduces; ZeRO-1/2 reduce-scatter and
//     all-gather the updated parameters after the optimizer step; ZeRO-3 all-gathers each layer's
//     parameters before its forward and again before its backward, the next layer's gather
//     prefetched while the current layer computes (one layer ahead), frees them after use, and
//     reduce-scatters each layer's gradients every micro-batch;
//   - recompute: the operator list's recompute ops run right before each layer's backward;
//   - the step: a gradient-norm all-reduce over every rank, then the optimizer.
// Activations: each (chunk, micro-batch) allocates the bytes its forward saves (Op::saved) and
// frees them after its backward, so the engine's memory peak follows the schedule's in-flight
// micro-batches; weights, gradients and optimizer states are the ranks' static memory.
//
// The code is cut by concern (sim/emit.h): timing, chunk assembly, the pipeline, data parallel
// and ZeRO, the step, each in its own sim/emit_*.cc, orchestrated by sim/builder.cc.
//
// Ranks: by default one representative rank per pipeline stage (the first TP/CP/DP rank of the
// stage); its collectives inside TP/CP/DP/EP groups have a single simulated member because the
// other members are symmetric. With all_ranks every GPU is simulated and collectives match their
// real members, so that later work can perturb single ranks.
#pragma once

#include <cstdint>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/layout.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "models/model_spec.h"
#include "sim/framework.h"
#include "sim/program.h"

namespace scaleplan::sim {

// What the builder does. A default-constructed value is a neutral framework (every FrameworkTiming
// and models::FrameworkOps default, no host issue); build_options resolves a framework's for a
// layout and GPU, and tests set single fields to isolate one effect.
struct BuildOptions {
  bool all_ranks = false;
  // Static memory per stage (weights, gradients, optimizer states) from the memory model; empty
  // means none is tracked.
  std::vector<Bytes> stage_static_memory;
  // Decoder layers per model chunk (pp·vpp entries summing to the layer count); empty: the
  // layout's default split (stage_layer_counts).
  std::vector<int> chunk_layers;
  // The framework's timing conventions and operator-list changes (sim/framework.h), read as they
  // are; the
  // fields of `timing` that depend on the layout or the GPU are read resolved, from the fields
  // below (attention, param_gather, dp_bucket_params, blocking_p2p, overlap_pairs), never from
  // `timing` itself.
  FrameworkTiming timing;
  models::FrameworkOps ops;
  // What the framework stores beyond the operator list (sim::Framework::memory): each layer's
  // activation allocation is models::layer_saved_bytes, the memory model's own figure.
  models::FrameworkMemory memory;
  HostIssue host;
  // The attention core's kernel (framework_attention on the cluster's GPU).
  AttentionKernel attention = AttentionKernel::kFlash2;
  // ZeRO-1/2's parameter gather (param_gather_for).
  ParamGather param_gather = ParamGather::kAfterStep;
  // DP gradient bucket in parameters (dp_bucket_params).
  int64_t dp_bucket_params = 40'000'000;
  // A pipeline send holds up the sender's next pass until it completes (blocks_p2p;
  // FrameworkTiming::blocking_p2p says why). false: sends run on their own stream beside compute.
  bool blocking_p2p = false;
  // DualPipe's forward-backward pairs (sim/schedule.h Pass::with_next) share the compute stream,
  // each pass's communication beside the other's compute; false: one after the other
  // (pairs_overlap).
  bool overlap_pairs = true;
  // Merge each run of consecutive compute ops of a pass into one op lasting their summed durations
  // (ProgramBuilder::chain says which runs). Every other op starts and ends at the same tick, and
  // the breakdown is unchanged, when compute runs at full speed; under a compute slowdown
  // (EngineOptions::compute_slowdown_under_comm > 1) the engine rounds each op's stretched end to
  // a tick and a merged op rounds once, so times may move by a tick (1 ps) per merged op. Ops with
  // a host issue op are never merged. The per-kernel names and shapes are lost, so simulate()
  // merges only when no trace is asked for. Default off: the program lists every kernel.
  bool merge_compute = false;
};

// `framework`'s conventions resolved for the resolved `layout` on `gpu`: timing, kernels and host
// as they are, and attention, param_gather, dp_bucket_params, blocking_p2p and overlap_pairs from
// the functions of sim/framework.h. all_ranks, stage memory, chunk_layers and merge_compute are
// left at their defaults.
BuildOptions build_options(const Framework& framework, const Layout& layout,
                           const hw::GpuSpec& gpu);

struct BuildInputs {
  const models::ModelSpec* model = nullptr;
  const Layout* layout = nullptr;  // resolved
  int64_t seq_len = 0;
  const hw::Cluster* cluster = nullptr;
  const calibrate::KernelCostModel* kernels = nullptr;
  const hw::CollectiveModel* collectives = nullptr;
  // hw::place_layout(*layout, *cluster) if the caller has it; nullptr: build_program computes it.
  const hw::LayoutPlacement* placement = nullptr;
  // A finished program whose arrays' memory the new one reuses (it is emptied first: the new
  // program equals one built without it); nullptr: fresh arrays (SimulationScratch).
  Program* storage = nullptr;
};

Result<Program> build_program(const BuildInputs& in, const BuildOptions& options = {});

}  // namespace scaleplan::sim
