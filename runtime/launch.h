// Launching ranks: one call runs a function on every rank of a backend and gathers the outcome.
//
// host: `ranks` threads in this process, one host Backend each, joined by in-process collectives;
// or, when the process was started by mpirun or srun, this process is one rank and the
// collectives go over MPI (built with MPI only; `ranks` is then the MPI world's size).
// cuda: one rank per GPU, bootstrapped in one of two ways (DESIGN.md, runtime/):
//   - MPI: the process was started by mpirun or srun (OMPI_COMM_WORLD_*, PMI_*, SLURM_* in the
//     environment); rank 0 makes the NCCL unique id and broadcasts it with MPI_Bcast (nccl-tests).
//     Each process drives one GPU, its local rank.
//   - single process: one thread per local GPU (`ranks` of them, 0 = all), one NCCL communicator
//     each, initialized together.
// The function runs once per rank, on that rank's thread. When one rank fails, the others' pending
// collectives are aborted (they return an error rather than hang) and the first failure is
// returned, prefixed with "rank r: ".
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/status.h"
#include "hw_profiles/gpu_identity.h"
#include "runtime/backend.h"

namespace scaleplan::runtime {

enum class BackendKind { kHost, kCuda };
Result<BackendKind> parse_backend_kind(std::string_view s);  // "host" | "cuda"

struct LaunchOptions {
  BackendKind kind = BackendKind::kHost;
  int ranks = 1;  // host: threads; cuda single-process: local GPUs to drive (0 = all)
  // How long a host collective or receive waits for its peers before it fails, naming them
  // (the executor also bounds its own waits on cuda with it). 0: forever.
  Duration timeout{};
  // cuda: attention through the backend's reference kernels (runtime/cuda/attention.cu: no tensor
  // cores, ~1 TFLOP/s on an H200) instead of the kernel the shape names. Only the oracle of the
  // host-vs-GPU tests; `profile` refuses to fit attention measured on them.
  bool reference_attention = false;
};

using RankFn = std::function<Status(Backend&)>;

// Whether a rank's failure is the consequence of another's (its waits were aborted): its message
// says "aborted: " (the backends' and the executor's convention). run_ranks reports the first
// failure that is not. Inline: the cuda module (runtime/modules.h) uses it too.
inline bool is_abort(const Status& st) {
  return !st.is_ok() && st.message().find("aborted: ") != std::string::npos;
}

Status run_ranks(const LaunchOptions& options, const RankFn& fn);

// Whether the process was started by an MPI launcher (OMPI_COMM_WORLD_*, PMI_*, PMIX_*, SLURM_*
// with several tasks); then run_ranks makes this process one rank of the MPI world, on either
// backend. The world rank and size the launcher gave (0 and 1 when not launched by MPI).
bool launched_by_mpi();
int launched_rank();
int launched_world_size();
// How many of the launcher's processes run on this machine (1 when not launched by MPI; the world
// size when the launcher does not say).
int launched_local_size();
// Whether this build can bootstrap over MPI (MPI was found at configure time and its module,
// libscaleplan_mpi.so, built; runtime/modules.h).
bool mpi_compiled();

// Whether this build contains the cuda backend (the CUDA toolkit and NCCL were found; the backend
// is the module libscaleplan_cuda.so, loaded on first use: runtime/modules.h), and how many CUDA
// devices this process sees (0 without the backend, its module, a driver or a GPU).
bool cuda_backend_compiled();
int cuda_device_count();
// The CUDA devices this process sees (name, memory, SM count, as cudaGetDeviceProperties reports
// them); empty without the backend, a driver or a GPU. Callers that decide by the GPU take a
// DeviceQuery, so that tests can answer for a machine they are not.
std::vector<hw::DeviceIdentity> cuda_devices();
using DeviceQuery = std::function<std::vector<hw::DeviceIdentity>()>;

// Entry points of the two backends; run_ranks dispatches to them.
Status run_host_ranks(const LaunchOptions& options, const RankFn& fn);
inline Status run_host_ranks(int ranks, const RankFn& fn) {
  return run_host_ranks(LaunchOptions{BackendKind::kHost, ranks}, fn);
}
// An error when !cuda_backend_compiled() or when its module cannot be loaded.
Status run_cuda_ranks(const LaunchOptions& options, const RankFn& fn);
inline Status run_cuda_ranks(int ranks, const RankFn& fn) {
  return run_cuda_ranks(LaunchOptions{BackendKind::kCuda, ranks}, fn);
}

}  // namespace scaleplan::runtime
