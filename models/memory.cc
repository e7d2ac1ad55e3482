// The memory model; every term, formula and source in memory.h and docs/memory-model.md.
#include "models/memory.h"

#include <algorithm>
#include <bit>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>
#include <utility>

#include "models/memory_layers.h"
#include "models/operators.h"
#include "models/operators_detail.h"
#include "models/tensors.h"

namespace scaleplan::models {
namespace {

using namespace memory_layers;  // NOLINT: memory.cc's own internals, split off for length

constexpr int64_t kAct = 2;   // bf16 activation element
constexpr int64_t kFp32 = 4;  // fp32 element

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Parameters one GPU of a stage holds, split by the group ZeRO shards them over.
struct StageParams {
  int64_t dense = 0;          // sharded over dp·cp
  int64_t expert = 0;         // sharded over the expert data-parallel group
  int64_t largest_layer = 0;  // the largest decoder layer's local parameters (ZeRO-3 gathers)
  int64_t layers = 0;         // the decoder layers' local parameters (fp8 weight copies)
};

int groups_with_ranks(const Layout& l) {
  int n = 0;
  for (int size : {l.tp, l.cp, l.dp_degree() * l.cp, l.pp, l.ep, l.etp}) n += size > 1 ? 1 : 0;
  return n;
}

}  // namespace

Bytes layer_saved_bytes(const ModelSpec& m, const Layout& l, int64_t seq_len, int64_t layer,
                        const std::vector<Op>& ops, const FrameworkMemory& fw,
                        const FrameworkOps& fw_ops) {
  Bytes saved = total_saved(ops);
  if (!op_level_sac(m, l, layer, fw_ops))
    saved += framework_layer_extra(m, l, fw, unfused_glu_half(ops), token_counts(l, seq_len));
  return saved;
}

FrameworkMemory framework_memory(FrameworkId id) {
  FrameworkMemory f;
  switch (id) {
    case FrameworkId::kMegatron:
      f.fp8_weight_copies = true;
      f.loss_softmax_in_place = true;
      return f;
    // Megatron-LM as its 2021-2022 papers ran it: Megatron's memory conventions but fp16 main
    // gradients, 2 B/param (--accumulate-allreduce-grads-in-fp32 is off for --fp16,
    // sim::Framework; the 2 + 2 + 12 B/param of Rajbhandari et al. 2020 §3.1).
    case FrameworkId::kMegatron2022:
    case FrameworkId::kDeepspeed2021:
      f.fp32_grad_accum = false;
      f.loss_softmax_in_place = true;  // the same VocabParallelCrossEntropy
      return f;
    // torchtitan: FSDP2 with fp32 sharded parameters, fp32 gradients and Adam's m and v
    // (torchtitan apply_fsdp: MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)), and
    // SwiGLU as separate SiLU and product ops (FeedForward.forward).
    case FrameworkId::kTorchtitan:
    case FrameworkId::kTorchtitan2025:
      f.fp32_params = true;
      f.unfused_glu = true;
      f.torch_cross_entropy_backward = true;
      return f;
    case FrameworkId::kNanotron:
      f.half_grad_buckets = true;
      f.flat_param_gather = true;
      f.tp_gather_buffers = 2;  // MemoryBuffer "allgather" + "allgather2"
      f.unfused_glu = true;
      f.mha_qkv_stack_saved = true;
      return f;
  }
  return f;
}

std::vector<int> nanotron_chunk_layers(const ModelSpec& m, int pp) {
  const double d_qkv = static_cast<double>(m.hidden / m.num_heads);
  const double layer_cost =
      4.0 * static_cast<double>(m.num_heads) * d_qkv * static_cast<double>(m.hidden) +
      3.0 * static_cast<double>(m.ffn) * static_cast<double>(m.hidden);
  const double head_cost = static_cast<double>(m.vocab) * static_cast<double>(m.hidden);
  const double total = layer_cost * static_cast<double>(m.num_layers) + head_cost;
  std::vector<int> counts(static_cast<size_t>(pp), 0);
  int rank = 0;
  double cumulative = 0;  // the embedding block costs 0 and sits on rank 0
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    cumulative += layer_cost;
    ++counts[static_cast<size_t>(rank)];
    const double threshold = total * static_cast<double>(rank + 1) / static_cast<double>(pp);
    if (cumulative > threshold && rank + 1 < pp) ++rank;
  }
  return counts;
}

