// nccl-tests logs (hw::parse_nccl_tests_log, hw::fit_to_nccl_log): any text gives a log or an
// invalid-input error naming the line; a log that fits gives a profile that loads back, as
// `cluster import-nccl` writes it and `cluster show` reads it.
#include "fuzz/fuzz_util.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/nccl_tests.h"

SCALEPLAN_FUZZ_TARGET(nccl_log) {
  using namespace scaleplan;
  static const hw::Cluster base = [] {
    auto c = hw::load_cluster("dgx-h100");
    if (!c) fuzz::broken("bundled dgx-h100", c.status().message());
    return *c;
  }();
  auto log = hw::parse_nccl_tests_log(fuzz::as_text(data, size), "fuzz.log");
  fuzz::check_contract(log.status(), "parse_nccl_tests_log");
  if (!log) return 0;
  (void)hw::measured_placement(*log);
  if (!log->op) log->op = CollectiveOp::kAllReduce;
  if (log->ranks <= 0) log->ranks = 8;
  if (log->nodes <= 0) log->nodes = 1;
  auto fit = hw::fit_to_nccl_log(base, *log, "fuzz.log");
  fuzz::check_contract(fit.status(), "fit_to_nccl_log");
  if (!fit) return 0;
  auto again = hw::parse_cluster(hw::cluster_to_json(fit->cluster), "fitted.json");
  if (!again) fuzz::broken("fitted profile does not load back", again.status().message());
  return 0;
}
