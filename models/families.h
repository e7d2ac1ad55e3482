// The model families scaleplan reads, by Hugging Face model_type, and the ones it refuses.
//
// A config.json names its family in model_type, and the family decides what the file does not
// say: whether the FFN is gated, the activation when none is named, the norm, which linears carry
// biases, whether embeddings are tied by default, the extra norms and residual wiring. Each entry
// below is transformers' modeling_<type>.py / configuration_<type>.py as of v4.57 (the source of
// every default, cited per family in families.cc). A model_type that is not listed as supported is
// an invalid-input error that names it and says why ("model_type 'mamba' is not supported:
// state-space layers are not modelled"): never read as another family. Plain data; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace scaleplan::models {

// What a family's layers are, beyond the fields its config.json carries.
enum FamilyTrait : uint32_t {
  kGatedFfn = 1u << 0,           // act(gate)·up, down (Llama's MLP); else fc1, act, fc2 (GPT-2)
  kLayerNormFamily = 1u << 1,    // LayerNorm with a bias; else RMSNorm
  kTiedByDefault = 1u << 2,      // tie_word_embeddings defaults to true
  kQkvBias = 1u << 3,            // q/k/v biases always (Qwen2)
  kAllLinearBias = 1u << 4,      // every linear has a bias (GPT-2)
  kAttentionBiasOn = 1u << 5,    // attention_bias defaults to true (GPT-NeoX)
  kMlpBiasOn = 1u << 6,          // mlp_bias defaults to true (gpt-oss, GPT-NeoX)
  kQkNorm = 1u << 7,             // RMSNorm on q and k per head, with weights (Qwen3, Gemma-3)
  kSandwichNorm = 1u << 8,       // post-branch norms too (Gemma-2/3)
  kParallelResidual = 1u << 9,   // use_parallel_residual, default true (GPT-NeoX)
  kLearnedPositions = 1u << 10,  // learned position table, no RoPE (GPT-2)
  kAttentionSinks = 1u << 11,    // one sink logit per head (gpt-oss)
  kMultimodal = 1u << 12,        // a wrapper: the language model is its text_config
};

struct Family {
  std::string_view model_type;
  uint32_t traits = 0;
  std::string_view act;  // the activation when the config names none
  // For a multimodal wrapper (kMultimodal): the text_config's model_type when it names none.
  std::string_view text_type;
  // Fields that real checkpoints omit and the config class fills in (HF writes only the
  // non-default ones): a JSON object merged under the file's own keys; "" none.
  std::string_view defaults;
  bool has(FamilyTrait t) const { return (traits & t) != 0; }
};

// The family of `model_type`, or an invalid-input error naming it with the reason it is refused:
// a known architecture scaleplan does not model (state-space, recurrent, encoder-decoder,
// encoder-only layers...) or an unknown one (the supported types are listed).
Result<const Family*> find_family(std::string_view model_type);

// The supported model types, in table order.
std::vector<std::string_view> supported_model_types();

}  // namespace scaleplan::models
