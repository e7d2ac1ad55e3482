// The runtime's loadable modules (internal to runtime/): the cuda backend (libscaleplan_cuda.so:
// CUDA runtime, cuBLASLt, cuDNN, NVRTC, NCCL and MPI) and the host backend's MPI transport
// (libscaleplan_mpi.so: MPI). They are shared libraries opened with dlopen the first time a
// command needs them (`run`/`profile --backend cuda`, a host run under mpirun), so that every other
// command maps none of those libraries: their loading and relocation cost ~0.1 s of system time per
// process (docs/architecture.md, "Loadable modules").
//
// Each module exports one C function, scaleplan_<name>_module_v1, returning a table of function
// pointers; the table's `abi` must equal kModuleAbi, i.e. module and loader come from the same
// build. The types that cross (Status, std::function, std::vector, the Backend and Transport
// interfaces) are the project's and libstdc++'s, the same on both sides. A module links its own
// copies of the few static helpers it uses and exports nothing else (a version script), so it
// never sees, nor is seen by, the symbols of the executable or of the Python extension.
//
// Search order for lib<name>.so: the directory of the file holding this loader (the scaleplan
// executable, the Python extension, a test binary) and its ../lib (installed layout); the build
// folder the loader was built in; the install lib dir; then the dynamic linker's own search
// (LD_LIBRARY_PATH). Loading happens once per process (thread-safe); a failure is remembered and
// returned as the same error.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/gpu_identity.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {

namespace host {
class Transport;
}

// Bumped whenever a table or a type crossing it changes.
inline constexpr int kModuleAbi = 1;

struct CudaModule {
  int abi = kModuleAbi;
  int (*device_count)() = nullptr;                         // 0 without a driver or a GPU
  std::vector<hw::DeviceIdentity> (*devices)() = nullptr;  // as cudaGetDeviceProperties says
  Status (*run_ranks)(const LaunchOptions&, const RankFn&) = nullptr;  // run_cuda_ranks
};

struct MpiModule {
  int abi = kModuleAbi;
  // The MPI transport of this process (MPI_COMM_WORLD), initializing MPI if it is not yet.
  Result<std::unique_ptr<host::Transport>> (*transport)(Duration timeout) = nullptr;
  void (*mark_failed)() = nullptr;  // mpi_mark_failed: do not finalize at exit
};

// The module, loaded on first use; an error naming the library, where it was looked for and
// dlerror() when it cannot be loaded, or that this build has none.
Result<const CudaModule*> cuda_module();
Result<const MpiModule*> mpi_module();

// What they are made of (tests): the places searched, in order, and the table of lib<name>.so
// from the first of `dirs` that holds it (else the dynamic linker's search), its entry point
// <name>_module_v1 called; errors start with `what`.
std::vector<std::string> module_dirs();
Result<const void*> open_module(const std::string& name, const std::string& what,
                                const std::vector<std::string>& dirs);

}  // namespace scaleplan::runtime

// The entry points the modules define (extern "C": no name mangling to match across builds).
// Each returns its table (a CudaModule or an MpiModule) as `const void*`, the type open_module
// calls it through: calling a function through a pointer of another type is undefined behaviour
// (UBSan's -fsanitize=function reports it).
extern "C" {
const void* scaleplan_cuda_module_v1();
const void* scaleplan_mpi_module_v1();
}
