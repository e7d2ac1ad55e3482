// Launching the cuda backend's ranks: one process driving every local GPU (one thread per rank,
// the communicators from ncclCommInitAll) or one rank per process under an MPI launcher (the id
// from rank 0 by MPI_Bcast, as nccl-tests bootstraps); the first failing rank aborts the others'
// communicators so that none is left blocked in a collective. Built into the module
// libscaleplan_cuda.so, whose one export is the table at the end (runtime/modules.h).
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/cuda/check.h"
#include "runtime/cuda/cuda_backend.h"
#include "runtime/launch.h"
#include "runtime/modules.h"
#include "runtime/mpi_env.h"

namespace scaleplan::runtime {
namespace cuda {
namespace {

Result<int> device_count() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    return Status::invalid(std::string("cuda backend: no CUDA device: cudaGetDeviceCount: ") +
                           cudaGetErrorString(e));
  }
  if (n == 0) return Status::invalid("cuda backend: no CUDA device: cudaGetDeviceCount found none");
  return n;
}

// Runs fn on every backend's thread; the first failure aborts the communicators of the others.
Status run_all(std::vector<std::unique_ptr<Backend>>& backends, CommRegistry& registry,
               const RankFn& fn) {
  std::mutex mu;
  Status first;
  auto body = [&](size_t i) {
    cudaSetDevice(static_cast<int>(i));
    Status st;
    try {
      st = fn(*backends[i]);
    } catch (const std::exception& ex) {
      st = Status::internal(std::string("unexpected exception: ") + ex.what());
    }
    if (!st.is_ok()) {
      const Status named = st.with_context("rank " + std::to_string(backends[i]->rank()));
      std::lock_guard lock(mu);
      if (first.is_ok() || (is_abort(first) && !is_abort(named))) first = named;
      registry.abort_all();
    }
  };
  std::vector<std::thread> threads;
  for (size_t i = 1; i < backends.size(); ++i) threads.emplace_back(body, i);
  body(0);
  for (auto& t : threads) t.join();
  return first;
}

#ifdef SCALEPLAN_HAVE_MPI
#define SP_MPI_CHECK(call) SP_MPI_CALL("cuda backend: bootstrap", call)

Status run_mpi(const LaunchOptions& options, const RankFn& fn) {
  SP_RETURN_IF_ERROR(mpi_init(/*threads=*/false));
  int rank = 0, size = 1, local_rank = 0, local_size = 1;
  SP_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  SP_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  MPI_Comm node;
  SP_MPI_CHECK(
      MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  SP_MPI_CHECK(MPI_Comm_rank(node, &local_rank));
  SP_MPI_CHECK(MPI_Comm_size(node, &local_size));
  MPI_Comm_free(&node);
  SP_ASSIGN_OR_RETURN(const int devices, device_count());
  if (local_size > devices) {
    return Status::invalid("cuda backend: " + std::to_string(local_size) +
                           " ranks on this node but " + std::to_string(devices) + " GPUs");
  }
  const int device = local_rank;
  SP_CUDA_CHECK("bootstrap", cudaSetDevice(device));
  // nccl-tests' bootstrap: rank 0 makes the id, MPI_Bcast gives it to everyone.
  ncclUniqueId id;
  if (rank == 0) SP_NCCL_CHECK("bootstrap", ncclGetUniqueId(&id));
  SP_MPI_CHECK(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD));
  ncclComm_t comm = nullptr;
  SP_NCCL_CHECK("bootstrap", ncclCommInitRank(&comm, size, id, rank));
  CommRegistry registry;
  registry.add(comm);
  SP_ASSIGN_OR_RETURN(const std::unique_ptr<Backend> backend,
                      make_cuda_backend({rank, size, local_size, device}, comm, &registry,
                                        options.reference_attention));
  // One rank per process, run on this thread.
  Status st;
  try {
    st = fn(*backend);
  } catch (const std::exception& ex) {
    st = Status::internal(std::string("unexpected exception: ") + ex.what());
  }
  if (!st.is_ok()) {
    registry.abort_all();  // peers blocked in a collective with this rank get an error, not a hang
    mpi_mark_failed();
    return st.with_context("rank " + std::to_string(rank));
  }
  return Status::ok();
}
#endif

}  // namespace

int device_count_or_zero() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

std::vector<hw::DeviceIdentity> visible_devices() {
  std::vector<hw::DeviceIdentity> out;
  const int n = device_count_or_zero();
  for (int d = 0; d < n; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    out.push_back(
        {prop.name, Bytes(static_cast<int64_t>(prop.totalGlobalMem)), prop.multiProcessorCount});
  }
  return out;
}

Status run_ranks(const LaunchOptions& options, const RankFn& fn) {
  const int ranks = options.ranks;
  if (launched_by_mpi()) {
#ifdef SCALEPLAN_HAVE_MPI
    return run_mpi(options, fn);
#else
    return Status::invalid(
        "cuda backend: started by an MPI launcher, but this scaleplan was built without MPI");
#endif
  }
  SP_ASSIGN_OR_RETURN(const int devices, device_count());
  const int n = ranks > 0 ? ranks : devices;
  if (n > devices) {
    return Status::invalid("cuda backend: " + std::to_string(n) +
                           " ranks asked for, this machine has " + std::to_string(devices) +
                           " GPUs");
  }
  // One process driving all local GPUs: ncclCommInitAll makes the n communicators at once.
  std::vector<ncclComm_t> comms(n, nullptr);
  std::vector<int> devs(n);
  for (int i = 0; i < n; ++i) devs[i] = i;
  SP_NCCL_CHECK("bootstrap", ncclCommInitAll(comms.data(), n, devs.data()));
  CommRegistry registry;
  std::vector<std::unique_ptr<Backend>> backends;
  for (int i = 0; i < n; ++i) {
    registry.add(comms[i]);
    auto b = make_cuda_backend({i, n, n, i}, comms[i], &registry, options.reference_attention);
    if (!b) return b.status().with_context("rank " + std::to_string(i));
    backends.push_back(std::move(b).value());
  }
  return run_all(backends, registry, fn);
}

}  // namespace cuda
}  // namespace scaleplan::runtime

// The entry point of libscaleplan_cuda.so (runtime/modules.h).
extern "C" __attribute__((visibility("default"))) const void* scaleplan_cuda_module_v1() {
  namespace cuda = scaleplan::runtime::cuda;
  static const scaleplan::runtime::CudaModule table{scaleplan::runtime::kModuleAbi,
                                                    &cuda::device_count_or_zero,
                                                    &cuda::visible_devices, &cuda::run_ranks};
  return &table;
}
