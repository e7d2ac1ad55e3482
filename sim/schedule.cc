#include "sim/schedule.h"

#include <algorithm>
#include <deque>
#include <string>

namespace scaleplan::sim {
namespace {

using Order = std::vector<Pass>;

Order afab(int m) {
  Order o;
  for (int i = 0; i < m; ++i) o.push_back({PassKind::kForward, i, 0});
  for (int i = 0; i < m; ++i) o.push_back({PassKind::kBackward, i, 0});
  return o;
}

Order one_f_one_b(int p, int s, int m) {
  const int warmup = std::min(p - s - 1, m);
  Order o;
  for (int i = 0; i < warmup; ++i) o.push_back({PassKind::kForward, i, 0});
  for (int i = 0; i < m - warmup; ++i) {
    o.push_back({PassKind::kForward, warmup + i, 0});
    o.push_back({PassKind::kBackward, i, 0});
  }
  for (int i = m - warmup; i < m; ++i) o.push_back({PassKind::kBackward, i, 0});
  return o;
}

// Megatron-core's interleaved order (get_schedule_table, get_pp_rank_microbatches in
// megatron/core/pipeline_parallel/schedules.py): the k-th forward visits micro-batch groups of
// n = interleave_group_size(p, m) in order, chunk by chunk, the last group taking the m mod n
// left over; the k-th backward does the same with the chunks reversed. Warm-up: (p − s − 1)·2 +
// (v − 1)·n forwards.
Order interleaved(int p, int v, int s, int m) {
  const int n = static_cast<int>(interleave_group_size(p, m));
  std::vector<Pass> fwd, bwd;
  for (int g = 0; g < m; g += n) {
    const int size = g + n >= m ? m - g : n;
    for (int c = 0; c < v; ++c) {
      for (int j = 0; j < size; ++j) {
        fwd.push_back({PassKind::kForward, g + j, c});
        bwd.push_back({PassKind::kBackward, g + j, v - 1 - c});
      }
    }
  }
  const int total = m * v;
  const int warmup = std::min((p - s - 1) * 2 + (v - 1) * n, total);
  Order o;
  for (int k = 0; k < warmup; ++k) o.push_back(fwd[k]);
  for (int k = 0; k < total - warmup; ++k) {
    o.push_back(fwd[warmup + k]);
    o.push_back(bwd[k]);
  }
  for (int k = total - warmup; k < total; ++k) o.push_back(bwd[k]);
  return o;
}

// ZB-H1 as in the authors' reference schedule (sail-sg/zero-bubble-pipeline-parallelism, the
// DeepSpeed ZeroBubbleH1Pipeline): pp-s-1 warm-up forwards; then s rounds of F, B with the weight
// pass deferred; then F, B, W while forwards remain; then B, W; then the s deferred W passes. Later
// stages defer more W passes, so input gradients travel back without waiting for weight
// gradients, and the deferred W passes fill the drain.
Order zb_h1(int p, int s, int m) {
  Order o;
  int forward = 0, backward = 0, weight = 0;
  auto f = [&] { o.push_back({PassKind::kForward, forward++, 0}); };
  auto b = [&] { o.push_back({PassKind::kBackwardInput, backward++, 0}); };
  auto w = [&] { o.push_back({PassKind::kBackwardWeight, weight++, 0}); };
  for (int i = 0; i < p - s - 1 && forward < m; ++i) f();
  for (int i = 0; i < s && forward < m; ++i) {
    f();
    b();
  }
  while (forward < m) {
    f();
    b();
    w();
  }
  while (backward < m) {
    b();
    w();
  }
  while (weight < m) w();
  return o;
}

// The eight steps of DeepSeek's reference schedules (deepseek-ai/DualPipe: dualpipe.py
// DualPipe.step and dualpipev.py DualPipeV.step, the same steps), for rank r of P (DualPipe: the
// half rank of the half of the ranks) over n micro-batches per chunk. Phase 0 and 1 are the
// reference's two module slots; `flip` swaps which local chunk each runs, and chunk c's
// micro-batches are c·`per_chunk_offset` + 0..n-1. A backward run with zero bubble leaves its
// weight part for a later weight pass, first in first out (WeightGradStore); the others compute
// both parts at once. Forward-backward pairs (the reference's forward_backward_chunk, "F&B") are
// marked with_next, except the first pair of the rank(s) where the pipelines meet
// (`unpaired_first`), which the reference runs one pass after the other "to further reduce bubble
// size".
Order eight_steps(int P, int r, int n, int flip, int per_chunk_offset, bool unpaired_first) {
  int f[2] = {0, 0}, b[2] = {0, 0};
  std::deque<Pass> deferred;
  Order o;
  auto F = [&](int phase) {
    const int c = phase ^ flip;
    o.push_back({PassKind::kForward, c * per_chunk_offset + f[c]++, c});
  };
  auto B = [&](int phase, bool zero_bubble) {
    const int c = phase ^ flip;
    const int mb = c * per_chunk_offset + b[c]++;
    o.push_back({zero_bubble ? PassKind::kBackwardInput : PassKind::kBackward, mb, c});
    if (zero_bubble) deferred.push_back({PassKind::kBackwardWeight, mb, c});
  };
  auto W = [&] {
    o.push_back(deferred.front());
    deferred.pop_front();
  };
  auto FB = [&](int forward_phase, int backward_phase) {
    F(forward_phase);
    o.back().with_next = true;
    B(backward_phase, false);
  };
  for (int i = 0; i < (P - r - 1) * 2; ++i) F(0);  // 1: nF0
  for (int i = 0; i < r + 1; ++i) {                // 2: nF0F1
    // _forward_chunk(0, send=is_middle_rank) (DualPipe) / send=False (DualPipeV), then
    // _send_forward(0) after F1; the meeting rank(s) hold their last F1's send back too.
    F(0);
    o.back().defer_send = !unpaired_first;
    F(1);
    o.back().defer_send = unpaired_first && i == r;
  }
  for (int i = 0; i < P - r - 1; ++i) {  // 3: nB1W1F1, zero bubble
    B(1, true);
    W();
    F(1);
  }
  for (int i = 0; i < n - 2 * P + r + 1; ++i) {  // 4 (main): nF0B1F1B0
    if (i == 0 && unpaired_first) {
      F(0);  // _forward_chunk(0, send=False); its send goes out after B1
      o.back().defer_send = true;
      B(1, false);
    } else {
      FB(0, 1);
    }
    FB(1, 0);
  }
  for (int i = 0; i < P - r - 1; ++i) {  // 5: nB1F1B0
    B(1, false);
    FB(1, 0);
  }
  bool zero_bubble = false;  // 6: nB1B0, the second half with zero bubble
  for (int i = 0; i < r + 1; ++i) {
    if (i == (r + 1) / 2 && r % 2 == 1) zero_bubble = true;
    B(1, zero_bubble);
    if (i == (r + 1) / 2 && r % 2 == 0) zero_bubble = true;
    B(0, zero_bubble);
  }
  for (int i = 0; i < P - r - 1; ++i) {  // 7: nWB0, zero bubble
    W();
    B(0, true);
  }
  while (!deferred.empty()) W();  // 8: nW
  return o;
}

// DualPipe (DeepSeek-AI 2024, DeepSeek-V3 report §3.2.1): micro-batches enter from both ends, the
// first half at rank 0 (direction 0, chunk 0: rank s runs stage s) and the second half at rank
// p-1 (direction 1, chunk 1: rank s runs stage p-1-s). The reference's phase 0/1 means direction
// 0/1 on the first half of the ranks and 1/0 on the second; the two middle ranks run their first
// pair unpaired.
Order dualpipe(int p, int s, int m) {
  const int half = p / 2;
  return eight_steps(half, std::min(s, p - 1 - s), m / 2, s >= half ? 1 : 0, m / 2,
                     s == half - 1 || s == half);
}

// DualPipeV (DualPipe "cut in half"): phase 0 is the down arm of the V (chunk 0), phase 1 the up
// arm (chunk 1), on every rank; all m micro-batches go through both arms; the last rank, where the
// arms meet, runs its first pair unpaired.
Order dualpipev(int p, int s, int m) { return eight_steps(p, s, m, 0, 0, s == p - 1); }

// ZB-V as PyTorch's ScheduleZBVZeroBubble._calculate_single_rank_operations orders it (Qi et al.
// 2023, §6): 2(p−s)−1 forwards of chunk 0; s pairs of forwards (chunk 1, chunk 0); p−s rounds of
// chunk 1's F, B, W; then F, B, W of chunk 0 and of chunk 1 in turn until both chunks have run
// max(2p−1, m) forwards; then s pairs of B (chunk 0, chunk 1), p−s of chunk 0's B and its oldest
// deferred W, and the deferred W passes left, chunk 1's first. Passes of micro-batches beyond m
// are dropped, as the reference does.
Order zb_v(int p, int s, int m) {
  const int n = std::max(2 * p - 1, m);
  int f[2] = {0, 0}, b[2] = {0, 0};
  Order o;
  auto F = [&](int c) { o.push_back({PassKind::kForward, f[c]++, c}); };
  auto B = [&](int c) { o.push_back({PassKind::kBackwardInput, b[c]++, c}); };
  auto W = [&](int c, int mb) { o.push_back({PassKind::kBackwardWeight, mb, c}); };
  for (int i = 0; i < 2 * (p - s) - 1; ++i) F(0);
  for (int i = 0; i < s; ++i) {
    F(1);
    F(0);
  }
  for (int i = 0; i < p - s; ++i) {
    F(1);
    B(1);
    W(1, b[1] - 1);
  }
  while (f[1] < f[0] || f[0] < n) {
    if (f[0] < n) F(0);
    B(0);
    W(0, b[0] - 1);
    F(1);
    B(1);
    W(1, b[1] - 1);
  }
  int w[2] = {b[0], b[1]};
  for (int i = 0; i < s; ++i) {
    B(0);
    B(1);
  }
  for (int i = 0; i < p - s; ++i) {
    B(0);
    W(0, w[0]++);
  }
  while (w[1] < b[1]) W(1, w[1]++);
  while (w[0] < b[0]) W(0, w[0]++);
  std::erase_if(o, [m](const Pass& x) { return x.microbatch >= m; });
  return o;
}

}  // namespace

Status dualpipev_fits(int pp, int64_t microbatches) {
  if (pp >= 2 && microbatches >= 2 * int64_t{pp}) return Status::ok();
  return Status::invalid(
      "schedule: dualpipev needs pp >= 2 and micro-batches >= 2·pp (pp=" + std::to_string(pp) +
      ", micro-batches=" + std::to_string(microbatches) + ")");
}

Status dualpipe_fits(int pp, int64_t microbatches) {
  if (pp >= 2 && pp % 2 == 0 && microbatches % 2 == 0 && microbatches >= 2 * int64_t{pp})
    return Status::ok();
  return Status::invalid(
      "schedule: dualpipe needs an even pp >= 2 and an even number of micro-batches >= 2·pp "
      "(pp=" +
      std::to_string(pp) + ", micro-batches=" + std::to_string(microbatches) + ")");
}

Result<std::vector<std::vector<Pass>>> pipeline_schedule(Schedule schedule, int pp, int vpp,
                                                         int64_t microbatches) {
  if (pp < 1 || vpp < 1 || microbatches < 1) {
    return Status::invalid("schedule: pp=" + std::to_string(pp) + ", vpp=" + std::to_string(vpp) +
                           ", micro-batches=" + std::to_string(microbatches) + " must all be >= 1");
  }
  if (microbatches > 32767) {
    return Status::invalid("schedule: " + std::to_string(microbatches) +
                           " micro-batches exceed 32767");
  }
  const int m = static_cast<int>(microbatches);
  if (vpp > 1 && schedule != Schedule::kInterleaved) {
    return Status::invalid("schedule: vpp=" + std::to_string(vpp) +
                           " needs schedule=interleaved, not " + std::string(to_string(schedule)));
  }
  if (schedule == Schedule::kDualPipe) SP_RETURN_IF_ERROR(dualpipe_fits(pp, m));
  if (schedule == Schedule::kDualPipeV) SP_RETURN_IF_ERROR(dualpipev_fits(pp, m));
  if (schedule == Schedule::kZbV && pp < 2)
    return Status::invalid("schedule: zb-v needs pp >= 2 (pp=" + std::to_string(pp) + ")");
  if (schedule == Schedule::kInterleaved && vpp > 1 && m < pp) {
    return Status::invalid("schedule: interleaved needs at least pp=" + std::to_string(pp) +
                           " micro-batches, got " + std::to_string(m));
  }
  std::vector<std::vector<Pass>> out(pp);
  for (int s = 0; s < pp; ++s) {
    switch (schedule) {
      case Schedule::kAfab:
        out[s] = afab(m);
        break;
      case Schedule::k1F1B:
        out[s] = one_f_one_b(pp, s, m);
        break;
      case Schedule::kInterleaved:
        out[s] = vpp > 1 ? interleaved(pp, vpp, s, m) : one_f_one_b(pp, s, m);
        break;
      case Schedule::kZbH1:
        out[s] = zb_h1(pp, s, m);
        break;
      case Schedule::kDualPipe:
        out[s] = dualpipe(pp, s, m);
        break;
      case Schedule::kDualPipeV:
        out[s] = dualpipev(pp, s, m);
        break;
      case Schedule::kZbV:
        out[s] = zb_v(pp, s, m);
        break;
    }
  }
  return out;
}

}  // namespace scaleplan::sim
