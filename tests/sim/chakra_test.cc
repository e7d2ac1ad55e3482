// Chakra traces of a hand-built Program, decoded here with the protobuf wire format
// (protobuf.dev/programming-guides/encoding) against the field numbers of Chakra's et_def.proto
// (third_party/chakra/, v0.0.4). The read-back with Chakra's own reader is
// tests/sim/chakra_readback.py; this test pins the encoding of the fields one by one.
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "models/model_spec.h"
#include "sim/chakra.h"
#include "sim/engine.h"
#include "sim/program.h"
#include "sim/simulate.h"

namespace scaleplan::sim {
namespace {

// A decoded message: field number -> values (varints as integers, length-delimited as bytes).
struct Msg {
  std::multimap<int, uint64_t> ints;
  std::multimap<int, std::string> bytes;
};

uint64_t varint(std::string_view s, size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; pos < s.size(); shift += 7) {
    const auto b = static_cast<uint8_t>(s[pos++]);
    v |= static_cast<uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
  ADD_FAILURE() << "truncated varint";
  return v;
}

Msg decode(std::string_view s) {
  Msg m;
  size_t pos = 0;
  while (pos < s.size()) {
    const uint64_t key = varint(s, pos);
    const int field = static_cast<int>(key >> 3);
    if ((key & 7) == 0) {
      m.ints.emplace(field, varint(s, pos));
    } else if ((key & 7) == 2) {
      const uint64_t n = varint(s, pos);
      m.bytes.emplace(field, std::string(s.substr(pos, n)));
      pos += n;
    } else {
      ADD_FAILURE() << "wire type " << (key & 7) << " not written by sim/chakra.cc";
      return m;
    }
  }
  return m;
}

// The length-delimited messages of a trace file (protolib.py decodeMessage).
std::vector<Msg> messages(std::string_view file) {
  std::vector<Msg> out;
  size_t pos = 0;
  while (pos < file.size()) {
    const uint64_t n = varint(file, pos);
    out.push_back(decode(file.substr(pos, n)));
    pos += n;
  }
  return out;
}

std::vector<uint64_t> packed(const Msg& m, int field) {
  std::vector<uint64_t> v;
  auto [a, b] = m.bytes.equal_range(field);
  for (auto it = a; it != b; ++it) {
    size_t pos = 0;
    while (pos < it->second.size()) v.push_back(varint(it->second, pos));
  }
  return v;
}

// Node.attr (field 10) by name: AttributeProto name = 1; the value's field number and value.
std::map<std::string, std::pair<int, std::string>> attrs(const Msg& node) {
  std::map<std::string, std::pair<int, std::string>> out;
  auto [a, b] = node.bytes.equal_range(10);
  for (auto it = a; it != b; ++it) {
    Msg at = decode(it->second);
    const std::string name = at.bytes.find(1)->second;
    for (const auto& [f, v] : at.ints) out[name] = {f, std::to_string(static_cast<int64_t>(v))};
    for (const auto& [f, v] : at.bytes)
      if (f != 1) out[name] = {f, v};
  }
  return out;
}

// Two ranks: rank 0 computes (2.4 us, 1e6 FLOPs), all-reduces 1 MiB with rank 1 and sends 4 KiB
// to it; rank 1 computes 2.6 us then joins the all-reduce and receives after it.
Program two_ranks() {
  Program p;
  p.add_rank({.global_rank = 0});
  p.add_rank({.global_rank = 1});
  const uint32_t k = p.add_label(OpLabel{"gemm", "", Flops(1e6), {}});
  const uint32_t ar = p.add_label(OpLabel{"dp.all_reduce", "", Flops(0), {}});
  const uint32_t pp = p.add_label(OpLabel{"pp.send", "", Flops(0), {}});
  const uint32_t coll = p.add_match(2), p2p = p.add_match(2);
  const OpId c0 = p.add_op(0, {.kind = OpKind::kCompute, .duration = Duration::seconds(2.4e-6),
                               .label = k});
  const OpId a0 = p.add_op(0, {.kind = OpKind::kCollective, .stream = StreamKind::kDp,
                               .duration = Duration::seconds(10e-6), .bytes = 1 << 20,
                               .match = coll, .label = ar},
                           {c0});
  p.add_op(0, {.kind = OpKind::kSend, .stream = StreamKind::kPpSend, .bytes = 4096, .match = p2p,
               .label = pp},
           {a0});
  const OpId c1 = p.add_op(1, {.kind = OpKind::kCompute, .duration = Duration::seconds(2.6e-6),
                               .label = k});
  const OpId a1 = p.add_op(1, {.kind = OpKind::kCollective, .stream = StreamKind::kDp,
                               .duration = Duration::seconds(10e-6), .bytes = 1 << 20,
                               .match = coll, .label = ar},
                           {c1});
  p.add_op(1, {.kind = OpKind::kRecv, .stream = StreamKind::kPpRecv, .bytes = 4096, .match = p2p,
               .label = pp},
           {a1});
  EXPECT_TRUE(p.validate().is_ok());
  return p;
}

TEST(ChakraTest, NodesCarryKindDurationDependenciesAndBytes) {
  const Program p = two_ranks();
  auto t = to_chakra(p, "job");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ASSERT_EQ(t->ranks.size(), 2u);
  EXPECT_EQ(t->ranks[1].file, "job.1.et");  // Chakra's "<prefix>.<rank>.et"
  const std::vector<Msg> m0 = messages(t->ranks[0].bytes);
  // GlobalMetadata, then one node per op of the rank.
  ASSERT_EQ(m0.size(), 1u + 3u);
  EXPECT_EQ(m0[0].bytes.find(1)->second, "0.0.4");  // GlobalMetadata.version
  // Node fields: id = 1, name = 2, type = 3, ctrl_deps = 4, data_deps = 5, duration_micros = 7.
  const Msg& gemm = m0[1];
  EXPECT_EQ(gemm.ints.find(1)->second, 0u);
  EXPECT_EQ(gemm.bytes.find(2)->second, "gemm");
  EXPECT_EQ(gemm.ints.find(3)->second, 4u);  // COMP_NODE
  // 2.4 us in whole microseconds is 2; the exact value is 2.4e6 ps.
  EXPECT_EQ(gemm.ints.find(7)->second, 2u);
  auto ga = attrs(gemm);
  EXPECT_EQ(ga["scaleplan.duration_ps"], std::make_pair(9, std::string("2400000")));
  EXPECT_EQ(ga["num_ops"], std::make_pair(9, std::string("1000000")));  // int64_val
  EXPECT_EQ(ga["is_cpu_op"], std::make_pair(27, std::string("0")));     // bool_val
  const Msg& allreduce = m0[2];
  EXPECT_EQ(allreduce.ints.find(3)->second, 7u);  // COMM_COLL_NODE
  EXPECT_EQ(packed(allreduce, 5), std::vector<uint64_t>{0});  // data dep: the GEMM
  EXPECT_TRUE(packed(allreduce, 4).empty());  // first op of the dp stream: no stream predecessor
  auto aa = attrs(allreduce);
  EXPECT_EQ(aa["comm_type"], std::make_pair(9, std::string("0")));  // ALL_REDUCE
  EXPECT_EQ(aa["comm_size"], std::make_pair(9, std::to_string(1 << 20)));
  EXPECT_EQ(aa.count("pg_name"), 0u);  // a hand-built program has no layout, so no groups
  const Msg& send = m0[3];
  EXPECT_EQ(send.ints.find(3)->second, 5u);  // COMM_SEND_NODE
  auto sa = attrs(send);
  EXPECT_EQ(sa["comm_size"].second, "4096");
  EXPECT_EQ(sa["comm_tag"].first, 7);  // int32_val, as Chakra's feeder reads it
  const std::vector<Msg> m1 = messages(t->ranks[1].bytes);
  ASSERT_EQ(m1.size(), 4u);
  EXPECT_EQ(m1[1].ints.find(7)->second, 3u);  // 2.6 us rounds to 3
  EXPECT_EQ(m1[3].ints.find(3)->second, 6u);  // COMM_RECV_NODE
  EXPECT_EQ(attrs(m1[3])["comm_tag"], sa["comm_tag"]);  // a send and its receive share the tag
}

TEST(ChakraTest, StreamOrderIsControlDependency) {
  // Two kernels on the compute stream with no data dependency: the second waits for the first
  // because a stream runs its ops in order, which Chakra says with a control dependency.
  Program p;
  p.add_rank({.global_rank = 3});
  const uint32_t k = p.add_label(OpLabel{"k", "", Flops(0), {}});
  p.add_op(0, {.kind = OpKind::kCompute, .duration = Duration::seconds(1e-6), .label = k});
  p.add_op(0, {.kind = OpKind::kCompute, .duration = Duration::seconds(1e-6), .label = k});
  auto t = to_chakra(p);
  ASSERT_TRUE(t.is_ok());
  const std::vector<Msg> m = messages(t->ranks[0].bytes);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(packed(m[2], 4), std::vector<uint64_t>{0});
  EXPECT_TRUE(packed(m[2], 5).empty());
  EXPECT_EQ(t->ranks[0].file, "scaleplan.3.et");
}

TEST(ChakraTest, WriteRefusesAMissingDirectoryBeforeWriting) {
  auto t = to_chakra(two_ranks());
  ASSERT_TRUE(t.is_ok());
  const std::string missing =
      (std::filesystem::temp_directory_path() / "scaleplan_chakra_no_such_dir").string();
  std::filesystem::remove_all(missing);
  const Status s = write_chakra(*t, missing);
  EXPECT_EQ(s.code(), Status::Code::kInvalidInput);
  EXPECT_NE(s.message().find(missing), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(missing));
}

// A simulated iteration written as Chakra and read back is the same DAG (data deps), the same
// streams, durations (scaleplan.duration_ps, exact to the tick) and matches (scaleplan.match), so
// the engine, deterministic and given the same interference factor, must give the same iteration
// time to the tick: any difference is something the trace lost.
TEST(ChakraTest, AnIterationReadBackTakesTheSameTime) {
  auto cluster = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(cluster.is_ok());
  auto model = models::load_model("llama3-8b");
  ASSERT_TRUE(model.is_ok());
  auto kernels = calibrate::kernel_cost_model_for(*cluster);
  ASSERT_TRUE(kernels.is_ok());
  for (const char* text : {"tp=2,pp=2,dp=2,gbs=8,zero=1",
                           "tp=1,pp=2,vpp=2,schedule=interleaved,dp=2,cp=2,gbs=8,zero=1"}) {
    SCOPED_TRACE(text);
    auto layout = parse_layout(text);
    ASSERT_TRUE(layout.is_ok());
    SimulateOptions o;
    o.all_ranks = true;
    o.keep_program = true;
    auto r = simulate(*model, *cluster, 2048, *layout, o);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    auto t = to_chakra(*r->program);
    ASSERT_TRUE(t.is_ok()) << t.status().message();
    auto back = from_chakra(t->ranks);
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_EQ(back->num_ops(), r->program->num_ops());
    EXPECT_EQ(back->all_deps().size(), r->program->all_deps().size());
    const Engine engine(*back, {.compute_slowdown_under_comm = (*kernels)->overlap_slowdown()});
    auto tl = engine.run();
    ASSERT_TRUE(tl.is_ok()) << tl.status().message();
    EXPECT_EQ(tl->makespan.since_start(), r->iteration);
  }
}

// A trace another tool wrote carries no scaleplan.* attributes: its communication is timed by the
// cluster's collective model. One rank-pair all-reduce of 64 MiB on a DGX H100 must take what the
// model gives for two packed GPUs, and without a model it is refused by name.
TEST(ChakraTest, ForeignCollectivesAreTimedByTheClusterModel) {
  auto cluster = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(cluster.is_ok());
  const hw::CollectiveModel cm(*cluster);
  // Each rank's trace written by hand with the wire format: GlobalMetadata, then one
  // COMM_COLL_NODE with only the fields Chakra's own converters write.
  std::string node;
  auto put = [](std::string& out, uint64_t v) {
    while (v >= 0x80) {
      out.push_back(static_cast<char>((v & 0x7F) | 0x80));
      v >>= 7;
    }
    out.push_back(static_cast<char>(v));
  };
  auto field_bytes = [&put](std::string& out, int f, const std::string& b) {
    put(out, (static_cast<uint64_t>(f) << 3) | 2);
    put(out, b.size());
    out += b;
  };
  auto attr_i = [&](const std::string& name, uint64_t v) {
    std::string a;
    field_bytes(a, 1, name);
    put(a, (9 << 3) | 0);
    put(a, v);
    return a;
  };
  auto attr_s = [&](const std::string& name, const std::string& v) {
    std::string a;
    field_bytes(a, 1, name);
    field_bytes(a, 29, v);
    return a;
  };
  put(node, (1 << 3) | 0);  // id 0
  put(node, 0);
  put(node, (3 << 3) | 0);  // COMM_COLL_NODE
  put(node, 7);
  field_bytes(node, 10, attr_i("comm_type", 0));  // ALL_REDUCE
  field_bytes(node, 10, attr_i("comm_size", 64 << 20));
  field_bytes(node, 10, attr_s("pg_name", "0"));
  std::string meta;
  field_bytes(meta, 1, "0.0.4");
  std::vector<ChakraRankTrace> traces(2);
  for (int r = 0; r < 2; ++r) {
    traces[r].global_rank = r;
    put(traces[r].bytes, meta.size());
    traces[r].bytes += meta;
    put(traces[r].bytes, node.size());
    traces[r].bytes += node;
  }
  auto refused = from_chakra(traces);
  EXPECT_FALSE(refused.is_ok());
  auto back = from_chakra(traces, &cm);
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  ASSERT_EQ(back->num_ops(), 2u);
  const Duration expected =
      cm.estimate(CollectiveOp::kAllReduce, Bytes(64 << 20), hw::GroupPlacement::packed(*cluster, 2))
          .time;
  EXPECT_GT(expected, Duration::zero());
  EXPECT_EQ(back->op(0).duration, expected);
  EXPECT_EQ(back->op(0).match, back->op(1).match);  // one all-reduce of both ranks
}

}  // namespace
}  // namespace scaleplan::sim
