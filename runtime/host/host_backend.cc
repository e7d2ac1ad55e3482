// The host backend: a rank is a thread; kernels are runtime/host/host_kernels.h; communication is
// runtime/host/host_comm.h. Ops run synchronously in the rank's thread, so an event's timestamp is
// the steady clock when `record` is called and streams only label the ops.
#include <chrono>
#include <cstring>
#include <fstream>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "runtime/host/host_comm.h"
#include "runtime/host/host_kernels.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace host {
namespace {

using Clock = std::chrono::steady_clock;

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

class HostBackend final : public Backend {
 public:
  HostBackend(HostWorld* world, int rank, Clock::time_point start)
      : world_(world), rank_(rank), start_(start) {
    world_group_ = Group{0, world->size(), rank};
  }

  std::string name() const override { return "host"; }
  std::string device_name() const override {
    static const std::string model = cpu_model();
    return "host " + model;
  }
  int rank() const override { return rank_; }
  int world_size() const override { return world_->size(); }
  int local_size() const override { return world_->size(); }
  const Group& world() const override { return world_group_; }
  ElemType matmul_type() const override { return ElemType::kF32; }

  Result<Buffer> allocate(int64_t count, ElemType type) override {
    if (count < 0) return Status::invalid("allocate: negative count " + std::to_string(count));
    std::vector<char> storage(static_cast<size_t>(count * element_size(type)) + 1, 0);
    Buffer b{storage.data(), count, type};
    memory_.emplace(b.data, std::move(storage));
    return b;
  }
  void release(Buffer& b) override {
    memory_.erase(b.data);
    b = Buffer{};
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
  Status exchange(const Group& g, const std::vector<P2POp>& ops, StreamKind) override {
    SP_ASSIGN_OR_RETURN(HostComm * comm, comm_of(g, "send/recv"));
    return comm->exchange(g.rank, ops);
  }

  Result<Event> record(StreamKind) override {
    events_.push_back(Clock::now());
    return Event{static_cast<int64_t>(events_.size()) - 1};
  }
  Status wait(StreamKind, Event e) override { return check_event(e, "wait"); }
  Result<Duration> elapsed(Event a, Event b) override {
    SP_RETURN_IF_ERROR(check_event(a, "elapsed"));
    SP_RETURN_IF_ERROR(check_event(b, "elapsed"));
    return ticks(events_[b.id] - events_[a.id]);
  }
  Result<Duration> since_start(Event e) override {
    SP_RETURN_IF_ERROR(check_event(e, "since_start"));
    return ticks(events_[e.id] - start_);
  }
  Status synchronize() override { return Status::ok(); }

 private:
  static Duration ticks(Clock::duration d) {
    return Duration::ticks(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count() * 1000);
  }
  Status check_event(Event e, std::string_view op) const {
    if (e.id < 0 || e.id >= static_cast<int64_t>(events_.size())) {
      return Status::invalid(std::string(op) + ": event " + std::to_string(e.id) +
                             " was not recorded on this backend");
    }
    return Status::ok();
  }
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
  Clock::time_point start_;
  Group world_group_;
  std::unordered_map<void*, std::vector<char>> memory_;
  std::vector<Clock::time_point> events_;
};

}  // namespace
}  // namespace host

Status run_host_ranks(int ranks, const RankFn& fn) {
  if (ranks < 1)
    return Status::invalid("host backend: ranks must be >= 1, got " + std::to_string(ranks));
  host::HostWorld world(ranks);
  const auto start = std::chrono::steady_clock::now();
  std::mutex mu;
  Status first;
  auto body = [&](int r) {
    host::HostBackend backend(&world, r, start);
    Status st;
    try {
      st = fn(backend);
    } catch (const std::exception& e) {
      st = Status::internal(std::string("unexpected exception: ") + e.what());
    }
    if (!st.is_ok()) {
      const Status named = st.with_context("rank " + std::to_string(r));
      std::lock_guard lock(mu);
      // A rank aborted by another's failure reports "aborted"; keep the original failure.
      if (first.is_ok()) {
        first = named;
        world.abort(named.message());
      }
    }
  };
  std::vector<std::thread> threads;
  for (int r = 1; r < ranks; ++r) threads.emplace_back(body, r);
  body(0);
  for (auto& t : threads) t.join();
  return first;
}

}  // namespace scaleplan::runtime
