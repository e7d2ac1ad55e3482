// Chakra execution traces of a Program; contract in chakra.h.
#include "sim/chakra.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/json_util.h"

namespace scaleplan::sim {
namespace {

// Protobuf wire format (protobuf.dev/programming-guides/encoding): a field is a varint key
// (number << 3 | wire type), then a varint (type 0) or a varint length and the bytes (type 2).
constexpr int kVarint = 0, kLen = 2;

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire));
}
// int32 and int64 fields encode negative values as their 64-bit two's complement.
void put_int(std::string& out, int field, int64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, static_cast<uint64_t>(v));
}
void put_bytes(std::string& out, int field, std::string_view b) {
  put_key(out, field, kLen);
  put_varint(out, b.size());
  out.append(b);
}
void put_packed(std::string& out, int field, const std::vector<uint64_t>& vs) {
  if (vs.empty()) return;
  std::string body;
  for (uint64_t v : vs) put_varint(body, v);
  put_bytes(out, field, body);
}

// ChakraProtoMsg.AttributeProto: name = 1, int32_val = 7, int64_val = 9, bool_val = 27,
// string_val = 29 (et_def.proto at v0.0.4).
std::string attr_int(std::string_view name, int field, int64_t v) {
  std::string a;
  put_bytes(a, 1, name);
  put_int(a, field, v);
  return a;
}
std::string attr_int64(std::string_view name, int64_t v) { return attr_int(name, 9, v); }
std::string attr_int32(std::string_view name, int32_t v) { return attr_int(name, 7, v); }
std::string attr_bool(std::string_view name, bool v) { return attr_int(name, 27, v ? 1 : 0); }
std::string attr_string(std::string_view name, std::string_view v) {
  std::string a;
  put_bytes(a, 1, name);
  put_bytes(a, 29, v);
  return a;
}

// ChakraProtoMsg.NodeType.
enum NodeType : int {
  kMetadataNode = 1,
  kCompNode = 4,
  kCommSendNode = 5,
  kCommRecvNode = 6,
  kCommCollNode = 7
};

// ChakraProtoMsg.CollectiveCommType of a collective (et_def.proto: ALL_REDUCE = 0, REDUCE = 1,
// ALL_GATHER = 2, GATHER = 3, SCATTER = 4, BROADCAST = 5, ALL_TO_ALL = 6, REDUCE_SCATTER = 7,
// BARRIER = 9).
int64_t comm_type(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return 0;
    case CollectiveOp::kReduce: return 1;
    case CollectiveOp::kAllGather: return 2;
    case CollectiveOp::kGather: return 3;
    case CollectiveOp::kScatter: return 4;
    case CollectiveOp::kBroadcast: return 5;
    case CollectiveOp::kAllToAll: return 6;
    case CollectiveOp::kReduceScatter: return 7;
    case CollectiveOp::kBarrier: return 9;
    case CollectiveOp::kSendRecv: return 0;  // not a collective op's value (sends are nodes)
  }
  return 0;
}

void put_message(std::string& out, std::string_view msg) {
  put_varint(out, msg.size());
  out.append(msg);
}

}  // namespace

