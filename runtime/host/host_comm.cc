#include "runtime/host/host_comm.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>

#include "runtime/host/bf16.h"

namespace scaleplan::runtime::host {

Status AbortableBarrier::arrive_and_wait(int member, Clock::time_point deadline,
                                         std::vector<int>* missing) {
  std::unique_lock lock(mu_);
  if (aborted_) return Status::internal("aborted: " + why_);
  const int64_t gen = generation_;
  present_[static_cast<size_t>(member)] = true;
  if (++arrived_ == n_) {
    arrived_ = 0;
    std::fill(present_.begin(), present_.end(), false);
    ++generation_;
    cv_.notify_all();
    return Status::ok();
  }
  cv_.wait_until(lock, deadline, [&] { return generation_ != gen || aborted_; });
  if (generation_ != gen) return Status::ok();
  if (aborted_) return Status::internal("aborted: " + why_);
  if (missing) {
    for (int m = 0; m < n_; ++m) {
      if (!present_[static_cast<size_t>(m)]) missing->push_back(m);
    }
  }
  return Status::internal("timed out: " + std::to_string(arrived_) + " of " + std::to_string(n_) +
                          " members arrived");
}

void AbortableBarrier::abort(const std::string& why) {
  std::lock_guard lock(mu_);
  if (!aborted_) why_ = why;
  aborted_ = true;
  cv_.notify_all();
}

namespace {

std::string fmt_seconds(Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g s", d.to_seconds());
  return buf;
}

// Elements this member must provide in its send and recv buffers for `a` in a group of n.
void required_counts(const CollectiveArgs& a, int n, int me, int64_t* send, int64_t* recv) {
  const int64_t c = a.count;
  const bool root = me == a.root;
  switch (a.op) {
    case CollectiveOp::kAllReduce:
      *send = c;
      *recv = c;
      break;
    case CollectiveOp::kAllGather:
      *send = c;
      *recv = n * c;
      break;
    case CollectiveOp::kReduceScatter:
      *send = n * c;
      *recv = c;
      break;
    case CollectiveOp::kAllToAll:
      *send = n * c;
      *recv = n * c;
      break;
    case CollectiveOp::kBroadcast:
      *send = root ? c : 0;
      *recv = c;
      break;
    case CollectiveOp::kReduce:
      *send = c;
      *recv = root ? c : 0;
      break;
    case CollectiveOp::kGather:
      *send = c;
      *recv = root ? n * c : 0;
      break;
    case CollectiveOp::kScatter:
      *send = root ? n * c : 0;
      *recv = c;
      break;
    case CollectiveOp::kSendRecv:  // not a collective: rejected by collective()
    case CollectiveOp::kBarrier:
      *send = 0;
      *recv = 0;
      break;
  }
}

template <typename T>
T combine(T acc, T v, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return acc + v;
    case ReduceOp::kMax:
      return std::max(acc, v);
    case ReduceOp::kMin:
      return std::min(acc, v);
  }
  return acc;
}

// dst[i] = reduce over r of srcs[r][offset + i], in rank order.
void reduce_block(const std::vector<const void*>& srcs, int64_t offset, int64_t count, ElemType t,
                  ReduceOp op, void* dst) {
  const int n = static_cast<int>(srcs.size());
  for (int64_t i = 0; i < count; ++i) {
    if (t == ElemType::kI32) {
      int32_t acc = static_cast<const int32_t*>(srcs[0])[offset + i];
      for (int r = 1; r < n; ++r)
        acc = combine(acc, static_cast<const int32_t*>(srcs[r])[offset + i], op);
      if (op == ReduceOp::kAvg) acc /= n;
      static_cast<int32_t*>(dst)[i] = acc;
      continue;
    }
    auto load = [&](int r) {
      return t == ElemType::kF32 ? static_cast<const float*>(srcs[r])[offset + i]
                                 : bf16_to_float(static_cast<const uint16_t*>(srcs[r])[offset + i]);
    };
    float acc = load(0);
    for (int r = 1; r < n; ++r) acc = combine(acc, load(r), op);
    if (op == ReduceOp::kAvg) acc /= static_cast<float>(n);
    if (t == ElemType::kF32) {
      static_cast<float*>(dst)[i] = acc;
    } else {
      static_cast<uint16_t*>(dst)[i] = float_to_bf16(acc);
    }
  }
}

}  // namespace

HostComm::HostComm(HostWorld* world, int id, std::vector<int> world_ranks)
    : world_(world),
      id_(id),
      world_ranks_(std::move(world_ranks)),
      barrier_(static_cast<int>(world_ranks_.size())),
      posts_(world_ranks_.size()) {}

