#include "sim/pass_plan.h"

#include <algorithm>
#include <string>
#include <utility>
#include <variant>

#include "models/tensors.h"

namespace scaleplan::sim {

ParamShards param_shards(const models::ModelSpec& m, int tp, int ep, int etp) {
  ParamShards p;
  p.layer_dense.assign(static_cast<size_t>(m.num_layers), 0);
  p.layer_expert.assign(static_cast<size_t>(m.num_layers), 0);
  p.layer_tensors.assign(static_cast<size_t>(m.num_layers), {});
  for (const auto& t : models::tensor_table(m)) {
    const int64_t n = models::shard_numel(t, m, tp, ep, etp);
    if (t.layer >= 0) {
      const auto i = static_cast<size_t>(t.layer);
      (t.expert ? p.layer_expert : p.layer_dense)[i] += n;
      p.layer_tensors[i].push_back(n);
    } else {
      if (t.first_stage) {
        p.first_extra += n;
        p.first_tensors.push_back(n);
      }
      if (t.last_stage) {
        p.last_extra += n;
        p.last_tensors.push_back(n);
      }
    }
  }
  // DeepSeek's MTP modules run on the last stage after the head (models::mtp_operators).
  for (const auto& t : models::mtp_tensor_table(m)) {
    const int64_t n = models::shard_numel(t, m, tp, ep, etp);
    (t.expert ? p.mtp_expert : p.last_extra) += n;
    p.last_tensors.push_back(n);
  }
  return p;
}

int PassPlan::global_chunk(int stage, int local) const {
  return stage_chunks[static_cast<size_t>(stage) * static_cast<size_t>(local_chunks) +
                      static_cast<size_t>(local)];
}

int64_t PassPlan::head_params() const {
  return params().last_extra + (embedding_copy_on_last ? tied_shard : 0);
}

int64_t PassPlan::extra_dense_params(int g) const {
  const ChunkPlan& c = chunks[static_cast<size_t>(g)];
  return (c.embedding ? params().first_extra : 0) + (c.head ? head_params() : 0);
}

int64_t PassPlan::extra_expert_params(int g) const {
  return chunks[static_cast<size_t>(g)].head ? params().mtp_expert : 0;
}

int64_t PassPlan::stage_params(int s, bool expert) const {
  const std::vector<int64_t>& per_layer = expert ? params().layer_expert : params().layer_dense;
  int64_t n = 0;
  for (size_t g = 0; g < chunks.size(); ++g) {
    const ChunkPlan& c = chunks[g];
    if (c.stage != s) continue;
    for (int i = 0; i < c.layers; ++i) n += per_layer[static_cast<size_t>(c.first_layer + i)];
    n +=
        expert ? extra_expert_params(static_cast<int>(g)) : extra_dense_params(static_cast<int>(g));
  }
  return n;
}

bool PassPlan::connected(int g, int h) const {
  return h >= 0 && h < static_cast<int>(chunks.size()) && (!dualpipe || g / pp == h / pp);
}

bool PassPlan::remote(int g, int h) const {
  return connected(g, h) &&
         chunks[static_cast<size_t>(g)].stage != chunks[static_cast<size_t>(h)].stage;
}

int PassPlan::last_microbatch(int c) const {
  const int m = static_cast<int>(microbatches);
  return dualpipe ? (c + 1) * (m / 2) - 1 : m - 1;
}

Result<PassPlan> pass_plan(const models::ModelSpec& m, const Layout& l, int64_t seq_len,
                           const FrameworkTiming& timing, std::shared_ptr<const ParamShards> shards,
                           const std::vector<int>& chunk_layers, bool with_order) {
  PassPlan p;
  p.dualpipe = l.schedule == Schedule::kDualPipe;
  if (p.dualpipe && l.zero >= 3) {
    return Status::invalid("layout: schedule=dualpipe with zero=3 is not modelled (zero=" +
                           std::to_string(l.zero) + "); DualPipe runs with ZeRO 0-2");
  }
  p.pp = l.pp;
  p.local_chunks = chunks_per_rank(l);
  p.microbatches = l.num_microbatches();
  // Layers per model chunk (DualPipe's second copy repeats the first: model_chunk).
  std::vector<int> model_counts = chunk_layers;
  if (model_counts.empty()) {
    SP_ASSIGN_OR_RETURN(model_counts, stage_layer_counts(l, m.num_layers));
  }
  const int model_chunks = l.pp * l.chunks_per_stage();
  int64_t sum = 0;
  for (int n : model_counts) sum += n;
  if (static_cast<int>(model_counts.size()) != model_chunks || sum != m.num_layers) {
    return Status::invalid("chunk_layers: " + std::to_string(model_counts.size()) +
                           " chunks holding " + std::to_string(sum) + " layers; the layout has " +
                           std::to_string(model_chunks) + " chunks and the model " +
                           std::to_string(m.num_layers) + " layers");
  }
  std::vector<int> first_layers(model_counts.size(), 0);
  for (size_t c = 1; c < model_counts.size(); ++c)
    first_layers[c] = first_layers[c - 1] + model_counts[c - 1];
  const int global_chunks = l.pp * p.local_chunks;
  p.chunks.resize(static_cast<size_t>(global_chunks));
  p.stage_chunks.resize(static_cast<size_t>(global_chunks));
  for (int s = 0; s < l.pp; ++s) {
    for (int v = 0; v < p.local_chunks; ++v) {
      const int g = chunk_of_stage(l, s, v);
      ChunkPlan& c = p.chunks[static_cast<size_t>(g)];
      c.stage = s;
      c.local = v;
      p.stage_chunks[static_cast<size_t>(s * p.local_chunks + v)] = g;
    }
  }
  for (int g = 0; g < global_chunks; ++g) {
    ChunkPlan& c = p.chunks[static_cast<size_t>(g)];
    c.model_chunk = model_chunk(l, g);
    c.first_layer = first_layers[static_cast<size_t>(c.model_chunk)];
    c.layers = model_counts[static_cast<size_t>(c.model_chunk)];
    c.embedding = c.model_chunk == 0;
    c.head = c.model_chunk == model_chunks - 1;
  }
  if (with_order) {
    SP_ASSIGN_OR_RETURN(p.order,
                        pipeline_schedule(l.schedule, l.pp, l.vpp_degree(), p.microbatches));
  }
  p.split_weight = l.schedule == Schedule::kZbH1 || two_chunks_per_rank(l.schedule);
  p.shards = std::move(shards);
  // The first and last stage each hold a copy when they are different ranks (V-shaped schedules
  // hold both ends on rank 0).
  p.embedding_copy_on_last =
      (m.tied_embeddings || m.mtp_layers > 0) && l.pp > 1 && !v_shaped(l.schedule);
  p.tied_shard = (m.vocab + l.tp - 1) / l.tp * m.hidden;
  // The layer boundary activation, hidden × 2 bytes per token: with SP each TP rank holds and
  // sends tokens/(cp·tp) of it; without, the whole tokens/cp, or its 1/tp slice followed by a TP
  // all-gather at the receiver (FrameworkTiming::p2p_scatter_gather).
  const auto tok = models::token_counts(l, seq_len);
  const bool scatter = !l.sequence_parallel() && timing.p2p_scatter_gather && l.tp > 1;
  const int64_t tokens = l.sequence_parallel() ? tok.sp : scatter ? tok.gemm / l.tp : tok.gemm;
  p.p2p_bytes = tokens * m.hidden * 2;
  if (scatter && l.pp > 1) p.p2p_gather_bytes = tok.gemm * m.hidden * 2;
  return p;
}

std::vector<DpBucket> dp_buckets(const std::vector<int64_t>& dense,
                                 const std::vector<int64_t>& expert, int64_t extra,
                                 int64_t extra_expert, Bucketing how, int64_t cap) {
  std::vector<DpBucket> out;
  const int64_t threshold = std::max<int64_t>(cap, 1);
  DpBucket b;
  for (size_t i = 0; i < dense.size(); ++i) {
    b.dense += dense[i];
    b.expert += expert[i];
    if (how == Bucketing::kPerLayer ||
        (how == Bucketing::kBySize && b.dense + b.expert >= threshold)) {
      b.after = i;
      out.push_back(b);
      b = {};
    }
  }
  b.dense += extra;
  b.expert += extra_expert;
  b.after = dense.size();
  out.push_back(b);
  return out;
}

std::optional<PassKind> chunk_pass(models::Pass p, bool split_weight) {
  switch (p) {
    case models::Pass::kForward:
      return PassKind::kForward;
    case models::Pass::kBackwardWeight:
      return split_weight ? PassKind::kBackwardWeight : PassKind::kBackwardInput;
    case models::Pass::kBackwardInput:
    case models::Pass::kRecompute:
      return PassKind::kBackwardInput;
    case models::Pass::kOptimizer:
      return std::nullopt;
  }
  return std::nullopt;
}

Result<OperatorLists> operator_lists(const models::ModelSpec& m, const Layout& l, int64_t seq_len,
                                     const models::FrameworkOps& ops, AttentionKernel attention) {
  OperatorLists out;
  for (int& f : out.first_layer) f = -1;
  auto with_kernel = [attention](std::vector<models::Op>& list) {
    for (models::Op& op : list) {
      if (auto* a = std::get_if<AttentionShape>(&op.shape)) a->kernel = attention;
    }
  };
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const int kind = m.layer_kind(layer);
    if (out.first_layer[kind] >= 0) continue;
    SP_ASSIGN_OR_RETURN(out.layer[kind],
                        models::framework_layer_operators(m, l, seq_len, layer, ops));
    with_kernel(out.layer[kind]);
    out.first_layer[kind] = static_cast<int>(layer);
  }
  SP_ASSIGN_OR_RETURN(out.embedding, models::embedding_operators(m, l, seq_len));
  if (ops.torchtitan_kernels)
    models::apply_torchtitan_embedding_kernels(out.embedding, m, l, seq_len,
                                               models::runs_autocast(ops, l));
  SP_ASSIGN_OR_RETURN(out.head, models::framework_head_operators(m, l, seq_len, ops));
  with_kernel(out.embedding);
  with_kernel(out.head);
  return out;
}

}  // namespace scaleplan::sim
