// torchtitan under torch.compile (`[compile] enable = true`): what Inductor runs in place of the
// eager kernels of a decoder block and of the loss. docs/simulator.md, "torchtitan with
// torch.compile", gives the sources; the conventions in brief:
//  - torchtitan compiles each TransformerBlock on its own (apply_compile, fullgraph=True) when
//    "model" is in compile.components, and the loss function when "loss" is
//    (torchtitan/models/llama3/infra/parallelize.py:256-269, components/loss.py:33-35 at v0.2.2);
//    the embedding, the final norm, the LM head, AccumulateGrad and the optimizer stay eager.
//  - Inductor leaves matmuls to cuBLAS and SDPA to cuDNN (extern kernels, which its scheduler never
//    fuses: Scheduler.can_fuse, "node1 is extern or nop") and generates one Triton kernel per chain
//    of element-wise and reduction ops between them, which reads the chain's inputs and writes its
//    outputs once. So every memory-bound kernel of the eager block is replaced by the fused kernels
//    below, each a MemoryBoundShape whose bytes are its inputs plus its outputs.
//  - The weights' fp32 -> bf16 casts of autocast are graph ops whose only consumer is a matmul:
//    they stay one kernel per weight, and the min-cut partitioner saves their bf16 outputs (a node
//    a matmul reads in the backward "must be materialized", so it is never recomputed:
//    torch/_functorch/partitioners.py should_ban_recomputation / is_materialized_backwards); the
//    weight gradient's bf16 -> fp32 convert is a generated Triton kernel, not PyTorch's casting
//    loop.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/layout.h"
#include "core/status.h"
#include "models/model_spec.h"
#include "models/operators.h"

namespace scaleplan::models {

// Sets fw.compile_model / fw.compile_loss from torchtitan's compile.components as the command line
// gives them ("model", "loss" or "model,loss"; empty: torch.compile off). Errors name --compile:
// an unknown component, or a framework that is not torchtitan (fw.torchtitan_kernels off: only
// torchtitan has the option).
Status set_compile_components(FrameworkOps& fw, std::string_view components);
// The components fw compiles, "model,loss" / "model" / "loss"; "" when torch.compile is off.
std::string compile_components(const FrameworkOps& fw);

// Whether the compiled block is modelled for this model and layout: dense Llama-style blocks
// (RMSNorm, RoPE, SwiGLU, no MoE, no MLA), without TP or CP and without activation checkpointing.
// The error names --compile and what is not modelled.
Status check_compile(const ModelSpec& m, const Layout& layout);

// Rewrites a dense decoder layer's eager list (framework_layer_operators' torchtitan list) into
// the compiled block's: every memory-bound op is removed and Inductor's fused kernels are put
// between the extern kernels they sit between. `stream_bytes` is the residual stream's width, 4
// under autocast over fp32 parameters (runs_autocast), else 2. What a removed forward op stored
// moves to the fused kernel in its place (the first of its gap between extern kernels), except
// the eager SwiGLU's SiLU output, which Inductor recomputes in the fused backward. Errors as
// check_compile, or naming a missing anchor.
Status compile_layer(std::vector<Op>& ops, const ModelSpec& m, const Layout& layout,
                     int64_t seq_len, int64_t layer, int64_t stream_bytes);

// The compiled loss (torch.compile of cross_entropy(pred.float())): one online-softmax reduction
// over the bf16 logits forward (Inductor's online_softmax, on by default) and one kernel writing
// their bf16 gradient backward, in place of the eager cast, log-softmax, nll and their backward.
Status compile_loss(std::vector<Op>& head, const ModelSpec& m, const Layout& layout,
                    int64_t seq_len);

}  // namespace scaleplan::models