Status HostComm::check_posts(int me) const {
  const CollectiveArgs& mine = posts_[me].args;
  const std::string op(to_string(mine.op));
  const int n = size();
  for (int r = 0; r < n; ++r) {
    const CollectiveArgs& o = posts_[r].args;
    if (o.op != mine.op) {
      return Status::internal(op + ": group rank " + std::to_string(r) + " called " +
                              std::string(to_string(o.op)) +
                              " at the same time (mismatched collectives)");
    }
    if (o.count != mine.count || o.root != mine.root || o.reduce != mine.reduce) {
      return Status::internal(op + ": group rank " + std::to_string(r) + " passed count " +
                              std::to_string(o.count) + ", root " + std::to_string(o.root) +
                              " but group rank " + std::to_string(me) + " passed count " +
                              std::to_string(mine.count) + ", root " + std::to_string(mine.root));
    }
  }
  if (mine.root < 0 || mine.root >= n) {
    return Status::invalid(op + ": root " + std::to_string(mine.root) + " outside a group of " +
                           std::to_string(n));
  }
  if (mine.count < 0) return Status::invalid(op + ": negative count");
  // Types must agree with the root's or rank 0's buffers (all members reduce the same type).
  const ElemType t0 = posts_[mine.root].args.send.data ? posts_[mine.root].args.send.type
                                                       : posts_[mine.root].args.recv.type;
  for (int r = 0; r < n; ++r) {
    const CollectiveArgs& o = posts_[r].args;
    if ((o.send.data && o.send.type != t0) || (o.recv.data && o.recv.type != t0)) {
      return Status::invalid(op + ": group rank " + std::to_string(r) + " uses element type " +
                             std::string(to_string(o.send.data ? o.send.type : o.recv.type)) +
                             ", root uses " + std::string(to_string(t0)));
    }
  }
  int64_t need_send = 0, need_recv = 0;
  required_counts(mine, n, me, &need_send, &need_recv);
  if (mine.send.count < need_send || mine.recv.count < need_recv) {
    return Status::invalid(op + ": group rank " + std::to_string(me) + " needs " +
                           std::to_string(need_send) + " send and " + std::to_string(need_recv) +
                           " recv elements, buffers hold " + std::to_string(mine.send.count) +
                           " and " + std::to_string(mine.recv.count));
  }
  return Status::ok();
}

Status HostComm::collective(int me, const CollectiveArgs& a) {
  // Every member gets the same op, so every member returns here and none waits at the barrier.
  if (a.op == CollectiveOp::kSendRecv) {
    return Status::invalid("sendrecv is point to point, not a collective: use send()/recv()");
  }
  SP_RETURN_IF_ERROR(check_collective_type(a));
  const int n = size();
  posts_[me].args = a;
  SP_RETURN_IF_ERROR(wait_barrier(me));
  // Every member sees the same posts and so reaches the same verdict on their consistency; a
  // member whose own buffers are too small fails alone, after the second barrier.
  Status st = check_posts(me);
  const ElemType t = a.send.data ? a.send.type : a.recv.type;
  const int64_t e = element_size(t);
  const int64_t c = a.count;
  std::vector<char> scratch;
  std::vector<const void*> sends(n);
  for (int r = 0; r < n; ++r) sends[r] = posts_[r].args.send.data;
  const bool root = me == a.root;
  if (st.is_ok()) {
    switch (a.op) {
      case CollectiveOp::kAllReduce:
        scratch.resize(c * e);
        reduce_block(sends, 0, c, t, a.reduce, scratch.data());
        break;
      case CollectiveOp::kReduce:
        if (root) {
          scratch.resize(c * e);
          reduce_block(sends, 0, c, t, a.reduce, scratch.data());
        }
        break;
      case CollectiveOp::kReduceScatter:
        scratch.resize(c * e);
        reduce_block(sends, me * c, c, t, a.reduce, scratch.data());
        break;
      case CollectiveOp::kAllGather:
        scratch.resize(n * c * e);
        for (int r = 0; r < n; ++r) std::memcpy(scratch.data() + r * c * e, sends[r], c * e);
        break;
      case CollectiveOp::kGather:
        if (root) {
          scratch.resize(n * c * e);
          for (int r = 0; r < n; ++r) std::memcpy(scratch.data() + r * c * e, sends[r], c * e);
        }
        break;
      case CollectiveOp::kAllToAll:
        scratch.resize(n * c * e);
        for (int r = 0; r < n; ++r) {
          std::memcpy(scratch.data() + r * c * e, static_cast<const char*>(sends[r]) + me * c * e,
                      c * e);
        }
        break;
      case CollectiveOp::kBroadcast:
        scratch.resize(c * e);
        std::memcpy(scratch.data(), sends[a.root], c * e);
        break;
      case CollectiveOp::kScatter:
        scratch.resize(c * e);
        std::memcpy(scratch.data(), static_cast<const char*>(sends[a.root]) + me * c * e, c * e);
        break;
      case CollectiveOp::kSendRecv:  // not a collective: rejected by collective()
      case CollectiveOp::kBarrier:
        break;
    }
  }
  SP_RETURN_IF_ERROR(wait_barrier(me));
  if (!st.is_ok()) return st;
  if (!scratch.empty()) std::memcpy(a.recv.data, scratch.data(), scratch.size());
  return Status::ok();
}

