// The features of each fitted cost model: what a kernel's time is assumed to be linear in.
//
// Defined once here and used by both the fit (calibrate/profile_fit.h) and the prediction
// (calibrate/fitted_model.h), so the two can never disagree. Each model is a sum of costs that a
// roofline would take the max of (Williams et al. 2009): a fixed overhead (launch, tail), a
// per-FLOP cost, a per-byte cost, plus a term for the work a GPU does in wasted partial tiles and
// waves (tile quantization; NVIDIA, "Matrix Multiplication Background", GEMM performance guide).
// The efficiency surface is then implicit: eff(shape) = flops / (time(shape) · peak).
#pragma once

#include <vector>

#include "core/kernel_shapes.h"
#include "hw_profiles/calibration.h"

namespace scaleplan::calibrate {

// Tiling of the GEMM kernels, for the quantization feature (hw_profiles/calibration.h: a
// calibrated profile holds its own).
using TileParams = hw::TileParams;

// [1, flops, padded_flops, bytes]: padded_flops = 2·k·tile²·(tiles rounded up to whole waves).
std::vector<double> gemm_features(const GemmShape& s, const TileParams& tiles);
// [1, flops, bytes, batch·heads·q_len]: the last is per-row work (softmax statistics, rescaling)
// that does not shrink with a shorter kv; flops are the forward's or the backward's.
std::vector<double> attention_features(const AttentionShape& s, bool backward);
// [1, bytes, flops].
std::vector<double> memory_features(const MemoryBoundShape& s);
// [1, bytes]: latency + bytes / bandwidth (Hockney 1994), per collective, group size, placement.
std::vector<double> collective_features(Bytes size);

}  // namespace scaleplan::calibrate
