// The cuda backend: one GPU per rank, cuBLASLt GEMMs (gemm.h), attention through cuDNN SDPA
// (cudnn_sdpa.h) or the kernel the Program names, our own kernels (kernels.h), NCCL
// communicators (the world's from ncclCommInitRank/InitAll, each group's from ncclCommSplit), one
// stream for compute and one per communication kind, CUDA events for timestamps. Every library
// call is checked (check.h) and its failure returned as a Status naming the op.
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/cuda/cuda_memory_ops.h"
#include "runtime/cuda/cudnn_sdpa.h"
#include "runtime/cuda/gemm.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/unfused_attention.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace cuda {
namespace {

ncclDataType_t nccl_type(ElemType t) {
  switch (t) {
    case ElemType::kF32:
      return ncclFloat32;
    case ElemType::kBf16:
      return ncclBfloat16;
    case ElemType::kI32:
      return ncclInt32;
    case ElemType::kFp8E4m3:
    case ElemType::kE8m0:
      return ncclUint8;  // moved, never reduced (check_collective_type)
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp r) {
  switch (r) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kAvg:
      return ncclAvg;
  }
  return ncclSum;
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(int rank, int world, int local, int device, ncclComm_t comm, CommRegistry* registry)
      : rank_(rank), world_size_(world), local_size_(local), device_(device), registry_(registry) {
    comms_.push_back(comm);
    world_group_ = Group{0, world, rank};
  }
  ~CudaBackend() override {
    cudaSetDevice(device_);
    cudaDeviceSynchronize();
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
    for (const auto& [p, bytes] : memory_) cudaFree(p);
    for (const auto& [p, bytes] : async_memory_) cudaFree(p);
    for (cudaStream_t s : streams_) cudaStreamDestroy(s);
    if (!registry_->aborted()) {
      for (ncclComm_t c : comms_) {
        if (c) ncclCommDestroy(c);
      }
    }
  }

  Status init() {
    SP_CUDA_CHECK("init", cudaSetDevice(device_));
    cudaDeviceProp prop{};
    SP_CUDA_CHECK("init", cudaGetDeviceProperties(&prop, device_));
    device_name_ = prop.name;
    streams_.resize(kNumStreams);
    for (auto& s : streams_)
      SP_CUDA_CHECK("init", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    SP_RETURN_IF_ERROR(gemm_.init());
    SP_ASSIGN_OR_RETURN(start_, record(StreamKind::kCompute));
    return Status::ok();
  }

  std::string name() const override { return "cuda"; }
  std::string device_name() const override { return device_name_; }
  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  int local_size() const override { return local_size_; }
  const Group& world() const override { return world_group_; }
  ElemType matmul_type() const override { return ElemType::kBf16; }
  ElemType activation_type() const override { return ElemType::kBf16; }

  Result<Buffer> allocate(int64_t count, ElemType type) override {
    if (count < 0) return Status::invalid("allocate: negative count");
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1) * element_size(type));
    SP_CUDA_CHECK("allocate", cudaMalloc(&p, bytes));
    memory_.emplace(p, static_cast<int64_t>(bytes));
    live_ += static_cast<int64_t>(bytes);
    peak_ = std::max(peak_, live_);
    // The zero fill runs on the legacy stream, which the backend's non-blocking streams do not
    // wait for: it is waited for here, or a kernel could run before it and see its result
    // overwritten (test CudaGpuTest.GpuGatherSeesAFreshAllocationsUpload).
    SP_CUDA_CHECK("allocate", cudaMemsetAsync(p, 0, bytes, cudaStreamLegacy));
    SP_CUDA_CHECK("allocate", cudaStreamSynchronize(cudaStreamLegacy));
    return Buffer{p, count, type};
  }
  void release(Buffer& b) override {
    if (auto it = memory_.find(b.data); it != memory_.end()) {
      live_ -= it->second;
      memory_.erase(it);
      cudaFree(b.data);
    }
    b = Buffer{};
  }
  Result<Buffer> allocate_on(StreamKind s, int64_t count, ElemType type) override {
    if (count < 0) return Status::invalid("allocate: negative count");
    void* p = nullptr;
    const size_t bytes = static_cast<size_t>(std::max<int64_t>(count, 1) * element_size(type));
    SP_CUDA_CHECK("allocate", cudaMallocAsync(&p, bytes, stream(s)));
    async_memory_.emplace(p, static_cast<int64_t>(bytes));
    live_ += static_cast<int64_t>(bytes);
    peak_ = std::max(peak_, live_);
    SP_CUDA_CHECK("allocate", cudaMemsetAsync(p, 0, bytes, stream(s)));
    return Buffer{p, count, type};
  }
  void release_on(StreamKind s, Buffer& b) override {
    if (auto it = async_memory_.find(b.data); it != async_memory_.end()) {
      live_ -= it->second;
      async_memory_.erase(it);
      cudaFreeAsync(b.data, stream(s));
    }
    b = Buffer{};
  }
  // The high-water mark of this backend's cudaMalloc'ed bytes (its buffers and workspaces; the
  // cuBLASLt workspace is allocated by gemm_ outside this count).
  MemoryStats memory_stats() const override { return {Bytes(live_), Bytes(peak_)}; }
  void reset_peak() override { peak_ = live_; }
  Status upload(const Buffer& dst, const void* host) override {
    // Wait for every stream first: a kernel still reading the old contents must finish.
    SP_CUDA_CHECK("upload", cudaDeviceSynchronize());
    SP_CUDA_CHECK("upload",
                  cudaMemcpy(dst.data, host, dst.bytes().value(), cudaMemcpyHostToDevice));
    // From pageable memory cudaMemcpy returns once the bytes are staged, before the DMA has
    // landed, and the non-blocking streams do not wait for it: a collective right after read
    // zeros on an H200 (2026-11-30: `run` gathered "0 ops" from rank 0). Wait for the copy.
    SP_CUDA_CHECK("upload", cudaStreamSynchronize(cudaStreamLegacy));
    return Status::ok();
  }
  Status download(const Buffer& src, void* host) override {
    SP_CUDA_CHECK("download", cudaDeviceSynchronize());  // results of every stream are written
    SP_CUDA_CHECK("download",
                  cudaMemcpy(host, src.data, src.bytes().value(), cudaMemcpyDeviceToHost));
    return Status::ok();
  }

