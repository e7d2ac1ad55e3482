// Chakra execution traces of a Program; contract in chakra.h.
#include "sim/chakra.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "hw_profiles/collectives.h"

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
      if (op.is_comm() && op.match != kNoMatch)
        attrs.push_back(attr_int64("scaleplan.match", op.match));
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
  return write_file_atomic((d / (std::string(prefix) + ".json")).string(),
                           t.comm_groups_json());
}

namespace {

// ---- reading ----

struct Reader {
  std::string_view s;
  size_t pos = 0;
  bool ok = true;
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= s.size()) break;
      const auto b = static_cast<uint8_t>(s[pos++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ok = false;
    return 0;
  }
  std::string_view bytes() {
    const uint64_t n = varint();
    if (!ok || n > s.size() - pos) {
      ok = false;
      return {};
    }
    std::string_view b = s.substr(pos, n);
    pos += n;
    return b;
  }
  // Skips a field of `wire` type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
  void skip(int wire) {
    if (wire == 0) varint();
    else if (wire == 2) bytes();
    else if (wire == 1 && pos + 8 <= s.size()) pos += 8;
    else if (wire == 5 && pos + 4 <= s.size()) pos += 4;
    else ok = false;
  }
};

// An attribute's value: integers of every varint type as int64, strings as text.
struct AttrValue {
  int64_t i = 0;
  std::string str;
  bool is_string = false;
};

struct NodeRec {
  uint64_t id = 0;
  std::string name;
  int type = 0;
  std::vector<uint64_t> ctrl, data;
  uint64_t micros = 0;
  std::map<std::string, AttrValue, std::less<>> attrs;
  const AttrValue* attr(std::string_view n) const {
    auto it = attrs.find(n);
    return it == attrs.end() ? nullptr : &it->second;
  }
};

void read_packed(Reader& r, int wire, std::vector<uint64_t>& out) {
  if (wire == 0) {
    out.push_back(r.varint());
    return;
  }
  Reader p{r.bytes()};
  while (r.ok && p.ok && p.pos < p.s.size()) out.push_back(p.varint());
  r.ok = r.ok && p.ok;
}

bool parse_attr(std::string_view msg, std::string& name, AttrValue& v) {
  Reader r{msg};
  while (r.ok && r.pos < r.s.size()) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 2) {
      name = std::string(r.bytes());
    } else if (field == 29 && wire == 2) {
      v.str = std::string(r.bytes());
      v.is_string = true;
    } else if (wire == 0) {
      const uint64_t x = r.varint();
      // sint32/sint64 (15, 17) are zig-zag encoded.
      v.i = (field == 15 || field == 17) ? static_cast<int64_t>((x >> 1) ^ (~(x & 1) + 1))
                                         : static_cast<int64_t>(x);
    } else {
      r.skip(wire);
    }
  }
  return r.ok;
}

bool parse_node(std::string_view msg, NodeRec& n) {
  Reader r{msg};
  while (r.ok && r.pos < r.s.size()) {
    const uint64_t key = r.varint();
    const int field = static_cast<int>(key >> 3), wire = static_cast<int>(key & 7);
    if (field == 1 && wire == 0) n.id = r.varint();
    else if (field == 2 && wire == 2) n.name = std::string(r.bytes());
    else if (field == 3 && wire == 0) n.type = static_cast<int>(r.varint());
    else if (field == 4) read_packed(r, wire, n.ctrl);
    else if (field == 5) read_packed(r, wire, n.data);
    else if (field == 7 && wire == 0) n.micros = r.varint();
    else if (field == 10 && wire == 2) {
      std::string name;
      AttrValue v;
      if (!parse_attr(r.bytes(), name, v)) return false;
      n.attrs[name] = std::move(v);
    } else {
      r.skip(wire);
    }
  }
  return r.ok;
}

template <typename E>
std::optional<E> enum_named(std::string_view text, int count) {
  for (int i = 0; i < count; ++i)
    if (to_string(static_cast<E>(i)) == text) return static_cast<E>(i);
  return std::nullopt;
}

std::optional<CollectiveOp> collective_of(int64_t comm_type) {
  for (int i = 0; i < kNumCollectiveOps; ++i) {
    const auto op = static_cast<CollectiveOp>(i);
    if (op != CollectiveOp::kSendRecv && sim::comm_type(op) == comm_type) return op;
  }
  return std::nullopt;
}

}  // namespace

