// Exact parameter and FLOP accounting, derived from the tensor table.
//
// Parameters: total (every tensor, the MTP modules excluded as in published totals) and active
// (per token: top_k routed experts instead of all). FLOPs per token of training, counting a
// multiply-add as 2 FLOPs: forward 2·(active matmul params) + attention scores and values
// (causal: half of the s×s work), backward 2× forward (Narayanan et al. 2021; Chowdhery et al.
// 2022 Appendix B). Model FLOPs exclude recomputation; hardware FLOPs add the recomputed forward
// (selective: the attention core; full: the whole forward).
#pragma once

#include <cstdint>
#include <map>

#include "core/layout.h"
#include "models/model_spec.h"
#include "models/tensors.h"

namespace scaleplan::models {

struct ParamCounts {
  int64_t total = 0;
  int64_t active = 0;  // per token
  std::map<Component, int64_t> by_component;  // total, per component
  int64_t embedding = 0;  // input embedding (and position table) only
};
ParamCounts count_params(const ModelSpec& m);

struct FlopsPerToken {
  double forward = 0;          // matmuls + attention, model FLOPs
  double backward = 0;         // 2 × forward
  double attention_forward = 0;  // the s-dependent attention part of `forward` (QK^T and PV)
  double model() const { return forward + backward; }
  // Hardware FLOPs: model FLOPs plus what recomputation runs again.
  double hardware(Recompute r) const;
  double selective_recompute = 0;  // attention core forward, run again under selective recompute
};
// Training FLOPs per token at sequence length `seq` (causal attention).
FlopsPerToken flops_per_token(const ModelSpec& m, int64_t seq);

}  // namespace scaleplan::models