double microbatches_in_flight(const Layout& l, int stage) {
  const int64_t p = l.pp, m = l.num_microbatches(), s = stage;
  switch (l.schedule) {
    case Schedule::kAfab:
      return static_cast<double>(m);
    case Schedule::k1F1B:
      return static_cast<double>(std::min<int64_t>(p - s, m));
    case Schedule::kZbH1:
      // Stage s defers s weight passes (sim/schedule.h), and a deferred weight pass keeps what
      // the weight gradients need (PyTorch pipelining's stage_backward_input saves the
      // intermediates feeding the weights and their gradients): every linear's input and output
      // gradient, 2T(8h + 3·ffn) bytes per SwiGLU layer at tp = 1, about the 34·T·h that 1F1B
      // saves (Korthikanti et al. 2022 without the score terms). So, as a micro-batch each, p − s
      // micro-batches before their input-gradient pass and s after it: p at every stage, stage
      // 0's 1F1B peak (Qi et al. 2023: the same peak as 1F1B, over the stages).
      return static_cast<double>(std::min<int64_t>(p, m));
    case Schedule::kInterleaved: {
      // Megatron-core schedules.py: warmup = (p − s − 1)·2 + (v − 1)·n chunk forwards, n the
      // micro-batch group (interleave_group_size), then one more before the first backward; each
      // chunk holds 1/v of the stage's layers.
      const int64_t v = l.vpp_degree();
      const int64_t n = interleave_group_size(p, m);
      const int64_t chunks = std::min<int64_t>((p - s - 1) * 2 + (v - 1) * n + 1, m * v);
      return static_cast<double>(chunks) / static_cast<double>(v);
    }
    case Schedule::kDualPipe:
      // At its peak rank s holds p − s passes of its direction-0 stage and s + 1 of its
      // direction-1 stage (deepseek-ai/DualPipe dualpipe.py, m >= 2p).
      return static_cast<double>(std::min<int64_t>(p + 1, 2 * m));
    case Schedule::kDualPipeV:
      // deepseek-ai/DualPipe dualpipev.py: at its peak rank s holds 2p − s passes of its down-arm
      // chunk and s + 1 of its up-arm chunk (m >= 2p), 2p + 1 chunk passes of half its layers.
      return static_cast<double>(std::min<int64_t>(2 * p + 1, 2 * m)) / 2.0;
    case Schedule::kZbV:
      // PyTorch's ScheduleZBVZeroBubble order: at most min(m, 2p − s) + min(m, s) or
      // min(m, 2p − 1 − s) + min(m, s + 1) chunk passes of half the rank's layers (assemble
      // weighs the two arms' chunks).
      return static_cast<double>(std::max(std::min(m, 2 * p - s) + std::min(m, s),
                                          std::min(m, 2 * p - 1 - s) + std::min(m, s + 1))) /
             2.0;
  }
  return static_cast<double>(std::min<int64_t>(p - s, m));
}

Bytes korthikanti_layer_bytes(int64_t s, int64_t b, int64_t h, int64_t a, int t, bool sp,
                              Recompute r) {
  const double sbh = static_cast<double>(s) * static_cast<double>(b) * static_cast<double>(h);
  const double att = 5.0 * static_cast<double>(a) * static_cast<double>(s) / static_cast<double>(h);
  const double td = static_cast<double>(t);
  double per_sbh = 0;
  switch (r) {
    case Recompute::kNone:  // Table 2: TP+SP sbh(34/t + 5as/(ht)); TP only sbh(10 + 24/t +
                            // 5as/(ht))
      per_sbh = sp ? (34.0 + att) / td : 10.0 + 24.0 / td + att / td;
      break;
    case Recompute::kSelective:
      per_sbh = sp ? 34.0 / td : 10.0 + 24.0 / td;
      break;
    case Recompute::kFull:
      per_sbh = sp ? 2.0 / td : 2.0;
      break;
  }
  return Bytes(static_cast<int64_t>(sbh * per_sbh + 0.5));
}

