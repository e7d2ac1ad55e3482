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
// an error, so a failure never turns into a hang.
//
// Thread-safety: HostWorld and HostComm are used concurrently by their members, as described.
#pragma once

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

// A reusable barrier that can be aborted (std::barrier cannot).
class AbortableBarrier {
 public:
  explicit AbortableBarrier(int n) : n_(n) {}
  Status arrive_and_wait();
  void abort(const std::string& why);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
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
  explicit HostWorld(int size);
  int size() const { return size_; }
  HostComm* comm(int id);
  int add_comm(std::vector<int> world_ranks);
  void abort(const std::string& why);

 private:
  int size_;
  std::mutex mu_;
  std::vector<std::unique_ptr<HostComm>> comms_;
  bool aborted_ = false;
  std::string why_;
};

}  // namespace scaleplan::runtime::host
