#include "runtime/launch.h"

namespace scaleplan::runtime {

Result<BackendKind> parse_backend_kind(std::string_view s) {
  if (s == "host") return BackendKind::kHost;
  if (s == "cuda") return BackendKind::kCuda;
  return Status::invalid("--backend: '" + std::string(s) + "' is not one of host, cuda");
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

}  // namespace scaleplan::runtime
