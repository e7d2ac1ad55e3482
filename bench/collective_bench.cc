// Cost of one collective-time query with the group's placement cached: what the simulator and the
// planner pay per collective op (millions per plan search).
#include <benchmark/benchmark.h>

#include "core/layout.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"

namespace {

using namespace scaleplan;
using namespace scaleplan::hw;

void BM_EstimateAllReduceMultiNode(benchmark::State& state) {
  const Cluster c = *load_cluster("dgx-h100");
  const CollectiveModel model(c);
  const GroupPlacement g = GroupPlacement::packed(c, 64);
  int64_t bytes = 1 << 20;
  for (auto _ : state) {
    auto e = model.estimate(CollectiveOp::kAllReduce, Bytes(bytes), g);
    benchmark::DoNotOptimize(e);
    bytes = ((bytes * 3) & ((int64_t(1) << 32) - 1)) | 1;  // vary the size so nothing is hoisted
  }
}
BENCHMARK(BM_EstimateAllReduceMultiNode);

void BM_EstimateMeasuredAllReduce(benchmark::State& state) {
  // A calibrated profile: the 8-GPU all-reduce measured at 11 sizes (1 KiB to 1 GiB, x4 steps as
  // `profile --quick`); each query interpolates the points and models the measured group too.
  Cluster c = *load_cluster("dgx-h100");
  MeasuredCollective m{"all_reduce", 8, "intra_node", {}, 0, {}};
  for (int64_t b = 1024; b <= (int64_t(1) << 30); b *= 4)
    m.points.emplace_back(Bytes(b), Duration::seconds(20e-6 + static_cast<double>(b) / 150e9));
  c.measured_collectives = {m};
  const CollectiveModel model(c);
  const GroupPlacement g = GroupPlacement::packed(c, 8);
  int64_t bytes = 1 << 20;
  for (auto _ : state) {
    auto e = model.estimate(CollectiveOp::kAllReduce, Bytes(bytes), g);
    benchmark::DoNotOptimize(e);
    bytes = ((bytes * 3) & ((int64_t(1) << 32) - 1)) | 1;
  }
}
BENCHMARK(BM_EstimateMeasuredAllReduce);

void BM_EstimateMixedOpsPlacedLayout(benchmark::State& state) {
  // tp=8, dp=16, pp=2 on 256 H100s: TP all-reduce, DP reduce-scatter/all-gather, PP send/recv, each
  // on its cached representative group.
  const Cluster c = *load_cluster("dgx-h100");
  const CollectiveModel model(c);
  Layout l;
  l.tp = 8;
  l.dp = 16;
  l.pp = 2;
  const LayoutPlacement p = *place_layout(l, c);
  const CollectiveOp ops[] = {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter,
                              CollectiveOp::kAllGather, CollectiveOp::kSendRecv};
  const GroupKind kinds[] = {GroupKind::kTp, GroupKind::kDp, GroupKind::kDp, GroupKind::kPp};
  int i = 0;
  for (auto _ : state) {
    auto e = model.estimate(ops[i & 3], Bytes(int64_t(64) << 20), p[kinds[i & 3]]);
    benchmark::DoNotOptimize(e);
    ++i;
  }
}
BENCHMARK(BM_EstimateMixedOpsPlacedLayout);

void BM_PlaceLayout(benchmark::State& state) {
  // The placement itself (done once per layout and cached): 1024 GPUs, every group kind.
  const Cluster c = *load_cluster("dgx-h100");
  Layout l;
  l.tp = 8;
  l.dp = 32;
  l.pp = 4;
  for (auto _ : state) benchmark::DoNotOptimize(place_layout(l, c));
}
BENCHMARK(BM_PlaceLayout)->Unit(benchmark::kMillisecond);

}  // namespace
