// The MPI environment of a process started by mpirun or srun, shared by both backends' bootstraps
// (internal to runtime/).
//
// mpi_init initializes MPI once (MPI_THREAD_MULTIPLE: the host backend's streams are threads that
// communicate at once) and finalizes it at exit; after mpi_mark_failed it does not, because
// MPI_Finalize waits for every process and a failed run may have left one that never arrives:
// the launcher then sees this process end without finalizing and takes the job down.
#pragma once

#include <string>

#include "core/status.h"

#ifdef SCALEPLAN_HAVE_MPI
#define OMPI_SKIP_MPICXX 1  // the C API only; the C++ bindings warn and are deprecated
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace scaleplan::runtime {

#ifdef SCALEPLAN_HAVE_MPI
// `threads`: the caller calls MPI from several threads at once (MPI_THREAD_MULTIPLE required).
Status mpi_init(bool threads);
void mpi_mark_failed();
// An MPI return code as a Status naming the call and MPI's message.
Status mpi_error(const std::string& op, const char* call, int code);
#define SP_MPI_CALL(op, call)                                                 \
  do {                                                                        \
    const int sp_mpi_rc_ = (call);                                            \
    if (sp_mpi_rc_ != MPI_SUCCESS) return mpi_error((op), #call, sp_mpi_rc_); \
  } while (0)
#endif

}  // namespace scaleplan::runtime
