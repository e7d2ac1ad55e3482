// cudnn_sdpa.h in a build without cuDNN or the cuDNN frontend's headers (runtime/CMakeLists.txt):
// every call refuses, naming what is missing and how to get it.
#include "runtime/cuda/cudnn_sdpa.h"

namespace scaleplan::runtime::cuda {

struct CudnnSdpa::Impl {};

CudnnSdpa::CudnnSdpa() = default;
CudnnSdpa::~CudnnSdpa() = default;

Status CudnnSdpa::available() {
  return Status::invalid(
      "cuDNN SDPA is not in this build: CMake found no cuDNN 9 (cudnn.h, libcudnn) or no cuDNN "
      "frontend headers (cudnn_frontend.h); run scripts/setup.sh and rebuild "
      "(docs/dependencies.md)");
}

int64_t CudnnSdpa::workspace_bytes() const { return 0; }

Status CudnnSdpa::forward(const AttentionDims&, const void*, const void*, const void*, void*,
                          float*, cudaStream_t) {
  return Status::invalid("attention_forward: " + available().message());
}

Status CudnnSdpa::backward(const AttentionDims&, const void*, const void*, const void*, const void*,
                           const float*, const void*, void*, void*, void*, cudaStream_t) {
  return Status::invalid("attention_backward: " + available().message());
}

}  // namespace scaleplan::runtime::cuda