  Status gemm(const GemmArgs& g) override {
    const GemmShape& s = g.shape;
    if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) {
      return Status::invalid("gemm: m, n, k and batch must be positive");
    }
    SP_RETURN_IF_ERROR(check(g.a, s.batch * s.m * s.k, ElemType::kBf16, "gemm: a"));
    SP_RETURN_IF_ERROR(check(g.b, s.batch * s.k * s.n, ElemType::kBf16, "gemm: b"));
    SP_RETURN_IF_ERROR(check(g.c, s.batch * s.m * s.n, ElemType::kBf16, "gemm: c"));
    return gemm_.run(g, stream(StreamKind::kCompute));
  }

  // The test oracle (LaunchOptions::reference_attention): attention through the reference kernels
  // of attention.cu whatever kernel the shape names.
  void set_reference_attention(bool on) { reference_attention_ = on; }

  std::string attention_implementation(const AttentionShape& s) const override {
    return reference_attention_ ? "reference" : std::string(to_string(s.kernel));
  }

  // The kernel the shape names, as the framework runs it (AttentionShape::kernel, chosen by
  // sim::framework_attention): cuDNN SDPA, or the unfused core (cuBLASLt batched GEMMs +
  // softmax); FlashAttention-2 is refused, naming what is missing, rather than timed on a kernel
  // the framework does not run.
  Status attention_forward(const AttentionArgs& a) override {
    SP_ASSIGN_OR_RETURN(const AttentionDims d, dims(a, false));
    if (!reference_attention_) {
      SP_RETURN_IF_ERROR(attention_kernel_available(a.shape.kernel, "attention_forward"));
      const cudaStream_t s = stream(StreamKind::kCompute);
      float* lse = static_cast<float*>(a.lse.data);
      SP_RETURN_IF_ERROR(a.shape.kernel == AttentionKernel::kUnfused
                             ? unfused_.forward(d, a.q.data, a.k.data, a.v.data, a.o.data, lse, s)
                             : sdpa_.forward(d, a.q.data, a.k.data, a.v.data, a.o.data, lse, s));
      note_attention_workspace();
      return Status::ok();
    }
    SP_CUDA_CHECK(
        "attention_forward",
        cuda::attention_forward(d, a.q.data, a.k.data, a.v.data, a.o.data,
                                static_cast<float*>(a.lse.data), stream(StreamKind::kCompute)));
    return Status::ok();
  }
  Status attention_backward(const AttentionArgs& a) override {
    SP_ASSIGN_OR_RETURN(const AttentionDims d, dims(a, true));
    if (!reference_attention_) {
      SP_RETURN_IF_ERROR(attention_kernel_available(a.shape.kernel, "attention_backward"));
      const cudaStream_t s = stream(StreamKind::kCompute);
      const float* lse = static_cast<const float*>(a.lse.data);
      SP_RETURN_IF_ERROR(a.shape.kernel == AttentionKernel::kUnfused
                             ? unfused_.backward(d, a.q.data, a.k.data, a.v.data, lse, a.d_o.data,
                                                 a.dq.data, a.dk.data, a.dv.data, s)
                             : sdpa_.backward(d, a.q.data, a.k.data, a.v.data, a.o.data, lse,
                                              a.d_o.data, a.dq.data, a.dk.data, a.dv.data, s));
      note_attention_workspace();
      return Status::ok();
    }
    const int64_t rows = d.batch * d.heads * d.q_len;
    if (workspace_.count < rows) {
      release(workspace_);
      SP_ASSIGN_OR_RETURN(workspace_, allocate(rows, ElemType::kF32));
    }
    SP_CUDA_CHECK(
        "attention_backward",
        cuda::attention_backward(d, a.q.data, a.k.data, a.v.data, a.o.data,
                                 static_cast<const float*>(a.lse.data), a.d_o.data, a.dq.data,
                                 a.dk.data, a.dv.data, static_cast<float*>(workspace_.data),
                                 stream(StreamKind::kCompute)));
    return Status::ok();
  }

  Status memory_op(const MemOpArgs& a) override { return memory_ops_.run(a, stream(a.stream)); }

  Result<Group> split(const Group& parent, int color, int key) override {
    SP_ASSIGN_OR_RETURN(ncclComm_t comm, comm_of(parent, "split"));
    ncclComm_t out = nullptr;
    SP_NCCL_CHECK("split",
                  ncclCommSplit(comm, color < 0 ? NCCL_SPLIT_NOCOLOR : color, key, &out, nullptr));
    if (out == nullptr) return Group{};
    registry_->add(out);
    int size = 0, r = 0;
    SP_NCCL_CHECK("split", ncclCommCount(out, &size));
    SP_NCCL_CHECK("split", ncclCommUserRank(out, &r));
    comms_.push_back(out);
    return Group{static_cast<int>(comms_.size()) - 1, size, r};
  }

  Status collective(const Group& g, const CollectiveArgs& a) override;

  Status exchange(const Group& g, const std::vector<P2POp>& ops, StreamKind s) override {
    SP_ASSIGN_OR_RETURN(ncclComm_t comm, comm_of(g, "send/recv"));
    for (const P2POp& op : ops) {
      if (op.peer < 0 || op.peer >= g.size || op.peer == g.rank) {
        return Status::invalid(std::string(op.is_send ? "send" : "recv") + ": peer " +
                               std::to_string(op.peer) + " is not another rank of a group of " +
                               std::to_string(g.size));
      }
    }
    // One NCCL group, so that a send and a receive between the same ranks cannot deadlock.
    SP_NCCL_CHECK("send/recv", ncclGroupStart());
    for (const P2POp& op : ops) {
      const ncclResult_t r = op.is_send
                                 ? ncclSend(op.buffer.data, op.buffer.count,
                                            nccl_type(op.buffer.type), op.peer, comm, stream(s))
                                 : ncclRecv(op.buffer.data, op.buffer.count,
                                            nccl_type(op.buffer.type), op.peer, comm, stream(s));
      if (r != ncclSuccess && r != ncclInProgress) {
        ncclGroupEnd();
        SP_NCCL_CHECK(op.is_send ? "send" : "recv", r);
      }
    }
    SP_NCCL_CHECK("send/recv", ncclGroupEnd());
    return Status::ok();
  }

  // Events come from a pool (events_): ids [0, live_events_) are recorded and valid; recycling
  // makes every id but the start's reusable, so that a step costs no cudaEventCreate.
  Result<Event> record(StreamKind s) override {
    if (live_events_ == static_cast<int64_t>(events_.size())) {
      cudaEvent_t e = nullptr;
      SP_CUDA_CHECK("record", cudaEventCreate(&e));
      events_.push_back(e);
    }
    const int64_t id = live_events_++;
    SP_CUDA_CHECK("record", cudaEventRecord(events_[id], stream(s)));
    return Event{id};
  }
  void recycle_events() override { live_events_ = start_.id + 1; }
  Status wait(StreamKind waiter, Event e) override {
    SP_RETURN_IF_ERROR(check_event(e, "wait"));
    SP_CUDA_CHECK("wait", cudaStreamWaitEvent(stream(waiter), events_[e.id], 0));
    return Status::ok();
  }
  Result<Duration> elapsed(Event a, Event b) override {
    SP_RETURN_IF_ERROR(check_event(a, "elapsed"));
    SP_RETURN_IF_ERROR(check_event(b, "elapsed"));
    SP_CUDA_CHECK("elapsed", cudaEventSynchronize(events_[b.id]));
    float ms = 0;
    SP_CUDA_CHECK("elapsed", cudaEventElapsedTime(&ms, events_[a.id], events_[b.id]));
    return Duration::seconds(static_cast<double>(ms) * 1e-3);
  }
  Result<Duration> since_start(Event e) override { return elapsed(start_, e); }
  Result<bool> query(Event e) override {
    SP_RETURN_IF_ERROR(check_event(e, "query"));
    // An NCCL error of any communicator of this rank (a peer that failed) ends the wait.
    for (ncclComm_t c : comms_) {
      ncclResult_t async = ncclSuccess;
      if (c) SP_NCCL_CHECK("query", ncclCommGetAsyncError(c, &async));
      if (async != ncclSuccess && async != ncclInProgress) SP_NCCL_CHECK("communicator", async);
    }
    const cudaError_t r = cudaEventQuery(events_[e.id]);
    if (r == cudaErrorNotReady) return false;
    SP_CUDA_CHECK("query", r);
    return true;
  }
  Status synchronize() override {
    SP_CUDA_CHECK("synchronize", cudaDeviceSynchronize());
    return Status::ok();
  }
  void abort(const std::string&) override { registry_->abort_all(); }

 private:
  cudaStream_t stream(StreamKind s) const { return streams_[static_cast<int>(s)]; }
  static Status attention_kernel_available(AttentionKernel k, const std::string& op) {
    switch (k) {
      case AttentionKernel::kCudnn:
        return CudnnSdpa::available().with_context(op);
      case AttentionKernel::kFlash2:
        return Status::invalid(
            op +
            ": the framework runs FlashAttention-2 here (sim::framework_attention), and this "
            "build has no FlashAttention-2 library (flash-attn's C++ kernels are not "
            "linked); run with the attention core cuDNN SDPA (`--attention cudnn`) or on a "
            "GPU where the framework picks it");
      case AttentionKernel::kUnfused:
        return Status::ok();
    }
    return Status::ok();
  }
  // The SDPA graphs' workspace and the unfused core's scores are device memory of this rank:
  // counted with the buffers.
  void note_attention_workspace() {
    const int64_t ws = sdpa_.workspace_bytes() + unfused_.workspace_bytes();
    if (ws != attention_counted_) {
      live_ += ws - attention_counted_;
      attention_counted_ = ws;
      peak_ = std::max(peak_, live_);
    }
  }
  Status check_event(Event e, std::string_view op) const {
    if (e.id < 0 || e.id >= live_events_) {
      return Status::invalid(std::string(op) + ": event " + std::to_string(e.id) +
                             " was not recorded here");
    }
    return Status::ok();
  }
  Result<ncclComm_t> comm_of(const Group& g, std::string_view op) const {
    if (!g.member() || g.id < 0 || g.id >= static_cast<int>(comms_.size()) ||
        comms_[g.id] == nullptr) {
      return Status::invalid(std::string(op) + ": rank " + std::to_string(rank_) +
                             " is not a member of group " + std::to_string(g.id));
    }
    return comms_[g.id];
  }
  Result<AttentionDims> dims(const AttentionArgs& a, bool backward) const {
    const AttentionShape& s = a.shape;
    const std::string op = backward ? "attention_backward" : "attention_forward";
    AttentionDims d{s.batch,
                    s.heads,
                    s.kv_heads,
                    s.q_len,
                    s.kv_len,
                    s.head_dim,
                    s.v_head_dim ? s.v_head_dim : s.head_dim,
                    s.causal,
                    a.scale,
                    s.causal && s.window > 0 ? s.window : 0};
    if (d.batch <= 0 || d.heads <= 0 || d.kv_heads <= 0 || d.q_len <= 0 || d.kv_len <= 0 ||
        d.head_dim <= 0) {
      return Status::invalid(
          op + ": batch, heads, kv_heads, q_len, kv_len and head dims must be positive");
    }
    if (d.heads % d.kv_heads != 0) {
      return Status::invalid(op + ": heads=" + std::to_string(d.heads) +
                             " is not a multiple of kv_heads=" + std::to_string(d.kv_heads));
    }
    if (d.head_dim > kMaxHeadDim || d.v_head_dim > kMaxHeadDim) {
      return Status::invalid(op + ": head dim " +
                             std::to_string(std::max(d.head_dim, d.v_head_dim)) +
                             " exceeds the kernel's " + std::to_string(kMaxHeadDim));
    }
    if (d.scale == 0.0f) d.scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
    const int64_t nq = d.batch * d.heads * d.q_len, nk = d.batch * d.kv_heads * d.kv_len;
    const ElemType t = ElemType::kBf16;
    SP_RETURN_IF_ERROR(check(a.q, nq * d.head_dim, t, op + ": q"));
    SP_RETURN_IF_ERROR(check(a.k, nk * d.head_dim, t, op + ": k"));
    SP_RETURN_IF_ERROR(check(a.v, nk * d.v_head_dim, t, op + ": v"));
    SP_RETURN_IF_ERROR(check(a.o, nq * d.v_head_dim, t, op + ": o"));
    SP_RETURN_IF_ERROR(check(a.lse, nq, ElemType::kF32, op + ": lse"));
    if (backward) {
      SP_RETURN_IF_ERROR(check(a.d_o, nq * d.v_head_dim, t, op + ": d_o"));
      SP_RETURN_IF_ERROR(check(a.dq, nq * d.head_dim, t, op + ": dq"));
      SP_RETURN_IF_ERROR(check(a.dk, nk * d.head_dim, t, op + ": dk"));
      SP_RETURN_IF_ERROR(check(a.dv, nk * d.v_head_dim, t, op + ": dv"));
    }
    return d;
  }

  int rank_, world_size_, local_size_, device_;
  CommRegistry* registry_;
  std::string device_name_;
  Group world_group_;
  std::vector<ncclComm_t> comms_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> events_;  // the pool; [0, live_events_) recorded since the last recycle
  int64_t live_events_ = 0;
  std::unordered_map<void*, int64_t> memory_;        // cudaMalloc'ed -> bytes
  std::unordered_map<void*, int64_t> async_memory_;  // cudaMallocAsync'ed -> bytes
  int64_t live_ = 0, peak_ = 0;
  LtGemm gemm_;
  CudnnSdpa sdpa_;
  UnfusedAttention unfused_{gemm_};
  MemoryOps memory_ops_{[this](int64_t count, ElemType type) { return allocate(count, type); }};
  int64_t attention_counted_ = 0;  // of sdpa_'s and unfused_'s workspaces, the bytes live_ counts
  bool reference_attention_ = false;
  Event start_;
  Buffer workspace_, barrier_buf_;
};

