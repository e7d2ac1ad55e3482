// In-process communicators for the host backend: every NCCL primitive between threads.
//
// A HostWorld is shared by the rank threads of one run_host_ranks call; it owns every HostComm
// (the world group and each group made by split), so Group ids index its comm table. A collective
// is barrier-based: each member posts its arguments, waits at the comm's barrier, checks that all
// members posted the same op / count / type / root, computes its own result from the other members'
// send buffers into private scratch, waits at the barrier again (nobody may overwrite a send buffer
// that another member still reads), then copies the scratch into its receive buffer. Reductions add
// in group-rank order 0..n-1, so results are deterministic and equal a sequential reference.
// Point-to-point transfers are eager: a send copies into the (src, dst) channel and returns; a recv
// waits for the next message of that channel. When any rank fails, `abort` wakes every waiter with
// an error, so a failure never turns into a hang; and a member that waits longer than the world's
// timeout (a peer that never arrives) fails with a message naming the members that did not.
//
// Each member's communication on one comm comes from one thread at a time (a rank may drive
// different comms from different threads at once: one per stream).
// Thread-safety: HostWorld and HostComm are used concurrently by their members, as described.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"

namespace scaleplan::runtime::host {

using Clock = std::chrono::steady_clock;

// A reusable barrier that can be aborted (std::barrier cannot) and that gives up at a deadline,
// naming the members (0..n-1) that had not arrived.
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int n) : n_(n), present_(static_cast<size_t>(n), false) {}
  // On a timeout `missing` (if given) receives the members that had not arrived.
  Status arrive_and_wait(int member, Clock::time_point deadline = Clock::time_point::max(),
                         std::vector<int>* missing = nullptr);
  void abort(const std::string& why);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
  std::vector<bool> present_;  // who has arrived in this generation
  int64_t generation_ = 0;
  bool aborted_ = false;
  std::string why_;
};

class HostWorld;

class HostComm {
 public:
  HostComm(HostWorld* world, int id, std::vector<int> world_ranks);
  int id() const { return id_; }
  int size() const { return static_cast<int>(world_ranks_.size()); }
  const std::vector<int>& world_ranks() const { return world_ranks_; }

  // Called by every member (group rank `me`) with its own arguments.
  Status collective(int me, const CollectiveArgs& args);
  Status exchange(int me, const std::vector<P2POp>& ops);
  Result<int> split(int me, int color, int key, int* new_rank);  // returns the new comm id, or -1
  void abort(const std::string& why);

 private:
  struct Post {
    CollectiveArgs args;
    int color = 0, key = 0, new_comm = -1;
  };
  struct Channel {
    std::deque<std::vector<char>> messages;
  };
  Status check_posts(int me) const;
  Status wait_barrier(int me);

  HostWorld* world_;
  int id_;
  std::vector<int> world_ranks_;
  AbortableBarrier barrier_;
  std::vector<Post> posts_;
  std::mutex p2p_mu_;
  std::condition_variable p2p_cv_;
  std::map<std::pair<int, int>, Channel> channels_;
  bool aborted_ = false;
  std::string why_;
};

class HostWorld {
 public:
  // `timeout`: how long a member waits for the others at a collective or for a message (0:
  // forever).
  explicit HostWorld(int size, Duration timeout = Duration::zero());
  int size() const { return size_; }
  Duration timeout() const { return timeout_; }
  Clock::time_point deadline() const;
  HostComm* comm(int id);
  int add_comm(std::vector<int> world_ranks);
  void abort(const std::string& why);

 private:
  int size_;
  Duration timeout_;
  std::mutex mu_;
  std::vector<std::unique_ptr<HostComm>> comms_;
  bool aborted_ = false;
  std::string why_;
};

}  // namespace scaleplan::runtime::host