namespace {

// The activations stage s of an interleaved pipeline holds at its peak: the maximum over Megatron-
// core's pass order (sim/schedule.h: warm-up (p−s−1)·2 + (v−1)·n forwards, n the micro-batch group
// of interleave_group_size, then one forward and one backward at a time) of Σ_c passes of local
// chunk c in flight × `chunk_bytes[c]`. The k-th forward runs chunk (k mod nv) / n while
// micro-batch groups of n are full, then chunk (k − full) / r over the last group of r; the k-th
// backward runs the reverse chunk. The state after step k repeats every nv steps inside the full
// groups, so the walk covers the warm-up, one period and the stretch from the last full period to
// the end: O(n·v) per stage.
Bytes interleaved_peak(int64_t p, int64_t v, int64_t s, int64_t m,
                       const std::vector<Bytes>& chunk_bytes) {
  const int64_t n = interleave_group_size(p, m);
  const int64_t total = m * v, period = n * v, full = (m / n) * period, r = m % n;
  auto chunk_of = [&](int64_t k) { return k < full ? (k % period) / n : (k - full) / r; };
  // Forwards of chunk c among the first x, in closed form (backwards: of chunk v-1-c).
  auto forwards = [&](int64_t c, int64_t x) {
    if (x <= full) return (x / period) * n + std::clamp(x % period - c * n, int64_t{0}, n);
    return (m / n) * n + std::clamp(x - full - c * r, int64_t{0}, r);
  };
  auto weight = [&](int64_t c) { return chunk_bytes[static_cast<size_t>(c)].value(); };
  const int64_t warmup = std::min((p - s - 1) * 2 + (v - 1) * n, total);
  // The bytes in flight after step k's forward: forwards 0..warmup+k, backwards 0..k-1.
  auto state_at = [&](int64_t k) {
    int64_t b = 0;
    for (int64_t c = 0; c < v; ++c)
      b += (forwards(c, warmup + k + 1) - forwards(v - 1 - c, k)) * weight(c);
    return b;
  };
  int64_t peak = 0;
  for (int64_t c = 0; c < v; ++c) peak += forwards(c, warmup) * weight(c);  // warm-up only adds
  const int64_t steps = total - warmup;
  auto walk = [&](int64_t from, int64_t to) {
    if (from >= to) return;
    int64_t b = state_at(from);
    for (int64_t k = from;;) {
      peak = std::max(peak, b);
      if (++k >= to) break;
      b += weight(chunk_of(warmup + k)) - weight(v - 1 - chunk_of(k - 1));
    }
  };
  const int64_t first = std::min(steps, period);
  walk(0, first);
  walk(std::max(first, std::min(steps, full - warmup) - period), steps);
  return Bytes(peak);
}

// What estimate_memory needs from the tensor table under one (tp, ep, etp): per-layer shard sums
// and the embedding / head entries, so that placing them on stages is a sum over layers.
struct ShardedParams {
  std::vector<int64_t> layer_dense, layer_expert, layer_total;  // per decoder layer
  int64_t first_dense = 0, first_expert = 0;  // entries on the first stage (embedding)
  int64_t last_dense = 0, last_expert = 0;    // entries on the last stage (final norm, LM head)
  int64_t tied_dense = 0, tied_expert = 0;    // tied embedding: also on the last stage when pp > 1
  // Over the layers, entry i covering layers [0, i): sums of the above and the count of MoE
  // layers; max_total[k][i] is the largest layer_total in [i, i + 2^k). A stage's parameters then
  // cost O(1) per model chunk instead of a pass over its layers (assemble runs for every
  // candidate a plan enumerates).
  std::vector<int64_t> dense_before, expert_before, total_before, moe_before;
  std::vector<std::vector<int64_t>> max_total;