Status CudaBackend::collective(const Group& g, const CollectiveArgs& a) {
  const std::string op(to_string(a.op));
  if (a.op == CollectiveOp::kSendRecv) {
    return Status::invalid("sendrecv is point to point, not a collective: use send()/recv()");
  }
  SP_RETURN_IF_ERROR(check_collective_type(a));
  SP_ASSIGN_OR_RETURN(ncclComm_t comm, comm_of(g, op));
  const int n = g.size;
  const bool root = g.rank == a.root;
  if (a.root < 0 || a.root >= n) return Status::invalid(op + ": root outside the group");
  const ElemType t = a.send.data ? a.send.type : a.recv.type;
  int64_t need_send = a.count, need_recv = a.count;
  switch (a.op) {
    case CollectiveOp::kAllGather:
      need_recv = n * a.count;
      break;
    case CollectiveOp::kReduceScatter:
      need_send = n * a.count;
      break;
    case CollectiveOp::kAllToAll:
      need_send = need_recv = n * a.count;
      break;
    case CollectiveOp::kBroadcast:
      need_send = root ? a.count : 0;
      break;
    case CollectiveOp::kReduce:
      need_recv = root ? a.count : 0;
      break;
    case CollectiveOp::kGather:
      need_recv = root ? n * a.count : 0;
      break;
    case CollectiveOp::kScatter:
      need_send = root ? n * a.count : 0;
      break;
    case CollectiveOp::kSendRecv:  // rejected above
    case CollectiveOp::kBarrier:
      need_send = need_recv = 0;
      break;
    case CollectiveOp::kAllReduce:
      break;
  }
  if (need_send) SP_RETURN_IF_ERROR(check(a.send, need_send, t, op + ": send"));
  if (need_recv) SP_RETURN_IF_ERROR(check(a.recv, need_recv, t, op + ": recv"));
  const ncclDataType_t dt = nccl_type(t);
  const ncclRedOp_t red = nccl_op(a.reduce);
  const cudaStream_t s = stream(a.stream);
  const size_t c = static_cast<size_t>(a.count);
  switch (a.op) {
    case CollectiveOp::kAllReduce:
      SP_NCCL_CHECK(op, ncclAllReduce(a.send.data, a.recv.data, c, dt, red, comm, s));
      break;
    case CollectiveOp::kAllGather:
      SP_NCCL_CHECK(op, ncclAllGather(a.send.data, a.recv.data, c, dt, comm, s));
      break;
    case CollectiveOp::kReduceScatter:
      SP_NCCL_CHECK(op, ncclReduceScatter(a.send.data, a.recv.data, c, dt, red, comm, s));
      break;
    case CollectiveOp::kAllToAll:
      SP_NCCL_CHECK(op, ncclAlltoAll(a.send.data, a.recv.data, c, dt, comm, s));
      break;
    case CollectiveOp::kBroadcast:
      SP_NCCL_CHECK(op, ncclBroadcast(a.send.data, a.recv.data, c, dt, a.root, comm, s));
      break;
    case CollectiveOp::kReduce:
      SP_NCCL_CHECK(op, ncclReduce(a.send.data, a.recv.data, c, dt, red, a.root, comm, s));
      break;
    case CollectiveOp::kGather:
      SP_NCCL_CHECK(op, ncclGather(a.send.data, a.recv.data, c, dt, a.root, comm, s));
      break;
    case CollectiveOp::kScatter:
      SP_NCCL_CHECK(op, ncclScatter(a.send.data, a.recv.data, c, dt, a.root, comm, s));
      break;
    case CollectiveOp::kSendRecv:
      return Status::invalid("sendrecv is point to point, not a collective: use send()/recv()");
    case CollectiveOp::kBarrier: {
      // NCCL has no barrier: an all-reduce of one float, waited for on the host.
      if (!barrier_buf_.data) {
        SP_ASSIGN_OR_RETURN(barrier_buf_, allocate(1, ElemType::kF32));
      }
      SP_NCCL_CHECK(op, ncclAllReduce(barrier_buf_.data, barrier_buf_.data, 1, ncclFloat32, ncclSum,
                                      comm, s));
      SP_CUDA_CHECK(op, cudaStreamSynchronize(s));
      break;
    }
  }
  return Status::ok();
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaRank& r, ncclComm_t comm,
                                                   CommRegistry* registry,
                                                   bool reference_attention) {
  auto b = std::make_unique<CudaBackend>(r.rank, r.world, r.local, r.device, comm, registry);
  SP_RETURN_IF_ERROR(b->init());
  b->set_reference_attention(reference_attention);
  return std::unique_ptr<Backend>(std::move(b));
}

}  // namespace cuda
}  // namespace scaleplan::runtime
