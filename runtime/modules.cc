// Loading the runtime's modules (runtime/modules.h), and the entry points of runtime/launch.h that
// reach the cuda backend or MPI through them.
#include "runtime/modules.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <string>

#include "runtime/host/host_transport.h"

namespace scaleplan::runtime {
namespace {

// The directory of the binary this loader is linked into (dladdr on one of its own functions).
std::string own_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&own_dir), &info) == 0 || !info.dli_fname) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

bool is_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

struct Loaded {
  const void* table = nullptr;
  Status error;
};

Loaded load(const std::string& name, const std::string& what) {
  Result<const void*> t = open_module(name, what, module_dirs());
  if (!t) return {nullptr, t.status()};
  return {t.value(), Status::ok()};
}

template <typename Table>
Result<const Table*> checked(const Loaded& l, const std::string& what) {
  if (!l.error.is_ok()) return l.error;
  const auto* t = static_cast<const Table*>(l.table);
  if (!t || t->abi != kModuleAbi) {
    return Status::invalid(what + ": the module is from another build (abi " +
                           std::to_string(t ? t->abi : -1) + ", this scaleplan " +
                           std::to_string(kModuleAbi) + "): rebuild or reinstall them together");
  }
  return t;
}

}  // namespace

std::vector<std::string> module_dirs() {
  std::vector<std::string> dirs;
  auto add = [&dirs](const std::string& d) {
    if (!d.empty() && std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  };
  if (const std::string self = own_dir(); !self.empty()) {
    add(self);
    add(self + "/../lib");
  }
#ifdef SCALEPLAN_MODULE_BUILD_DIR
  add(SCALEPLAN_MODULE_BUILD_DIR);
#endif
#ifdef SCALEPLAN_MODULE_INSTALL_DIR
  add(SCALEPLAN_MODULE_INSTALL_DIR);
#endif
  return dirs;
}

Result<const void*> open_module(const std::string& name, const std::string& what,
                                const std::vector<std::string>& dirs) {
  const std::string file = "lib" + name + ".so";
  const std::string entry = name + "_module_v1";  // name is "scaleplan_<module>"
  std::string path;
  for (const std::string& d : dirs) {
    if (is_file(d + "/" + file)) {
      path = d + "/" + file;
      break;
    }
  }
  // Not in any of them: the dynamic linker's search (LD_LIBRARY_PATH, the cache).
  const std::string tried = path.empty() ? file : path;
  void* handle = dlopen(tried.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    std::string where;
    for (const std::string& d : dirs) where += (where.empty() ? "" : ", ") + d;
    const char* err = dlerror();
    const std::string searched =
        path.empty() ? " (not in " + where + " nor on the library path)" : "";
    return Status::invalid(what + ": cannot load " + file + searched + ": " +
                           (err ? err : "unknown dlopen error") +
                           " (docs/architecture.md, \"Loadable modules\")");
  }
  // The module stays loaded for the life of the process: its code may run in atexit handlers.
  using Entry = const void* (*)();
  auto fn = reinterpret_cast<Entry>(dlsym(handle, entry.c_str()));
  if (!fn) {
    const char* err = dlerror();
    return Status::invalid(what + ": " + tried + " has no " + entry + ": " +
                           (err ? err : "not found"));
  }
  return fn();
}

Result<const CudaModule*> cuda_module() {
#ifdef SCALEPLAN_CUDA_MODULE
  static const Loaded loaded = load("scaleplan_cuda", "cuda backend");
  return checked<CudaModule>(loaded, "cuda backend");
#else
  return Status::invalid(
      "cuda backend: this scaleplan was built without the CUDA toolkit and NCCL "
      "(configure with -DSCALEPLAN_WITH_CUDA=ON on a machine that has them)");
#endif
}

Result<const MpiModule*> mpi_module() {
#ifdef SCALEPLAN_MPI_MODULE
  static const Loaded loaded = load("scaleplan_mpi", "host backend over MPI");
  return checked<MpiModule>(loaded, "host backend over MPI");
#else
  return Status::invalid(
      "host backend: started by an MPI launcher, but this scaleplan was built without MPI "
      "(install libopenmpi-dev and reconfigure)");
#endif
}

#ifdef SCALEPLAN_MPI_MODULE
bool mpi_compiled() { return true; }
#else
bool mpi_compiled() { return false; }
#endif

#ifdef SCALEPLAN_CUDA_MODULE
bool cuda_backend_compiled() { return true; }
#else
bool cuda_backend_compiled() { return false; }
#endif

int cuda_device_count() {
  auto m = cuda_module();
  return m.is_ok() ? m.value()->device_count() : 0;
}

std::vector<hw::DeviceIdentity> cuda_devices() {
  auto m = cuda_module();
  return m.is_ok() ? m.value()->devices() : std::vector<hw::DeviceIdentity>{};
}

Status run_cuda_ranks(const LaunchOptions& options, const RankFn& fn) {
  SP_ASSIGN_OR_RETURN(const CudaModule* m, cuda_module());
  return m->run_ranks(options, fn);
}

}  // namespace scaleplan::runtime