  void index(const ModelSpec& m) {
    const size_t n = layer_total.size();
    for (auto* v : {&dense_before, &expert_before, &total_before, &moe_before}) v->assign(n + 1, 0);
    for (size_t i = 0; i < n; ++i) {
      dense_before[i + 1] = dense_before[i] + layer_dense[i];
      expert_before[i + 1] = expert_before[i] + layer_expert[i];
      total_before[i + 1] = total_before[i] + layer_total[i];
      moe_before[i + 1] = moe_before[i] + (m.is_moe_layer(static_cast<int64_t>(i)) ? 1 : 0);
    }
    max_total.assign(1, layer_total);
    for (size_t w = 1; 2 * w <= n; w *= 2) {
      const std::vector<int64_t>& prev = max_total.back();
      std::vector<int64_t> next(n - 2 * w + 1);
      for (size_t i = 0; i < next.size(); ++i) next[i] = std::max(prev[i], prev[i + w]);
      max_total.push_back(std::move(next));
    }
  }
  // The largest layer_total in [b, e), b < e.
  int64_t largest_in(size_t b, size_t e) const {
    const int k = std::bit_width(e - b) - 1;
    const size_t w = size_t{1} << k;
    return std::max(max_total[static_cast<size_t>(k)][b], max_total[static_cast<size_t>(k)][e - w]);
  }
};

ShardedParams sharded_params(const ModelSpec& m, const std::vector<TensorEntry>& table, int tp,
                             int ep, int etp) {
  ShardedParams p;
  p.layer_dense.assign(static_cast<size_t>(m.num_layers), 0);
  p.layer_expert.assign(static_cast<size_t>(m.num_layers), 0);
  p.layer_total.assign(static_cast<size_t>(m.num_layers), 0);
  for (const TensorEntry& t : table) {
    const int64_t n = shard_numel(t, m, tp, ep, etp);
    if (t.layer >= 0) {
      const auto i = static_cast<size_t>(t.layer);
      (t.expert ? p.layer_expert[i] : p.layer_dense[i]) += n;
      p.layer_total[i] += n;
    }
    if (t.first_stage) (t.expert ? p.first_expert : p.first_dense) += n;
    if (t.last_stage) (t.expert ? p.last_expert : p.last_dense) += n;
    // A tied embedding is also the LM head: the last stage keeps a copy (Megatron-LM and nanotron
    // both hold it on the first and last stages and all-reduce its gradient between them). MTP
    // modules look the shifted tokens up in the same table on the last stage: Megatron-core keeps
    // a copy there too (GPTModel builds the embedding where pre_process or mtp_process).
    if (t.first_stage && (m.tied_embeddings || m.mtp_layers > 0) &&
        t.component == Component::kEmbedding && t.name.starts_with("embed_tokens")) {
      (t.expert ? p.tied_expert : p.tied_dense) += n;
    }
  }
  // The MTP modules' own parameters (eh_proj, norms, their decoder layers), on the last stage.
  for (const TensorEntry& t : mtp_tensor_table(m)) {
    (t.expert ? p.last_expert : p.last_dense) += shard_numel(t, m, tp, ep, etp);
  }
  p.index(m);
  return p;
}

// The activation side of one layout: what depends only on the operator list's inputs (tp, cp, ep,
// etp, sp, mbs, recompute, dtype).
struct ActivationParts {
  std::optional<LayerActivations> kind[2];  // [dense, MoE], for the kinds the model has
  Bytes embed_saved, head_saved;
};

// `cache`: ListSums kept across calls (the estimator's); nullptr: none.
Result<ActivationParts> activation_parts(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                         const FrameworkMemory& fw, const FrameworkOps& fw_ops,
                                         ListSumsCache* cache) {
  ActivationParts a;
  // Per layer kind (dense / MoE), computed once each, from the first layer of the kind.
  for (int64_t layer = 0; layer < m.num_layers; ++layer) {
    const int moe = m.is_moe_layer(layer) ? 1 : 0;
    if (a.kind[moe]) continue;
    SP_ASSIGN_OR_RETURN(a.kind[moe], layer_activations(m, l, seq_len, layer, fw, fw_ops, cache));
  }
  SP_ASSIGN_OR_RETURN(std::vector<Op> embed_ops, embedding_operators(m, l, seq_len));
  a.embed_saved = total_saved(embed_ops);
  // The head with the MTP modules after it on the last stage: their activations join its own
  // (incl. the fp32 softmax of the loss). Each MTP module holds a decoder layer of the last
  // layer's kind, whose list the layer sums above have built where the framework adjusts it op by
  // op as the head list does: its bytes are taken from there (issue 45: the head with the MTP
  // modules was a third of the memory model's list building).
  std::optional<Bytes> mtp_layer;
  if (m.mtp_layers > 0 && detail::layer_adjusted_op_by_op(fw_ops)) {
    SP_ASSIGN_OR_RETURN(mtp_layer,
                        layer_list_saved(m, l, seq_len, m.num_layers - 1, fw_ops, cache));
  }
  SP_ASSIGN_OR_RETURN(a.head_saved, detail::framework_head_saved(m, l, seq_len, fw_ops, mtp_layer));
  return a;
}

Result<std::vector<int>> chunk_layer_counts(const ModelSpec& m, const Layout& l,
                                            const MemoryOptions& opt) {
  if (opt.chunk_layers) {
    const std::vector<int>& chunks = *opt.chunk_layers;
    int64_t sum = 0;
    for (int c : chunks) sum += c;
    if (static_cast<int64_t>(chunks.size()) != static_cast<int64_t>(l.pp) * l.chunks_per_stage() ||
        sum != m.num_layers) {
      return Status::invalid(
          "memory: chunk_layers must list pp·vpp chunks (2·pp for dualpipev and "
          "zb-v) summing to " +
          std::to_string(m.num_layers) + " layers");
    }
    return chunks;
  }
  return stage_layer_counts(l, m.num_layers);
}

// The model proper, from the parts above. Every sum is over integers, so the order in which the
// layers are visited does not change a bit of the result.
// What torch.autocast over fp32 parameters adds (models::runs_autocast; torchtitan without
// FSDP): the bf16 copy of every cast weight (autocast_cast_params) is made in each micro-batch's
// forward and saved by its matmul for the input gradient, so all of them are alive from the end
// of the forward until each layer's backward frees its own (2 B per cast parameter at the loss);
// and the residual stream stays fp32 (the embedding runs in fp32 and fp32 + bf16 adds promote), so
// every RMSNorm, which autocast runs in fp32, stores its fp32 input: 2 B per element more than the
// list's bf16 input, for the two norms of each layer and the final norm; and every linear reading
// a norm's output stores its own bf16 cast of it.
struct AutocastMemory {
  Bytes weight_cache;
  Bytes per_mb_activations;  // on top of the list's, per micro-batch of the whole model
};
AutocastMemory autocast_memory_terms(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                     const FrameworkOps& fw_ops) {
  AutocastMemory a;
  if (!runs_autocast(fw_ops, l)) return a;
  a.weight_cache = Bytes(kAct * autocast_cast_params(m, l).total());
  const int64_t stream = token_counts(l, seq_len).sp * m.hidden;
  a.per_mb_activations = Bytes((kFp32 - kAct) * stream * (2 * m.num_layers + 1));
  // Each linear that reads a norm's output saves its own bf16 cast of it (autocast casts per
  // call): beyond the one the list counts for the attention block and the FFN, attn - 1 + ffn - 1
  // more per layer (autocast_norm_readers; torchtitan's wq, wk, wv and w1, w3: 3). Compiled, the
  // casts of one norm output are one graph node after CSE, saved once (models/inductor.h).
  for (int64_t layer = 0; layer < m.num_layers && !fw_ops.compile_model; ++layer) {
    const auto [attn, ffn] = autocast_norm_readers(m, layer);
    a.per_mb_activations += Bytes(kAct * stream * (attn - 1 + ffn - 1));
  }
  return a;
}

MemoryResult assemble(const ModelSpec& m, const Layout& l, int64_t seq_len,
                      const MemoryOptions& opt, const std::vector<int>& chunks,
                      const ShardedParams& sharded, const ActivationParts& act) {
  const int pp = l.pp;
  const auto npp = static_cast<size_t>(pp);

  // One pass over the layers: model chunk c holds the next chunks[c] layers and runs on
  // stage_of_chunk(c) (core/layout.h; in a V stage 0 holds both ends).
  auto stage_of = [&](size_t c) {
    return static_cast<size_t>(stage_of_chunk(l, static_cast<int>(c)));
  };
  const size_t last_stage = stage_of(chunks.size() - 1);
  std::vector<StageParams> params(npp);
  struct StageActs {
    int layers = 0;
    Bytes per_mb, grad_working, largest;
  };
  std::vector<StageActs> acts(npp);
  std::vector<Bytes> chunk_per_mb(chunks.size());  // one micro-batch of each chunk's layers
  {
    int64_t layer = 0;
    for (size_t c = 0; c < chunks.size(); ++c) {
      const size_t s = stage_of(c);
      StageParams& p = params[s];
      StageActs& a = acts[s];
      if (chunks[c] <= 0) continue;
      const auto b = static_cast<size_t>(layer), e = b + static_cast<size_t>(chunks[c]);
      layer += chunks[c];
      p.dense += sharded.dense_before[e] - sharded.dense_before[b];
      p.expert += sharded.expert_before[e] - sharded.expert_before[b];
      p.largest_layer = std::max(p.largest_layer, sharded.largest_in(b, e));
      p.layers += sharded.total_before[e] - sharded.total_before[b];
      const int64_t moe = sharded.moe_before[e] - sharded.moe_before[b];
      a.layers += chunks[c];
      for (const auto& [kind, count] : {std::pair{0, chunks[c] - moe}, std::pair{1, moe}}) {
        if (count == 0) continue;
        const LayerActivations& la = *act.kind[kind];
        a.per_mb += la.saved * count;
        chunk_per_mb[c] += la.saved * count;
        a.grad_working = std::max(a.grad_working, la.grad_working);
        a.largest = std::max(a.largest, la.largest_block);
      }
    }
  }
  params[0].dense += sharded.first_dense;
  params[0].expert += sharded.first_expert;
  params[last_stage].dense += sharded.last_dense;
  params[last_stage].expert += sharded.last_expert;
  if (last_stage != 0) {  // the output projection's copy of tied embeddings
    params[last_stage].dense += sharded.tied_dense;
    params[last_stage].expert += sharded.tied_expert;
  }
  // DualPipe: rank s holds stage s of one pipeline and stage pp-1-s of the other (two copies of
  // the model across the pipeline: DeepSeek-V3 report §3.2.1, "2x parameters"). Its micro-batch
  // is reported as the mean of the two stages; the activations count each direction's passes
  // (below).
  const bool dual = l.schedule == Schedule::kDualPipe && pp > 1;
  if (dual) {
    std::vector<StageParams> both(npp);
    std::vector<StageActs> mixed(npp);
    for (size_t s = 0; s < npp; ++s) {
      // The other copy's stage on rank s: its local chunk 1 (core/layout.h).
      const auto t = static_cast<size_t>(model_chunk(l, chunk_of_stage(l, static_cast<int>(s), 1)));
      both[s].dense = params[s].dense + params[t].dense;
      both[s].expert = params[s].expert + params[t].expert;
      both[s].largest_layer = std::max(params[s].largest_layer, params[t].largest_layer);
      both[s].layers = params[s].layers + params[t].layers;
      mixed[s].layers = acts[s].layers + acts[t].layers;
      mixed[s].per_mb = Bytes((acts[s].per_mb.value() + acts[t].per_mb.value()) / 2);
      mixed[s].grad_working = std::max(acts[s].grad_working, acts[t].grad_working);
      mixed[s].largest = std::max(acts[s].largest, acts[t].largest);
    }
    params = std::move(both);
    acts = std::move(mixed);
  }

  const TokenCounts tok = token_counts(l, seq_len);
  const bool sp = l.tp > 1 && l.sequence_parallel();
  const int64_t nd = static_cast<int64_t>(l.dp_degree()) * l.cp;  // ZeRO group, dense
  const FrameworkMemory& fw = opt.framework;
  const int64_t grad_bytes = fw.fp32_grad_accum ? 4 : 2;
  const int64_t vocab_local = ceil_div(m.vocab, l.tp);

  MemoryResult r;
  r.gpu_memory = opt.gpu_memory;
  r.margin = opt.margin;
  r.overhead = opt.cuda_context + opt.nccl_per_communicator * groups_with_ranks(l);
  r.stages.reserve(npp);
  for (int s = 0; s < pp; ++s) {
    const StageParams& p = params[static_cast<size_t>(s)];
    const StageActs& a = acts[static_cast<size_t>(s)];
    StageMemory st;
    st.stage = s;
    st.layers = a.layers;
    st.params = p.dense + p.expert;
    // Model states (Rajbhandari et al. 2020 §3.1; ZeRO stages §5.1-5.3).
    // Every term shards this stage's parameters alike: the ZeRO shard is computed once (the
    // memory model runs on every candidate: millions in a large MoE search, issue 45).
    const int64_t zero_sharded = zero_shard(p.dense, p.expert, l);
    auto shard = [&](bool sharded) { return sharded ? zero_sharded : p.dense + p.expert; };
    st.weights = Bytes((fw.fp32_params ? 4 : 2) * shard(l.zero >= 3));
    st.gradients = Bytes(grad_bytes * shard(l.zero >= 2));
    if (fw.half_grad_buckets && nd > 1) st.gradients += Bytes(2 * st.params);
    // Adam's m and v: 4 B each, or 2 under moments=bf16 (Layout::moments); the fp32 masters 4
    // (none where the parameters are the fp32 masters).
    const int64_t moments = l.moments == MomentDtype::kBf16 ? 2 * 2 : 2 * 4;
    st.optimizer = Bytes((fw.fp32_params ? moments : 4 + moments) * shard(l.zero >= 1));
    // FrameworkMemory::fp8_weight_copies: the decoder layers' fp8 weights and their transposes
    // (their norms and routers are a rounding error here), kept through the step.
    if (l.dtype == DType::kFp8 && fw.fp8_weight_copies && l.zero < 3) {
      st.fp8_weight_copies = Bytes(2 * p.layers);
      // FrameworkMemory::fp8_primary_weights: no bf16 copy of the decoder layers' weights.
      if (fw.fp8_primary_weights) st.weights -= Bytes(2 * p.layers);
    }
    const Bytes states = st.weights + st.gradients + st.optimizer + st.fp8_weight_copies;
    // runs_autocast requires pp = 1: this is the whole model.
    const AutocastMemory autocast = autocast_memory_terms(m, l, seq_len, opt.ops);
    st.autocast_weight_cache = autocast.weight_cache;

    // Activations of one micro-batch of the whole stage.
    Bytes per_mb = a.per_mb, largest = a.largest;
    const Bytes grad_working = a.grad_working;
    if (dual && (s == 0 || s == pp - 1)) {
      per_mb += Bytes((act.embed_saved.value() + act.head_saved.value()) / 2);  // one of each
    } else {
      if (s == 0) per_mb += act.embed_saved;
      if (static_cast<size_t>(s) == last_stage) per_mb += act.head_saved;  // incl. the loss's
    }
    per_mb += autocast.per_mb_activations;
    st.activations_per_microbatch = per_mb;
    st.in_flight = microbatches_in_flight(l, s);
    st.activations = per_mb * st.in_flight;
    // One micro-batch of global chunk g, with the embedding or the LM head where it holds them
    // (DualPipe: chunk g is stage g of either copy).
    auto chunk_bytes = [&](size_t g) {
      Bytes b = chunk_per_mb[g];
      if (g == 0) b += act.embed_saved;
      if (g + 1 == chunk_per_mb.size()) b += act.head_saved;  // incl. the loss's fp32 softmax
      return b;
    };
    if (dual && l.num_microbatches() >= 2 * int64_t{pp}) {
      // deepseek-ai/DualPipe dualpipe.py's order, counted: at its peak rank s holds p − s passes
      // of its direction-0 chunk (stage s) and s + 1 of its direction-1 chunk (stage p−1−s), p + 1
      // in all; rank 0 and rank p−1 each hold one stage with the embedding and one with the head.
      const auto su = static_cast<size_t>(s);
      st.activations = chunk_bytes(su) * static_cast<double>(pp - s) +
                       chunk_bytes(npp - 1 - su) * static_cast<double>(s + 1);
    }
    if (l.schedule == Schedule::kDualPipeV && pp > 1 && l.num_microbatches() >= 2 * int64_t{pp}) {
      // The two arms' chunks differ (stage 0 holds the embedding and the LM head with its loss):
      // 2p − s passes of the down-arm chunk and s + 1 of the up-arm one (microbatches_in_flight).
      const auto su = static_cast<size_t>(s);
      st.activations = chunk_bytes(su) * static_cast<double>(2 * pp - s) +
                       chunk_bytes(2 * npp - 1 - su) * static_cast<double>(s + 1);
    }
    if (l.schedule == Schedule::kZbV && pp > 1) {
      // PyTorch's ScheduleZBVZeroBubble order, counted (any m): the peak of rank s's chunks in
      // flight is one of two states, min(m, 2p − s) down-arm and min(m, s) up-arm passes or
      // min(m, 2p − 1 − s) and min(m, s + 1), whichever weighs more.
      const auto su = static_cast<size_t>(s);
      const int64_t m = l.num_microbatches(), p = pp;
      const Bytes down = chunk_bytes(su), up = chunk_bytes(2 * npp - 1 - su);
      auto state = [&](int64_t d, int64_t u) {
        return down * static_cast<double>(std::min(m, d)) +
               up * static_cast<double>(std::min(m, u));
      };
      st.activations = std::max(state(2 * p - s, s), state(2 * p - 1 - s, s + 1));
    }
    if (l.schedule == Schedule::kInterleaved && l.vpp_degree() > 1) {
      // Chunks of one stage differ where they hold the embedding or the LM head, and the mix of
      // chunks in flight changes along the order.
      std::vector<Bytes> local;
      for (size_t c = 0; c < static_cast<size_t>(l.vpp_degree()); ++c)
        local.push_back(chunk_bytes(c * npp + static_cast<size_t>(s)));
      st.activations = interleaved_peak(pp, l.vpp_degree(), s, l.num_microbatches(), local);
    }
    if (st.activations != per_mb * st.in_flight) {  // counted per chunk above
      st.in_flight = static_cast<double>(st.activations.value()) /
                     static_cast<double>(std::max<int64_t>(per_mb.value(), 1));
    }

    // Working set on top of the stored activations.
    if (static_cast<size_t>(s) == last_stage || (dual && s == 0)) {
      const int64_t logits = tok.gemm * vocab_local;
      // FrameworkMemory::loss_softmax_in_place: the fp32 copy is the stored softmax, already in
      // the activations.
      const bool fp32_working = fw.fp32_logits && !fw.loss_softmax_in_place;
      st.logits_transient = Bytes(logits * (kAct + (fp32_working ? kFp32 : 0)));
      // FrameworkMemory::torch_cross_entropy_backward: two fp32 gradients in the loss's backward.
      if (fw.torch_cross_entropy_backward && fw.fp32_logits && l.tp == 1)
        st.logits_transient = std::max(st.logits_transient, Bytes(2 * kFp32 * logits));
      largest = std::max(largest, Bytes(logits * (fw.fp32_logits ? kFp32 : kAct)));
    }
    st.backward_transient = grad_working;
    Bytes comm(0);
    // SP all-gather output: transient (Megatron), or the framework's persistent gather buffers,
    // alive in every phase (nanotron MemoryBuffer), counted in both peaks.
    Bytes persistent(0);
    if (sp && fw.tp_gather_buffers > 0) {
      persistent = Bytes(fw.tp_gather_buffers * tok.gemm * m.hidden * kAct);
      comm += persistent;
    } else if (sp) {
      comm += Bytes(tok.gemm * m.hidden * kAct);
    }
    if (pp > 1) comm += Bytes(2 * tok.sp * m.hidden * kAct);  // p2p: activation + gradient
    if (l.zero >= 3) comm += Bytes(2 * 2 * p.largest_layer);  // current + prefetched layer
    // ZeRO-2/3 reduce-scatter staging: one bucket (Megatron-LM DDP bucket_size 40M params).
    if (l.zero >= 2) comm += Bytes(grad_bytes * std::min<int64_t>(40'000'000, st.params));
    st.comm_buffers = comm;
    st.buffers = st.logits_transient + st.backward_transient + st.comm_buffers;
    // The loss's logits and a layer's backward gradients are not alive at the same time.
    st.fwd_bwd_peak = states + st.activations + comm + st.autocast_weight_cache +
                      std::max(st.logits_transient, st.backward_transient);

    if (fw.flat_param_gather && l.zero >= 1 && nd > 1) {
      st.optimizer_transient = Bytes(2 * (p.dense + p.expert) + 2 * shard(true));
      largest = std::max(largest, Bytes(2 * (p.dense + p.expert)));
    }
    // fp16 main gradients (Megatron-LM --fp16 without --accumulate-allreduce-grads-in-fp32): the
    // step first gives every parameter it updates an fp32 gradient
    // (_copy_model_grads_to_main_grads: main_param.grad = main_grad.float()), alive until the step
    // ends.
    if (!fw.fp32_grad_accum) st.optimizer_transient += Bytes(4 * shard(l.zero >= 1));
    st.step_peak = states + persistent + st.optimizer_transient;
    st.total = std::max(st.fwd_bwd_peak, st.step_peak);
    st.fragmentation = largest;
    st.reserved = st.total + st.fragmentation;
    if (st.reserved > r.peak_reserved) {
      r.peak_reserved = st.reserved;
      r.peak_stage = s;
    }
    r.peak_allocated = std::max(r.peak_allocated, st.total);
    r.stages.push_back(st);
  }
  r.headroom = r.gpu_memory - r.margin - r.overhead - r.peak_reserved;
  r.fits = r.gpu_memory.value() > 0 && r.headroom.value() >= 0;
  return r;
}

// Activations derive from the operator list (and the framework's per-layer extras, which depend
// on tp and recompute among its fields), so they are cached per operator_list_key.
using ActivationKey = OperatorListKey;

}  // namespace

