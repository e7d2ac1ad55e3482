// cuDNN SDPA through the cuDNN frontend's graph API (cudnn_sdpa.h). The graphs follow NVIDIA's
// samples at cudnn-frontend commit 3929da2: samples/cpp/sdpa/fp16_fwd.cpp
// (create_sdpa_forward_graph) and samples/cpp/sdpa/fp16_bwd.cpp (create_sdpa_backward_graph);
// the pinned headers are PyPI's nvidia-cudnn-frontend 1.32.0 (scripts/setup.sh). The only
// translation unit that includes the frontend.
#include "runtime/cuda/cudnn_sdpa.h"

#include <cudnn.h>

#include <cudnn_frontend.h>
#include <cstring>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>

#include "runtime/cuda/check.h"

namespace fe = cudnn_frontend;

namespace scaleplan::runtime::cuda {
namespace {

enum Uid : int64_t { kQ = 1, kK, kV, kO, kStats, kDo, kDq, kDk, kDv };

// dims and strides of a packed BHSD tensor
std::vector<int64_t> bhsd(int64_t b, int64_t h, int64_t s, int64_t d) { return {b, h, s, d}; }
std::vector<int64_t> packed(int64_t h, int64_t s, int64_t d) { return {h * s * d, s * d, d, 1}; }

std::shared_ptr<fe::graph::Tensor_attributes> input(fe::graph::Graph& g, const char* name,
                                                    int64_t uid, int64_t b, int64_t h, int64_t s,
                                                    int64_t d) {
  return g.tensor(fe::graph::Tensor_attributes()
                      .set_name(name)
                      .set_uid(uid)
                      .set_dim(bhsd(b, h, s, d))
                      .set_stride(packed(h, s, d)));
}

// The mask of AttentionArgs (backend.h): causal aligned bottom-right (query i is token
// kv_len - q_len + i); a window of w keys keeps key j for query position p when p - j < w, which
// is the frontend's left bound w under the same alignment (utils/attn_score_modifiers.h
// sliding_window_mask: "column + window_size - (s_kv - s_q) > row" is kept). A square causal mask
// is the same top-left or bottom-right; top-left is the form every cuDNN version supports with a
// window (sdpa_support_surface.h refuses bottom-right + window + s_q == s_kv on Hopper up to 9.9).
template <typename Attrs>
void set_mask(Attrs& a, const AttentionDims& d) {
  if (!d.causal) return;
  a.set_diagonal_alignment(d.q_len == d.kv_len ? fe::DiagonalAlignment_t::TOP_LEFT
                                               : fe::DiagonalAlignment_t::BOTTOM_RIGHT)
      .set_diagonal_band_right_bound(0);
  if (d.window > 0) a.set_diagonal_band_left_bound(static_cast<int>(d.window));
}

std::string what(const AttentionDims& d) {
  return "b=" + std::to_string(d.batch) + " h=" + std::to_string(d.heads) +
         " kv_h=" + std::to_string(d.kv_heads) + " q=" + std::to_string(d.q_len) +
         " kv=" + std::to_string(d.kv_len) + " d=" + std::to_string(d.head_dim) +
         " dv=" + std::to_string(d.v_head_dim) + (d.causal ? " causal" : " full") +
         (d.window > 0 ? " window=" + std::to_string(d.window) : std::string());
}

}  // namespace

struct CudnnSdpa::Impl {
  using Key = std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, bool,
                         int64_t, uint32_t>;
  cudnnHandle_t handle = nullptr;
  std::map<Key, std::shared_ptr<fe::graph::Graph>> graphs;
  void* workspace = nullptr;
  int64_t workspace_size = 0;

  ~Impl() {
    if (workspace) cudaFree(workspace);
    if (handle) cudnnDestroy(handle);
  }

