#include "core/units.h"

#include <gtest/gtest.h>

namespace scaleplan {
namespace {

TEST(Units, TransferTimeIsBytesOverBandwidth) {
  // 1 GB over 100 GB/s takes 10 ms.
  Duration d = Bytes(1'000'000'000) / BytesPerSecond(100e9);
  EXPECT_EQ(d.count(), Duration::seconds(0.010).count());
  EXPECT_DOUBLE_EQ(d.to_seconds(), 0.010);
}

TEST(Units, ComputeTimeIsFlopsOverRate) {
  // 989e12 FLOPs at 989 TFLOP/s take exactly one second.
  EXPECT_EQ((Flops(989e12) / FlopsPerSecond(989e12)).count(), Duration::kTicksPerSecond);
}

TEST(Units, DurationIsIntegerPicoseconds) {
  EXPECT_EQ(Duration::microseconds(2).count(), 2'000'000);
  EXPECT_EQ((Duration::ticks(3) + Duration::ticks(4)).count(), 7);
  Time t = Time::zero() + Duration::seconds(1.5);
  EXPECT_EQ((t - Time::zero()).count(), 1'500'000'000'000);
}

TEST(Units, ParsesBytesSiAndBinary) {
  EXPECT_EQ(parse_bytes("80GiB", "x")->value(), 80LL << 30);
  EXPECT_EQ(parse_bytes("80 GB", "x")->value(), 80'000'000'000LL);
  EXPECT_EQ(parse_bytes("4096", "x")->value(), 4096);
  EXPECT_EQ(parse_bytes("1.5KiB", "x")->value(), 1536);
}

TEST(Units, ParsesBandwidthInBytesAndBits) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("900GB/s", "x")->value(), 900e9);
  // 400 Gb/s is 50 GB/s.
  EXPECT_DOUBLE_EQ(parse_bandwidth("400Gb/s", "x")->value(), 50e9);
}

TEST(Units, ParsesDurationsAndFlopRates) {
  EXPECT_EQ(parse_duration("2us", "x")->count(), 2'000'000);
  EXPECT_EQ(parse_duration("1.5 ms", "x")->count(), 1'500'000'000);
  EXPECT_DOUBLE_EQ(parse_flop_rate("989TFLOP/s", "x")->value(), 989e12);
}

TEST(Units, BadUnitNamesFieldAndText) {
  auto r = parse_bandwidth("900GB", "gpu.memory_bandwidth");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.status().message().find("gpu.memory_bandwidth"), std::string::npos);
  EXPECT_NE(r.status().message().find("900GB"), std::string::npos);
  EXPECT_FALSE(parse_bytes("-5GiB", "x").is_ok());
  EXPECT_FALSE(parse_bytes("lots", "x").is_ok());
}

TEST(Units, Formats) {
  EXPECT_EQ(format_bytes(80_GiB), "80.00 GiB");
  EXPECT_EQ(format_duration(Duration::microseconds(1500)), "1.500 ms");
  EXPECT_EQ(format_count(8.03e9), "8.03B");
}

}  // namespace
}  // namespace scaleplan
