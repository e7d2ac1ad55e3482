// The program builder's pipeline emitter (sim/emit.h): one pass of a chunk on one rank, its start
// (inputs, receives, activations), its end (releases, sends) and DualPipe's overlapped pairs.
#include "sim/emit.h"

#include <array>
#include <vector>

namespace scaleplan::sim::build {

// One pass of one chunk on one rank; returns its last compute op.
OpId ProgramBuilder::emit_pass(RankState& rs, const Pass& p, OpId prev, bool send_out) {
  const int g = global_chunk(p.chunk, rs.stage);
  if (split_weight_ && p.kind == PassKind::kBackward) {
    // A whole backward where the chunk lists are split (DualPipe without zero bubble): the
    // input-gradient part, then the weight part at once; the gradient goes to the previous
    // stage only after both, as autograd returns it.
    const OpId input =
        emit_pass(rs, {PassKind::kBackwardInput, p.microbatch, p.chunk}, prev, false);
    const OpId end =
        emit_pass(rs, {PassKind::kBackwardWeight, p.microbatch, p.chunk}, input, false);
    if (remote(g, g - 1)) emit_send(rs, false, g - 1, p, end);
    return end;
  }
  const ChunkOps& c = chunks_[g];
  const bool fwd = p.kind == PassKind::kForward;
  const bool weight = p.kind == PassKind::kBackwardWeight;
  const OpId start = begin_pass(rs, p, g, prev);
  OpId end;
  const std::vector<Timed>& ops = fwd ? c.forward : weight ? c.weight : c.backward;
  const bool reduce_here = (split_weight_ ? weight : !fwd) && (reduces(p) || l_.zero >= 3);
  // BuildOptions::param_gather: a chunk's first forward on this rank gathers the parameters
  // the last step updated, block by block, as a ZeRO-3 forward does.
  const bool gathers_params = fwd && o_.param_gather != ParamGather::kAfterStep &&
                              (l_.zero == 1 || l_.zero == 2) &&
                              rs.params_gathered.insert(p.chunk).second;
  if ((l_.zero >= 3 && !weight) || gathers_params) {
    end = emit_zero3(rs, g, ops, start, p.microbatch, p.chunk, fwd,
                     gathers_params ? o_.param_gather : ParamGather::kFirstForward);
  } else if (reduce_here) {
    end = emit_with_buckets(rs, c, ops, weight ? c.weight_bounds : c.backward_bounds, start,
                            p.microbatch, p.chunk);
  } else {
    end = chain(rs, ops, 0, ops.size(), start, p.microbatch, p.chunk);
  }
  if (l_.zero >= 3 && reduce_here && weight) {
    // ZB-H1 with ZeRO-3: the weight pass holds the gradients; reduce them after it.
    reduce_buckets(rs, c.layer_dense_params, c.layer_expert_params, c.extra_dense_params(),
                   c.extra_expert_params, std::vector<OpId>(c.layer_dense_params.size(), end), end,
                   p.chunk);
  }
  finish_pass(rs, p, g, end, send_out);
  return end;
}

// Whether pass `p` is the one after which its chunk's gradients are complete and the DP
// buckets are reduced as they close (the last micro-batch of the chunk, with BuildOptions::
// dp_overlap).
bool ProgramBuilder::reduces(const Pass& p) const {
  const bool every = reduces_every_microbatch(o_.timing, l_);
  return p.kind != PassKind::kForward && (every || p.microbatch == last_microbatch(p.chunk)) &&
         o_.timing.dp_overlap;
}

// A pass's start: a no-time op after the previous op, the input from the neighbouring chunk,
// the micro-batch's earlier passes and a blocking send; a forward allocates the activations
// it keeps.
OpId ProgramBuilder::begin_pass(RankState& rs, const Pass& p, int g, OpId prev) {
  const ChunkOps& c = chunks_[g];
  const bool fwd = p.kind == PassKind::kForward;
  const bool weight = p.kind == PassKind::kBackwardWeight;
  const int mb = p.microbatch;
  const Phase phase = fwd ? Phase::kForward : weight ? Phase::kBackwardWeight : Phase::kBackward;
  const int from = fwd ? g - 1 : g + 1;
  // One slot per source: the previous op, the input, this micro-batch's forward and backward of
  // this chunk, a blocking send.
  std::array<OpId, 5> deps = {prev, kNoOp, kNoOp, kNoOp, kNoOp};
  if (!weight && connected(g, from)) {
    if (remote(g, from)) {
      OpSpec r{.kind = OpKind::kRecv,
               .stream = StreamKind::kPpRecv,
               .phase = phase,
               .bytes = p2p_bytes_,
               .match = p2p_match(rs, fwd ? 0 : 1, g, mb),
               .label = p2p_labels_[static_cast<size_t>(stage_of(from))],
               .collective = CollectiveOp::kSendRecv,
               .microbatch = mb,
               .chunk = p.chunk};
      const OpId recv = prog_.add_op(rs.rank, r);
      if (p2p_gather_) {
        Timed gather = *p2p_gather_;
        gather.phase = phase;
        deps[1] = add(rs, gather, mb, p.chunk, recv);
      } else {
        deps[1] = recv;
      }
      // nanotron-style blocking receive: the CPU waits for it before issuing the pass.
      if (o_.host.blocking_recv && o_.host.per_launch > Duration::zero()) rs.host_wait = recv;
    } else {
      deps[1] = (fwd ? rs.fwd_end : rs.bwd_end)[pass_index(from, mb)];
    }
  }
  if (!fwd) deps[2] = rs.fwd_end[pass_index(g, mb)];
  if (weight) deps[3] = rs.bwd_end[pass_index(g, mb)];
  deps[4] = rs.blocking_send;  // BuildOptions::blocking_p2p: the previous pass's send
  rs.blocking_send = kNoOp;
  // A no-time op gathers the dependencies so that the chain has one predecessor.
  const OpId start = prog_.add_op(rs.rank,
                                  {.kind = OpKind::kCompute,
                                   .phase = phase,
                                   .label = start_label_,
                                   .microbatch = mb,
                                   .chunk = p.chunk},
                                  unique_deps(deps));
  if (fwd && c.saved.value() > 0) {
    prog_.add_op(rs.rank,
                 {.kind = OpKind::kAlloc,
                  .stream = StreamKind::kCompute,
                  .phase = phase,
                  .bytes = c.saved.value(),
                  .label = act_label_,
                  .microbatch = mb,
                  .chunk = p.chunk},
                 {start});
  }
  return start;
}

// After a pass's last op `end`: where later passes find it, the release of the activations
// once the backward no longer needs them, and (unless `send_out` is false) the send to the
// neighbouring chunk. A whole backward (kBackward) of split lists stands for both parts.
void ProgramBuilder::finish_pass(RankState& rs, const Pass& p, int g, OpId end, bool send_out) {
  const ChunkOps& c = chunks_[g];
  const bool fwd = p.kind == PassKind::kForward;
  const bool weight = p.kind == PassKind::kBackwardWeight;
  const bool whole = p.kind == PassKind::kBackward;
  const size_t at = pass_index(g, p.microbatch);
  (fwd ? rs.fwd_end : weight ? rs.w_end : rs.bwd_end)[at] = end;
  if (whole && split_weight_) rs.w_end[at] = end;
  const bool releases = split_weight_ ? (weight || whole) : !fwd;
  if (releases && c.saved.value() > 0) {
    prog_.add_op(rs.rank,
                 {.kind = OpKind::kFree,
                  .stream = StreamKind::kCompute,
                  .phase = fwd ? Phase::kForward : Phase::kBackward,
                  .bytes = c.saved.value(),
                  .label = act_label_,
                  .microbatch = p.microbatch,
                  .chunk = p.chunk},
                 {end});
  }
  const int to = fwd ? g + 1 : g - 1;
  if (send_out && !weight && remote(g, to)) {
    if (p.defer_send) {
      rs.deferred_sends.push_back({fwd, to, p});  // issued after the rank's next pass
    } else {
      emit_send(rs, fwd, to, p, end);
    }
  }
}

// DualPipe's forward-backward pair (Pass::with_next): the two passes' ops share the compute
// stream, which switches to the other pass after every collective, so that each pass's
// communication (EP all-to-alls, TP collectives) runs beside the other's compute, as the
// reference's overlapped_forward_backward does. A backward that reduces its chunk's gradients
// (the last micro-batch) runs after the forward instead. Returns the op that ends both.
OpId ProgramBuilder::emit_pair(RankState& rs, const Pass& f, const Pass& b, OpId prev) {
  const int gf = global_chunk(f.chunk, rs.stage), gb = global_chunk(b.chunk, rs.stage);
  if (b.kind != PassKind::kBackward || reduces(b) || l_.zero >= 3) {
    prev = emit_pass(rs, f, prev);
    return emit_pass(rs, b, prev);
  }
  const OpId fs = begin_pass(rs, f, gf, prev);
  const OpId bs = begin_pass(rs, b, gb, prev);
  const ChunkOps& cb = chunks_[gb];
  pair_ops_.assign(cb.backward.begin(), cb.backward.end());
  if (split_weight_) pair_ops_.insert(pair_ops_.end(), cb.weight.begin(), cb.weight.end());
  const std::vector<Timed>& fo = chunks_[gf].forward;
  auto next_switch = [](const std::vector<Timed>& ops, size_t from) {
    for (size_t k = from; k < ops.size(); ++k) {
      if (ops[k].kind == OpKind::kCollective && !ops[k].overlap_next) return k + 1;
    }
    return ops.size();
  };
  OpId fe = fs, be = bs;
  size_t i = 0, j = 0;
  for (bool on_f = true; i < fo.size() || j < pair_ops_.size(); on_f = !on_f) {
    if (on_f && i < fo.size()) {
      const size_t e = next_switch(fo, i);
      fe = chain(rs, fo, i, e, fe, f.microbatch, f.chunk);
      i = e;
    } else if (!on_f && j < pair_ops_.size()) {
      const size_t e = next_switch(pair_ops_, j);
      be = chain(rs, pair_ops_, j, e, be, b.microbatch, b.chunk);
      j = e;
    }
  }
  finish_pass(rs, f, gf, fe, true);
  finish_pass(rs, b, gb, be, true);
  return prog_.add_op(rs.rank,
                      {.kind = OpKind::kCompute,
                       .phase = Phase::kBackward,
                       .label = start_label_,
                       .microbatch = b.microbatch,
                       .chunk = b.chunk},
                      std::span<const OpId>(std::array<OpId, 2>{fe, be}));
}

// The activation (forward) or its gradient (backward) of pass `p` to global chunk `to`.
void ProgramBuilder::emit_send(RankState& rs, bool fwd, int to, const Pass& p, OpId end) {
  OpSpec s{.kind = OpKind::kSend,
           .stream = StreamKind::kPpSend,
           .phase = fwd ? Phase::kForward : Phase::kBackward,
           .duration = p2p_time_,
           .bytes = p2p_bytes_,
           .match = p2p_match(rs, fwd ? 0 : 1, to, p.microbatch),
           .label = p2p_labels_[static_cast<size_t>(stage_of(to))],
           .collective = CollectiveOp::kSendRecv,
           .link = p2p_link_,
           .microbatch = p.microbatch,
           .chunk = p.chunk};
  const OpId send = prog_.add_op(rs.rank, s, {end});
  if (o_.blocking_p2p) rs.blocking_send = send;
}

}  // namespace scaleplan::sim::build
