// Enum names as tables (core/enum_names.h): a value past the table names "?", an unknown name
// finds nothing, and each enum with a parser reads every name it prints back as the same value.
#include "core/enum_names.h"

#include <gtest/gtest.h>

#include "core/comm.h"
#include "core/framework.h"
#include "core/layout.h"

namespace scaleplan {
namespace {

enum class Color { kRed, kGreen, kCount };
constexpr std::string_view kColorNames[] = {"red", "green"};

TEST(EnumNames, ValuesOutsideTheTableAndUnknownNames) {
  EXPECT_EQ(name_in(kColorNames, Color::kGreen), "green");
  EXPECT_EQ(name_in(kColorNames, Color::kCount), "?");
  EXPECT_EQ(value_in<Color>(kColorNames, "red"), Color::kRed);
  EXPECT_EQ(value_in<Color>(kColorNames, "Red"), std::nullopt);
  EXPECT_EQ(value_in<Color>(kColorNames, ""), std::nullopt);
}

template <typename E, typename Parse>
void expect_round_trip(int count, Parse parse) {
  for (int i = 0; i < count; ++i) {
    const auto v = static_cast<E>(i);
    auto back = parse(to_string(v));
    ASSERT_TRUE(back.is_ok()) << to_string(v) << ": " << back.status().message();
    EXPECT_EQ(*back, v) << to_string(v);
  }
}

TEST(EnumNames, EveryPrintedNameParsesBackAsItsValue) {
  expect_round_trip<CollectiveOp>(kNumCollectiveOps, parse_collective_op);
  expect_round_trip<FrameworkId>(kNumFrameworks, parse_framework);
  expect_round_trip<Schedule>(static_cast<int>(Schedule::kZbV) + 1, parse_schedule);
  expect_round_trip<Recompute>(static_cast<int>(Recompute::kFull) + 1, parse_recompute);
  expect_round_trip<CpComm>(static_cast<int>(CpComm::kA2a) + 1, parse_cp_comm);
}

TEST(EnumNames, NamesStandInTheEnumsDeclaredOrder) {
  EXPECT_EQ(to_string(Schedule::kZbH1), "zb-h1");
  EXPECT_EQ(to_string(StreamKind::kPpRecv), "pp recv");
  EXPECT_EQ(to_string(StreamKind::kCount), "?");
  EXPECT_EQ(to_string(GroupKind::kDpCp), "dp_cp");
  EXPECT_EQ(to_string(CommClass::kCp), "cp");
  EXPECT_EQ(to_string(FrameworkId::kDeepspeed2021), "deepspeed-2021");
}

}  // namespace
}  // namespace scaleplan
