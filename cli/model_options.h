// Help texts of the options shared by the subcommands that take a model (simulate, memory, plan,
// validate); the values are read by api/options.h.
#pragma once

namespace scaleplan::cli {

inline constexpr const char* kMoeImbalanceHelp =
    "MoE load imbalance: max/mean tokens per expert-parallel rank (>= 1; default 1, balanced). "
    "The busiest rank's expert GEMMs and all-to-alls set the pace";

inline constexpr const char* kMoeDispatcherHelp =
    "MoE token dispatcher: alltoall (default; every token copy crosses the all-to-all) or deepep "
    "(across nodes a token crosses the network once per destination node)";

inline constexpr const char* kHostLaunchHelp =
    "CPU time to issue one kernel or collective, e.g. 40us, as a profiler trace of your run "
    "shows: replaces the framework's own (nanotron, torchtitan: 10us; megatron: none, its host "
    "runs ahead of the GPU) and keeps its extra kernels and blocking receives; 0 turns the host "
    "model off (docs/simulator.md, \"Host issue\")";

inline constexpr const char* kFrameworkHelp =
    "megatron (default; Megatron-core), megatron-2022 (Megatron-LM of its 2021-2022 papers), "
    "deepspeed-2021 (its GPT under DeepSpeed's early-2021 ZeRO-3), nanotron, or torchtitan "
    "(eager, no torch.compile; torchtitan-2025: on PyTorch <= 2.8): memory, timing and host "
    "conventions";

}  // namespace scaleplan::cli
