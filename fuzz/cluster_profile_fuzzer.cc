// Cluster profiles (hw::parse_cluster), with `extends` chains onto the bundled profiles: any text
// gives a Cluster or an invalid-input error; an accepted profile prints back to JSON that parses
// to the same profile (what `cluster show --json` and `cluster import-nccl` rely on), and its
// topology and per-GPU network bandwidth are usable.
#include "fuzz/fuzz_util.h"
#include "hw_profiles/cluster.h"

SCALEPLAN_FUZZ_TARGET(cluster_profile) {
  using namespace scaleplan;
  auto c = hw::parse_cluster(std::string(fuzz::as_text(data, size)), "fuzz.json");
  fuzz::check_contract(c.status(), "parse_cluster");
  if (!c) return 0;
  (void)c->nic_bandwidth_per_gpu();
  const std::string text = hw::cluster_to_json(*c);
  auto again = hw::parse_cluster(text, "printed.json");
  if (!again) fuzz::broken("cluster_to_json does not load back", again.status().message());
  return 0;
}
