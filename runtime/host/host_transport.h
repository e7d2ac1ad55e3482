// How the host backend's ranks communicate: in process (threads, runtime/host/host_comm.h) or
// between processes over MPI (runtime/host/host_mpi.cc, one rank per process under mpirun).
//
// A Transport is one rank's end. Groups are its own handles (Group::id indexes its
// communicators); the world is id 0. Every call follows runtime/backend.h's conventions (NCCL
// count conventions, split as ncclCommSplit). A member's calls on one group come from one thread
// at a time; different groups may be driven from different threads at once (one per stream).
// A wait for peers gives up after the transport's timeout with a message naming who did not
// arrive where it can tell.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "runtime/backend.h"
#include "runtime/launch.h"

namespace scaleplan::runtime::host {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual int local_size() const = 0;  // ranks on this machine
  virtual Result<Group> split(const Group& parent, int color, int key) = 0;
  virtual Status collective(const Group& group, const CollectiveArgs& args) = 0;
  // Sends are eager: they return once the data is copied out of the buffer.
  virtual Status exchange(const Group& group, const std::vector<P2POp>& ops) = 0;
  // Completes this rank's pending eager sends (MPI), within the timeout.
  virtual Status flush() = 0;
  // Every wait, now and later, fails with `why` (Backend::abort).
  virtual void abort(const std::string& why) = 0;
};

// Runs `fn` with one host backend over `transport` on this thread: the entry point for a process
// that is one rank (MPI).
Status run_host_rank(std::unique_ptr<Transport> transport, const RankFn& fn);

#ifdef SCALEPLAN_HAVE_MPI
// The MPI transport of this process (MPI_COMM_WORLD), initializing MPI with
// MPI_THREAD_MULTIPLE if it is not yet.
Result<std::unique_ptr<Transport>> mpi_transport(Duration timeout);
#endif

}  // namespace scaleplan::runtime::host
