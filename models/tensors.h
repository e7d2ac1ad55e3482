// The tensor table: every parameter tensor of a model, once, with its shape and how it is sharded.
//
// Parameter counts, weight/gradient/optimizer bytes, and the weight shapes used for FLOPs all
// derive from this table. Each entry is one tensor of one decoder layer (or of the embedding / head
// / final norm), with `count` copies (e.g. num_experts for a routed expert's matrix). Per-layer
// entries carry the layer index; which pipeline stage holds a layer is the layout's business.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/layout.h"
#include "models/model_spec.h"

namespace scaleplan::models {

enum class Component {
  kEmbedding,      // token (and learned position) embeddings
  kAttention,      // q/k/v/o projections, MLA down/up projections, their biases, q/k norms
  kMlp,            // dense FFN
  kRouter,         // MoE gate
  kRoutedExperts,  // routed expert FFNs
  kSharedExperts,  // shared expert FFNs
  kNorm,           // per-layer norms and the final norm
  kLmHead,         // output projection (absent when tied)
};
std::string_view to_string(Component c);

// How a tensor is split across the tensor-parallel group (Megatron's column/row parallel linears).
enum class TpSplit {
  kReplicated,  // every TP rank holds all of it (norms, router, biases of row-parallel linears)
  kColumn,      // output dimension split (q/k/v, gate/up, column-parallel biases)
  kRow,         // input dimension split (o_proj, down_proj)
  kVocab,       // vocabulary dimension split (embedding, LM head)
  kKvColumn,    // k/v projections: split by tp when kv heads divide, else replicated kv heads
};

struct TensorEntry {
  std::string name;  // "layers.{l}.self_attn.q_proj.weight"-like, without the layer
  Component component;
  std::vector<int64_t> shape;  // [out, in] for linear weights, [n] for vectors
  int64_t count = 1;           // copies (experts)
  int64_t layer = -1;          // decoder layer index, -1 for embedding/head/final norm
  bool first_stage = false;    // lives on the first pipeline stage (embedding)
  bool last_stage = false;     // lives on the last pipeline stage (final norm, LM head)
  TpSplit tp_split = TpSplit::kReplicated;
  bool expert = false;    // on the expert grid: split over ep (count) and etp (tp_split)
  int64_t numel() const;  // product of shape times count
};

// The whole table. Per-layer tensors are listed for every layer (layers may differ: dense vs MoE).
// Order: embedding (first stage), layers 0..L-1, final norm and LM head (last stage). Tied
// embeddings have no lm_head entry; under pipeline parallelism the last stage then holds a copy of
// embed_tokens for the output projection (Megatron-LM), which is the memory model's business.
// DeepSeek's multi-token-prediction modules are not in this table (see mtp_tensor_table).
std::vector<TensorEntry> tensor_table(const ModelSpec& m);
// The entries of tensor_table(m) of decoder layer `layer` (0 <= layer < num_layers), in order,
// without building the rest of the table.
std::vector<TensorEntry> layer_tensor_table(const ModelSpec& m, int64_t layer);

// The tensors of DeepSeek's MTP modules (m.mtp_layers of them; empty when 0), with layer indices
// num_layers, num_layers+1, ... and last_stage set. Their embedding and output head are shared
// with the main model and not repeated. Published totals (DeepSeek-V3 671B) exclude these.
std::vector<TensorEntry> mtp_tensor_table(const ModelSpec& m);

// Elements of `t` held by one GPU under (tp, ep, etp): TP/ETP split per tp_split, experts over ep.
// A kKvColumn tensor with fewer kv heads than tp keeps one kv head per rank (replicated).
int64_t shard_numel(const TensorEntry& t, const ModelSpec& m, int tp, int ep, int etp);

}  // namespace scaleplan::models
