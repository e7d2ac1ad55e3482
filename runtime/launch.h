// Launching ranks: one call runs a function on every rank of a backend and gathers the outcome.
//
// host: `ranks` threads in this process, one host Backend each, joined by in-process collectives.
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
};

using RankFn = std::function<Status(Backend&)>;

Status run_ranks(const LaunchOptions& options, const RankFn& fn);

// Whether this build contains the cuda backend (the CUDA toolkit and NCCL were found), and how
// many CUDA devices this process sees (0 without the backend, a driver or a GPU).
bool cuda_backend_compiled();
int cuda_device_count();
// The CUDA devices this process sees (name, memory, SM count, as cudaGetDeviceProperties reports
// them); empty without the backend, a driver or a GPU. Callers that decide by the GPU take a
// DeviceQuery, so that tests can answer for a machine they are not.
std::vector<hw::DeviceIdentity> cuda_devices();
using DeviceQuery = std::function<std::vector<hw::DeviceIdentity>()>;

// Entry points of the two backends; run_ranks dispatches to them.
Status run_host_ranks(int ranks, const RankFn& fn);
Status run_cuda_ranks(int ranks, const RankFn& fn);  // an error when !cuda_backend_compiled()

}  // namespace scaleplan::runtime
