// The Megatron-Bridge export (`--emit megatron-bridge`): a chosen layout as a recipe run with
// Hydra/OmegaConf overrides, for NVIDIA-NeMo/Megatron-Bridge v0.6.0 (51885cf, 2026-08-19), whose
// Megatron-core is its submodule 3rdparty/Megatron-LM at cd4afff (2026-07-25).
//
// Megatron-Bridge's entry, `scripts/training/run_recipe.py --recipe NAME --mode pretrain
// --dataset mock KEY=VALUE...`, builds the recipe's `ConfigContainer`, applies the trailing
// overrides to it through an OmegaConf tree in struct mode (an unknown key fails;
// training/utils/omegaconf_utils.py parse_hydra_overrides), then `ConfigContainer.validate()`
// computes the data-parallel size (world / (tp·pp·cp), get_data_parallel_size) and the
// micro-batch count follows (gbs / (mbs·dp), init_num_microbatches_calculator).
//
// The recipe is the one the model maps to (Llama 3 8B and 70B, DeepSeek-V3: the H100 recipes,
// whose provider AutoBridge builds from the model's Hugging Face config), otherwise the vanilla
// GPT recipe (a bare GPTModelProvider) with the whole model shape in overrides. Every layout key
// and every field of the model shape the simulation used is written as an override, so what the
// recipe set for its own layout (DeepSeek-V3's pipeline layout for pp = 16, its HybridEP
// dispatcher) does not survive into the run. Definitions checked against:
// export/frameworks/megatron-bridge.json (scripts/framework_defs/extract_megatron_bridge.py),
// test tests/export/new_exports/check_new_exports.py. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "export/exporters.h"

namespace scaleplan::planner {

inline constexpr std::string_view kMegatronBridgeVersion = "v0.6.0";
inline constexpr std::string_view kMegatronBridgeCommit = "51885cf";

// The recipe function `--recipe` names for this model: the H100 recipe whose AutoBridge reads
// the model's Hugging Face checkpoint when the model is one of those (by its preset name), the
// vanilla GPT recipe otherwise.
std::string megatron_bridge_recipe(const models::ModelSpec& m);

Result<Export> export_megatron_bridge(const ExportInput& in);

}  // namespace scaleplan::planner
