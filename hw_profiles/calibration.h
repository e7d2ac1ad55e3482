// The calibration a profile carries: the "calibration" section that `scaleplan profile` writes
// (docs/calibration.md), as a typed value. hw::load_cluster parses it once, when it reads the
// profile, into Cluster::calibration; calibrate/ fits it (calibrate::fit_calibration) and turns its
// kernel part into a cost model (calibrate/fitted_model.h), the collective model uses its
// collective fits. The types live here, below calibrate/, because the profile holds them.
//
// A fitted model carries its k-fold cross-validated error and, for kernels, the error on hold-out
// shapes that were measured but never fitted.
//
// Plain values; the functions are pure and thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/json_util.h"
#include "core/kernel_shapes.h"
#include "core/status.h"
#include "core/units.h"

namespace scaleplan::hw {

// Tiling of the GEMM kernels, for the quantization feature (calibrate/features.h): output tiles of
// tile×tile run in waves of `units` (SMs on a GPU, 1 on the host where quantization does not
// apply).
struct TileParams {
  int64_t tile = 128;
  int64_t units = 1;
};

// Relative errors |predicted − measured| / measured of a fit on samples it was not fitted to.
struct ErrorSummary {
  int n = 0;          // held-out samples evaluated
  double median = 0;  // median relative error
  double p90 = 0;     // 90th percentile
  double max = 0;
};

// A fitted linear model: coefficient names (from the feature list) with values, and its errors.
// `roofline`: the profile times this kind with its base's roofline model instead (JSON
// `"model": "roofline"`, with `reason`): what `refit` writes for a kind the traces did not
// measure on enough shapes, or whose fit lost to the roofline (docs/calibration.md, refit step 4).
// The coefficients are then the fit that was not used (all zero when none could be made).
struct ModelFit {
  std::vector<std::string> names;
  std::vector<double> coef;
  int samples = 0;
  ErrorSummary cv;       // k-fold cross-validation on the fitted grid
  ErrorSummary holdout;  // on hold-out shapes (n = 0 when none were measured)
  bool roofline = false;
  std::string reason;  // why the roofline times it (empty when it does not)
  // memory_bound only: the memory families (BandwidthFit::family keys) of the shapes it was
  // fitted on, where the fit knows them (`refit` of a roofline profile); a shape of another
  // family without a curve of its own is then timed by the roofline, not extrapolated to. Empty:
  // it times every shape without a curve (every profile `profile` writes).
  std::vector<std::string> families;
};

// The coefficient names of each kernel model, in the order of calibrate/features.h's features.
inline const std::vector<std::string> kGemmNames = {"overhead_s", "seconds_per_flop",
                                                    "seconds_per_padded_flop", "seconds_per_byte"};
inline const std::vector<std::string> kAttentionNames = {"overhead_s", "seconds_per_flop",
                                                         "seconds_per_byte", "seconds_per_row"};
inline const std::vector<std::string> kMemoryNames = {"overhead_s", "seconds_per_byte",
                                                      "seconds_per_flop"};

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

// The bandwidth curve of one memory-bound op family (a MemOp name, "<op>/<path>" for a MemPath
// other than vectorized: calibrate::memory_family_key): t = overhead + bytes / bandwidth. The
// fitted KernelCostModel times a memory-bound shape by its family where the profile measured it,
// else the family-blind memory_bound fit: ops move bytes at very different rates where special
// functions cost more than the bytes (a CPU core), as PyTorch's casting loop does on a GPU.
// `roofline` (as ModelFit's): the family's shapes are timed by the base's roofline; the overhead
// and bandwidth are then the fit that lost.
struct BandwidthFit {
  std::string family;
  Duration overhead;
  double seconds_per_byte = 0;
  int samples = 0;
  ErrorSummary cv;
  bool roofline = false;
  std::string reason;
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
  // Whether the section has kernel models: false for a calibration of collectives only (written
  // by hand from nccl-tests fits), which leaves the kernels to the roofline; true for what
  // `scaleplan profile` writes and fit_calibration returns.
  bool kernel_models = true;
};

// The kernel model of each kind and its key in the section ("gemm", "attention_forward",
// "attention_backward", "memory_bound"): one place for what refit and the fitted model name.
const char* kernel_model_key(KernelKind k);
ModelFit& kernel_model(Calibration& c, KernelKind k);
const ModelFit& kernel_model(const Calibration& c, KernelKind k);

Json to_json(const Calibration& c);
// A whole calibration section (kernel models required); errors read `ctx: calibration: ...`.
Result<Calibration> calibration_from_json(const Json& j, const std::string& ctx);
// The section is an object of a format this build reads (1); errors read `ctx: calibration: ...`.
Status check_calibration_format(const Json& j, const std::string& ctx);
// A profile's section as hw::load_cluster reads it: one with any kernel model (gemm,
// attention_forward, attention_backward, memory_bound) must be whole (calibration_from_json); one
// without is a calibration of collectives only (kernel_models = false), of a format this build
// reads, whose collective fits the loader reads into Cluster::measured_collectives.
Result<Calibration> profile_calibration_from_json(const Json& j, const std::string& ctx);

// A time in seconds from a calibration or its measurements: finite, non-negative, at most an hour
// (a latency or an overhead beyond that is no measurement; units.h kMaxParsedSeconds).
Result<Duration> calibration_seconds(const Json& j, const char* key, const std::string& ctx);

}  // namespace scaleplan::hw
