// bf16 GEMM through cuBLASLt (fp32 accumulation and scale), as llm.c's llmc/matmul.cuh does; an
// fp8 shape (GemmShape::dtype, the layouts with dtype=fp8) multiplies e4m3 A and B with
// per-tensor scales (CUBLASLT_MATMUL_DESC_A/B_SCALE_POINTER, 1.0 here: the executor's operands
// are synthetic) into bf16, as Transformer Engine's fp8 GEMMs do. cuBLASLt runs fp8 only in the
// "TN" form (column-major A transposed, B not; cuBLAS docs, cublasLtMatmul, FP8 restrictions):
// row-major that is op(A) = A [m, k] and op(B) = B^T with B stored [n, k] (trans_a false,
// trans_b true), the layout Transformer Engine casts its operands into; other forms are refused.
// For fp8 the buffers hold one byte per element (typed bf16, so at least that many bytes).
// Row-major operands are passed to the column-major library as their transposes: C^T = op(B)^T ·
// op(A)^T, so no copy is made. Descriptors and the heuristic's algorithm are cached per shape, so
// that a timed loop measures the kernel, not the planning. Not thread-safe: one per rank.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <map>
#include <tuple>

#include "core/status.h"
#include "runtime/backend.h"

namespace scaleplan::runtime::cuda {

class LtGemm {
 public:
  LtGemm() = default;
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;
  ~LtGemm();
  Status init();
  Status run(const GemmArgs& g, cudaStream_t stream);

 private:
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool, bool>;
  Status plan(const GemmArgs& g, Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  static constexpr size_t kScaleStride = 64;  // floats: 256 bytes between A's and B's scale
  float* scales_ = nullptr;  // device: the fp8 operands' per-tensor scales (A at 0, B at stride)
  std::map<Key, Plan> plans_;
};

// Hopper wants 32 MiB of cuBLASLt workspace (cuBLAS docs, quoted in PyTorch PR #120925).
inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

}  // namespace scaleplan::runtime::cuda
