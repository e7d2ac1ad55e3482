// MoE routing: softmax over the experts of each token, the top_k experts (ties to the lower id, as
// the host backend), and their weights renormalized to sum to one (Mixtral/DeepSeek top-k gating).
// One thread per token: the expert count (8-256) is small.
#include "runtime/cuda/kernels.h"

namespace scaleplan::runtime::cuda {
namespace {

constexpr int kMaxTopK = 16;

__global__ void routing_kernel(const float* logits, float* weights, int32_t* experts, int64_t rows,
                               int64_t n, int64_t k) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float* x = logits + r * n;
  float m = -INFINITY;
  for (int64_t e = 0; e < n; ++e) m = fmaxf(m, x[e]);
  float best[kMaxTopK];
  int32_t id[kMaxTopK];
  for (int64_t j = 0; j < k; ++j) best[j] = -INFINITY, id[j] = -1;
  for (int64_t e = 0; e < n; ++e) {  // insertion into the sorted top-k list
    const float p = __expf(x[e] - m);
    int64_t pos = k;
    while (pos > 0 && p > best[pos - 1]) --pos;
    if (pos == k) continue;
    for (int64_t j = k - 1; j > pos; --j) best[j] = best[j - 1], id[j] = id[j - 1];
    best[pos] = p;
    id[pos] = static_cast<int32_t>(e);
  }
  float total = 0.f;
  for (int64_t j = 0; j < k; ++j) total += best[j];
  for (int64_t j = 0; j < k; ++j) {
    weights[r * k + j] = best[j] / total;
    experts[r * k + j] = id[j];
  }
}

}  // namespace

cudaError_t moe_routing(const float* logits, float* weights, int32_t* experts, int64_t rows,
                        int64_t num_experts, int64_t top_k, cudaStream_t stream) {
  if (top_k > kMaxTopK) return cudaErrorInvalidValue;
  routing_kernel<<<static_cast<unsigned>((rows + 127) / 128), 128, 0, stream>>>(
      logits, weights, experts, rows, num_experts, top_k);
  return cudaGetLastError();
}

}  // namespace scaleplan::runtime::cuda
