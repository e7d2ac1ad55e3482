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

// A fitted linear model: coefficient names (from the feature list) with values, and its errors.
struct ModelFit {
  std::vector<std::string> names;
  std::vector<double> coef;
  int samples = 0;
  ErrorSummary cv;       // k-fold cross-validation on the fitted grid
  ErrorSummary holdout;  // on hold-out shapes (n = 0 when none were measured)
};

// The forward and backward curves of one attention implementation (KernelSample::implementation),
// fitted on its own samples: a profile that timed cuDNN SDPA and the unfused core has a curve for
// each, and the fitted model times a shape by the curve of its AttentionShape::kernel.
struct AttentionKernelFit {
  std::string kernel;
  ModelFit forward, backward;
};

// The implementation name fit_calibration refuses attention samples of (LaunchOptions::
// reference_attention): kernels no framework runs, ~500x slower than cuDNN's on an H200.
inline constexpr std::string_view kReferenceAttention = "reference";

struct CollectiveFit {
  std::string op;
  int ranks = 0;
  std::string placement;
  Duration latency;             // α
  double seconds_per_byte = 0;  // 1/β, per nccl-tests size
  double busbw_gbps = 0;        // β × bus factor, GB/s (1e9 B/s), as nccl-tests prints
  int samples = 0;
  ErrorSummary cv;
};

// The bandwidth curve of one memory-bound op family (a MemOp, by its core/kernel_shapes.h name):
// t = overhead + bytes / bandwidth. The fitted KernelCostModel times a memory-bound shape by its
// op's family where the profile measured it, and by the family-blind memory_bound fit otherwise:
// the op kinds move bytes at very different rates where special functions (exp, tanh, sin) cost
// more than the bytes (a CPU core), which bytes alone cannot tell apart.
struct BandwidthFit {
  std::string family;
  Duration overhead;
  double seconds_per_byte = 0;
  int samples = 0;
  ErrorSummary cv;
};

struct Calibration {
  std::string backend;  // "host" or "cuda"
  std::string device;   // "NVIDIA H200", "host <cpu model>"
  TileParams tiles;
  // attention_forward/backward: the curves of the attention implementation measured first (the
  // only one, in a profile of one); attention_kernels: one pair per implementation measured.
  ModelFit gemm, attention_forward, attention_backward, memory_bound;
  std::vector<AttentionKernelFit> attention_kernels;
  std::vector<BandwidthFit> memory_families;
  double overlap_slowdown = 1.0;  // >= 1
  std::vector<CollectiveFit> collectives;
};

// Fits every model with at least as many samples as coefficients; `folds` for cross-validation.
// Attention samples timed on the reference kernels (implementation "reference") are an error:
// a profile fitted to them would predict a toy, not the framework's kernel.
Result<Calibration> fit_calibration(const Measurements& m, const TileParams& tiles, int folds = 5,
                                    const FitOptions& options = {});

// The per-kernel prediction of a fitted calibration (what fitted_model.h wraps), in seconds.
// Attention uses the curve of the shape's kernel (attention_kernels) where one was fitted.
double predict_seconds(const Calibration& c, const KernelSample& shape);

Json to_json(const Calibration& c);
Result<Calibration> calibration_from_json(const Json& j, const std::string& ctx);
// The section is an object of a format this build reads (1); errors read `ctx: calibration: ...`.
Status check_calibration_format(const Json& j, const std::string& ctx);
Json to_json(const Measurements& m);
Result<Measurements> measurements_from_json(const Json& j, const std::string& ctx);
Json to_json(const KernelSample& s);
Result<KernelSample> kernel_sample_from_json(const Json& j, const std::string& ctx);
Json to_json(const CollectiveSample& s);
Result<CollectiveSample> collective_sample_from_json(const Json& j, const std::string& ctx);

}  // namespace scaleplan::calibrate
