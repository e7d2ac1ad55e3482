// The host backend's MPI transport: one rank per process, every primitive of runtime/backend.h as
// a nonblocking MPI call (MPI_Iallreduce, MPI_Ireduce_scatter_block, ...) completed by polling
// until it finishes or the timeout passes, so that a peer that never arrives ends the wait with
// an error instead of a hang. bf16 moves as 16-bit words and reduces through user-defined ops
// (MPI has no bf16); kAvg reduces as a sum and divides after. Sends are eager, as in process: the
// data is copied out, MPI_Isend'ed, and the request completed later (flush, or the next exchange).
#ifdef SCALEPLAN_HAVE_MPI

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <limits>
#include <mutex>
#include <thread>

#include "runtime/host/bf16.h"
#include "runtime/host/host_transport.h"
#include "runtime/modules.h"
#include "runtime/mpi_env.h"

namespace scaleplan::runtime::host {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
void bf16_apply(void* in, void* inout, int* len, F f) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = float_to_bf16(f(bf16_to_float(a[i]), bf16_to_float(b[i])));
}
void bf16_sum(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_apply(in, inout, len, [](float x, float y) { return x + y; });
}
void bf16_max(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_apply(in, inout, len, [](float x, float y) { return std::max(x, y); });
}
void bf16_min(void* in, void* inout, int* len, MPI_Datatype*) {
  bf16_apply(in, inout, len, [](float x, float y) { return std::min(x, y); });
}

MPI_Datatype mpi_type(ElemType t) {
  switch (t) {
    case ElemType::kF32:
      return MPI_FLOAT;
    case ElemType::kBf16:
      return MPI_UINT16_T;
    case ElemType::kI32:
      return MPI_INT32_T;
    case ElemType::kFp8E4m3:
    case ElemType::kE8m0:
      return MPI_UINT8_T;  // moved, never reduced (check_collective_type)
  }
  return MPI_BYTE;
}

