// sim::match_by_structure: the predicted Program's ops matched to what a PyTorch profiler
// (Kineto) trace ran, per micro-batch, pass and layer.
//
// The two sides do not name their ops alike (the Program writes "attn.qkv", PyTorch runs three
// aten::mm), nor cut them alike (one Program op for a layer's weight casts, one aten::copy_ per
// weight), so the match goes by structure and by what each op computes:
//   1. Ops: each predicted slice is one op (RecordedOp of a scaleplan trace); each measured op is
//      one launching PyTorch op with all its kernels (RecordedSlice::unit), its time their summed
//      durations, its class the one with most of that time, in the rank's first iteration with
//      GPU work. Host-issue slices are not ops of the Program and are left out.
//   2. Pass: forward, backward (autograd's nodes; the Program's backward and recompute phases),
//      optimizer, other.
//   3. Micro-batch: the Program's args.microbatch; on the measured side a forward op that follows
//      a backward op starts the next micro-batch (gradient accumulation runs forward, backward,
//      forward, ...).
//   4. Layers, within each (micro-batch, pass) and on each side alike (the backward read in
//      reverse): the attention ops (attention_fwd in the forward, attention_bwd in the backward)
//      are the anchors, one per layer. Layer i (i >= 1) starts right after the last GEMM before
//      the last norm before anchor i; layer 0 starts at the last norm before anchor 0, extended
//      back over ops of the kinds that open layer 1 (the weight casts and residual add a layer
//      opens with, not the embedding); the last layer ends after as many GEMMs past its anchor as
//      layer 0 has past its own. Ops before layer 0 (in the backward: after it) are "below the
//      layers" (-1: the embedding), ops past the last layer are "above the layers" (L: the final
//      norm, the head and the loss). Where the two sides find a different number of layers in
//      a (micro-batch, pass), it is matched as one segment.
//   5. Within each (micro-batch, pass, layer) segment, in time order:
//      - GEMMs by shape: first one to one where the dims are equal as a set ({m, n, k}: the two
//        sides write a weight gradient's dims in different orders); then a predicted GEMM to the
//        measured GEMMs that share two of its dims and whose third dims add up to its own (the
//        Program's fused Q/K/V or gate/up GEMM and PyTorch's separate ones);
//      - every other class (attention, memory-bound and optimizer by kind, communication by
//        collective) by count: as many on both sides pair in order, different counts match as
//        one group (the Program writes a layer's weight casts as one op, PyTorch one per weight).
//      What is left is unmatched, with the reason.
// Pure function of both timelines.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"
#include "sim/recorded.h"

namespace scaleplan::sim {

// A segment of the step: a pass of one micro-batch and, where both sides have layers, a layer.
struct StepSegment {
  static constexpr int kAnyLayer = -2;  // a row of every layer (per micro-batch)
  StepPass pass = StepPass::kOther;
  int microbatch = -1;  // -1: not tied to one (optimizer, other)
  // -1: below the layers (the embedding's side, or no layer structure); layers: above them (the
  // head's and the loss's side), in the model's order whatever the pass.
  int layer = -1;
  bool operator==(const StepSegment&) const = default;
};

// One or more predicted ops matched to one or more measured ops.
struct OpGroup {
  int64_t rank = 0;
  StepSegment segment;
  OpClass cls = OpClass::kOtherCompute;
  int8_t mem_op = -1;             // memory-bound / optimizer kind (MemOp), -1 otherwise
  std::string how;                // "shape", "fused shape", "in order", "as a group", "by order"
  std::vector<size_t> predicted;  // slice indices into the predicted rank
  std::vector<size_t> measured;   // op indices into the measured rank (RecordedRank::ops)
  std::string predicted_name, measured_name;  // the longest op's name on each side
  Duration predicted_time, measured_time;
};

// An op of one side with no counterpart.
struct UnmatchedOp {
  int64_t rank = 0;
  bool predicted = true;  // which side it is on
  StepSegment segment;
  OpClass cls = OpClass::kOtherCompute;
  int8_t mem_op = -1;
  std::string name, reason;
  Duration time;
};

// Time side by side for one segment kind (summed over the other coordinates).
struct SegmentRow {
  StepSegment segment;  // per layer: microbatch -1; per micro-batch: layer -1
  Duration predicted, measured;
};

// Time of matched groups by class or kind.
struct MatchedTime {
  std::string name;
  Duration predicted, measured;
  int64_t groups = 0;
};

struct StructuredMatch {
  int microbatches_predicted = 0, microbatches_measured = 0;
  int layers_predicted = 0, layers_measured = 0;        // most found in any (micro-batch, pass)
  int64_t matched_predicted = 0, matched_measured = 0;  // ops in groups
  int64_t predicted_only = 0, measured_only = 0;
  std::vector<OpGroup> groups;
  std::vector<UnmatchedOp> unmatched;          // predicted first, then measured, each in time order
  std::vector<SegmentRow> layers;              // (pass, layer), summed over micro-batches
  std::vector<SegmentRow> microbatches;        // (pass, micro-batch), layer kAnyLayer
  std::vector<MatchedTime> by_class, by_kind;  // over matched groups only
  std::vector<size_t> largest;                 // indices into groups: ten largest |errors|
  // Unmatched ops by reason, largest total time first: (reason, count, predicted?, time).
  struct Reason {
    std::string reason;
    bool predicted = true;
    int64_t count = 0;
    Duration time;
  };
  std::vector<Reason> reasons;
};

// `predicted` a scaleplan trace, `measured` a Kineto trace; ranks paired by global rank.
StructuredMatch match_by_structure(const RecordedTimeline& predicted,
                                   const RecordedTimeline& measured);

// "mb 2 backward layer 3", "forward below the layers", "mb 1 forward", "optimizer".
std::string to_string(const StepSegment& s, int layers);

}  // namespace scaleplan::sim
