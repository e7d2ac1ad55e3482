#include "runtime/launch.h"

namespace scaleplan::runtime {

Result<BackendKind> parse_backend_kind(std::string_view s) {
  if (s == "host") return BackendKind::kHost;
  if (s == "cuda") return BackendKind::kCuda;
  return Status::invalid("--backend: '" + std::string(s) + "' is not one of host, cuda");
}

bool is_abort(const Status& st) {
  return !st.is_ok() && st.message().find("aborted: ") != std::string::npos;
}

Status run_ranks(const LaunchOptions& options, const RankFn& fn) {
  switch (options.kind) {
    case BackendKind::kHost:
      return run_host_ranks(options, fn);
    case BackendKind::kCuda:
      return run_cuda_ranks(options, fn);
  }
  return Status::invalid("unknown backend");
}

#ifndef SCALEPLAN_HAVE_CUDA
bool cuda_backend_compiled() { return false; }
int cuda_device_count() { return 0; }
std::vector<hw::DeviceIdentity> cuda_devices() { return {}; }
Status run_cuda_ranks(const LaunchOptions&, const RankFn&) {
  return Status::invalid(
      "cuda backend: this scaleplan was built without the CUDA toolkit and NCCL "
      "(configure with -DSCALEPLAN_WITH_CUDA=ON on a machine that has them)");
}
#endif

}  // namespace scaleplan::runtime
