#include "runtime/cuda/gemm.h"

#include "runtime/cuda/check.h"

#include <vector>

namespace scaleplan::runtime::cuda {

LtGemm::~LtGemm() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  if (workspace_) cudaFree(workspace_);
  if (scales_) cudaFree(scales_);
  if (handle_) cublasLtDestroy(handle_);
}

Status LtGemm::init() {
  SP_CUBLAS_CHECK("gemm", cublasLtCreate(&handle_));
  SP_CUDA_CHECK("gemm", cudaMalloc(&workspace_, kGemmWorkspaceBytes));
  // The fp8 scales, A's and B's each at the start of its own 256-byte block: cuBLASLt reads a
  // scale pointer as an aligned operand (a B scale 4 bytes after A's gave
  // CUBLAS_STATUS_NOT_SUPPORTED on an H200, 2026-11-30), as PyTorch's separate scale tensors are.
  std::vector<float> ones(2 * kScaleStride, 1.0f);
  SP_CUDA_CHECK("gemm",
                cudaMalloc(reinterpret_cast<void**>(&scales_), ones.size() * sizeof(float)));
  SP_CUDA_CHECK("gemm", cudaMemcpy(scales_, ones.data(), ones.size() * sizeof(float),
                                   cudaMemcpyHostToDevice));
  return Status::ok();
}

Status LtGemm::plan(const GemmArgs& g, Plan& p) {
  const GemmShape& s = g.shape;
  const char* op = "gemm";
  SP_CUBLAS_CHECK(op, cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Library A is our B (n×k after op), library B is our A (k×m after op), library C is C^T (n×m).
  const cublasOperation_t ta = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  SP_CUBLAS_CHECK(
      op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  SP_CUBLAS_CHECK(
      op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const bool fp8 = s.dtype == DType::kFp8;
  if (fp8) {
    if (g.trans_a || !g.trans_b) {
      return Status::invalid(
          "gemm: fp8 runs only as A [m, k] times B^T with B stored [n, k] (trans_a false, "
          "trans_b true: cuBLASLt's TN form), got trans_a " +
          std::to_string(g.trans_a) + " trans_b " + std::to_string(g.trans_b));
    }
    // Library A is our B, library B is our A: their scales follow them.
    SP_CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                       &scales_, sizeof scales_));
    float* b_scale = scales_ + kScaleStride;
    SP_CUBLAS_CHECK(op, cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
                                                       &b_scale, sizeof b_scale));
  }
  const cudaDataType_t in_type = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const uint64_t a_rows = g.trans_b ? s.k : s.n, a_cols = g.trans_b ? s.n : s.k;
  const uint64_t b_rows = g.trans_a ? s.m : s.k, b_cols = g.trans_a ? s.k : s.m;
  SP_CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&p.a, in_type, a_rows, a_cols, a_rows));
  SP_CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&p.b, in_type, b_rows, b_cols, b_rows));
  SP_CUBLAS_CHECK(op, cublasLtMatrixLayoutCreate(&p.c, CUDA_R_16BF, s.n, s.m, s.n));
  if (s.batch > 1) {
    const int32_t count = static_cast<int32_t>(s.batch);
    const int64_t strides[3] = {s.k * s.n, s.m * s.k, s.m * s.n};
    cublasLtMatrixLayout_t layouts[3] = {p.a, p.b, p.c};
    for (int i = 0; i < 3; ++i) {
      SP_CUBLAS_CHECK(
          op, cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                               &count, sizeof count));
      SP_CUBLAS_CHECK(op, cublasLtMatrixLayoutSetAttribute(
                              layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
                              sizeof strides[i]));
    }
  }
  cublasLtMatmulPreference_t pref = nullptr;
  SP_CUBLAS_CHECK(op, cublasLtMatmulPreferenceCreate(&pref));
  const size_t ws = kGemmWorkspaceBytes;
  Status st = Status::ok();
  cublasLtMatmulHeuristicResult_t heur{};
  int found = 0;
  const cublasStatus_t s1 = cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
  const cublasStatus_t s2 = s1 == CUBLAS_STATUS_SUCCESS
                                ? cublasLtMatmulAlgoGetHeuristic(handle_, p.desc, p.a, p.b, p.c,
                                                                 p.c, pref, 1, &heur, &found)
                                : s1;
  cublasLtMatmulPreferenceDestroy(pref);
  SP_CUBLAS_CHECK(op, s2);
  if (found == 0) {
    return Status::internal(
        "cuda backend: gemm: cuBLASLt has no algorithm for m=" + std::to_string(s.m) +
        " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + " (" +
        (fp8 ? "fp8 e4m3" : "bf16") + ", row-major; dimensions must keep 16-byte alignment)");
  }
  p.algo = heur.algo;
  return st;
}

Status LtGemm::run(const GemmArgs& g, cudaStream_t stream) {
  const GemmShape& s = g.shape;
  const Key key{
      s.m, s.n, s.k, s.batch, g.trans_a, g.trans_b, g.beta != 0.0f, s.dtype == DType::kFp8};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    Plan p;
    SP_RETURN_IF_ERROR(plan(g, p));
    it = plans_.emplace(key, p).first;
  }
  const Plan& p = it->second;
  SP_CUBLAS_CHECK("gemm", cublasLtMatmul(handle_, p.desc, &g.alpha, g.b.data, p.a, g.a.data, p.b,
                                         &g.beta, g.c.data, p.c, g.c.data, p.c, &p.algo, workspace_,
                                         kGemmWorkspaceBytes, stream));
  return Status::ok();
}

}  // namespace scaleplan::runtime::cuda
