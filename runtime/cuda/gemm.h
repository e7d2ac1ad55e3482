// bf16 GEMM through cuBLASLt (fp32 accumulation and scale), as llm.c's llmc/matmul.cuh does.
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
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, bool, bool, bool>;
  Status plan(const GemmArgs& g, Plan& p);

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::map<Key, Plan> plans_;
};

// Hopper wants 32 MiB of cuBLASLt workspace (cuBLAS docs, quoted in PyTorch PR #120925).
inline constexpr size_t kGemmWorkspaceBytes = size_t{32} << 20;

}  // namespace scaleplan::runtime::cuda
