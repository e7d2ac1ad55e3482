// Chakra execution traces of a Program: the workload format of MLCommons Chakra, which ASTRA-sim
// reads and PyTorch's execution-trace observer writes.
//
// The schema is schema/protobuf/et_def.proto of mlcommons/chakra at v0.0.4 (8b20269; unchanged up
// to 1.0.0, 21585d8), vendored in third_party/chakra/. A trace file is one GlobalMetadata message
// and then one Node per op, each preceded by its size as a varint (Chakra's
// src/third_party/utils/protolib.py encodeMessage/decodeMessage). The encoding is written here by
// hand (protobuf wire format) so that scaleplan needs no protobuf library to build.
//
// One trace per simulated rank, named `<prefix>.<global rank>.et` as Chakra's converters name them.
// Each op becomes a node whose id is its index among its rank's ops:
//   compute        COMP_NODE, duration_micros, num_ops (FLOPs); host time: is_cpu_op = true
//   collective     COMM_COLL_NODE, comm_type, comm_size (Op::bytes), pg_name (a group id)
//   send / receive COMM_SEND_NODE / COMM_RECV_NODE, comm_src, comm_dst (global ranks), comm_tag
//                  (the Program's match id, the same on both sides), comm_size
//   alloc / free   METADATA_NODE (no time; the bytes in scaleplan.bytes)
// The attribute names and value types are those Chakra's feeder reads (src/feeder/et_feeder_node.cpp
// at 21585d8, lines 26-50). data_deps are the op's dependencies, ctrl_deps the previous op on the
// same stream (a stream runs its ops in order). duration_micros is whole microseconds, as the
// schema has it; the exact duration (picoseconds) is the attribute scaleplan.duration_ps, with the
// stream, phase and kernel shape as scaleplan.* attributes. A group id (pg_name) is a decimal
// number, one per (kind, index) group, and ChakraTraces::groups holds its members, written as
// ASTRA-sim's communicator-group file.
//
// Reading (read_chakra) rebuilds a Program from traces: one simulated rank per trace, one op per
// node in id order, data_deps as dependencies. A node with scaleplan.* attributes keeps its stream,
// phase and exact duration, so that a Program written and read back is timed identically by the
// engine (the same DAG, durations and matches). A node without them (a trace another tool wrote)
// takes the stream of its kind, its ctrl_deps as dependencies too, a compute node
// duration_micros, and a collective or a send the time scaleplan's collective model gives on the
// cluster for its bytes over its group packed onto consecutive GPUs (GroupPlacement::packed) or, for
// a send, over a pair of GPUs. Collectives meet by pg_name and their order within it on each rank
// (scaleplan.match when present), sends and receives by (comm_src, comm_dst, comm_tag).
//
// Pure functions of their inputs; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "sim/program.h"

namespace scaleplan::hw {
class CollectiveModel;
}

namespace scaleplan::sim {

// The version written in GlobalMetadata: the Chakra release whose schema this is.
inline constexpr std::string_view kChakraSchemaVersion = "0.0.4";

struct ChakraRankTrace {
  int64_t global_rank = 0;
  std::string file;   // "<prefix>.<global rank>.et"
  std::string bytes;  // the encoded trace
};

struct ChakraTraces {
  std::vector<ChakraRankTrace> ranks;     // one per simulated rank, in the Program's order
  std::map<int, std::vector<int>> groups;  // pg_name (group id) -> member global ranks
  // {"<group id>": [global ranks], ...}: ASTRA-sim's communicator-group configuration.
  std::string comm_groups_json() const;
};

// Encodes every simulated rank of `program`. Errors when an op's group or peer cannot be resolved
// (a program without a layout has no groups: its collectives carry no pg_name then).
Result<ChakraTraces> to_chakra(const Program& program, std::string_view prefix = "scaleplan");

// Writes `traces` into `dir` (an existing directory): one file per rank and
// `<prefix>.json`, each atomically. A `dir` that is not a directory is an invalid-input
// error naming it, before anything is written.
Status write_chakra(const ChakraTraces& traces, const std::string& dir,
                    std::string_view prefix = "scaleplan");

// Rebuilds a Program from the bytes of trace files (each `ChakraRankTrace::bytes`). `collectives`
// times communication nodes that carry no scaleplan.duration_ps; nullptr: such a node is an
// invalid-input error naming it. Errors name the file (its global rank) and the node.
Result<Program> from_chakra(const std::vector<ChakraRankTrace>& traces,
                            const hw::CollectiveModel* collectives = nullptr);
// Reads every `*.et` file of `dir` (the rank from the name `<prefix>.<rank>.et`) and rebuilds the
// Program (from_chakra). A directory without traces is an invalid-input error naming it.
Result<Program> read_chakra(const std::string& dir,
                            const hw::CollectiveModel* collectives = nullptr);

}  // namespace scaleplan::sim