Result<Program> from_chakra(const std::vector<ChakraRankTrace>& traces,
                            const hw::CollectiveModel* collectives) {
  Program p;
  std::vector<std::vector<NodeRec>> nodes(traces.size());
  for (size_t t = 0; t < traces.size(); ++t) {
    const std::string where = "chakra trace of rank " + std::to_string(traces[t].global_rank);
    Reader r{traces[t].bytes};
    RankInfo info{.global_rank = traces[t].global_rank};
    bool first = true;
    while (r.ok && r.pos < r.s.size()) {
      std::string_view msg = r.bytes();
      if (!r.ok) break;
      if (first) {  // GlobalMetadata: its attrs (field 2) may carry the stage and represents
        first = false;
        Reader m{msg};
        while (m.ok && m.pos < m.s.size()) {
          const uint64_t key = m.varint();
          if ((key >> 3) == 2 && (key & 7) == 2) {
            std::string name;
            AttrValue v;
            if (!parse_attr(m.bytes(), name, v)) break;
            if (name == "scaleplan.stage") info.stage = static_cast<int>(v.i);
            if (name == "scaleplan.represents") info.represents = v.i;
          } else {
            m.skip(static_cast<int>(key & 7));
          }
        }
        continue;
      }
      NodeRec n;
      if (!parse_node(msg, n))
        return Status::invalid(where + ": node " + std::to_string(nodes[t].size()) +
                               " is not a Chakra Node message");
      if (n.id != nodes[t].size())
        return Status::invalid(where + ": node '" + n.name + "' has id " + std::to_string(n.id) +
                               ", expected " + std::to_string(nodes[t].size()) +
                               " (ids in file order, from 0)");
      nodes[t].push_back(std::move(n));
    }
    if (!r.ok) return Status::invalid(where + ": truncated length-delimited message");
    p.add_rank(info);
  }
  // Matches: collectives by (pg_name, k-th of that group on the rank) or scaleplan.match, sends
  // and receives by (src, dst, tag). Count the members first: add_match needs them.
  // (GCC 12 warns falsely (-Wrestrict) on "literal" + std::string; the key is built by append.)
  auto match_key = [](const NodeRec& n, std::map<std::string, int>& ordinal) -> std::string {
    std::string k;
    if (const AttrValue* m = n.attr("scaleplan.match")) {
      k.append("m").append(std::to_string(m->i));
      return k;
    }
    if (n.type == 7) {
      const AttrValue* pg = n.attr("pg_name");
      const std::string g = pg ? pg->str : "";
      k.append("c").append(g).append("#").append(std::to_string(ordinal[g]++));
      return k;
    }
    const AttrValue* src = n.attr("comm_src");
    const AttrValue* dst = n.attr("comm_dst");
    const AttrValue* tag = n.attr("comm_tag");
    k.append("p").append(std::to_string(src ? src->i : -1)).append(">");
    k.append(std::to_string(dst ? dst->i : -1)).append("#").append(std::to_string(tag ? tag->i : -1));
    return k;
  };
  std::map<std::string, int> members;
  std::vector<std::vector<std::string>> keys(traces.size());
  for (size_t t = 0; t < traces.size(); ++t) {
    std::map<std::string, int> ordinal;
    for (const NodeRec& n : nodes[t]) {
      keys[t].push_back(n.type >= 5 && n.type <= 7 ? match_key(n, ordinal) : "");
      if (!keys[t].back().empty()) ++members[keys[t].back()];
    }
  }
  std::map<std::string, uint32_t> match_id;
  for (const auto& [k, m] : members) match_id[k] = p.add_match(m);

  for (size_t t = 0; t < traces.size(); ++t) {
    const std::string where = "chakra trace of rank " + std::to_string(traces[t].global_rank);
    std::vector<OpId> ids;
    for (size_t i = 0; i < nodes[t].size(); ++i) {
      const NodeRec& n = nodes[t][i];
      const std::string at = where + ": node " + std::to_string(i) + " '" + n.name + "'";
      OpSpec s;
      const AttrValue* cpu = n.attr("is_cpu_op");
      switch (n.type) {
        case 4: s.kind = cpu && cpu->i ? OpKind::kHost : OpKind::kCompute; break;
        case 5: s.kind = OpKind::kSend; break;
        case 6: s.kind = OpKind::kRecv; break;
        case 7: s.kind = OpKind::kCollective; break;
        case 1: {
          const AttrValue* op = n.attr("scaleplan.op");
          s.kind = op && op->str == "alloc"  ? OpKind::kAlloc
                   : op && op->str == "free" ? OpKind::kFree
                                             : OpKind::kCompute;
          break;
        }
        default:
          return Status::invalid(at + ": node type " + std::to_string(n.type) +
                                 " (memory load/store) is not simulated");
      }
      s.stream = s.kind == OpKind::kHost   ? StreamKind::kHost
                 : s.kind == OpKind::kSend ? StreamKind::kPpSend
                 : s.kind == OpKind::kRecv ? StreamKind::kPpRecv
                 : s.kind == OpKind::kCollective ? StreamKind::kDp
                                                 : StreamKind::kCompute;
      const AttrValue* stream = n.attr("scaleplan.stream");
      if (stream) {
        auto k = enum_named<StreamKind>(stream->str, kNumStreams);
        if (!k) return Status::invalid(at + ": scaleplan.stream '" + stream->str + "'");
        s.stream = *k;
      }
      if (const AttrValue* ph = n.attr("scaleplan.phase"))
        s.phase = enum_named<Phase>(ph->str, static_cast<int>(Phase::kOther) + 1)
                      .value_or(Phase::kOther);
      if (const AttrValue* mb = n.attr("scaleplan.microbatch")) s.microbatch = static_cast<int>(mb->i);
      if (const AttrValue* ch = n.attr("scaleplan.chunk")) s.chunk = static_cast<int>(ch->i);
      if (const AttrValue* b = n.attr("comm_size")) s.bytes = b->i;
      if (const AttrValue* b = n.attr("scaleplan.bytes")) s.bytes = b->i;
      if (s.kind == OpKind::kCollective) {
        const AttrValue* ct = n.attr("comm_type");
        auto op = collective_of(ct ? ct->i : 0);
        if (!op) return Status::invalid(at + ": comm_type " + std::to_string(ct->i));
        s.collective = *op;
      } else if (s.kind == OpKind::kSend || s.kind == OpKind::kRecv) {
        s.collective = CollectiveOp::kSendRecv;
      }
      if (!keys[t][i].empty()) s.match = match_id[keys[t][i]];
      if (const AttrValue* d = n.attr("scaleplan.duration_ps")) {
        s.duration = Duration::ticks(d->i);
      } else if (s.kind == OpKind::kCollective || s.kind == OpKind::kSend ||
                 s.kind == OpKind::kRecv) {
        if (!collectives)
          return Status::invalid(at + ": a communication node without scaleplan.duration_ps "
                                      "needs a cluster (--cluster) to be timed");
        const hw::Cluster& c = collectives->cluster();
        const int group = s.kind == OpKind::kCollective ? members[keys[t][i]] : 2;
        const CollectiveOp op = s.kind == OpKind::kCollective ? s.collective
                                                               : CollectiveOp::kSendRecv;
        s.duration = group <= 1 && s.kind == OpKind::kCollective
                         ? Duration::zero()
                         : collectives->estimate(op, Bytes(s.bytes),
                                                 hw::GroupPlacement::packed(c, group)).time;
      } else {
        s.duration = Duration::microseconds(static_cast<double>(n.micros));
      }
      std::string shape;
      if (const AttrValue* sh = n.attr("scaleplan.shape")) shape = sh->str;
      const AttrValue* flops = n.attr("num_ops");
      s.label = p.add_label(OpLabel{n.name, shape, Flops(flops ? static_cast<double>(flops->i) : 0),
                                    {}});
      std::vector<OpId> deps;
      for (uint64_t d : n.data) {
        if (d >= i) return Status::invalid(at + ": depends on node " + std::to_string(d) +
                                           ", which does not come before it");
        deps.push_back(ids[d]);
      }
      if (!stream)  // another tool's trace: its control dependencies order the node too
        for (uint64_t d : n.ctrl) {
          if (d >= i) return Status::invalid(at + ": depends on node " + std::to_string(d) +
                                             ", which does not come before it");
          deps.push_back(ids[d]);
        }
      ids.push_back(p.add_op(static_cast<int>(t), s, deps));
    }
  }
  SP_RETURN_IF_ERROR(p.validate());
  return p;
}

Result<Program> read_chakra(const std::string& dir, const hw::CollectiveModel* collectives) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status::invalid("--chakra: '" + dir + "' is not a directory");
  std::vector<ChakraRankTrace> traces;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() != ".et") continue;
    const std::string stem = e.path().stem().string();  // "<prefix>.<rank>"
    const size_t dot = stem.rfind('.');
    ChakraRankTrace t;
    try {
      t.global_rank = std::stoll(stem.substr(dot == std::string::npos ? 0 : dot + 1));
    } catch (...) {
      return Status::invalid("--chakra: '" + name + "' is not named <prefix>.<rank>.et");
    }
    std::ifstream in(e.path(), std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    t.bytes = ss.str();
    t.file = name;
    traces.push_back(std::move(t));
  }
  if (traces.empty()) return Status::invalid("--chakra: no <prefix>.<rank>.et file in '" + dir + "'");
  std::sort(traces.begin(), traces.end(),
            [](const auto& a, const auto& b) { return a.global_rank < b.global_rank; });
  return from_chakra(traces, collectives);
}

}  // namespace scaleplan::sim
