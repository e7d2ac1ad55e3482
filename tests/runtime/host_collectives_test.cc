// Host collectives against a sequential reference, for every primitive and group sizes 1, 2, 3, 4
// and 8, plus split groups, send/recv, and failures that must become errors rather than hangs.
//
// Every rank r fills element i of its send buffer with value(r, i), a small integer, so that sums
// are exact in f32 and the reference (the definition of each primitive, computed in one thread over
// all ranks' inputs) must match bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <vector>

#include "runtime/host/bf16.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace {

float value(int rank, int64_t i) { return static_cast<float>((rank * 7 + i * 3) % 23 - 11); }

// Reference result for group rank `me` of n, count c, root 0 (sum or max).
std::vector<float> reference(CollectiveOp op, ReduceOp red, int n, int me, int64_t c, int root) {
  auto send = [&](int r, int64_t len) {
    std::vector<float> v(len);
    for (int64_t i = 0; i < len; ++i) v[i] = value(r, i);
    return v;
  };
  auto reduce = [&](int64_t offset, int64_t len) {
    std::vector<float> acc(len);
    for (int64_t i = 0; i < len; ++i) {
      float a = value(0, offset + i);
      for (int r = 1; r < n; ++r) {
        const float v = value(r, offset + i);
        a = red == ReduceOp::kMax ? std::max(a, v) : a + v;
      }
      acc[i] = red == ReduceOp::kAvg ? a / static_cast<float>(n) : a;
    }
    return acc;
  };
  std::vector<float> out;
  switch (op) {
    case CollectiveOp::kAllReduce:
      return reduce(0, c);
    case CollectiveOp::kReduce:
      return me == root ? reduce(0, c) : out;
    case CollectiveOp::kReduceScatter:
      return reduce(me * c, c);
    case CollectiveOp::kAllGather:
    case CollectiveOp::kGather:
      if (op == CollectiveOp::kGather && me != root) return out;
      for (int r = 0; r < n; ++r) {
        auto s = send(r, c);
        out.insert(out.end(), s.begin(), s.end());
      }
      return out;
    case CollectiveOp::kAllToAll:
      for (int r = 0; r < n; ++r) {
        auto s = send(r, n * c);
        out.insert(out.end(), s.begin() + me * c, s.begin() + (me + 1) * c);
      }
      return out;
    case CollectiveOp::kBroadcast:
      return send(root, c);
    case CollectiveOp::kScatter: {
      auto s = send(root, n * c);
      return std::vector<float>(s.begin() + me * c, s.begin() + (me + 1) * c);
    }
    case CollectiveOp::kSendRecv:  // not a collective: rejected by collective()
    case CollectiveOp::kBarrier:
      return out;
  }
  return out;
}

// Runs `op` on a group (the world, or a split of it) and checks every member's result.
Status run_and_check(Backend& be, const Group& g, CollectiveOp op, ReduceOp red, int64_t c,
                     int root) {
  const int n = g.size, me = g.rank;
  const int64_t send_len = n * c, recv_len = n * c;  // large enough for every primitive
  SP_ASSIGN_OR_RETURN(Buffer send, be.allocate(send_len, ElemType::kF32));
  SP_ASSIGN_OR_RETURN(Buffer recv, be.allocate(recv_len, ElemType::kF32));
  std::vector<float> host(send_len);
  for (int64_t i = 0; i < send_len; ++i) host[i] = value(me, i);
  SP_RETURN_IF_ERROR(be.upload(send, host.data()));
  CollectiveArgs a{op, send, recv, c, red, root};
  SP_RETURN_IF_ERROR(be.collective(g, a));
  const std::vector<float> want = reference(op, red, n, me, c, root);
  std::vector<float> got(recv_len);
  SP_RETURN_IF_ERROR(be.download(recv, got.data()));
  for (size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i]) {
      return Status::internal(std::string(to_string(op)) + " n=" + std::to_string(n) + " rank " +
                              std::to_string(me) + " element " + std::to_string(i) + ": got " +
                              std::to_string(got[i]) + ", want " + std::to_string(want[i]));
    }
  }
  return Status::ok();
}