Result<MemoryResult> estimate_memory(const ModelSpec& m, const Layout& l, int64_t seq_len,
                                     const MemoryOptions& opt) {
  SP_ASSIGN_OR_RETURN(std::vector<int> chunks, chunk_layer_counts(m, l, opt));
  const ShardedParams sharded = sharded_params(m, tensor_table(m), l.tp, l.ep, l.etp);
  SP_ASSIGN_OR_RETURN(ActivationParts act,
                      activation_parts(m, l, seq_len, opt.framework, opt.ops, nullptr));
  return assemble(m, l, seq_len, opt, chunks, sharded, act);
}

struct MemoryEstimator::Cache {
  std::vector<TensorEntry> table;
  std::mutex mu;  // guards the maps; entries are never erased, so pointers stay valid
  std::map<std::tuple<int, int, int>, std::unique_ptr<const ShardedParams>> params;
  std::map<ActivationKey, std::unique_ptr<const ActivationParts>> activations;
  ListSumsCache sums;  // the layer lists' sums that activation_parts reads (its own mutex)
};

MemoryEstimator::MemoryEstimator(ModelSpec model, int64_t seq_len, MemoryOptions options)
    : model_(std::move(model)),
      seq_len_(seq_len),
      options_(std::move(options)),
      cache_(std::make_unique<Cache>()) {
  cache_->table = tensor_table(model_);
}

