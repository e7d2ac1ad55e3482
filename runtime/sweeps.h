// The calibration sweeps: which kernels and collectives `scaleplan profile` measures, and how one
// point of a sweep is set up, timed (runtime/microbench.h) and checked.
//
// Kernel points are the GEMMs of transformer layers over a grid of hidden sizes and token counts
// (QKV, output projection, MLP up and down, each forward and as the weight-gradient GEMM whose
// reduction dimension is the token count), attention over (batch·heads, sequence, head dim, causal)
// forward and backward, and every memory-bound op over sizes. Hold-out points are shapes of the
// same kinds at sizes the grid does not contain; they are measured but never fitted, and give the
// error the fitted model makes on shapes it has not seen. Collective points are every primitive
// over message sizes, for group sizes 2, 4, 8, ... up to the world, packed on one node
// ("intra_node") and, when there are several nodes, one rank per node ("inter_node"); the host
// backend's groups are threads ("host").
//
// Inputs are a deterministic pattern of the element index, so that a check can recompute any
// expected element without a host copy of a multi-GiB operand. Checks run after the timed loop.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "calibrate/calibration.h"
#include "runtime/backend.h"
#include "runtime/launch.h"
#include "runtime/microbench.h"

namespace scaleplan::runtime {

enum class PointKind { kGemm, kAttentionFwd, kAttentionBwd, kMemory, kCollective };

struct SweepPoint {
  std::string id;  // stable and unique: the key of --resume
  PointKind kind = PointKind::kGemm;
  bool holdout = false;
  GemmShape gemm;
  AttentionShape attention;
  MemOpArgs mem;  // op, rows, cols and params; buffers are made by the runner
  // Collectives: `ranks` world ranks r with r % stride == 0, the first `ranks` of them.
  CollectiveOp op = CollectiveOp::kAllReduce;
  int ranks = 0, stride = 1;
  std::string placement;
  int64_t count = 0;  // f32 elements per rank (NCCL convention, backend.h)
};

struct SweepOptions {
  BackendKind backend = BackendKind::kHost;
  bool quick = false;
};

std::vector<SweepPoint> kernel_points(const SweepOptions& o);
std::vector<SweepPoint> collective_points(const SweepOptions& o, int world_size, int local_size);

// Measures one kernel point on this rank.
Result<calibrate::KernelSample> run_kernel_point(Backend& be, const SweepPoint& p,
                                                 const MeasureOptions& mo);

// Groups made for collective points, per (ranks, stride); each rank keeps its own, built in the
// same order on every rank.
using GroupCache = std::map<std::pair<int, int>, Group>;

// Collective over the world: every rank calls it with the same point. Members of the point's
// group measure together; the sample (the slowest member's median, when the collective has
// finished everywhere) is returned on world rank 0, nullopt elsewhere.
Result<std::optional<calibrate::CollectiveSample>> run_collective_point(Backend& be,
                                                                        const SweepPoint& p,
                                                                        const MeasureOptions& mo,
                                                                        GroupCache& groups);

// GEMM time while an all-reduce runs on a communication stream, over the GEMM time alone (>= 1
// where they contend). Every rank calls it; the ratio is returned on world rank 0 (1 elsewhere).
// On the host, ops are synchronous and nothing overlaps, so this measures ~1.
Result<double> run_overlap_point(Backend& be, const MeasureOptions& mo, bool quick);

}  // namespace scaleplan::runtime
