// The program builder's chunk assembly (sim/emit.h): a model chunk's timed op lists (embedding,
// its layers, the head) with their per-layer bounds, and the chain that places a run of a list.
#include "sim/emit.h"

#include <vector>

namespace scaleplan::sim::build {

Status ProgramBuilder::build_chunk(int g, int first_layer, int layers) {
  ChunkOps& c = chunks_[g];
  std::vector<models::Op> head, embed;
  ChunkOps e, h;
  if (first_chunk(g)) {
    embed = lists_.embedding;
    add_grad_accumulation(embed, plan_.params().first_extra);
    if (autocast_) {
      for (models::Op& op : models::autocast_embedding_ops(plan_.params().first_extra))
        embed.push_back(std::move(op));
    }
    SP_RETURN_IF_ERROR(split(embed, &e));
    c.saved += models::total_saved(embed);
    c.embed_params = plan_.params().first_extra;
    c.embed_tensors = plan_.params().first_tensors;
  }
  if (last_chunk(g)) {
    head = lists_.head;
    add_grad_accumulation(head, plan_.head_params() + plan_.params().mtp_expert);
    if (autocast_) {
      add_autocast(head, autocast_->head, plan_.head_params());
      add_autocast_stream(head, -1, 1);
    }
    SP_RETURN_IF_ERROR(split(head, &h));
    c.saved += models::total_saved(head);
    c.extra_expert_params = plan_.params().mtp_expert;
    c.head_params = plan_.head_params();
    c.head_tensors = plan_.params().last_tensors;
    if (plan_.embedding_copy_on_last) c.head_tensors.push_back(plan_.tied_shard);
  }
  auto append = [](std::vector<Timed>& dst, const std::vector<Timed>& src) {
    dst.insert(dst.end(), src.begin(), src.end());
  };
  append(c.forward, e.forward);
  for (int i = 0; i < layers; ++i) {
    const int kind = m_.layer_kind(first_layer + i);
    c.forward_bounds.push_back(c.forward.size());
    append(c.forward, layer_ops_[kind].forward);
    c.saved += layer_saved_[kind];
  }
  c.forward_bounds.push_back(c.forward.size());
  append(c.forward, h.forward);
  // Backward in reverse layer order; the weight pass (ZB-H1) likewise.
  append(c.backward, h.backward);
  append(c.weight, h.weight);
  c.backward_bounds.push_back(c.backward.size());
  c.weight_bounds.push_back(c.weight.size());
  for (int i = layers - 1; i >= 0; --i) {
    const int64_t layer = first_layer + i;
    const int kind = m_.layer_kind(layer);
    append(c.backward, layer_ops_[kind].backward);
    append(c.weight, layer_ops_[kind].weight);
    c.backward_bounds.push_back(c.backward.size());
    c.weight_bounds.push_back(c.weight.size());
    const auto li = static_cast<size_t>(layer);
    c.layer_dense_params.push_back(plan_.params().layer_dense[li]);
    c.layer_expert_params.push_back(plan_.params().layer_expert[li]);
    if (o_.timing.zero3_per_tensor_sync)
      c.layer_tensor_params.push_back(plan_.params().layer_tensors[li]);
  }
  append(c.backward, e.backward);
  append(c.weight, e.weight);
  charge_stage(c, plan_.chunks[static_cast<size_t>(g)].stage);
  return Status::ok();
}

// Places a list of ops as a chain after `prev`; returns the last op. A transfer marked
// overlap_next runs beside the next compute op, and the op after that waits for both.
//
// With BuildOptions::merge_compute, a run of consecutive compute ops of the chain becomes one op
// lasting the sum of their durations (its first op's label). Inside a chain each op's only
// consumer is the next one and nothing else sits between them on the compute stream, so op i+1
// starts exactly when op i ends; the run's end, the only time anything else waits for, is
// unchanged, as is every other op's start and end. A compute op that an overlapped transfer
// runs beside (pending) starts a new run, since the transfer waits for the op before it. The
// join after that op is left out too: the op after it waits for both instead (`joined`), which
// starts it at the same tick (a join takes no time and nothing else waits for it).
OpId ProgramBuilder::chain(RankState& rs, const std::vector<Timed>& ops, size_t begin, size_t end,
                           OpId prev, int mb, int chunk) {
  OpId pending = kNoOp;        // an overlapped transfer not yet joined
  OpId joined = kNoOp;         // a transfer the next op also waits for (its join left out)
  const Timed* run = nullptr;  // first op of the compute run being merged
  Duration run_time;
  Phase run_phase = Phase::kOther;
  auto flush = [&] {
    if (run == nullptr) return;
    Timed merged = *run;
    merged.duration = run_time;
    merged.phase = run_phase;
    prev = add(rs, merged, mb, chunk, prev, joined);
    joined = kNoOp;
    run = nullptr;
  };
  for (size_t i = begin; i < end; ++i) {
    const Timed& t = ops[i];
    // autograd's AccumulateGrad steals the first micro-batch's gradient (pp = 1 here: the
    // chunk's first micro-batch is 0).
    if (t.skips_first_microbatch && mb == 0) continue;
    if (o_.merge_compute && pending == kNoOp && t.kind == OpKind::kCompute && !t.overlap_next &&
        t.host == Duration::zero()) {
      if (run != nullptr && merge_class(run_phase) == merge_class(t.phase)) {
        run_time += t.duration;
        if (run_phase != t.phase) run_phase = Phase::kBackward;
        continue;
      }
      flush();
      run = &t;
      run_time = t.duration;
      run_phase = t.phase;
      continue;
    }
    flush();
    if (t.overlap_next) {
      // `joined` stays: the op this transfer runs beside waits for an earlier transfer too, as
      // the join op of the unmerged chain makes it.
      pending = add(rs, t, mb, chunk, prev, joined);
      continue;
    }
    const OpId op = add(rs, t, mb, chunk, prev, joined);
    joined = kNoOp;
    if (pending != kNoOp && t.kind == OpKind::kCompute && o_.merge_compute) {
      prev = op;
      joined = pending;
      pending = kNoOp;
    } else if (pending != kNoOp && t.kind == OpKind::kCompute) {
      // Join: a no-time op on the compute stream that waits for the transfer too.
      prev = prog_.add_op(rs.rank,
                          {.kind = OpKind::kCompute,
                           .phase = t.phase,
                           .label = join_label(),
                           .microbatch = mb,
                           .chunk = chunk},
                          {op, pending});
      pending = kNoOp;
    } else {
      prev = op;
    }
  }
  flush();
  if (joined != kNoOp) {
    // The chain ends at the transfer's partner: join them for the caller's single successor.
    prev = prog_.add_op(rs.rank,
                        {.kind = OpKind::kCompute,
                         .phase = ops[end - 1].phase,
                         .label = join_label(),
                         .microbatch = mb,
                         .chunk = chunk},
                        {prev, joined});
  }
  return prev;
}

// Phases that the breakdown (sim/metrics.h) tells apart: compute ops of different classes are
// never merged. Forward, backward and its input/weight parts count alike there (a merged run of
// mixed backward parts is labelled kBackward); recompute and the optimizer do not.
int ProgramBuilder::merge_class(Phase p) {
  if (p == Phase::kRecompute) return 1;
  if (p == Phase::kOptimizer || p == Phase::kOther) return 2;
  return 0;
}

uint32_t ProgramBuilder::join_label() {
  if (join_label_ == kNoMatch) join_label_ = prog_.add_label("cp.join", SyncPayload{});
  return join_label_;
}

}  // namespace scaleplan::sim::build
