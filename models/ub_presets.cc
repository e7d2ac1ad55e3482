#include "models/ub_presets.h"

namespace scaleplan::models {

namespace {

// The dataclasses' defaults (NeMo v2.2.0 nemo/collections/llm/recipes/tp_overlap_configs/
// userbuffers.py:25-58; Megatron-Bridge v0.3.0 src/megatron/bridge/training/comm_overlap.py:
// 42-74): RingExchangeOverlapCfg num_sm 1, set_sm_margin False, aggregate False, atomic_gemm
// False; PipelineOverlapCfg and BulkOverlapCfg name num_sm and set_sm_margin each time. Keys a
// preset leaves out keep TE's get_default_config (base.py:555-568: ub_cfg.update), so a
// ring-exchange proj/fc2 fprop keeps the pipeline's num_splits 4, which a ring exchange ignores.
constexpr UbGemmConfig ring(bool aggregate = false, int num_sm = 1, bool margin = false) {
  return {UbMethod::kRingExchange, num_sm, margin, 0, aggregate, false};
}
constexpr UbGemmConfig pipe(int num_sm, bool margin = true, int splits = 4) {
  return {UbMethod::kPipeline, num_sm, margin, splits, false, false};
}
constexpr UbGemmConfig bulk(int num_sm, bool margin = false) {
  return {UbMethod::kBulk, num_sm, margin, 0, false, false};
}
// A row by the GEMMs' names (designated initializers keep UbGemm's order).
struct Row {
  UbGemmConfig qkv_fprop, fc1_fprop, proj_fprop, fc2_fprop, proj_dgrad, fc2_dgrad, qkv_dgrad,
      fc1_dgrad, qkv_wgrad, fc1_wgrad;
};
constexpr std::array<UbGemmConfig, kUbGemms> gemms(const Row& r) {
  return {r.qkv_fprop, r.fc1_fprop, r.proj_fprop, r.fc2_fprop, r.proj_dgrad,
          r.fc2_dgrad, r.qkv_dgrad, r.fc1_dgrad,  r.qkv_wgrad, r.fc1_wgrad};
}

// clang-format off
const UbPreset kPresets[] = {
    {"te-default",
     "NVIDIA/TransformerEngine d0067d0 transformer_engine/pytorch/module/base.py:350-396 "
     "(bulk set_sm_margin True there, False here)",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(16), .fc2_fprop = pipe(16),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(16), .fc1_dgrad = bulk(16),
            .qkv_wgrad = bulk(16), .fc1_wgrad = bulk(16)})},
    // NeMo 2.2 (the NeMo of the 25.02 containers; identical to v2.2.1), which dgxc-benchmarking
    // v25.04.01 llama3.1/pretrain_llama31.py:78-99,137-140 picks by model size, GPU and precision.
    {"nemo-2.2/userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "NVIDIA/NeMo v2.2.0 (7192a2c) "
     "nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py:79-90",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(24), .fc2_fprop = pipe(16),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(4), .fc1_dgrad = bulk(2),
            .qkv_wgrad = bulk(24), .fc1_wgrad = bulk(4)})},
    {"nemo-2.2/userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "NVIDIA/NeMo v2.2.0 (7192a2c) "
     "nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py:92-103",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(24), .fc2_fprop = pipe(16),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(4), .fc1_dgrad = bulk(2),
            .qkv_wgrad = bulk(24), .fc1_wgrad = bulk(4)})},
    {"nemo-2.2/userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192", "NVIDIA/NeMo v2.2.0 "
     "(7192a2c) nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py:132-143",
     gemms({.qkv_fprop = ring(true), .fc1_fprop = ring(true), .proj_fprop = pipe(24),
            .fc2_fprop = pipe(8), .proj_dgrad = ring(true), .fc2_dgrad = ring(true),
            .qkv_dgrad = bulk(2), .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(24),
            .fc1_wgrad = bulk(2)})},
    {"nemo-2.2/userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192", "NVIDIA/NeMo v2.2.0 "
     "(7192a2c) nemo/collections/llm/recipes/tp_overlap_configs/userbuffers.py:145-156",
     gemms({.qkv_fprop = ring(true), .fc1_fprop = ring(true), .proj_fprop = pipe(24),
            .fc2_fprop = pipe(8), .proj_dgrad = ring(true), .fc2_dgrad = ring(true),
            .qkv_dgrad = bulk(2), .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(24),
            .fc1_wgrad = bulk(2)})},
    // dgxc-benchmarking v25.04.01 GPT-3 175B (NeMo launcher, NeMo 24.12): its own
    // ub_tp_comm_overlap_cfg, which NeMo v2.1.0 megatron_gpt_model.py:787-806 hands to TE.
    {"dgxc-25.04.01/gpt3_175b_hydra", "NVIDIA/dgxc-benchmarking v25.04.01 (85380ff) "
     "nemo_megatron/cfg/gpt3_175b_hydra.yaml:176-220, tp_comm_atomic_ag/rs false at :120-121",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(24), .fc2_fprop = pipe(20),
            .proj_dgrad = ring(), .fc2_dgrad = ring(true), .qkv_dgrad = bulk(4),
            .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(8), .fc1_wgrad = bulk(4)})},
    // Megatron-Bridge v0.3.0 (the Megatron-Bridge of the 26.02 containers), which
    // scripts/performance/configs/llama/llama3_llm_pretrain.py:64-67,98-101,200-203 (70B) and
    // llama31_llm_pretrain.py:60-63,93-96,185-188 (405B) pick: the H100 presets on H100, the B200
    // ones on B200, B300, GB200 and GB300; bf16 for bf16, fp8 for every other precision.
    {"mbridge-0.3/userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192", "NVIDIA-NeMo/Megatron-Bridge "
     "v0.3.0 (21b02e0) src/megatron/bridge/training/comm_overlap.py:95-106",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(24), .fc2_fprop = pipe(16),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(4), .fc1_dgrad = bulk(2),
            .qkv_wgrad = bulk(24), .fc1_wgrad = bulk(4)})},
    {"mbridge-0.3/userbuffers_fp8_h100_h8192_tp4_mbs1_seqlen8192", "NVIDIA-NeMo/Megatron-Bridge "
     "v0.3.0 (21b02e0) src/megatron/bridge/training/comm_overlap.py:108-119",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = ring(false, 1, true),
            .fc2_fprop = ring(false, 1, true), .proj_dgrad = ring(), .fc2_dgrad = ring(),
            .qkv_dgrad = bulk(4), .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(24),
            .fc1_wgrad = bulk(4)})},
    {"mbridge-0.3/userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", "NVIDIA-NeMo/Megatron-Bridge "
     "v0.3.0 (21b02e0) src/megatron/bridge/training/comm_overlap.py:121-132",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(32), .fc2_fprop = pipe(16),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(16), .fc1_dgrad = bulk(2),
            .qkv_wgrad = bulk(24), .fc1_wgrad = bulk(4)})},
    {"mbridge-0.3/userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", "NVIDIA-NeMo/Megatron-Bridge "
     "v0.3.0 (21b02e0) src/megatron/bridge/training/comm_overlap.py:134-145",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = ring(false, 1, true),
            .fc2_fprop = ring(false, 1, true), .proj_dgrad = ring(), .fc2_dgrad = ring(),
            .qkv_dgrad = bulk(4), .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(24),
            .fc1_wgrad = bulk(4)})},
    {"mbridge-0.3/userbuffers_bf16_h100_h16384_tp8_cp2_mbs1_seqlen8192",
     "NVIDIA-NeMo/Megatron-Bridge v0.3.0 (21b02e0) src/megatron/bridge/training/"
     "comm_overlap.py:148-159",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(24), .fc2_fprop = pipe(8),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(2), .fc1_dgrad = bulk(2),
            .qkv_wgrad = bulk(24), .fc1_wgrad = bulk(2)})},
    {"mbridge-0.3/userbuffers_fp8_h100_h16384_tp8_cp2_mbs1_seqlen8192",
     "NVIDIA-NeMo/Megatron-Bridge v0.3.0 (21b02e0) src/megatron/bridge/training/"
     "comm_overlap.py:161-172",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = ring(false, 1, true),
            .fc2_fprop = ring(false, 1, true), .proj_dgrad = ring(), .fc2_dgrad = ring(),
            .qkv_dgrad = bulk(2), .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(24),
            .fc1_wgrad = bulk(2)})},
    {"mbridge-0.3/userbuffers_bf16_b200_h16384_tp4_cp2_mbs1_seqlen8192",
     "NVIDIA-NeMo/Megatron-Bridge v0.3.0 (21b02e0) src/megatron/bridge/training/"
     "comm_overlap.py:174-185",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = pipe(32), .fc2_fprop = pipe(8),
            .proj_dgrad = ring(), .fc2_dgrad = ring(), .qkv_dgrad = bulk(8), .fc1_dgrad = bulk(2),
            .qkv_wgrad = bulk(24), .fc1_wgrad = bulk(2)})},
    {"mbridge-0.3/userbuffers_fp8_b200_h16384_tp4_cp2_mbs1_seqlen8192",
     "NVIDIA-NeMo/Megatron-Bridge v0.3.0 (21b02e0) src/megatron/bridge/training/"
     "comm_overlap.py:187-198",
     gemms({.qkv_fprop = ring(), .fc1_fprop = ring(), .proj_fprop = ring(false, 1, true),
            .fc2_fprop = ring(false, 1, true), .proj_dgrad = ring(), .fc2_dgrad = ring(),
            .qkv_dgrad = bulk(8), .fc1_dgrad = bulk(2), .qkv_wgrad = bulk(32),
            .fc1_wgrad = bulk(8)})},
};
// clang-format on

}  // namespace

std::string_view to_string(UbMethod m) {
  switch (m) {
    case UbMethod::kRingExchange:
      return "ring_exchange";
    case UbMethod::kPipeline:
      return "pipeline";
    case UbMethod::kBulk:
      return "bulk";
  }
  return "?";
}

std::string_view to_string(UbGemm g) {
  static constexpr std::string_view kNames[kUbGemms] = {
      "qkv_fprop", "fc1_fprop", "proj_fprop", "fc2_fprop", "proj_dgrad",
      "fc2_dgrad", "qkv_dgrad", "fc1_dgrad",  "qkv_wgrad", "fc1_wgrad"};
  return kNames[static_cast<size_t>(g)];
}

std::span<const UbPreset> ub_presets() { return kPresets; }

const UbPreset& te_default_ub_preset() { return kPresets[0]; }

const UbPreset* find_ub_preset(std::string_view name) {
  for (const UbPreset& p : kPresets)
    if (p.name == name) return &p;
  return nullptr;
}

}  // namespace scaleplan::models
