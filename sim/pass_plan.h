// PassPlan: what one training iteration runs on each pipeline rank, before any op is placed or
// timed. The program builder (sim/builder.h) emits its ops from it and the planner's lower bound
// (sim/iteration_bound.h) sums its durations over it, so the two read one plan and cannot
// disagree on which rank runs which chunk, which layers a chunk holds, where the embedding and the
// LM head sit, what each rank's optimizer steps over, which operator lists a layer, the embedding
// and the head run, or how big a pipeline transfer is.
//
//   param_shards    this GPU's share of every parameter under one (tp, ep, etp): per decoder
//                   layer (dense, expert, each tensor) and the non-layer tensors of the first and
//                   last stage (models::tensor_table and models::mtp_tensor_table, sharded by
//                   models::shard_numel);
//   pass_plan       the layout's chunks (core/layout.h's chunk-to-stage map, the layers of each,
//                   which hold the embedding and the LM head), each stage's pass order
//                   (sim/schedule.h), whether backward passes split into input and weight parts,
//                   the pipeline transfer's bytes and each stage's parameters;
//   operator_lists  the framework-adjusted operator lists (models::framework_layer_operators and
//                   framework_head_operators) of each layer kind, the embedding and the head, with
//                   the attention kernel the framework runs.
// The builder adds what only the timeline needs on top (gradient-accumulation kernels, the DP, ZeRO
// and optimizer collectives and copies, host issue); the bound counts a subset of what the plan
// holds, never more, which is what keeps it below the simulation.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "models/model_spec.h"
#include "models/operators.h"
#include "sim/framework.h"
#include "sim/schedule.h"

namespace scaleplan::sim {

struct ParamShards {
  std::vector<int64_t> layer_dense;                 // per decoder layer
  std::vector<int64_t> layer_expert;                // per decoder layer, routed experts
  std::vector<std::vector<int64_t>> layer_tensors;  // per decoder layer, each tensor's shard
  int64_t first_extra = 0;  // non-layer tensors on the first stage (the embedding)
  // Dense non-layer tensors on the last stage: the final norm, the LM head, the MTP modules' dense
  // part (not the copy of the embedding: PassPlan::head_params adds it where it exists).
  int64_t last_extra = 0;
  int64_t mtp_expert = 0;  // the MTP modules' expert parameters (last stage)
  std::vector<int64_t> first_tensors, last_tensors;  // their tensors' shards
};
ParamShards param_shards(const models::ModelSpec& model, int tp, int ep, int etp);

// One model chunk of the pipeline as a rank runs it (a global chunk of core/layout.h).
struct ChunkPlan {
  int stage = 0;           // the pipeline rank that runs it (stage_of_chunk)
  int local = 0;           // its index among that rank's chunks
  int model_chunk = 0;     // the entry of stage_layer_counts it runs (model_chunk)
  int first_layer = 0;     // its first decoder layer
  int layers = 0;          // how many decoder layers it runs
  bool embedding = false;  // runs the embedding (first model chunk)
  bool head = false;       // runs the final norm, the LM head, the loss and the MTP modules (last)
};

struct PassPlan {
  int pp = 1;
  int local_chunks = 1;  // chunks per rank (chunks_per_rank)
  int64_t microbatches = 1;
  bool dualpipe = false;  // Schedule::kDualPipe: two copies, one per direction
  // The schedule splits backward passes into their input- and weight-gradient parts (ZB-H1 and
  // the two-chunk schedules): weight gradients run in kBackwardWeight passes.
  bool split_weight = false;
  std::vector<ChunkPlan> chunks;              // global chunks, pipeline order
  std::vector<int> stage_chunks;              // [stage · local_chunks + local]: its global chunk
  std::vector<std::vector<Pass>> order;       // per stage (pipeline_schedule); empty unless asked
  std::shared_ptr<const ParamShards> shards;  // param_shards of the layout's (tp, ep, etp)
  const ParamShards& params() const { return *shards; }
  // The word embedding has a second copy on the last stage (tied to the LM head, or looked up by
  // DeepSeek's MTP modules) whose gradients are summed with the first's: the pipeline's ends are
  // different ranks.
  bool embedding_copy_on_last = false;
  int64_t tied_shard = 0;  // that copy's vocab/tp x hidden shard
  // A pipeline transfer: the bytes a send carries, and the TP all-gather's bytes after each receive
  // where the sender scattered the activation over TP (FrameworkTiming::p2p_scatter_gather), else
  // 0.
  int64_t p2p_bytes = 0;
  int64_t p2p_gather_bytes = 0;

