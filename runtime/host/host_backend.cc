// The host backend: a rank is a thread (or a process under MPI); kernels are
// runtime/host/host_kernels.h; communication goes through a Transport
// (runtime/host/host_transport.h: in-process, runtime/host/host_comm.h, or MPI). Ops run
// synchronously in the calling thread, so an event's timestamp is the steady clock when `record` is
// called, and a rank's streams are the threads that call it: allocation, release and events are
// guarded by a mutex so that one thread per stream may call at once.
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/host/host_comm.h"
#include "runtime/host/host_kernels.h"
#include "runtime/host/host_transport.h"
#include "runtime/launch.h"
#include "runtime/modules.h"

namespace scaleplan::runtime {
namespace host {
namespace {

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "cpu";
}

// One rank's end of the in-process communicators of a HostWorld.
class InProcessTransport final : public Transport {
 public:
  InProcessTransport(HostWorld* world, int rank) : world_(world), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return world_->size(); }
  int local_size() const override { return world_->size(); }

  Result<Group> split(const Group& parent, int color, int key) override {
    SP_ASSIGN_OR_RETURN(HostComm * comm, comm_of(parent, "split"));
    int new_rank = -1;
    SP_ASSIGN_OR_RETURN(const int id, comm->split(parent.rank, color, key, &new_rank));
    if (id < 0) return Group{};
    return Group{id, world_->comm(id)->size(), new_rank};
  }
  Status collective(const Group& g, const CollectiveArgs& a) override {
    SP_ASSIGN_OR_RETURN(HostComm * comm, comm_of(g, to_string(a.op)));
    return comm->collective(g.rank, a);
  }
  Status exchange(const Group& g, const std::vector<P2POp>& ops) override {
    SP_ASSIGN_OR_RETURN(HostComm * comm, comm_of(g, "send/recv"));
    return comm->exchange(g.rank, ops);
  }
  Status flush() override { return Status::ok(); }  // sends are copied into their channel
  void abort(const std::string& why) override { world_->abort(why); }

 private:
  Result<HostComm*> comm_of(const Group& g, std::string_view op) {
    HostComm* comm = g.member() ? world_->comm(g.id) : nullptr;
    if (comm == nullptr || g.rank < 0 || g.rank >= comm->size() ||
        comm->world_ranks()[g.rank] != rank_) {
      return Status::invalid(std::string(op) + ": rank " + std::to_string(rank_) +
                             " is not a member of group " + std::to_string(g.id));
    }
    return comm;
  }

  HostWorld* world_;
  int rank_;
};

class HostBackend final : public Backend {
 public:
  HostBackend(std::unique_ptr<Transport> transport, Clock::time_point start)
      : transport_(std::move(transport)), start_(start) {
    world_group_ = Group{0, transport_->size(), transport_->rank()};
  }

  std::string name() const override { return "host"; }
  std::string device_name() const override {
    static const std::string model = cpu_model();
    return "host " + model;
  }
  int rank() const override { return transport_->rank(); }
  int world_size() const override { return transport_->size(); }
  int local_size() const override { return transport_->local_size(); }
  const Group& world() const override { return world_group_; }
  ElemType matmul_type() const override { return ElemType::kF32; }
  // One flash-style kernel for every AttentionShape::kernel (host_attention.cc).
  std::string attention_implementation(const AttentionShape&) const override { return "host"; }
  bool concurrent_streams() const override { return true; }

  Result<Buffer> allocate(int64_t count, ElemType type) override {
    if (count < 0) return Status::invalid("allocate: negative count " + std::to_string(count));
    const int64_t bytes = count * element_size(type);
    std::vector<char> storage(static_cast<size_t>(bytes) + 1, 0);
    Buffer b{storage.data(), count, type};
    std::lock_guard lock(mu_);
    memory_.emplace(b.data, std::move(storage));
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return b;
  }
  void release(Buffer& b) override {
    std::lock_guard lock(mu_);
    if (auto it = memory_.find(b.data); it != memory_.end()) {
      live_ -= static_cast<int64_t>(it->second.size()) - 1;
      memory_.erase(it);
    }
    b = Buffer{};
  }
  MemoryStats memory_stats() const override {
    std::lock_guard lock(mu_);
    return {Bytes(live_), Bytes(peak_)};
  }
  void reset_peak() override {
    std::lock_guard lock(mu_);
    peak_ = live_;
  }
  Status upload(const Buffer& dst, const void* src) override {
    if (dst.count > 0) std::memcpy(dst.data, src, dst.bytes().value());
    return Status::ok();
  }
  Status download(const Buffer& src, void* dst) override {
    if (src.count > 0) std::memcpy(dst, src.data, src.bytes().value());
    return Status::ok();
  }

