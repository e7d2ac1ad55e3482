// nccl-tests logs: parse the tables users already have from their clusters, and fit the collective
// cost model to them.
//
// The parser reads the standard text output of all_reduce_perf, all_gather_perf, ... (nccl-tests
// src/common.cu): the "#  Rank  i Group ... on <host> device ..." lines give the ranks and hosts,
// the data rows "size count type redop [root] time algbw busbw #wrong time algbw busbw #wrong"
// give out-of-place then in-place results. Older logs without the root column parse too.
//
// fit_to_nccl_log rescales the efficiency of the fabric that limits the logged group (NVLink,
// NVLS or the network) so that the model's busbw at the largest logged size matches, then moves
// the base latency so that the smallest sizes match; it reports what it changed.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/units.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"

namespace scaleplan::hw {

struct NcclTestRow {
  Bytes size;
  int64_t count = 0;
  std::string type;
  std::string redop;
  Duration time;          // out-of-place
  double algbw_gbps = 0;  // as printed (GB/s = 1e9 B/s)
  double busbw_gbps = 0;
  std::optional<Duration> time_in_place;
  double busbw_in_place_gbps = 0;
};

struct NcclTestLog {
  std::optional<CollectiveOp> op;  // from "Collective test starting: X_perf" or the caller
  int ranks = 0;                   // "# Rank" lines; 0 if the log has none
  int nodes = 0;                   // distinct hosts of those lines
  // The GPU those lines name after the device's bus id ("... device 0 [0x1b] NVIDIA H100 80GB
  // HBM3"); "" when they name none. gpus_differ: not every rank names the same.
  std::string gpu;
  bool gpus_differ = false;
  std::vector<NcclTestRow> rows;  // in file order
};

// Parses the text of a log; `what` (the file name) prefixes errors, with the line number.
Result<NcclTestLog> parse_nccl_tests_log(std::string_view text, std::string_view what);

// The placement of a measured collective (MeasuredCollective::placement) that the log's group
// had: "intra_node" on one node, "inter_node" with one rank per node, else "multi_node" (ranks
// packed onto the nodes, as nccl-tests runs under mpirun -N <gpus per node>).
std::string_view measured_placement(const NcclTestLog& log);

// Whether `log` was measured on the GPU of `cluster` (named `profile` in the error): a log of
// another GPU model, or of mixed GPUs, is refused (gpu_identity.h, check_same_gpu); a log that
// names no GPU passes, and `*unchecked` (when given) is set.
Status check_log_gpu(const NcclTestLog& log, const Cluster& cluster, std::string_view profile,
                     std::string_view source, bool* unchecked = nullptr);

struct NcclFit {
  Cluster cluster;     // the input with a fitted cost_model
  std::string report;  // one line per changed parameter, with before and after
  // Fits to doubt, one sentence each: a parameter fitted from a single size, or moved by more
  // than 10x from the profile's value (a log of another group or fabric than assumed).
  std::vector<std::string> warnings;
};

// Fits `cluster`'s cost model to `log` (op, ranks and nodes must be known: from the log or set by
// the caller). The group is placed as nccl-tests places it: ranks/nodes per node, packed.
Result<NcclFit> fit_to_nccl_log(const Cluster& cluster, const NcclTestLog& log,
                                std::string_view source);

// One measured bus bandwidth of a collective over `nodes` nodes with `ranks_per_node` ranks each
// (the group nccl-tests runs with mpirun -N ranks_per_node).
struct MeasuredBusbw {
  CollectiveOp op = CollectiveOp::kAllReduce;
  int nodes = 1;
  int ranks_per_node = 8;
  Bytes bytes;
  double busbw_gbps = 0;
  // Bytes the timed call also moved through the GPU's memory, read plus written, outside the
  // collective itself: PyTorch's list-form all_gather copies its flat output into the list and
  // list-form reduce_scatter flattens its input first (ProcessGroupNCCL, docs/hw_profiles.md);
  // 0: none. `copy_time` is that copy's time, set by the caller from the kernel model; the fit
  // adds it to the modelled collective, since the measured time contains both.
  Bytes copied;
  Duration copy_time;
};

// Fits `cluster`'s cost_model.network_scaling to measured bus bandwidths at several node counts:
// for every collective and node count >= 2 measured, the fraction at which the model's busbw
// matches (the geometric mean of model/measured over those points is 1), by bisection between 1%
// and the line rate; and op-less points from all collectives pooled, for the collectives and
// pipeline sends that were not measured. Points on one node check the NVLink model and are left
// out of the fit. Replaces any scaling the profile had; the report gives each fraction and the
// model's busbw before and after for every point.
Result<NcclFit> fit_network_scaling(const Cluster& cluster,
                                    const std::vector<MeasuredBusbw>& points,
                                    std::string_view source);

// Reads measured points from JSON: {"points": [{"op": "all_reduce", "nodes": 2,
// "ranks_per_node": 8, "bytes": "256MiB", "busbw_gbps": 361.7}, ...]} (ranks_per_node defaults to
// 8; bytes takes a unit string or a number; optional "copied_bytes", MeasuredBusbw::copied).
// `what` names the file in errors.
Result<std::vector<MeasuredBusbw>> parse_measured_busbw(std::string_view json_text,
                                                        std::string_view what);

}  // namespace scaleplan::hw