  int global_chunk(int stage, int local) const;
  // Dense parameters of chunk g beyond its layers: the embedding (first) and head_params (last).
  int64_t extra_dense_params(int g) const;
  // Its expert parameters beyond its layers: the MTP modules' experts (last chunk).
  int64_t extra_expert_params(int g) const;
  // The last stage's dense parameters beyond its layers, the embedding's copy included.
  int64_t head_params() const;
  // Parameters of all the chunks stage s runs, dense and expert, as its optimizer steps them.
  int64_t stage_dense_params(int s) const { return stage_params(s, false); }
  int64_t stage_expert_params(int s) const { return stage_params(s, true); }
  int64_t stage_params(int s, bool expert) const;
  // Whether data flows between global chunks g and h (the same pipeline, h in range), and whether
  // it crosses ranks (a send and a receive).
  bool connected(int g, int h) const;
  bool remote(int g, int h) const;
  // The last micro-batch that local chunk c runs.
  int last_microbatch(int c) const;
};

// The plan of `layout` (resolved). `chunk_layers`: decoder layers per model chunk (pp·vpp entries
// summing to the layer count); empty: stage_layer_counts. `with_order`: also each stage's pass
// order (the bound's closed form does without it). Errors: DualPipe with ZeRO-3, chunk_layers not
// matching the layout and the model, a schedule the pipeline cannot run (pipeline_schedule).
Result<PassPlan> pass_plan(const models::ModelSpec& model, const Layout& layout, int64_t seq_len,
                           const FrameworkTiming& timing, std::shared_ptr<const ParamShards> shards,
                           const std::vector<int>& chunk_layers = {}, bool with_order = true);

// The pass of a chunk that an operator-list op of pass `p` runs in, as the builder lists a chunk's
// ops: kForward; kBackwardInput for recompute and input gradients, and weight gradients unless the
// schedule splits them off (`split_weight`: PassPlan::split_weight), then kBackwardWeight; nullopt
// for the optimizer's ops, which the step runs once.
std::optional<PassKind> chunk_pass(models::Pass p, bool split_weight);

// One DP gradient bucket of a chunk's backward: its dense parameters (reduced over DP x CP) and
// expert parameters (over the expert-data-parallel group), issued after the gradients of layer
// `after` (an index in backward order) or, where `after` equals the chunk's layer count, after the
// whole pass with the chunk's parameters beyond its layers.
struct DpBucket {
  int64_t dense = 0;
  int64_t expert = 0;
  size_t after = 0;
};

// How a chunk's gradients are grouped for the DP reduction: into buckets of at least
// dp_bucket_params (sim/framework.h) parameters as layers complete (Megatron-LM's
// DistributedDataParallel buckets), one per layer (ZeRO-3's per-module reduce-scatter), or one
// for the whole chunk (no overlap with the backward).
enum class Bucketing { kBySize, kPerLayer, kOne };

// The buckets of a chunk's backward over `dense` and `expert` parameters per layer (backward
// order) and `extra` / `extra_expert` beyond the layers (the last bucket takes them), in issue
// order; `cap`: the kBySize threshold. The program builder issues these and the planner's bound
// counts them (docs/planner.md, "Exact pruning").
std::vector<DpBucket> dp_buckets(const std::vector<int64_t>& dense,
                                 const std::vector<int64_t>& expert, int64_t extra,
                                 int64_t extra_expert, Bucketing how, int64_t cap);

// The operator lists of one iteration under `layout`: per ModelSpec::layer_kind the kinds present
// have (the list of the first layer of that kind, framework_layer_operators with `ops`), the
// embedding's, and the head's (framework_head_operators), every attention core run by `attention`.
struct OperatorLists {
  std::vector<models::Op> layer[models::ModelSpec::kLayerKinds];
  int first_layer[models::ModelSpec::kLayerKinds] = {};  // -1: no layer of that kind
  std::vector<models::Op> embedding, head;
};
Result<OperatorLists> operator_lists(const models::ModelSpec& model, const Layout& layout,
                                     int64_t seq_len, const models::FrameworkOps& ops,
                                     AttentionKernel attention);

}  // namespace scaleplan::sim