  Status gemm(const GemmArgs& a) override { return host::gemm(a); }
  Status attention_forward(const AttentionArgs& a) override { return host::attention_forward(a); }
  Status attention_backward(const AttentionArgs& a) override { return host::attention_backward(a); }
  Status memory_op(const MemOpArgs& a) override { return host::memory_op(a); }

  Result<Group> split(const Group& parent, int color, int key) override {
    return transport_->split(parent, color, key);
  }
  Status collective(const Group& g, const CollectiveArgs& a) override {
    return transport_->collective(g, a);
  }
  Status exchange(const Group& g, const std::vector<P2POp>& ops, StreamKind) override {
    return transport_->exchange(g, ops);
  }

  Result<Event> record(StreamKind) override {
    const auto now = Clock::now();
    std::lock_guard lock(mu_);
    events_.push_back(now);
    return Event{static_cast<int64_t>(events_.size()) - 1};
  }
  Status wait(StreamKind, Event e) override { return check_event(e, "wait"); }
  Result<Duration> elapsed(Event a, Event b) override {
    SP_RETURN_IF_ERROR(check_event(a, "elapsed"));
    SP_RETURN_IF_ERROR(check_event(b, "elapsed"));
    std::lock_guard lock(mu_);
    return ticks(events_[b.id] - events_[a.id]);
  }
  Result<Duration> since_start(Event e) override {
    SP_RETURN_IF_ERROR(check_event(e, "since_start"));
    std::lock_guard lock(mu_);
    return ticks(events_[e.id] - start_);
  }
  Result<bool> query(Event e) override {
    SP_RETURN_IF_ERROR(check_event(e, "query"));
    return true;
  }
  Status synchronize() override { return transport_->flush(); }
  void abort(const std::string& why) override { transport_->abort(why); }

 private:
  static Duration ticks(Clock::duration d) {
    return Duration::ticks(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count() * 1000);
  }
  Status check_event(Event e, std::string_view op) const {
    std::lock_guard lock(mu_);
    if (e.id < 0 || e.id >= static_cast<int64_t>(events_.size())) {
      return Status::invalid(std::string(op) + ": event " + std::to_string(e.id) +
                             " was not recorded on this backend");
    }
    return Status::ok();
  }

  std::unique_ptr<Transport> transport_;
  Clock::time_point start_;
  Group world_group_;
  mutable std::mutex mu_;  // memory_, live_, peak_, events_
  std::unordered_map<void*, std::vector<char>> memory_;
  int64_t live_ = 0, peak_ = 0;
  std::vector<Clock::time_point> events_;
};

Status run_guarded(Backend& backend, const RankFn& fn) {
  try {
    return fn(backend);
  } catch (const std::exception& e) {
    return Status::internal(std::string("unexpected exception: ") + e.what());
  }
}

}  // namespace

Status run_host_rank(std::unique_ptr<Transport> transport, const RankFn& fn) {
  const int rank = transport->rank();
  HostBackend backend(std::move(transport), Clock::now());
  const Status st = run_guarded(backend, fn);
  if (!st.is_ok()) return st.with_context("rank " + std::to_string(rank));
  return Status::ok();
}

}  // namespace host

Status run_host_ranks(const LaunchOptions& options, const RankFn& fn) {
  if (launched_by_mpi()) {
    SP_ASSIGN_OR_RETURN(const MpiModule* mpi, mpi_module());
    SP_ASSIGN_OR_RETURN(auto transport, mpi->transport(options.timeout));
    const Status st = host::run_host_rank(std::move(transport), fn);
    if (!st.is_ok()) mpi->mark_failed();
    return st;
  }
  const int ranks = options.ranks;
  if (ranks < 1)
    return Status::invalid("host backend: ranks must be >= 1, got " + std::to_string(ranks));
  host::HostWorld world(ranks, options.timeout);
  const auto start = host::Clock::now();
  std::mutex mu;
  Status first;
  auto body = [&](int r) {
    host::HostBackend backend(std::make_unique<host::InProcessTransport>(&world, r), start);
    const Status st = host::run_guarded(backend, fn);
    if (!st.is_ok()) {
      const Status named = st.with_context("rank " + std::to_string(r));
      std::lock_guard lock(mu);
      // A rank aborted by another's failure reports "aborted"; keep the original failure, which
      // may come second (the aborted rank can return first).
      if (first.is_ok() || (is_abort(first) && !is_abort(named))) first = named;
      world.abort(named.message());
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  return first;
}

}  // namespace scaleplan::runtime
