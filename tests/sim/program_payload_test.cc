// The typed Program: every op the builder emits carries a payload that says what it does, its
// label text is derived from that payload, and the groups and peers it names are the layout's.
// These are what the runtime's executor relies on to run the ops the simulator timed.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "calibrate/kernel_model.h"
#include "hw_profiles/cluster.h"
#include "hw_profiles/collectives.h"
#include "hw_profiles/placement.h"
#include "models/model_spec.h"
#include "sim/builder.h"
#include "sim/framework.h"
#include "sim/program.h"

namespace scaleplan::sim {
namespace {

struct Built {
  Program program;
  Layout layout;
  BuildOptions options;
};

// The all-ranks (or one-rank-per-stage) program of `layout_text` for `model` on 8-GPU DGX H100
// nodes under `framework`, unmerged, as the runtime would execute it.
Built build(const models::ModelSpec& model, const std::string& layout_text, int64_t gpus,
            FrameworkId framework, bool all_ranks, const calibrate::KernelCostModel& kernels,
            const hw::Cluster& cluster) {
  const int64_t seq = 256;
  auto parsed = parse_layout(layout_text);
  EXPECT_TRUE(parsed.is_ok()) << layout_text;
  auto l = resolve_layout(*parsed, models::layout_constraints(model, seq), gpus);
  EXPECT_TRUE(l.is_ok()) << layout_text << ": " << l.status().message();
  BuildOptions o = build_options(sim::framework(framework), *l, cluster.gpu);
  o.all_ranks = all_ranks;
  const hw::CollectiveModel collectives(cluster);
  BuildInputs in{&model, &*l, seq, &cluster, &kernels, &collectives, nullptr};
  auto p = build_program(in, o);
  EXPECT_TRUE(p.is_ok()) << layout_text << ": " << p.status().message();
  return {p.is_ok() ? std::move(*p) : Program{}, *l, o};
}

// Walks every op and checks its payload against its label, its op record and the layout:
//  - every op is typed, with the payload its kind needs;
//  - the label text and FLOPs are the payload's (payload_text, payload_flops);
//  - a kernel's duration is what the kernel model gives for the payload's shape (the payload is
//    what was timed), an attention kernel the build's;
//  - a collective runs on its stream's group kind; its group (kind and index) holds its rank, has
//    the payload's size, and with every rank simulated its match instance is exactly the group's
//    members (their global ranks);
//  - a send or receive names a peer in its rank's pipeline, and the matched op's rank is it;
//  - activations are allocated and freed once per (rank, chunk, micro-batch), in equal bytes.
void walk(const Built& b, const calibrate::KernelCostModel& kernels, const std::string& what) {
  const Program& p = b.program;
  ASSERT_GT(p.num_ops(), 0u) << what;
  ASSERT_TRUE(p.layout().has_value()) << what;
  ASSERT_FALSE(p.merged_compute()) << what;
  std::map<uint32_t, std::set<int64_t>> match_globals;
  std::map<uint32_t, std::vector<OpId>> match_ops;
  std::map<std::tuple<int, int, int>, std::pair<int64_t, int64_t>> acts;  // alloc, free bytes
  int kernels_seen = 0, collectives_seen = 0, transfers_seen = 0;
  for (OpId i = 0; i < p.num_ops(); ++i) {
    const Op& op = p.op(i);
    const OpLabel& label = p.label(i);
    const OpPayload& pay = label.payload;
    const std::string where = what + ": op " + std::to_string(i) + " " + label.name;
    ASSERT_FALSE(std::holds_alternative<std::monostate>(pay)) << where;
    EXPECT_EQ(label.shape, payload_text(pay)) << where;
    const int64_t global = p.ranks()[op.rank].global_rank;
    switch (op.kind) {
      case OpKind::kCompute: {
        if (std::holds_alternative<SyncPayload>(pay)) {
          EXPECT_EQ(op.duration, Duration::zero()) << where;
          break;
        }
        const auto* k = std::get_if<KernelPayload>(&pay);
        ASSERT_NE(k, nullptr) << where;
        ++kernels_seen;
        EXPECT_EQ(label.flops.value(), payload_flops(pay).value()) << where;
        Duration expect;
        if (const auto* g = std::get_if<GemmShape>(&k->shape)) {
          EXPECT_EQ(k->kind, KernelKind::kGemm) << where;
          if (b.layout.dtype == DType::kBf16) {
            EXPECT_EQ(g->dtype, DType::kBf16) << where;
          }
          expect = kernels.gemm(*g);
        } else if (const auto* a = std::get_if<AttentionShape>(&k->shape)) {
          EXPECT_TRUE(k->kind == KernelKind::kAttentionFwd || k->kind == KernelKind::kAttentionBwd)
              << where;
          EXPECT_EQ(a->kernel, b.options.attention) << where;
          expect = kernels.attention(*a, k->kind == KernelKind::kAttentionBwd);
        } else {
          EXPECT_EQ(k->kind, KernelKind::kMemoryBound) << where;
          expect = kernels.memory_bound(std::get<MemoryBoundShape>(k->shape));
        }
        EXPECT_EQ(op.duration, expect) << where;
        break;
      }
      case OpKind::kCollective: {
        const auto* c = std::get_if<CollectivePayload>(&pay);
        ASSERT_NE(c, nullptr) << where;
        ++collectives_seen;
        EXPECT_EQ(op.collective, c->op) << where;
        EXPECT_EQ(op.stream, stream_of(c->group)) << where;
        EXPECT_EQ(label.flops.value(), 0.0) << where;
        auto g = p.group(i);
        ASSERT_TRUE(g.is_ok()) << where << ": " << g.status().message();
        EXPECT_EQ(g->kind, c->group) << where;
        const std::span<const int> members = p.members(*g);
        EXPECT_EQ(static_cast<int>(members.size()), c->size) << where;
        EXPECT_TRUE(std::find(members.begin(), members.end(), global) != members.end())
            << where << ": rank " << global << " is not in " << to_string(c->group) << " group "
            << g->index;
        match_globals[op.match].insert(global);
        match_ops[op.match].push_back(i);
        break;
      }
      case OpKind::kSend:
      case OpKind::kRecv: {
        const auto* t = std::get_if<TransferPayload>(&pay);
        ASSERT_NE(t, nullptr) << where;
        ++transfers_seen;
        EXPECT_EQ(op.collective, CollectiveOp::kSendRecv) << where;
        EXPECT_NE(t->peer_stage, p.ranks()[op.rank].stage) << where;
        auto peer = p.peer(i);
        ASSERT_TRUE(peer.is_ok()) << where;
        EXPECT_NE(*peer, global) << where;
        match_ops[op.match].push_back(i);
        break;
      }
      case OpKind::kAlloc:
      case OpKind::kFree: {
        ASSERT_TRUE(std::holds_alternative<ActivationsPayload>(pay)) << where;
        EXPECT_GT(op.bytes, 0) << where;
        EXPECT_GE(op.microbatch, 0) << where;
        auto& a = acts[{op.rank, op.chunk, op.microbatch}];
        (op.kind == OpKind::kAlloc ? a.first : a.second) += op.bytes;
        break;
      }
      case OpKind::kHost:
        EXPECT_TRUE(std::holds_alternative<HostPayload>(pay)) << where;
        break;
    }
  }
  EXPECT_GT(kernels_seen, 0) << what;
  EXPECT_GT(collectives_seen, 0) << what;
  for (const auto& [key, a] : acts) {
    EXPECT_EQ(a.first, a.second) << what << ": activations of rank " << std::get<0>(key)
                                 << " chunk " << std::get<1>(key) << " micro-batch "
                                 << std::get<2>(key);
  }
  const bool all_ranks = p.num_ranks() == b.layout.gpus();
  for (const auto& [match, ops] : match_ops) {
    if (p.op(ops.front()).kind == OpKind::kCollective) {
      // With one rank per stage a member stands for its group (each op's rank is in its group,
      // checked above); with every rank simulated the instance is the group.
      if (!all_ranks) continue;
      auto g = p.group(ops.front());
      ASSERT_TRUE(g.is_ok());
      const std::span<const int> members = p.members(*g);
      EXPECT_EQ(match_globals[match], std::set<int64_t>(members.begin(), members.end()))
          << what << ": " << p.label(ops.front()).name << " (match " << match << ")";
      continue;
    }
    // A send and its receive: each names the other's global rank as its peer.
    ASSERT_EQ(ops.size(), 2u) << what;
    for (int k = 0; k < 2; ++k) {
      const OpId self = ops[k], other = ops[1 - k];
      EXPECT_EQ(*p.peer(self), p.ranks()[p.op(other).rank].global_rank)
          << what << ": " << p.label(self).name << " op " << self;
    }
  }
  if (b.layout.pp > 1 && b.layout.num_microbatches() > 0) {
    EXPECT_GT(transfers_seen, 0) << what;
  }
}

struct Job {
  const char* model;
  const char* layout;
  int64_t gpus;
  FrameworkId framework = FrameworkId::kMegatron;
  bool tied = false;  // tie the embedding to the LM head (the embedding group's all-reduce)
  int mtp = 0;        // DeepSeek MTP modules on the last stage
};

// Dense and MoE models, every schedule, ZeRO 0-3, CP (ring, all-gather, Ulysses), EP and ETP,
// under the frameworks whose programs differ (copies, unfused attention, host issue, blocking and
// scattered pipeline transfers). Every rank is simulated; small models keep the programs small.
TEST(ProgramPayload, EveryOpIsTypedAndItsGroupsAreTheLayouts) {
  auto cluster = hw::load_cluster("dgx-h100");
  ASSERT_TRUE(cluster.is_ok());
  // Each kernel's duration is the kernel model's for its payload at the clocks its figures were
  // measured at: without the step's SM clock (which re-times them per step: StepClock.*).
  cluster->gpu.efficiency.sm_clock = hw::SmClock{};
  auto kernels = calibrate::kernel_cost_model_for(*cluster);
  ASSERT_TRUE(kernels.is_ok());
  const std::vector<Job> jobs = {
      {"llama-tiny", "tp=2,pp=2,dp=2,gbs=8,zero=1", 8},
      {"llama-tiny", "tp=1,pp=2,dp=2,gbs=8,schedule=afab,zero=0", 4, FrameworkId::kMegatron, true},
      {"llama-tiny", "tp=1,pp=2,vpp=2,schedule=interleaved,dp=2,gbs=8,zero=1", 4},
      {"llama-tiny", "tp=2,pp=2,dp=1,gbs=8,schedule=zb-h1,zero=0", 4, FrameworkId::kMegatron2022},
      {"llama-tiny", "tp=1,pp=2,dp=2,gbs=16,schedule=dualpipe,zero=1", 4, FrameworkId::kMegatron,
       true},
      {"llama-tiny", "tp=1,pp=2,dp=2,gbs=16,schedule=dualpipev,zero=2", 4},
      {"llama-tiny", "tp=1,pp=2,dp=2,gbs=8,schedule=zb-v,zero=0", 4, FrameworkId::kTorchtitan},
      {"llama-tiny", "tp=2,cp=2,dp=2,gbs=4,zero=3", 8, FrameworkId::kTorchtitan},
      {"llama-tiny", "tp=1,cp=2,cp_comm=a2a,dp=2,gbs=4,zero=2", 4},
      {"llama-tiny", "tp=2,cp=2,cp_comm=all_gather,pp=2,gbs=4,zero=1", 8, FrameworkId::kNanotron},
      {"llama-tiny", "tp=1,pp=2,dp=2,gbs=8,zero=3", 4, FrameworkId::kDeepspeed2021},
      {"mixtral-tiny", "tp=2,ep=2,dp=2,gbs=8,zero=1", 4},
      {"mixtral-tiny", "tp=2,pp=2,ep=4,dp=2,gbs=8,zero=3", 8},
      {"mixtral-tiny", "tp=1,pp=2,ep=2,etp=2,dp=4,gbs=16,schedule=dualpipev,zero=1", 8},
      {"deepseek-tiny", "tp=1,pp=2,ep=4,dp=4,gbs=16,zero=2,recompute=selective", 8,
       FrameworkId::kMegatron, false, 1},
  };
  for (const Job& j : jobs) {
    auto model = models::load_model(j.model);
    ASSERT_TRUE(model.is_ok()) << j.model;
    model->tied_embeddings = j.tied;
    model->mtp_layers = j.mtp;
    const std::string what =
        std::string(j.model) + " " + j.layout + " " + std::string(to_string(j.framework));
    SCOPED_TRACE(what);
    walk(build(*model, j.layout, j.gpus, j.framework, true, **kernels, *cluster), **kernels,
         what + " (all ranks)");
    walk(build(*model, j.layout, j.gpus, j.framework, false, **kernels, *cluster), **kernels,
         what + " (one rank per stage)");
  }
}

}  // namespace
}  // namespace scaleplan::sim
