// The unfused attention core of the 2022 frameworks (Megatron-LM's ParallelAttention with
// FusedScaleMaskSoftmax, megatron/model/transformer.py; docs/simulator.md "Attention kernels",
// kUnfused): batched QK^T GEMM into the b·h·q_len×kv_len scores, scale-mask-softmax, batched PV
// GEMM; the backward recomputes the probabilities from the saved LSE and runs the four batched
// GEMMs and the softmax backward. GEMMs through cuBLASLt (gemm.h), bf16 with fp32 accumulation;
// the softmax kernels in attention_softmax.cu.
//
// GQA without repeating K and V: the query heads that share a K/V head are consecutive in BHSD,
// so each (sequence, K/V head) is one GEMM of G·q_len query rows against kv_len keys (G = heads /
// kv_heads), and dK, dV sum over the group inside the GEMM's reduction.
//
// Memory: the scores and their gradient, 2 × b·h·q_len·kv_len bf16, in this object's workspace
// (grown to the largest call's need), as the unfused core holds them. Not thread-safe: one per
// rank.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/status.h"
#include "runtime/cuda/gemm.h"
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {

class UnfusedAttention {
 public:
  explicit UnfusedAttention(LtGemm& gemm) : gemm_(gemm) {}
  ~UnfusedAttention();
  UnfusedAttention(const UnfusedAttention&) = delete;
  UnfusedAttention& operator=(const UnfusedAttention&) = delete;

  Status forward(const AttentionDims& d, const void* q, const void* k, const void* v, void* o,
                 float* lse, cudaStream_t stream);
  Status backward(const AttentionDims& d, const void* q, const void* k, const void* v,
                  const float* lse, const void* d_o, void* dq, void* dk, void* dv,
                  cudaStream_t stream);
  int64_t workspace_bytes() const { return bytes_; }

 private:
  Status reserve(int64_t bytes);
  LtGemm& gemm_;
  void* workspace_ = nullptr;
  int64_t bytes_ = 0;
};

}  // namespace scaleplan::runtime::cuda
