// Error checking for the cuda backend: every CUDA, cuBLASLt and NCCL call goes through one of
// these macros, which turn a failure into a Status naming the backend op, the call, the file and
// line, and the library's own message (as nccl-tests' CUDACHECK/NCCLCHECK do, but returning
// instead of exiting). Used from .cc and .cu files of runtime/cuda only.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <string>
#include <string_view>

#include "core/status.h"

namespace scaleplan::runtime::cuda {

inline Status call_error(std::string_view op, const char* call, const char* file, int line,
                         const std::string& message) {
  std::string f(file);
  if (const auto slash = f.rfind("runtime/"); slash != std::string::npos) f = f.substr(slash);
  return Status::internal("cuda backend: " + std::string(op) + ": " + call + " failed (" + f + ":" +
                          std::to_string(line) + "): " + message);
}

inline std::string cublas_message(cublasStatus_t s) {
  // cublasLt has no cublasGetStatusString in every version; the enum names say enough.
  switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE:
      return "CUBLAS_STATUS_INVALID_VALUE (bad shape, layout or alignment)";
    case CUBLAS_STATUS_ARCH_MISMATCH:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    default:
      return "cublas status " + std::to_string(static_cast<int>(s));
  }
}

}  // namespace scaleplan::runtime::cuda

#define SP_CUDA_CHECK(op, call)                                                    \
  do {                                                                             \
    const cudaError_t sp_e_ = (call);                                              \
    if (sp_e_ != cudaSuccess) {                                                    \
      return ::scaleplan::runtime::cuda::call_error(op, #call, __FILE__, __LINE__, \
                                                    cudaGetErrorString(sp_e_));    \
    }                                                                              \
  } while (0)

#define SP_CUBLAS_CHECK(op, call)                                                            \
  do {                                                                                       \
    const cublasStatus_t sp_s_ = (call);                                                     \
    if (sp_s_ != CUBLAS_STATUS_SUCCESS) {                                                    \
      return ::scaleplan::runtime::cuda::call_error(                                         \
          op, #call, __FILE__, __LINE__, ::scaleplan::runtime::cuda::cublas_message(sp_s_)); \
    }                                                                                        \
  } while (0)

#define SP_NCCL_CHECK(op, call)                                                    \
  do {                                                                             \
    const ncclResult_t sp_r_ = (call);                                             \
    if (sp_r_ != ncclSuccess && sp_r_ != ncclInProgress) {                         \
      return ::scaleplan::runtime::cuda::call_error(op, #call, __FILE__, __LINE__, \
                                                    ncclGetErrorString(sp_r_));    \
    }                                                                              \
  } while (0)