  static Key key(const AttentionDims& d, bool backward) {
    uint32_t scale_bits = 0;
    std::memcpy(&scale_bits, &d.scale, sizeof scale_bits);
    return {backward,   d.batch,      d.heads,  d.kv_heads, d.q_len,   d.kv_len,
            d.head_dim, d.v_head_dim, d.causal, d.window,   scale_bits};
  }

  Result<std::shared_ptr<fe::graph::Graph>> build_forward(const AttentionDims& d) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    const int64_t b = d.batch, h = d.heads, hk = d.kv_heads;
    auto q = input(*g, "Q", kQ, b, h, d.q_len, d.head_dim);
    auto k = input(*g, "K", kK, b, hk, d.kv_len, d.head_dim);
    auto v = input(*g, "V", kV, b, hk, d.kv_len, d.v_head_dim);
    auto opts = fe::graph::SDPA_attributes()
                    .set_name("sdpa_forward")
                    .set_generate_stats(true)  // training: the backward reads the LSE
                    .set_attn_scale(d.scale);
    set_mask(opts, d);
    auto [o, stats] = g->sdpa(q, k, v, opts);
    o->set_output(true)
        .set_uid(kO)
        .set_dim(bhsd(b, h, d.q_len, d.v_head_dim))
        .set_stride(packed(h, d.q_len, d.v_head_dim));
    stats->set_output(true)
        .set_uid(kStats)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({b, h, d.q_len, 1})
        .set_stride({h * d.q_len, d.q_len, 1, 1});
    SP_RETURN_IF_ERROR(build(*g, d, "attention_forward"));
    return g;
  }

  Result<std::shared_ptr<fe::graph::Graph>> build_backward(const AttentionDims& d) {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    const int64_t b = d.batch, h = d.heads, hk = d.kv_heads;
    auto q = input(*g, "Q", kQ, b, h, d.q_len, d.head_dim);
    auto k = input(*g, "K", kK, b, hk, d.kv_len, d.head_dim);
    auto v = input(*g, "V", kV, b, hk, d.kv_len, d.v_head_dim);
    auto o = input(*g, "O", kO, b, h, d.q_len, d.v_head_dim);
    auto d_o = input(*g, "dO", kDo, b, h, d.q_len, d.v_head_dim);
    auto stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(kStats)
                               .set_dim({b, h, d.q_len, 1})
                               .set_stride({h * d.q_len, d.q_len, 1, 1})
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opts =
        fe::graph::SDPA_backward_attributes().set_name("sdpa_backward").set_attn_scale(d.scale);
    set_mask(opts, d);
    auto [dq, dk, dv] = g->sdpa_backward(q, k, v, o, d_o, stats, opts);
    dq->set_output(true)
        .set_uid(kDq)
        .set_dim(bhsd(b, h, d.q_len, d.head_dim))
        .set_stride(packed(h, d.q_len, d.head_dim));
    dk->set_output(true)
        .set_uid(kDk)
        .set_dim(bhsd(b, hk, d.kv_len, d.head_dim))
        .set_stride(packed(hk, d.kv_len, d.head_dim));
    dv->set_output(true)
        .set_uid(kDv)
        .set_dim(bhsd(b, hk, d.kv_len, d.v_head_dim))
        .set_stride(packed(hk, d.kv_len, d.v_head_dim));
    SP_RETURN_IF_ERROR(build(*g, d, "attention_backward"));
    return g;
  }

  // validate -> operation graph -> heuristics (mode A) -> support check -> plans: what
  // Graph::build does, each step's error returned with the shape.
  Status build(fe::graph::Graph& g, const AttentionDims& d, const char* op) {
    auto e = g.build(handle, {fe::HeurMode_t::A});
    if (e.is_bad()) {
      return Status::internal(std::string("cuda backend: ") + op + ": cuDNN SDPA has no plan for " +
                              what(d) + " (cuDNN " + std::to_string(cudnnGetVersion()) +
                              "): " + e.get_message());
    }
    int64_t ws = 0;
    e = g.get_workspace_size(ws);
    if (e.is_bad()) {
      return Status::internal(std::string("cuda backend: ") + op +
                              ": cuDNN SDPA workspace size: " + e.get_message());
    }
    if (ws > workspace_size) {
      if (workspace) SP_CUDA_CHECK(op, cudaFree(workspace));
      workspace = nullptr;
      workspace_size = 0;
      SP_CUDA_CHECK(op, cudaMalloc(&workspace, static_cast<size_t>(ws)));
      workspace_size = ws;
    }
    return Status::ok();
  }

