#pragma once
// Transformer Engine's userbuffers TP-overlap configurations as the training recipes set them: one
// row per named preset (NeMo's and Megatron-Bridge's `TransformerLayerTPOverlapCfg`, a launcher's
// `ub_tp_comm_overlap_cfg`), each GEMM's method, SMs and splits, with the file and line it comes
// from. apply_tp_comm_overlap (models/operators.h) reads a layer's pairs from one of them; without
// a preset it reads te_default_ub_preset(). The table is static, immutable data: the pointers
// find_ub_preset returns stay valid for the program's life and may be shared across threads.

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace scaleplan::models {

// TE's overlap methods (transformer_engine/pytorch/module/base.py, initialize_ub):
//   kRingExchange  CommOverlapP2P: the GEMM runs in tp chunks (tp/2 with `aggregate`), the chunks
//                  move by the copy engine (`use_ce`), a reduce-scatter ends with one reduction
//                  kernel (comm_gemm_overlap.cpp split_overlap_ag :1044, split_overlap_rs :1295)
//   kPipeline      CommOverlap reduce-scatter: the GEMM in `num_splits` chunks, the reduce-scatter
//                  kernels on `num_sm` SMs (split_overlap_rs :611-760)
//   kBulk          one SM kernel of `num_sm` CTAs beside the whole GEMM (bulk_overlap :444-501)
enum class UbMethod : uint8_t { kRingExchange, kPipeline, kBulk };
std::string_view to_string(UbMethod m);  // "ring_exchange", "pipeline", "bulk"

// One GEMM's overlap configuration, as TE's add_ub takes it.
struct UbGemmConfig {
  UbMethod method = UbMethod::kRingExchange;
  int num_sm = 1;              // SMs of the communication kernels
  bool set_sm_margin = false;  // the GEMM is launched on sm_count - num_sm SMs (_math_sms)
  int num_splits = 0;          // pipeline: the GEMM's chunks; ring exchange: unused (tp chunks)
  bool aggregate = false;      // ring exchange all-gather: two chunks per GEMM, tp/2 GEMMs
  bool atomic_gemm = false;    // one atomic GEMM signalling chunk by chunk (false in every row)
};

// The GEMMs TE's initialize_ub configures, by its names.
enum class UbGemm : uint8_t {
  kQkvFprop,   // all-gather into the column-parallel qkv linear
  kFc1Fprop,   // all-gather into fc1
  kProjFprop,  // reduce-scatter out of the row-parallel proj (o) linear
  kFc2Fprop,   // reduce-scatter out of fc2 (down)
  kProjDgrad,  // all-gather of proj's output gradient into its dgrad
  kFc2Dgrad,   // the same for fc2
  kQkvDgrad,   // re-gather of qkv's input beside qkv's dgrad
  kFc1Dgrad,   // the same for fc1
  kQkvWgrad,   // reduce-scatter of qkv's input gradient beside qkv's wgrad
  kFc1Wgrad,   // the same for fc1
};
inline constexpr int kUbGemms = 10;
std::string_view to_string(UbGemm g);  // TE's name: "qkv_fprop", ...

struct UbPreset {
  std::string_view name;    // "<recipes>/<preset>", e.g. "nemo-2.2/userbuffers_fp8_h100_h8192_..."
  std::string_view source;  // repository, tag or commit, file:line of the preset
  std::array<UbGemmConfig, kUbGemms> gemms;
  const UbGemmConfig& operator[](UbGemm g) const { return gemms[static_cast<size_t>(g)]; }
};

// Every preset of the table, TE's defaults first.
std::span<const UbPreset> ub_presets();
// TE's get_default_config (base.py:375-396 at d0067d0), except bulk's set_sm_margin (TE: True),
// which the simulator keeps False as every recipe preset sets it (docs/simulator.md, "TP
// communication overlap"): what `simulate --tp-comm-overlap` and a record without a preset run.
const UbPreset& te_default_ub_preset();
// The preset named `name`; nullptr when the table has none.
const UbPreset* find_ub_preset(std::string_view name);

}  // namespace scaleplan::models
