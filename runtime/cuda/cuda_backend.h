// The cuda backend of one rank (cuda_backend.cc) and what the launcher (cuda_launch.cc) shares
// with it: the communicators of a run, so that a failing rank can abort the others'. Used by
// runtime/cuda only; the rest of the project reaches the backend through runtime/launch.h.
#pragma once

#include <nccl.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"

namespace scaleplan::runtime::cuda {

// Communicators of one run, so that a failing rank can abort the others' pending collectives
// (ncclCommAbort) instead of leaving them blocked.
class CommRegistry {
 public:
  void add(ncclComm_t c) {
    std::lock_guard lock(mu_);
    comms_.push_back(c);
  }
  void abort_all() {
    std::lock_guard lock(mu_);
    if (aborted_) return;
    aborted_ = true;
    for (ncclComm_t c : comms_) ncclCommAbort(c);
  }
  bool aborted() {
    std::lock_guard lock(mu_);
    return aborted_;
  }

 private:
  std::mutex mu_;
  std::vector<ncclComm_t> comms_;
  bool aborted_ = false;
};

// Where one rank runs: its rank and the world's size, the ranks on its node, its CUDA device.
struct CudaRank {
  int rank = 0;
  int world = 1;
  int local = 1;
  int device = 0;
};

// The backend of one rank on `comm` (the world's communicator, which it destroys unless the
// registry aborted it), initialised: its device set, streams and cuBLASLt made, the start event
// recorded. `reference_attention`: LaunchOptions::reference_attention.
Result<std::unique_ptr<Backend>> make_cuda_backend(const CudaRank& r, ncclComm_t comm,
                                                   CommRegistry* registry,
                                                   bool reference_attention);

}  // namespace scaleplan::runtime::cuda
