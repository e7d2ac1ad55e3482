#include "runtime/mpi_env.h"

#include <atomic>
#include <cstdlib>

#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace {

int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    if (const char* v = std::getenv(n)) return std::atoi(v);
  }
  return fallback;
}

}  // namespace

bool launched_by_mpi() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MV2_COMM_WORLD_SIZE"}) {
    if (std::getenv(v)) return true;
  }
  const char* tasks = std::getenv("SLURM_NTASKS");
  return tasks && std::atoi(tasks) > 1 && std::getenv("SLURM_PROCID");
}

int launched_rank() {
  if (!launched_by_mpi()) return 0;
  return env_int(
      {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "MV2_COMM_WORLD_RANK", "SLURM_PROCID"}, 0);
}

int launched_world_size() {
  if (!launched_by_mpi()) return 1;
  return env_int({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE", "SLURM_NTASKS"}, 1);
}

int launched_local_size() {
  if (!launched_by_mpi()) return 1;
  // Launchers that do not say how many of their processes share this machine: assume all do.
  return env_int({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "MV2_COMM_WORLD_LOCAL_SIZE",
                  "SLURM_NTASKS_PER_NODE"},
                 launched_world_size());
}

#ifdef SCALEPLAN_HAVE_MPI
namespace {
std::atomic<bool> g_failed{false};
}

Status mpi_error(const std::string& op, const char* call, int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return Status::internal(op + ": " + call + " failed: " + std::string(msg, len));
}

Status mpi_init(bool threads) {
  int initialized = 0, provided = 0;
  SP_MPI_CALL("mpi bootstrap", MPI_Initialized(&initialized));
  if (initialized) {
    SP_MPI_CALL("mpi bootstrap", MPI_Query_thread(&provided));
    return !threads || provided >= MPI_THREAD_MULTIPLE
               ? Status::ok()
               : Status::internal(
                     "mpi bootstrap: MPI was initialized without MPI_THREAD_MULTIPLE, "
                     "which the host backend's concurrent streams need");
  }
  SP_MPI_CALL("mpi bootstrap", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided));
  // Errors are values: a failed call returns its code instead of aborting the job.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  std::atexit([] {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && !g_failed.load()) MPI_Finalize();
  });
  if (threads && provided < MPI_THREAD_MULTIPLE) {
    return Status::internal(
        "mpi bootstrap: this MPI library does not provide MPI_THREAD_MULTIPLE, which the host "
        "backend's concurrent streams need");
  }
  return Status::ok();
}

void mpi_mark_failed() { g_failed.store(true); }
#endif

}  // namespace scaleplan::runtime
