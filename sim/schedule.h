// Pipeline schedules: the order in which each pipeline stage runs its passes.
//
// A pass is the forward (F) or backward (B) of one micro-batch through one model chunk of a stage;
// zero-bubble schedules split the backward into its input-gradient part (B) and its weight-gradient
// part (W). Chunk c of stage s is the global model chunk c·pp + s (core/layout.h), so with vpp > 1
// every stage holds vpp chunks that are pp chunks apart (Megatron-LM's interleaving).
//
// The order alone is the schedule: the program builder turns each pass into ops and adds the data
// dependencies between neighbouring chunks, and the engine decides the times.
//   afab         GPipe: all forwards, then all backwards (Huang et al. 2019).
//   1f1b         PipeDream-Flush: stage s warms up with min(pp-s-1, m) forwards, then alternates
//   one
//                forward and one backward, then drains (Narayanan et al. 2021, §2.2.1).
//   interleaved  Megatron-LM's interleaved 1F1B: warm-up (pp-s-1)·2 + (vpp-1)·pp forwards over
//                micro-batch groups of pp, chunks visited in order forward and in reverse backward
//                (Narayanan et al. 2021 §2.2.2; Megatron-LM schedules.py).
//   zb-h1        Zero Bubble H1 (Qi et al. 2023, §3) with the backward split into B and W: the
//                authors' reference order, in which stage s defers s weight passes so that input
//                gradients travel back without waiting, and the deferred W passes fill the
//                drain. The bubble shrinks from (p-1)(F+B+W) towards (p-1)(F+B-W) with the
//                activation memory of 1F1B.
//   dualpipe     DeepSeek's DualPipe: half the micro-batches enter at each end; every rank holds
//                two chunks, 0 = stage s of the pipeline that starts at rank 0, 1 = stage pp-1-s of
//                the one that starts at rank pp-1 (micro-batches m/2..m-1), the reference order
//                of deepseek-ai/DualPipe with zero-bubble weight passes where it uses them. Its
//                overlapped forward-backward pairs are marked (Pass::with_next). Needs an even pp
//                and an even m >= 2·pp.
//   dualpipev    DualPipeV, DualPipe "cut in half" (Sea AI Lab; deepseek-ai/DualPipe
//                dualpipev.py, torchtitan's "DualPipeV"): one copy of the model in 2·pp chunks
//                placed in a V, chunk 0 = stage s and chunk 1 = stage 2·pp-1-s of rank s, so rank 0
//                holds the embedding and the LM head and rank pp-1 hands chunk pp-1's output to
//                chunk pp itself. Every micro-batch goes down chunk 0 and back up chunk 1, in the
//                reference's eight steps with the same pairs and zero-bubble weight passes. Needs
//                pp >= 2 and m >= 2·pp.
//   zb-v         ZB-V (Qi et al. 2023 §6; PyTorch's ScheduleZBVZeroBubble, torchtitan's
//                "ZBVZeroBubble"): the chunks of dualpipev's V, every micro-batch down and up,
//                backwards split into B and W: warm-up forwards of both chunks, then F, B, W of
//                each chunk in turn, then the drain's B passes with the deferred W passes after
//                them. Any m; pp >= 2.
#pragma once

#include <cstdint>
#include <vector>

#include "core/layout.h"
#include "core/status.h"

namespace scaleplan::sim {

enum class PassKind : uint8_t { kForward, kBackward, kBackwardInput, kBackwardWeight };

struct Pass {
  PassKind kind = PassKind::kForward;
  int microbatch = 0;
  int chunk = 0;  // virtual stage on this rank, 0..vpp-1 (dualpipe: the direction, 0 or 1;
                  // dualpipev: the arm of the V, 0 down or 1 up)
  // DualPipe(V): this forward and the next pass, a backward of the other direction, run as one
  // overlapped pair (the reference's forward_backward_chunk, "F&B").
  bool with_next = false;
  // DualPipe(V): the reference issues this pass's send only after the rank's next pass (it appends
  // it to the operations it commits before the pass after that): the warm-up's direction-0
  // forwards wait for the direction-1 forward that follows them, and the meeting rank(s) hold the
  // last warm-up forward and the first main-step forward back by one pass.
  bool defer_send = false;
  bool operator==(const Pass&) const = default;
};

// Whether DualPipe can run pp stages over `microbatches` (an even pp >= 2, an even number of
// micro-batches >= 2·pp); the error names the numbers. The planner filters its candidates with it.
Status dualpipe_fits(int pp, int64_t microbatches);
// Whether DualPipeV can run pp ranks over `microbatches` (pp >= 2, micro-batches >= 2·pp).
Status dualpipev_fits(int pp, int64_t microbatches);
// bidirectional() and two_chunks_per_rank(), and the chunk-to-stage map, are core/layout.h's.

// The pass order of every stage: result[s] for s in 0..pp-1. Errors name the schedule and numbers
// (interleaving needs m >= pp; vpp > 1 only with the interleaved schedule).
Result<std::vector<std::vector<Pass>>> pipeline_schedule(Schedule schedule, int pp, int vpp,
                                                         int64_t microbatches);

}  // namespace scaleplan::sim
