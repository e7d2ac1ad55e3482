// Calibration: measurements of one machine and the cost models fitted to them.
//
// `scaleplan profile` measures kernels and collectives (runtime/sweeps.h) into Measurements, fits
// them with fit_calibration, and writes both into a profile JSON that extends a cluster profile:
//
//   { "extends": "<cluster>", "name": ..., "calibration": <Calibration>, "measurements": [...] }
//
// The "calibration" section is documented field by field in docs/calibration.md. Its kernel part
// becomes a KernelCostModel with calibrate/fitted_model.h; its collective part gives, per
// (op, group size, placement), a latency and a bandwidth (Hockney's t = α + size/β) with nccl-tests
// bus bandwidth. Every fitted model carries its k-fold cross-validated error and, for kernels, the
// error on hold-out shapes that were measured but never fitted.
//
// Plain values; the functions are pure and thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/features.h"
#include "calibrate/fit.h"
#include "core/json_util.h"
#include "core/kernel_shapes.h"
#include "core/units.h"
#include "hw_profiles/calibration.h"

namespace scaleplan::calibrate {

// One measured kernel. `family` names the op ("gemm", "attention_fwd", "attention_bwd", or a
// memory-bound op such as "rmsnorm"); `holdout` samples are never fitted, only predicted.
struct KernelSample {
  KernelKind kind = KernelKind::kGemm;
  std::string family;
  GemmShape gemm;            // kGemm
  AttentionShape attention;  // kAttentionFwd / kAttentionBwd
  MemoryBoundShape memory;   // kMemoryBound
  Duration time;             // time of one call: the measurement's estimate (see `statistic`)
  double noise = 0;          // relative spread (IQR / median) of the samples
  bool holdout = false;
  // Attention: the implementation that ran (Backend::attention_implementation: "cudnn",
  // "flash2", "unfused", "host", or "reference" for the cuda backend's test kernels, which
  // fit_calibration refuses); empty when unknown (measurements written before 2026-11-28).
  std::string implementation;
  // Memory-bound: memory.path, the implementation that ran (vectorized unless the source says
  // otherwise: a PyTorch trace's kernel name), is written as "path" when not vectorized.
};

// One measured collective (or one row of an nccl-tests log). `size` is the nccl-tests size.
struct CollectiveSample {
  std::string op;  // core/comm.h to_string names: "all_reduce", "all_gather", "alltoall", ...
  int ranks = 0;
  // "intra_node", "inter_node" (one rank per node), "multi_node" (packed over several nodes, as
  // nccl-tests runs), "host"
  std::string placement;
  Bytes size;
  Duration time;
  double noise = 0;
  std::string source;  // "profile" or "nccl-tests:<file>"
};

struct Measurements {
  std::vector<KernelSample> kernels;
  std::vector<CollectiveSample> collectives;
  std::optional<double> overlap_slowdown;  // GEMM time beside a collective / alone, measured
};

// The fitted models a profile carries, and their JSON: hw_profiles/calibration.h (the profile
// holds them, parsed once when it is loaded).
using hw::AttentionKernelFit;
using hw::BandwidthFit;
using hw::Calibration;
using hw::calibration_from_json;
using hw::check_calibration_format;
using hw::CollectiveFit;
using hw::kAttentionNames;
using hw::kernel_model;
using hw::kernel_model_key;
using hw::kGemmNames;
using hw::kMemoryNames;
using hw::kReferenceAttention;
using hw::ModelFit;
using hw::to_json;

// The name of a memory-bound implementation (MemPath) in measurements and family keys:
// "vectorized", "cast_loop", "row_norm", "multi_tensor", "strided", "strided_copy", "reduce",
// "segment_sum"; parse_mem_path is its inverse (nullopt for any other text).
std::string_view mem_path_name(MemPath p);
std::optional<MemPath> parse_mem_path(std::string_view name);

// The BandwidthFit::family of op family `family` run on implementation `path`: the op's name
// alone on the vectorized path (every family a profile fitted before 2026-11-30, whose sweeps
// time the vectorized kernels), "<op>/<path>" on another ("cast/cast_loop": PyTorch's bf16 -> fp32
// copy through the dynamic-casting loop, which a PyTorch trace times apart from the vectorized
// fp32 -> bf16 copy). fit_calibration fits one curve per key; the fitted model times a shape by
// its key's curve, else by its op's (vectorized) curve, else by the family-blind memory_bound fit.
std::string memory_family_key(std::string_view family, MemPath path);

// Fits every model with at least as many samples as coefficients; `folds` for cross-validation.
// Attention samples timed on the reference kernels (implementation "reference") are an error:
// a profile fitted to them would predict a toy, not the framework's kernel.
Result<Calibration> fit_calibration(const Measurements& m, const TileParams& tiles, int folds = 5,
                                    const FitOptions& options = {});

// The per-kernel prediction of a fitted calibration (what fitted_model.h wraps), in seconds.
// Attention uses the curve of the shape's kernel (attention_kernels) where one was fitted.
double predict_seconds(const Calibration& c, const KernelSample& shape);

Json to_json(const Measurements& m);
Result<Measurements> measurements_from_json(const Json& j, const std::string& ctx);
Json to_json(const KernelSample& s);
Result<KernelSample> kernel_sample_from_json(const Json& j, const std::string& ctx);
Json to_json(const CollectiveSample& s);
Result<CollectiveSample> collective_sample_from_json(const Json& j, const std::string& ctx);

}  // namespace scaleplan::calibrate