Status HostComm::exchange(int me, const std::vector<P2POp>& ops) {
  const int n = size();
  for (const P2POp& op : ops) {
    if (op.peer < 0 || op.peer >= n || op.peer == me) {
      return Status::invalid(std::string(op.is_send ? "send" : "recv") + ": peer " +
                             std::to_string(op.peer) + " is not another rank of a group of " +
                             std::to_string(n));
    }
  }
  // Sends first, eagerly buffered, so that a batch which sends and receives never deadlocks.
  for (const P2POp& op : ops) {
    if (!op.is_send) continue;
    const char* p = static_cast<const char*>(op.buffer.data);
    std::lock_guard lock(p2p_mu_);
    channels_[{me, op.peer}].messages.emplace_back(p, p + op.buffer.bytes().value());
    p2p_cv_.notify_all();
  }
  for (const P2POp& op : ops) {
    if (op.is_send) continue;
    std::unique_lock lock(p2p_mu_);
    Channel& ch = channels_[{op.peer, me}];
    p2p_cv_.wait_until(lock, world_->deadline(), [&] { return !ch.messages.empty() || aborted_; });
    if (ch.messages.empty() && aborted_)
      return Status::internal("recv from group rank " + std::to_string(op.peer) +
                              ": aborted: " + why_);
    if (ch.messages.empty()) {
      return Status::internal("recv from group rank " + std::to_string(op.peer) + " (global rank " +
                              std::to_string(world_ranks_[op.peer]) + "): timed out after " +
                              fmt_seconds(world_->timeout()) + " without a message");
    }
    std::vector<char> msg = std::move(ch.messages.front());
    ch.messages.pop_front();
    lock.unlock();
    if (static_cast<int64_t>(msg.size()) != op.buffer.bytes().value()) {
      return Status::invalid("recv from group rank " + std::to_string(op.peer) + ": message of " +
                             std::to_string(msg.size()) + " bytes, receive buffer holds " +
                             std::to_string(op.buffer.bytes().value()));
    }
    std::memcpy(op.buffer.data, msg.data(), msg.size());
  }
  return Status::ok();
}

Result<int> HostComm::split(int me, int color, int key, int* new_rank) {
  const int n = size();
  posts_[me].color = color;
  posts_[me].key = key;
  // new_comm is written only by a group's leader, between the barriers, and read after the second:
  // resetting it here would race with members still reading the previous split's result.
  SP_RETURN_IF_ERROR(wait_barrier(me));
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    if (color >= 0 && posts_[r].color == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(),
                   [&](int x, int y) { return posts_[x].key < posts_[y].key; });
  const auto pos = std::find(members.begin(), members.end(), me);
  *new_rank = color >= 0 ? static_cast<int>(pos - members.begin()) : -1;
  if (color >= 0 && members.front() == me) {
    std::vector<int> world_ranks;
    for (int r : members) world_ranks.push_back(world_ranks_[r]);
    posts_[me].new_comm = world_->add_comm(std::move(world_ranks));
  }
  SP_RETURN_IF_ERROR(wait_barrier(me));
  return color >= 0 ? posts_[members.front()].new_comm : -1;
}

Status HostComm::wait_barrier(int me) {
  std::vector<int> missing;
  Status st = barrier_.arrive_and_wait(me, world_->deadline(), &missing);
  if (st.is_ok() || missing.empty()) return st;
  std::string ranks;
  for (int g : missing) {
    if (!ranks.empty()) ranks += ',';
    ranks += std::to_string(world_ranks_[g]);
  }
  return Status::internal("timed out after " + fmt_seconds(world_->timeout()) +
                          " waiting for global rank(s) " + ranks + " (" +
                          std::to_string(size() - static_cast<int>(missing.size())) + " of " +
                          std::to_string(size()) + " members arrived)");
}

void HostComm::abort(const std::string& why) {
  barrier_.abort(why);
  std::lock_guard lock(p2p_mu_);
  if (!aborted_) why_ = why;
  aborted_ = true;
  p2p_cv_.notify_all();
}

HostWorld::HostWorld(int size, Duration timeout) : size_(size), timeout_(timeout) {
  std::vector<int> all(size);
  std::iota(all.begin(), all.end(), 0);
  add_comm(std::move(all));
}

Clock::time_point HostWorld::deadline() const {
  if (timeout_ <= Duration::zero()) return Clock::time_point::max();
  return Clock::now() + std::chrono::nanoseconds(timeout_.count() / 1000);
}

HostComm* HostWorld::comm(int id) {
  std::lock_guard lock(mu_);
  if (id < 0 || id >= static_cast<int>(comms_.size())) return nullptr;
  return comms_[id].get();
}

int HostWorld::add_comm(std::vector<int> world_ranks) {
  std::lock_guard lock(mu_);
  const int id = static_cast<int>(comms_.size());
  comms_.push_back(std::make_unique<HostComm>(this, id, std::move(world_ranks)));
  if (aborted_) comms_.back()->abort(why_);
  return id;
}

void HostWorld::abort(const std::string& why) {
  std::lock_guard lock(mu_);
  if (!aborted_) why_ = why;
  aborted_ = true;
  for (auto& c : comms_) c->abort(why);
}

}  // namespace scaleplan::runtime::host
