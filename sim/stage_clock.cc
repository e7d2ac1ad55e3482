#include "sim/stage_clock.h"

#include <variant>

namespace scaleplan::sim {

void ClockSums::add(const ClockSums& o, double times) {
  tensor_cycles += o.tensor_cycles * times;
  other_cycles += o.other_cycles * times;
  fixed_seconds += o.fixed_seconds * times;
}

ClockSums clock_sums(const std::vector<models::Op>& ops, const calibrate::KernelCostModel& base) {
  const hw::SmClock& c = *base.sm_clock();
  ClockSums s;
  for (const models::Op& op : ops) {
    if (!chunk_pass(op.pass, /*split_weight=*/true)) continue;  // the optimizer's
    switch (op.kind) {
      case models::OpKind::kGemm:
        s.tensor_cycles += base.gemm(*op.gemm()).to_seconds() * c.gemm_at();
        break;
      case models::OpKind::kAttentionFwd:
      case models::OpKind::kAttentionBwd: {
        const bool backward = op.kind == models::OpKind::kAttentionBwd;
        s.tensor_cycles +=
            base.attention(*op.attention(), backward).to_seconds() * c.attention_at();
        break;
      }
      case models::OpKind::kMemoryBound: {
        const auto& m = std::get<MemoryBoundShape>(op.shape);
        const double t = base.memory_bound(m).to_seconds();
        if (m.path == MemPath::kCastLoop) {
          s.other_cycles += t * c.cast_loop_at();
        } else {
          s.fixed_seconds += t;
        }
        break;
      }
      case models::OpKind::kComm:
        break;
    }
  }
  return s;
}

ClockSums optimizer_clock_sums(const std::vector<models::Op>& ops,
                               const calibrate::KernelCostModel& base) {
  ClockSums s;
  for (const models::Op& op : ops) {
    if (const auto* m = std::get_if<MemoryBoundShape>(&op.shape))
      s.fixed_seconds += base.memory_bound(*m).to_seconds();
  }
  return s;
}

std::vector<double> stage_clocks(const hw::SmClock& clock, const PassPlan& plan,
                                 const models::ModelSpec& model,
                                 const ClockSums (&layer)[models::ModelSpec::kLayerKinds],
                                 const ClockSums& embed, const ClockSums& head,
                                 const std::vector<ClockSums>& optimizer) {
  std::vector<ClockSums> stage(static_cast<size_t>(plan.pp));
  for (const ChunkPlan& cp : plan.chunks) {
    ClockSums chunk;
    int of_kind[models::ModelSpec::kLayerKinds] = {};
    for (int i = 0; i < cp.layers; ++i) ++of_kind[model.layer_kind(cp.first_layer + i)];
    for (int k = 0; k < models::ModelSpec::kLayerKinds; ++k) chunk.add(layer[k], of_kind[k]);
    if (cp.embedding) chunk.add(embed);
    if (cp.head) chunk.add(head);
    stage[static_cast<size_t>(cp.stage)].add(chunk, static_cast<double>(plan.microbatches));
  }
  std::vector<double> hz(stage.size());
  for (size_t s = 0; s < stage.size(); ++s) {
    if (s < optimizer.size()) stage[s].add(optimizer[s]);
    // Stages with bit-equal sums (a pipeline's middle stages, as a rule) share one solve through
    // the solves hw::step_clock keeps.
    const ClockSums& x = stage[s];
    hz[s] = hw::step_clock(clock, x.tensor_cycles, x.other_cycles, x.fixed_seconds);
  }
  return hz;
}

}  // namespace scaleplan::sim