  Result<fe::graph::Graph*> graph(const AttentionDims& d, bool backward) {
    const Key k = key(d, backward);
    auto it = graphs.find(k);
    if (it == graphs.end()) {
      auto g = backward ? build_backward(d) : build_forward(d);
      SP_RETURN_IF_ERROR(g.status());
      it = graphs.emplace(k, std::move(*g)).first;
    }
    return it->second.get();
  }

  Status run(fe::graph::Graph& g, std::unordered_map<int64_t, void*>& pack, cudaStream_t stream,
             const AttentionDims& d, const char* op) {
    if (cudnnSetStream(handle, stream) != CUDNN_STATUS_SUCCESS) {
      return Status::internal(std::string("cuda backend: ") + op + ": cudnnSetStream failed");
    }
    auto e = g.execute(handle, pack, workspace);
    if (e.is_bad()) {
      return Status::internal(std::string("cuda backend: ") + op + ": cuDNN SDPA execute for " +
                              what(d) + " failed: " + e.get_message());
    }
    return Status::ok();
  }
};

CudnnSdpa::CudnnSdpa() : impl_(std::make_unique<Impl>()) {}
CudnnSdpa::~CudnnSdpa() = default;

Status CudnnSdpa::available() { return Status::ok(); }

int64_t CudnnSdpa::workspace_bytes() const { return impl_->workspace_size; }

Status CudnnSdpa::forward(const AttentionDims& d, const void* q, const void* k, const void* v,
                          void* o, float* lse, cudaStream_t stream) {
  const char* op = "attention_forward";
  if (impl_->handle == nullptr) {
    const cudnnStatus_t s = cudnnCreate(&impl_->handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      return Status::internal(std::string("cuda backend: ") + op +
                              ": cudnnCreate failed: " + cudnnGetErrorString(s));
    }
  }
  SP_ASSIGN_OR_RETURN(fe::graph::Graph * g, impl_->graph(d, false));
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)},
                                             {kK, const_cast<void*>(k)},
                                             {kV, const_cast<void*>(v)},
                                             {kO, o},
                                             {kStats, lse}};
  return impl_->run(*g, pack, stream, d, op);
}

Status CudnnSdpa::backward(const AttentionDims& d, const void* q, const void* k, const void* v,
                           const void* o, const float* lse, const void* d_o, void* dq, void* dk,
                           void* dv, cudaStream_t stream) {
  const char* op = "attention_backward";
  if (impl_->handle == nullptr) {
    const cudnnStatus_t s = cudnnCreate(&impl_->handle);
    if (s != CUDNN_STATUS_SUCCESS) {
      return Status::internal(std::string("cuda backend: ") + op +
                              ": cudnnCreate failed: " + cudnnGetErrorString(s));
    }
  }
  SP_ASSIGN_OR_RETURN(fe::graph::Graph * g, impl_->graph(d, true));
  std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(q)},
                                             {kK, const_cast<void*>(k)},
                                             {kV, const_cast<void*>(v)},
                                             {kO, const_cast<void*>(o)},
                                             {kStats, const_cast<float*>(lse)},
                                             {kDo, const_cast<void*>(d_o)},
                                             {kDq, dq},
                                             {kDk, dk},
                                             {kDv, dv}};
  return impl_->run(*g, pack, stream, d, op);
}

}  // namespace scaleplan::runtime::cuda