MemoryEstimator::~MemoryEstimator() = default;

Result<MemoryResult> MemoryEstimator::estimate(const Layout& l) const {
  SP_ASSIGN_OR_RETURN(std::vector<int> chunks, chunk_layer_counts(model_, l, options_));
  const ShardedParams* sharded = nullptr;
  const ActivationParts* act = nullptr;
  const std::tuple<int, int, int> pkey{l.tp, l.ep, l.etp};
  const ActivationKey akey = operator_list_key(l);
  {
    std::lock_guard<std::mutex> lock(cache_->mu);
    if (auto it = cache_->params.find(pkey); it != cache_->params.end()) sharded = it->second.get();
    if (auto it = cache_->activations.find(akey); it != cache_->activations.end())
      act = it->second.get();
  }
  // Misses are computed outside the lock (two threads may both compute one; the results are
  // equal and the first stored wins). Errors are not cached: they are returned every time.
  if (sharded == nullptr) {
    auto fresh = std::make_unique<const ShardedParams>(
        sharded_params(model_, cache_->table, l.tp, l.ep, l.etp));
    std::lock_guard<std::mutex> lock(cache_->mu);
    sharded = cache_->params.try_emplace(pkey, std::move(fresh)).first->second.get();
  }
  if (act == nullptr) {
    SP_ASSIGN_OR_RETURN(
        ActivationParts parts,
        activation_parts(model_, l, seq_len_, options_.framework, options_.ops, &cache_->sums));
    auto fresh = std::make_unique<const ActivationParts>(std::move(parts));
    std::lock_guard<std::mutex> lock(cache_->mu);
    act = cache_->activations.try_emplace(akey, std::move(fresh)).first->second.get();
  }
  return assemble(model_, l, seq_len_, options_, chunks, *sharded, *act);
}

}  // namespace scaleplan::models
