// `cluster` as library calls: the bundled profiles (list), one profile with every field (show),
// and fitting a profile's cost model to measurements (import-nccl: an nccl-tests log;
// import-scaling: bus bandwidths measured at several node counts), writing a profile that extends
// the cluster with the fitted cost_model. Each outcome's to_json() is exactly the `--json` of its
// `scaleplan cluster` subcommand; errors name the option.
#pragma once

#include <nlohmann/json.hpp>  // the cost_model member
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "core/json_util.h"
#include "core/status.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/nccl_tests.h"

namespace scaleplan::api {

struct ClusterSummary {
  std::string name, gpu, description;
  int gpus_per_node = 0;
};
struct ClusterList {
  std::vector<ClusterSummary> clusters;
  Json to_json() const;  // `cluster list --json`
};
Result<ClusterList> cluster_list();

struct ClusterShow {
  hw::Cluster cluster;
  Result<Json> to_json() const;  // `cluster show C --json`: every field, and the path it came from
};
Result<ClusterShow> cluster_show(const std::string& cluster);

struct ClusterFitRequest {
  std::string cluster;  // the profile the measurements were taken on
  std::string source;   // import-nccl: the nccl-tests log; import-scaling: the points JSON file
  std::string out;      // the profile to write (extends the cluster)
  std::string name;     // of the written profile; empty: C-calibrated
  // import-nccl only: the log's collective when it does not name it, its ranks when it has no
  // '# Rank' lines, and fitting a log of another GPU anyway.
  std::string op;
  int ranks = 0;
  bool force_base = false;
};

struct ClusterFitOutcome {
  ClusterFitRequest request;
  hw::NcclFit fit;
  Json cost_model;       // the fitted cost_model object as written
  Json to_json() const;  // `cluster import-nccl|import-scaling --json`
};

// Notes: the fit's warnings (a log of another GPU with force_base, doubtful fits).
Result<ClusterFitOutcome> cluster_import_nccl(const ClusterFitRequest& request,
                                              const Callbacks<int>& callbacks = {});
Result<ClusterFitOutcome> cluster_import_scaling(const ClusterFitRequest& request);

}  // namespace scaleplan::api