std::string seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", d.to_seconds());
  return buf;
}

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(Duration timeout) : timeout_(timeout) {}

  Status init() {
    SP_MPI_CALL("mpi", MPI_Comm_rank(MPI_COMM_WORLD, &rank_));
    SP_MPI_CALL("mpi", MPI_Comm_size(MPI_COMM_WORLD, &size_));
    MPI_Comm node;
    SP_MPI_CALL("mpi", MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_,
                                           MPI_INFO_NULL, &node));
    SP_MPI_CALL("mpi", MPI_Comm_size(node, &local_size_));
    MPI_Comm_free(&node);
    MPI_Comm world;
    SP_MPI_CALL("mpi", MPI_Comm_dup(MPI_COMM_WORLD, &world));
    comms_.push_back(world);
    SP_MPI_CALL("mpi", MPI_Op_create(&bf16_sum, 1, &bf16_ops_[0]));
    SP_MPI_CALL("mpi", MPI_Op_create(&bf16_max, 1, &bf16_ops_[1]));
    SP_MPI_CALL("mpi", MPI_Op_create(&bf16_min, 1, &bf16_ops_[2]));
    return Status::ok();
  }
  ~MpiTransport() override {
    // Freeing communicators is collective in spirit; after a failure the peers may be gone, so
    // leave everything to the process's end.
    if (failed_) return;
    for (MPI_Comm& c : comms_) MPI_Comm_free(&c);
    for (MPI_Op& op : bf16_ops_) MPI_Op_free(&op);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_size() const override { return local_size_; }

  Result<Group> split(const Group& parent, int color, int key) override {
    SP_ASSIGN_OR_RETURN(MPI_Comm comm, comm_of(parent, "split"));
    // MPI_Comm_split blocks until every member calls it: make sure they are all here first.
    MPI_Request req;
    SP_MPI_CALL("split", MPI_Ibarrier(comm, &req));
    SP_RETURN_IF_ERROR(wait(req, "split", comm));
    MPI_Comm out = MPI_COMM_NULL;
    SP_MPI_CALL("split", MPI_Comm_split(comm, color < 0 ? MPI_UNDEFINED : color, key, &out));
    if (out == MPI_COMM_NULL) return Group{};
    int r = 0, n = 0;
    SP_MPI_CALL("split", MPI_Comm_rank(out, &r));
    SP_MPI_CALL("split", MPI_Comm_size(out, &n));
    std::lock_guard lock(mu_);
    comms_.push_back(out);
    return Group{static_cast<int>(comms_.size()) - 1, n, r};
  }

  Status collective(const Group& g, const CollectiveArgs& a) override {
    const std::string op(to_string(a.op));
    SP_ASSIGN_OR_RETURN(MPI_Comm comm, comm_of(g, op));
    if (a.op == CollectiveOp::kSendRecv)
      return Status::invalid("sendrecv is point to point, not a collective: use send()/recv()");
    SP_RETURN_IF_ERROR(check_collective_type(a));
    if (a.count < 0 || a.count > std::numeric_limits<int>::max())
      return Status::invalid(op + ": count " + std::to_string(a.count) + " outside MPI's int");
    if (a.root < 0 || a.root >= g.size) return Status::invalid(op + ": root outside the group");
    const ElemType t = a.send.data ? a.send.type : a.recv.type;
    const MPI_Datatype dt = mpi_type(t);
    const MPI_Op red = reduce_op(a.reduce, t);
    const int c = static_cast<int>(a.count);
    const bool root = g.rank == a.root;
    const bool in_place = a.send.data == a.recv.data;
    MPI_Request req = MPI_REQUEST_NULL;
    switch (a.op) {
      case CollectiveOp::kAllReduce:
        SP_MPI_CALL(op, MPI_Iallreduce(in_place ? MPI_IN_PLACE : a.send.data, a.recv.data, c, dt,
                                       red, comm, &req));
        break;
      case CollectiveOp::kAllGather:
        SP_MPI_CALL(op, MPI_Iallgather(a.send.data, c, dt, a.recv.data, c, dt, comm, &req));
        break;
      case CollectiveOp::kReduceScatter:
        SP_MPI_CALL(op,
                    MPI_Ireduce_scatter_block(a.send.data, a.recv.data, c, dt, red, comm, &req));
        break;
      case CollectiveOp::kAllToAll:
        SP_MPI_CALL(op, MPI_Ialltoall(a.send.data, c, dt, a.recv.data, c, dt, comm, &req));
        break;
      case CollectiveOp::kBroadcast:
        if (root && !in_place && c > 0)
          std::memcpy(a.recv.data, a.send.data, a.recv.bytes().value());
        SP_MPI_CALL(op, MPI_Ibcast(a.recv.data, c, dt, a.root, comm, &req));
        break;
      case CollectiveOp::kReduce:
        SP_MPI_CALL(op, MPI_Ireduce(root && in_place ? MPI_IN_PLACE : a.send.data,
                                    root ? a.recv.data : nullptr, c, dt, red, a.root, comm, &req));
        break;
      case CollectiveOp::kGather:
        SP_MPI_CALL(op, MPI_Igather(a.send.data, c, dt, root ? a.recv.data : nullptr, c, dt, a.root,
                                    comm, &req));
        break;
      case CollectiveOp::kScatter:
        SP_MPI_CALL(op, MPI_Iscatter(root ? a.send.data : nullptr, c, dt, a.recv.data, c, dt,
                                     a.root, comm, &req));
        break;
      case CollectiveOp::kBarrier:
        SP_MPI_CALL(op, MPI_Ibarrier(comm, &req));
        break;
      case CollectiveOp::kSendRecv:
        break;
    }
    SP_RETURN_IF_ERROR(wait(req, op, comm));
    if (a.reduce == ReduceOp::kAvg) divide(a, g);
    return Status::ok();
  }

  Status exchange(const Group& g, const std::vector<P2POp>& ops) override {
    SP_ASSIGN_OR_RETURN(MPI_Comm comm, comm_of(g, "send/recv"));
    for (const P2POp& op : ops) {
      if (op.peer < 0 || op.peer >= g.size || op.peer == g.rank) {
        return Status::invalid(std::string(op.is_send ? "send" : "recv") + ": peer " +
                               std::to_string(op.peer) + " is not another rank of a group of " +
                               std::to_string(g.size));
      }
    }
    for (const P2POp& op : ops) {
      if (!op.is_send) continue;
      const int64_t bytes = op.buffer.bytes().value();
      auto pending = std::make_unique<Pending>();
      pending->data.assign(static_cast<const char*>(op.buffer.data),
                           static_cast<const char*>(op.buffer.data) + bytes);
      SP_MPI_CALL("send", MPI_Isend(pending->data.data(), static_cast<int>(bytes), MPI_BYTE,
                                    op.peer, 0, comm, &pending->req));
      std::lock_guard lock(mu_);
      pending_.push_back(std::move(pending));
    }
    for (const P2POp& op : ops) {
      if (op.is_send) continue;
      const int64_t bytes = op.buffer.bytes().value();
      MPI_Request req;
      SP_MPI_CALL("recv", MPI_Irecv(op.buffer.data, static_cast<int>(bytes), MPI_BYTE, op.peer, 0,
                                    comm, &req));
      MPI_Status status;
      SP_RETURN_IF_ERROR(
          wait(req, "recv from group rank " + std::to_string(op.peer), comm, &status));
      int got = 0;
      MPI_Get_count(&status, MPI_BYTE, &got);
      if (got != bytes) {
        return Status::invalid("recv from group rank " + std::to_string(op.peer) + ": message of " +
                               std::to_string(got) + " bytes, receive buffer holds " +
                               std::to_string(bytes));
      }
    }
    return reap(false);
  }

  Status flush() override { return reap(true); }
  void abort(const std::string& why) override {
    std::lock_guard lock(mu_);
    if (!aborted_.exchange(true)) why_ = why;
  }

 private:
  struct Pending {
    MPI_Request req = MPI_REQUEST_NULL;
    std::vector<char> data;
  };

  Result<MPI_Comm> comm_of(const Group& g, std::string_view op) {
    std::lock_guard lock(mu_);
    if (!g.member() || g.id < 0 || g.id >= static_cast<int>(comms_.size())) {
      return Status::invalid(std::string(op) + ": rank " + std::to_string(rank_) +
                             " is not a member of group " + std::to_string(g.id));
    }
    return comms_[static_cast<size_t>(g.id)];
  }

  MPI_Op reduce_op(ReduceOp r, ElemType t) const {
    const bool bf16 = t == ElemType::kBf16;
    switch (r) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        return bf16 ? bf16_ops_[0] : MPI_SUM;
      case ReduceOp::kMax:
        return bf16 ? bf16_ops_[1] : MPI_MAX;
      case ReduceOp::kMin:
        return bf16 ? bf16_ops_[2] : MPI_MIN;
    }
    return MPI_SUM;
  }

  // kAvg: the sum divided by the group size, where the reduction landed.
  static void divide(const CollectiveArgs& a, const Group& g) {
    int64_t n = 0;
    if (a.op == CollectiveOp::kAllReduce || a.op == CollectiveOp::kReduceScatter) n = a.count;
    if (a.op == CollectiveOp::kReduce && g.rank == a.root) n = a.count;
    const float k = static_cast<float>(g.size);
    for (int64_t i = 0; i < n; ++i) {
      switch (a.recv.type) {
        case ElemType::kF32:
          static_cast<float*>(a.recv.data)[i] /= k;
          break;
        case ElemType::kBf16: {
          auto* p = static_cast<uint16_t*>(a.recv.data) + i;
          *p = float_to_bf16(bf16_to_float(*p) / k);
          break;
        }
        case ElemType::kI32:
          static_cast<int32_t*>(a.recv.data)[i] /= g.size;
          break;
        case ElemType::kFp8E4m3:  // refused before (check_collective_type)
        case ElemType::kE8m0:
          break;
      }
    }
  }

  // Polls `req` until it completes or the timeout passes. A short sleep between polls leaves the
  // cores to the rank's compute thread (two shared cores in CI).
  Status wait(MPI_Request& req, const std::string& what, MPI_Comm comm,
              MPI_Status* status = nullptr) {
    const auto deadline = timeout_ > Duration::zero()
                              ? Clock::now() + std::chrono::nanoseconds(timeout_.count() / 1000)
                              : Clock::time_point::max();
    auto pause = std::chrono::microseconds(5);
    for (;;) {
      int done = 0;
      MPI_Status st;
      const int rc = MPI_Test(&req, &done, &st);
      if (rc != MPI_SUCCESS) {
        failed_ = true;
        return mpi_error(what, "MPI_Test", rc);
      }
      if (done) {
        if (status) *status = st;
        return Status::ok();
      }
      if (aborted_.load()) {
        failed_ = true;
        std::lock_guard lock(mu_);
        return Status::internal(what + ": aborted: " + why_);
      }
      if (Clock::now() >= deadline) {
        failed_ = true;
        int n = 0;
        MPI_Comm_size(comm, &n);
        return Status::internal(what + ": timed out after " + seconds(timeout_) +
                                " waiting for the other members of a group of " +
                                std::to_string(n) + " (a peer process did not arrive)");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(100));
    }
  }

  // Completes finished eager sends; with `all`, waits for every one.
  Status reap(bool all) {
    std::deque<std::unique_ptr<Pending>> mine;
    {
      std::lock_guard lock(mu_);
      mine.swap(pending_);
    }
    Status st;
    for (auto& p : mine) {
      if (!p) continue;
      int done = 0;
      MPI_Test(&p->req, &done, MPI_STATUS_IGNORE);
      if (done) {
        p.reset();
      } else if (all && st.is_ok()) {
        st = wait(p->req, "send", comms_[0]);
        if (st.is_ok()) p.reset();
      }
    }
    std::lock_guard lock(mu_);
    for (auto& p : mine) {
      if (p) pending_.push_back(std::move(p));
    }
    return st;
  }

  Duration timeout_;
  int rank_ = 0, size_ = 1, local_size_ = 1;
  std::mutex mu_;  // comms_ (split appends), pending_
  std::vector<MPI_Comm> comms_;
  MPI_Op bf16_ops_[3] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
  std::deque<std::unique_ptr<Pending>> pending_;
  std::atomic<bool> failed_{false};
  std::atomic<bool> aborted_{false};
  std::string why_;  // guarded by mu_
};

}  // namespace

Result<std::unique_ptr<Transport>> mpi_transport(Duration timeout) {
  SP_RETURN_IF_ERROR(mpi_init(/*threads=*/true));
  auto t = std::make_unique<MpiTransport>(timeout);
  SP_RETURN_IF_ERROR(t->init());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace scaleplan::runtime::host

// The entry point of libscaleplan_mpi.so (runtime/modules.h).
extern "C" __attribute__((visibility("default"))) const void* scaleplan_mpi_module_v1() {
  static const scaleplan::runtime::MpiModule table{scaleplan::runtime::kModuleAbi,
                                                   &scaleplan::runtime::host::mpi_transport,
                                                   &scaleplan::runtime::mpi_mark_failed};
  return &table;
}

#endif  // SCALEPLAN_HAVE_MPI
