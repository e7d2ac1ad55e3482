// `model` as a library call: parameters (total, active, per component) and training FLOPs per
// token of a model preset or HF config.json, and the list of bundled presets.
//
// api::model validates the request (errors name the option) and returns a ModelOutcome whose
// to_json() is exactly `scaleplan model --json`; api::model_list's is `scaleplan model list
// --json`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/layout.h"
#include "core/status.h"
#include "models/accounting.h"
#include "models/model_spec.h"

namespace scaleplan::api {

struct ModelRequest {
  std::string model;   // preset name or HF config.json path
  int64_t seq = 4096;  // sequence length for the attention FLOPs
};

struct ModelOutcome {
  models::ModelSpec model;
  models::ParamCounts params;
  models::FlopsPerToken flops;
  int64_t seq = 0;

  Json to_json() const;
};

Result<ModelOutcome> model(const ModelRequest& request);
// The same from an already loaded model (a dict or an HF config read by the caller).
Result<ModelOutcome> model(const models::ModelSpec& spec, int64_t seq);

struct PresetSummary {
  std::string name, model_type;
  int64_t params_total = 0, params_active = 0;
};
struct ModelList {
  std::vector<PresetSummary> presets;
  Json to_json() const;
};
Result<ModelList> model_list();

// The recompute modes whose hardware FLOPs `model` reports, in order.
inline constexpr Recompute kRecomputes[] = {Recompute::kNone, Recompute::kSelective,
                                            Recompute::kFull};

// The FFN kind as config.json families name it ("swiglu", "gelu", ...).
std::string_view ffn_name(models::FfnKind k);
// Layers that apply rotary embeddings.
int64_t rope_layers(const models::ModelSpec& m);

}  // namespace scaleplan::api