class HostCollectives : public ::testing::TestWithParam<int> {};

TEST_P(HostCollectives, EveryPrimitiveMatchesSequentialReference) {
  const int n = GetParam();
  for (int o = 0; o < kNumBackendCollectives; ++o) {
    const auto op = static_cast<CollectiveOp>(o);
    for (int64_t count : {1, 5, 1000}) {
      const int root = n - 1;  // a root other than 0 catches root-indexing mistakes
      const Status st = run_host_ranks(n, [&](Backend& be) {
        return run_and_check(be, be.world(), op, ReduceOp::kSum, count, root);
      });
      EXPECT_TRUE(st.is_ok()) << st.message();
    }
  }
}

TEST_P(HostCollectives, MaxAndAverageReductions) {
  const int n = GetParam();
  for (ReduceOp red : {ReduceOp::kMax, ReduceOp::kAvg}) {
    const Status st = run_host_ranks(n, [&](Backend& be) {
      SP_RETURN_IF_ERROR(run_and_check(be, be.world(), CollectiveOp::kAllReduce, red, 33, 0));
      return run_and_check(be, be.world(), CollectiveOp::kReduceScatter, red, 7, 0);
    });
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
}

INSTANTIATE_TEST_SUITE_P(GroupSizes, HostCollectives, ::testing::Values(1, 2, 3, 4, 8));

TEST(HostCollectivesTest, InPlaceAllReduce) {
  // 4 ranks each holding rank+1 in place: the sum is 1+2+3+4 = 10 everywhere.
  const Status st = run_host_ranks(4, [](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(64, ElemType::kF32));
    std::vector<float> v(64, static_cast<float>(be.rank() + 1));
    SP_RETURN_IF_ERROR(be.upload(b, v.data()));
    SP_RETURN_IF_ERROR(be.collective(be.world(), {CollectiveOp::kAllReduce, b, b, 64}));
    SP_RETURN_IF_ERROR(be.download(b, v.data()));
    for (float x : v) {
      if (x != 10.0f) return Status::internal("in-place all_reduce gave " + std::to_string(x));
    }
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(HostCollectivesTest, Bf16AllReduceRoundsOnce) {
  // Sum of 3 ranks' 1.0, 2.0, 3.0 in bf16 is exactly 6.0; 1/3 steps accumulate in f32 and round
  // once.
  const Status st = run_host_ranks(3, [](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(8, ElemType::kBf16));
    std::vector<uint16_t> v(8, host::float_to_bf16(static_cast<float>(be.rank() + 1)));
    SP_RETURN_IF_ERROR(be.upload(b, v.data()));
    SP_RETURN_IF_ERROR(be.collective(be.world(), {CollectiveOp::kAllReduce, b, b, 8}));
    SP_RETURN_IF_ERROR(be.download(b, v.data()));
    if (host::bf16_to_float(v[3]) != 6.0f) return Status::internal("bf16 sum is not 6");
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(HostCollectivesTest, SplitGroupsLikeTensorAndDataParallel) {
  // 8 ranks as tp=2 × dp=4: tp groups are {0,1},{2,3},..., dp groups {0,2,4,6},{1,3,5,7}.
  // Each group runs every primitive; results must match the reference within each group.
  const Status st = run_host_ranks(8, [](Backend& be) {
    const int r = be.rank();
    SP_ASSIGN_OR_RETURN(const Group tp, be.split(be.world(), r / 2, r));
    SP_ASSIGN_OR_RETURN(const Group dp, be.split(be.world(), r % 2, r));
    if (tp.size != 2 || tp.rank != r % 2 || dp.size != 4 || dp.rank != r / 2) {
      return Status::internal("split gave tp " + std::to_string(tp.size) + "/" +
                              std::to_string(tp.rank) + ", dp " + std::to_string(dp.size) + "/" +
                              std::to_string(dp.rank));
    }
    for (int o = 0; o < kNumBackendCollectives; ++o) {
      SP_RETURN_IF_ERROR(run_and_check(be, tp, static_cast<CollectiveOp>(o), ReduceOp::kSum, 6, 1));
      SP_RETURN_IF_ERROR(run_and_check(be, dp, static_cast<CollectiveOp>(o), ReduceOp::kSum, 6, 2));
    }
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(HostCollectivesTest, SplitOrdersByKeyAndSkipsNegativeColor) {
  // 4 ranks, keys reversed: group rank = 3 - world rank. Rank 3 passes color -1 and joins nothing.
  const Status st = run_host_ranks(4, [](Backend& be) {
    const int r = be.rank();
    SP_ASSIGN_OR_RETURN(const Group g, be.split(be.world(), r == 3 ? -1 : 0, -r));
    if (r == 3) return g.member() ? Status::internal("color -1 joined a group") : Status::ok();
    if (g.size != 3 || g.rank != 2 - r) return Status::internal("bad key order");
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(HostCollectivesTest, SendRecvRingAndPipelineExchange) {
  // A ring of 5: everyone sends its rank to the next and receives from the previous in one batch.
  const Status st = run_host_ranks(5, [](Backend& be) {
    const int r = be.rank(), n = be.world_size();
    SP_ASSIGN_OR_RETURN(Buffer out, be.allocate(3, ElemType::kI32));
    SP_ASSIGN_OR_RETURN(Buffer in, be.allocate(3, ElemType::kI32));
    std::vector<int32_t> v(3, r);
    SP_RETURN_IF_ERROR(be.upload(out, v.data()));
    SP_RETURN_IF_ERROR(be.exchange(
        be.world(), {{true, out, (r + 1) % n}, {false, in, (r + n - 1) % n}}, StreamKind::kPpSend));
    SP_RETURN_IF_ERROR(be.download(in, v.data()));
    if (v[2] != (r + n - 1) % n) return Status::internal("ring got " + std::to_string(v[2]));
    // Then a plain send/recv pair between ranks 0 and 4 (the pipeline's first and last stage).
    if (r == 0) SP_RETURN_IF_ERROR(be.send(be.world(), out, 4));
    if (r == 4) {
      SP_RETURN_IF_ERROR(be.recv(be.world(), in, 0));
      SP_RETURN_IF_ERROR(be.download(in, v.data()));
      if (v[0] != 0) return Status::internal("send/recv got " + std::to_string(v[0]));
    }
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(HostCollectivesTest, MismatchedCountsAreAnErrorNamingTheOp) {
  const Status st = run_host_ranks(3, [](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(16, ElemType::kF32));
    return be.collective(be.world(), {CollectiveOp::kAllGather, b, b, be.rank() == 1 ? 2 : 1});
  });
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("all_gather"), std::string::npos) << st.message();
}

TEST(HostCollectivesTest, ARankThatFailsAbortsTheOthersInsteadOfHanging) {
  // Rank 2 returns before the all-reduce; the other three would wait at the barrier forever.
  std::atomic<int> aborted{0};
  const Status st = run_host_ranks(4, [&](Backend& be) {
    if (be.rank() == 2) return Status::invalid("rank 2 gave up");
    SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(4, ElemType::kF32));
    Status s = be.collective(be.world(), {CollectiveOp::kAllReduce, b, b, 4});
    if (!s.is_ok()) ++aborted;
    return s;
  });
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("rank 2 gave up"), std::string::npos) << st.message();
  EXPECT_EQ(aborted.load(), 3);
}

TEST(HostCollectivesTest, UndersizedBufferIsAnError) {
  const Status st = run_host_ranks(2, [](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer s, be.allocate(4, ElemType::kF32));
    SP_ASSIGN_OR_RETURN(Buffer r, be.allocate(4, ElemType::kF32));  // all_gather needs 2·4
    return be.collective(be.world(), {CollectiveOp::kAllGather, s, r, 4});
  });
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("needs 4 send and 8 recv"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace scaleplan::runtime
