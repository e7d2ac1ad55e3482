// `collective` as a library call: time, algbw and busbw of one collective on a cluster, from the
// collective cost model of hw_profiles/collectives.h, over one size or a sweep of sizes;
// optionally fitted first to a measured nccl-tests log (its busbw beside the model's).
//
// api::collective validates the request (errors name the option) and returns a
// CollectiveOutcome whose to_json() is exactly `scaleplan collective --json`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "api/callbacks.h"
#include "core/json_util.h"
#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::api {

struct CollectiveRequest {
  std::string cluster;            // bundled profile name or profile path
  std::string op = "all_reduce";  // all_reduce, all_gather, reduce_scatter, alltoall, ...
  int ranks = 0;                  // 0: from nccl_log
  std::string bytes;              // one size, e.g. "1GiB"; empty: the sweep
  std::string sweep;              // MIN:MAX[:FACTOR]; empty: 8B:8GiB
  std::string algo = "nccl";      // nccl, fastest, ring, tree, nvls, hier
  int ranks_per_node = 0;         // 0: packed
  int concurrent = 1;             // groups sharing the NICs
  std::string nccl_log;           // fit the model to this nccl-tests log first
  bool force_base = false;        // fit a log of another GPU anyway
};

struct CollectiveRow {
  Bytes bytes;
  Duration time;
  double algbw_gbps = 0, busbw_gbps = 0;
  std::string algorithm;
  std::optional<double> measured_busbw_gbps;  // from the nccl-tests log
};

struct CollectiveOutcome {
  CollectiveRequest request;
  std::string cluster_name;
  CollectiveOp op = CollectiveOp::kAllReduce;
  hw::GroupPlacement placement;
  double bus_factor = 0;
  std::string collective_model;  // describe() of the model
  std::string fit_report;        // with nccl_log: what the fit changed
  bool measured = false;         // a log was given
  std::vector<CollectiveRow> rows;

  // Exactly what `scaleplan collective --json` prints.
  Json to_json() const;
};

// Notes: warnings of the fit (a log of another GPU with force_base, fitted parameters at a bound).
Result<CollectiveOutcome> collective(const CollectiveRequest& request,
                                     const Callbacks<int>& callbacks = {});

}  // namespace scaleplan::api
