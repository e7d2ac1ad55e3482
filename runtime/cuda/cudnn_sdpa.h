// Attention through cuDNN's fused SDPA (flash) kernels, forward and backward, built as cuDNN
// frontend graphs: the kernels PyTorch's SDPA picks on Hopper (torchtitan) and Transformer Engine
// runs for Megatron-core ("Attention kernels" in docs/simulator.md). bf16 Q, K, V, O in BHSD
// layout, fp32 softmax statistics (the log-sum-exp of the scaled scores, natural log), GQA with
// K and V at their own head count (no repeat), causal masks aligned bottom-right, sliding windows
// as the diagonal band's left bound, head dims up to 256.
//
// One graph per shape (dims, mask, window, scale, direction), built on first use and cached, as
// the cuBLASLt plans of gemm.h are, so that a timed loop measures the kernel, not the planning.
// The graph's workspace is this object's (grown to the largest graph's need). Not thread-safe:
// one per rank. This header includes no cuDNN header: the frontend is heavy to compile, so only
// cudnn_sdpa.cc includes it (cudnn_sdpa_stub.cc replaces it in a build without cuDNN or the
// frontend, docs/dependencies.md).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {

class CudnnSdpa {
 public:
  CudnnSdpa();
  ~CudnnSdpa();
  CudnnSdpa(const CudnnSdpa&) = delete;
  CudnnSdpa& operator=(const CudnnSdpa&) = delete;

  // OK when this build has cuDNN SDPA; otherwise an error that names what is missing.
  static Status available();

  // `d.scale` must be set (the backend fills 1/sqrt(head_dim)). lse: [batch, heads, q_len] f32.
  Status forward(const AttentionDims& d, const void* q, const void* k, const void* v, void* o,
                 float* lse, cudaStream_t stream);
  Status backward(const AttentionDims& d, const void* q, const void* k, const void* v,
                  const void* o, const float* lse, const void* d_o, void* dq, void* dk, void* dv,
                  cudaStream_t stream);

  // Device bytes this object holds (its graphs' workspace), for the backend's memory count.
  int64_t workspace_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace scaleplan::runtime::cuda