Result<ChakraTraces> to_chakra(const Program& p, std::string_view prefix) {
  ChakraTraces t;
  const int n = p.num_ranks();
  // Each op's index among its rank's ops (its node id) and each rank's ops in order.
  std::vector<uint64_t> local(p.num_ops());
  std::vector<std::vector<OpId>> of_rank(static_cast<size_t>(n));
  for (OpId id = 0; id < p.num_ops(); ++id) {
    auto& v = of_rank[p.op(id).rank];
    local[id] = v.size();
    v.push_back(id);
  }
  std::map<std::pair<int, int>, int> group_id;  // (kind, index) -> pg_name
  for (int r = 0; r < n; ++r) {
    const RankInfo& info = p.ranks()[static_cast<size_t>(r)];
    ChakraRankTrace rt;
    rt.global_rank = info.global_rank;
    rt.file = std::string(prefix) + "." + std::to_string(info.global_rank) + ".et";
    // GlobalMetadata: version = 1, attr = 2.
    std::string meta;
    put_bytes(meta, 1, kChakraSchemaVersion);
    put_bytes(meta, 2, attr_string("schema", "chakra.0.0.4"));
    put_bytes(meta, 2, attr_string("generator", "scaleplan"));
    put_bytes(meta, 2, attr_int64("scaleplan.stage", info.stage));
    put_bytes(meta, 2, attr_int64("scaleplan.represents", info.represents));
    put_message(rt.bytes, meta);
    int64_t last_on_stream[kNumStreams];
    std::fill(std::begin(last_on_stream), std::end(last_on_stream), -1);
    for (OpId id : of_rank[static_cast<size_t>(r)]) {
      const Op& op = p.op(id);
      const OpLabel& label = p.label(id);
      std::string node;
      put_int(node, 1, static_cast<int64_t>(local[id]));  // id
      put_bytes(node, 2, label.name);                    // name
      int type = kCompNode;
      switch (op.kind) {
        case OpKind::kCompute:
        case OpKind::kHost: type = kCompNode; break;
        case OpKind::kCollective: type = kCommCollNode; break;
        case OpKind::kSend: type = kCommSendNode; break;
        case OpKind::kRecv: type = kCommRecvNode; break;
        case OpKind::kAlloc:
        case OpKind::kFree: type = kMetadataNode; break;
      }
      put_int(node, 3, type);
      auto& last = last_on_stream[static_cast<int>(op.stream)];
      std::vector<uint64_t> ctrl;
      if (last >= 0) ctrl.push_back(static_cast<uint64_t>(last));
      last = static_cast<int64_t>(local[id]);
      std::vector<uint64_t> data;
      for (OpId d : p.deps(id)) data.push_back(local[d]);
      put_packed(node, 4, ctrl);  // ctrl_deps
      put_packed(node, 5, data);  // data_deps
      // duration_micros = 7: whole microseconds, rounded to nearest.
      put_int(node, 7, std::llround(op.duration.to_microseconds()));
      std::vector<std::string> attrs;
      attrs.push_back(attr_bool("is_cpu_op", op.kind == OpKind::kHost));
      if (op.kind == OpKind::kCompute)
        attrs.push_back(attr_int64("num_ops", std::llround(label.flops.value())));
      if (op.kind == OpKind::kCollective) {
        attrs.push_back(attr_int64("comm_type", comm_type(op.collective)));
        attrs.push_back(attr_int64("comm_size", op.bytes));
        if (std::holds_alternative<CollectivePayload>(label.payload) && p.layout()) {
          SP_ASSIGN_OR_RETURN(GroupRef g, p.group(id));
          auto key = std::make_pair(static_cast<int>(g.kind), g.index);
          auto [it, fresh] = group_id.emplace(key, static_cast<int>(group_id.size()));
          if (fresh) {
            auto m = p.members(g);
            t.groups[it->second] = std::vector<int>(m.begin(), m.end());
          }
          attrs.push_back(attr_string("pg_name", std::to_string(it->second)));
          attrs.push_back(attr_string(
              "scaleplan.group", std::string(to_string(g.kind)) + "." + std::to_string(g.index)));
        }
      }
      if (op.kind == OpKind::kSend || op.kind == OpKind::kRecv) {
        attrs.push_back(attr_int64("comm_size", op.bytes));
        attrs.push_back(attr_int32("comm_tag", static_cast<int32_t>(op.match)));
        if (std::holds_alternative<TransferPayload>(label.payload) && p.layout()) {
          SP_ASSIGN_OR_RETURN(int64_t peer, p.peer(id));
          const bool send = op.kind == OpKind::kSend;
          attrs.push_back(attr_int32("comm_src", static_cast<int32_t>(send ? info.global_rank : peer)));
          attrs.push_back(attr_int32("comm_dst", static_cast<int32_t>(send ? peer : info.global_rank)));
        }
      }
      if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) {
        attrs.push_back(attr_string("scaleplan.op", to_string(op.kind)));
        attrs.push_back(attr_int64("scaleplan.bytes", op.bytes));
      }
      attrs.push_back(attr_int64("scaleplan.duration_ps", op.duration.count()));
      attrs.push_back(attr_string("scaleplan.stream", to_string(op.stream)));
      attrs.push_back(attr_string("scaleplan.phase", to_string(op.phase)));
      attrs.push_back(attr_int64("scaleplan.microbatch", op.microbatch));
      attrs.push_back(attr_int64("scaleplan.chunk", op.chunk));
      if (!label.shape.empty()) attrs.push_back(attr_string("scaleplan.shape", label.shape));
      for (const std::string& a : attrs) put_bytes(node, 10, a);
      put_message(rt.bytes, node);
    }
    t.ranks.push_back(std::move(rt));
  }
  return t;
}

std::string ChakraTraces::comm_groups_json() const {
  Json j = Json::object();
  for (const auto& [id, members] : groups) j[std::to_string(id)] = members;
  return j.dump(1) + "\n";
}

Status write_chakra(const ChakraTraces& t, const std::string& dir, std::string_view prefix) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status::invalid("--emit-chakra: '" + dir + "' is not an existing directory");
  const std::filesystem::path d(dir);
  for (const ChakraRankTrace& r : t.ranks)
    SP_RETURN_IF_ERROR(write_file_atomic((d / r.file).string(), r.bytes));
  return write_file_atomic((d / (std::string(prefix) + ".comm_groups.json")).string(),
                           t.comm_groups_json());
}

}  // namespace scaleplan::sim
