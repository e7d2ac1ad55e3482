// The program's narrow fields and match keys: a value the compact record or a key cannot hold is
// an error, never an alias of another value. The builder used to pack a collective's (group kind,
// group index, call count) into one 64-bit key, 20 bits for the group and 36 for the count, and a
// transfer's (pipeline, direction, chunk, micro-batch) likewise with 20 bits for the micro-batch,
// so a group index of 2^20 or a micro-batch of 2^20 silently became another collective's key.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "sim/match_table.h"
#include "sim/program.h"

namespace scaleplan::sim {
namespace {

// The old packing of a collective's key (sim/builder.cc before issue 27).
uint64_t packed_group_key(int kind, uint64_t group, uint64_t seq) {
  return (static_cast<uint64_t>(kind) << 56) | (group << 36) | seq;
}
uint64_t packed_transfer_key(uint64_t pipeline, int dir, uint64_t chunk, uint64_t mb) {
  return (uint64_t{0xFE} << 56) | (pipeline << 36) | (static_cast<uint64_t>(dir) << 35) |
         (chunk << 20) | mb;
}

TEST(MatchTable, CollectivesThatThePackedKeyMergedStayApart) {
  // Group 0's 2^36-th collective and group 1's first one: one packed key, two instances now.
  const uint64_t big = uint64_t{1} << 36;
  ASSERT_EQ(packed_group_key(0, 1, 0), packed_group_key(0, 0, big));
  // A group index of 2^20 reaches the kind's bits: TP group 2^20 was CP group 0.
  ASSERT_EQ(packed_group_key(0, uint64_t{1} << 20, 0), packed_group_key(1, 0, 0));
  Program prog;
  MatchTable table;
  const uint32_t a = table.instance(
      {.site = MatchKey::Site::kGroup, .kind = GroupKind::kTp, .group = 1, .seq = 0}, 2, prog);
  const uint32_t b = table.instance({.site = MatchKey::Site::kGroup,
                                     .kind = GroupKind::kTp,
                                     .group = 0,
                                     .seq = static_cast<int64_t>(big)},
                                    2, prog);
  const uint32_t c = table.instance(
      {.site = MatchKey::Site::kGroup, .kind = GroupKind::kTp, .group = int64_t{1} << 20, .seq = 0},
      2, prog);
  const uint32_t d = table.instance(
      {.site = MatchKey::Site::kGroup, .kind = static_cast<GroupKind>(1), .group = 0, .seq = 0}, 2,
      prog);
  EXPECT_NE(a, b);
  EXPECT_NE(c, d);
  EXPECT_EQ(table.size(), 4u);
  EXPECT_EQ(prog.match_members().size(), 4u);
  // The same key again is the same instance, and adds none.
  EXPECT_EQ(
      table.instance({.site = MatchKey::Site::kGroup, .kind = GroupKind::kTp, .group = 1, .seq = 0},
                     2, prog),
      a);
  EXPECT_EQ(prog.match_members().size(), 4u);
}

TEST(MatchTable, TransfersThatThePackedKeyMergedStayApart) {
  // Micro-batch 2^20 of chunk 0 was micro-batch 0 of chunk 1; chunk 2^15 reached the direction.
  ASSERT_EQ(packed_transfer_key(0, 0, 1, 0), packed_transfer_key(0, 0, 0, uint64_t{1} << 20));
  ASSERT_EQ(packed_transfer_key(0, 1, 0, 0), packed_transfer_key(0, 0, uint64_t{1} << 15, 0));
  Program prog;
  MatchTable table;
  auto transfer = [&](bool backward, int64_t chunk, int64_t mb) {
    return table.instance({.site = MatchKey::Site::kTransfer,
                           .backward = backward,
                           .group = 0,
                           .chunk = chunk,
                           .seq = mb},
                          2, prog);
  };
  EXPECT_NE(transfer(false, 1, 0), transfer(false, 0, int64_t{1} << 20));
  EXPECT_NE(transfer(true, 0, 0), transfer(false, int64_t{1} << 15, 0));
  // A world collective and a group collective with the same count are different instances.
  EXPECT_NE(table.instance({.site = MatchKey::Site::kWorld, .seq = 3}, 2, prog),
            table.instance({.site = MatchKey::Site::kGroup, .seq = 3}, 2, prog));
}

// One compute op on rank 0 with `spec`, then validate().
Status validate_one(OpSpec spec, int rank = 0) {
  Program prog;
  for (int r = 0; r <= rank && r < 70000; ++r) prog.add_rank({});
  prog.add_label("x", SyncPayload{});
  prog.add_op(rank, spec);
  return prog.validate();
}

TEST(ProgramLimits, ValuesTheCompactRecordCannotHoldAreErrors) {
  EXPECT_TRUE(validate_one({.microbatch = std::numeric_limits<int16_t>::max()}).is_ok());
  const Status mb = validate_one({.microbatch = std::numeric_limits<int16_t>::max() + 1});
  ASSERT_FALSE(mb.is_ok());
  EXPECT_NE(mb.message().find("micro-batch 32768"), std::string::npos) << mb.message();
  EXPECT_TRUE(validate_one({.chunk = 255}).is_ok());
  const Status chunk = validate_one({.chunk = 256});
  ASSERT_FALSE(chunk.is_ok());
  EXPECT_NE(chunk.message().find("model chunk 256"), std::string::npos) << chunk.message();
  const Status rank = validate_one({}, 65536);
  ASSERT_FALSE(rank.is_ok());
  EXPECT_NE(rank.message().find("rank 65536"), std::string::npos) << rank.message();

  Program prog;
  prog.add_rank({});
  prog.add_match(70000);
  const Status members = prog.validate();
  ASSERT_FALSE(members.is_ok());
  EXPECT_NE(members.message().find("70000 members"), std::string::npos) << members.message();
}

}  // namespace
}  // namespace scaleplan::sim
