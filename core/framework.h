// Which training framework a run uses: the one place where framework names are read.
//
// A framework is a named set of conventions (how it stores memory, when it communicates, which
// kernels it launches, what its host costs): today's Megatron-core ("megatron"), the Megatron-LM of
// its 2021-2022 papers ("megatron-2022"), DeepSpeed's ZeRO-3 of early 2021 ("deepspeed-2021"),
// nanotron, and torchtitan in eager mode on PyTorch >= 2.9 ("torchtitan") or <= 2.8
// ("torchtitan-2025"). Every folder keys its part of the conventions on FrameworkId
// (models::framework_memory and framework_ops, sim/framework.cc's timing and host issue), and
// sim::Framework holds them all as one value; nothing below the command line compares framework
// names but the functions here.
//
// Two ways in: a name the user gives (`--framework`), and the free text and publication date of a
// published run (a validation record's "framework" field, "Megatron-LM (2021)", "nanotron",
// "torchtitan + torch.compile"), which resolve_run_framework turns into the conventions the run
// was trained under. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "core/status.h"

namespace scaleplan {

enum class FrameworkId : uint8_t {
  kMegatron,      // Megatron-core (Megatron-LM since 2023, NeMo, Megatron-Bridge)
  kMegatron2022,  // Megatron-LM v2.x-v3.0, as Narayanan et al. 2021 and Korthikanti et al. 2022 ran
                  // it
  kDeepspeed2021,   // megatron-2022's model code under DeepSpeed's ZeRO-3 of early 2021
  kNanotron,        // huggingface/nanotron
  kTorchtitan,      // pytorch/torchtitan, eager, PyTorch >= 2.9
  kTorchtitan2025,  // pytorch/torchtitan, eager, its 2024-2025 releases on PyTorch <= 2.8
};
inline constexpr int kNumFrameworks = 6;

// "megatron", "megatron-2022", "deepspeed-2021", "nanotron", "torchtitan", "torchtitan-2025".
std::string_view to_string(FrameworkId f);
// One of the names above, or "megatron-lm" / "Megatron-LM" for megatron. The error names
// `framework` and lists the names.
Result<FrameworkId> parse_framework(std::string_view name);
// Whether `f` is one of torchtitan's convention sets.
inline bool is_torchtitan(FrameworkId f) {
  return f == FrameworkId::kTorchtitan || f == FrameworkId::kTorchtitan2025;
}

// Whether `a` and `b` are versions of one framework (megatron and megatron-2022; torchtitan and
// torchtitan-2025).
bool same_family(FrameworkId a, FrameworkId b);

// The framework a published run names in free text ("Megatron-LM (2021)", "nanotron", "NeMo 25.02
// container (... Megatron-Core)", "torchtitan + torch.compile", "DeepSpeed ZeRO-3 ..."), in order
// of precedence (case-insensitive): text containing "nanotron" is nanotron; text starting with
// "megatron" is Megatron-LM; then "torchtitan", with `compiled` when it names torch.compile;
// "deepspeed"; anything else is kOther. Whose recipes configured a Megatron-core run (validate
// infers the options they set): "megatron-bridge" in the text is Megatron-Bridge's, else "nemo"
// NeMo's ("nemo 2 scripts": NeMo 2's performance scripts).
enum class FrameworkFamily : uint8_t { kMegatron, kNanotron, kTorchtitan, kDeepspeed, kOther };
enum class RunRecipes : uint8_t { kNone, kMegatronBridge, kNemo, kNemo2 };
struct RunFramework {
  FrameworkFamily family = FrameworkFamily::kOther;
  bool compiled = false;  // torchtitan under torch.compile
  RunRecipes recipes = RunRecipes::kNone;
  bool megatron_bridge_first = false;  // the text starts with "megatron-bridge"
  bool dgxc = false;                   // "dgxc-benchmarking" in the text (NVIDIA's recipes)
  bool year_2021 = false;              // "(2021)" in the text (Megatron-LM as of its 2021 paper)
};
RunFramework classify_run_framework(std::string_view text);

// The conventions a published run was trained under, from its framework and its publication month
// (year·12 + month − 1; nullopt: undated):
//  - nanotron's for nanotron;
//  - DeepSpeed's ZeRO-3 of early 2021 ("deepspeed-2021") for DeepSpeed runs published before July
//    2021, when DeepSpeed PR #1188 (June 2021) dropped the synchronization before every gather and
//    added coalesced gathers;
//  - torchtitan's eager conventions for torchtitan runs that do not name torch.compile:
//    "torchtitan-2025" (composite RMSNorm) for those published before October 2025, when PyTorch
//    2.9 brought the fused RMSNorm kernel, "torchtitan" for later or undated ones; a compiled
//    torchtitan run fuses what the eager conventions add, so Megatron-core's are the closer ones
//    (with torchtitan's attention kernel: `attention_of`);
//  - the Megatron-LM of 2021-22 ("megatron-2022": unfused attention core, fp16, DP reduction after
//    the backward, blocking pipeline sends) for other runs published before 2023, since
//    FlashAttention (May 2022) reached Megatron-LM as --use-flash-attn in 2023 and
//    --overlap-grad-reduce came with Megatron-core the same year;
//  - today's Megatron-core ("megatron") for the rest, later or undated.
struct RunConventions {
  FrameworkId framework = FrameworkId::kMegatron;
  // Whose attention kernel choice applies where it is not the conventions' own (a compiled
  // torchtitan run: SDPA's backend order is torchtitan's, compiled or not); nullopt: the
  // conventions' own.
  std::optional<FrameworkId> attention_of;
};
RunConventions resolve_run_framework(const RunFramework& run, std::optional<int> month);

}  // namespace scaleplan
