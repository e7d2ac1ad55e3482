// Counts with suffixes: one reader for every count the CLI and the layout take.
#include "core/counts.h"

#include <gtest/gtest.h>

#include <string>

namespace scaleplan {
namespace {

int64_t count(std::string_view text, CountSuffix s = CountSuffix::kBinary) {
  auto r = parse_count(text, "--x", s);
  EXPECT_TRUE(r.is_ok()) << text << ": " << r.status().message();
  return r.is_ok() ? *r : -1;
}

void expect_refused(std::string_view text, const std::string& needle,
                    CountSuffix s = CountSuffix::kBinary) {
  auto r = parse_count(text, "--seq", s);
  ASSERT_FALSE(r.is_ok()) << text;
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

TEST(Counts, SuffixesScaleByTheirBase) {
  EXPECT_EQ(count("4096"), 4096);
  EXPECT_EQ(count("4k"), 4096);  // sequence lengths: 4k context = 4096 tokens
  EXPECT_EQ(count("4K"), 4096);
  EXPECT_EQ(count("128k"), 131072);
  EXPECT_EQ(count("1.5k"), 1536);
  EXPECT_EQ(count("16k"), 16384);  // 16k GPUs (Llama 3's 16,384 H100s)
  EXPECT_EQ(count("2M"), 2 * 1024 * 1024);
  EXPECT_EQ(count(" 8k "), 8192);
  EXPECT_EQ(count("15T", CountSuffix::kDecimal), 15'000'000'000'000);  // 15T tokens
  EXPECT_EQ(count("1.4T", CountSuffix::kDecimal), 1'400'000'000'000);
  EXPECT_EQ(count("10k", CountSuffix::kDecimal), 10'000);
  EXPECT_EQ(count("2e6", CountSuffix::kDecimal), 2'000'000);
  EXPECT_EQ(count("0"), 0);
  // Plain integers are read exactly, without a double in between.
  EXPECT_EQ(count("9007199254740993"), 9'007'199'254'740'993);
}

TEST(Counts, WhatIsNotACountIsNamed) {
  expect_refused("4q",
                 "--seq: '4q' is not a count (digits with an optional k, M, G or T: 4k = "
                 "4096)");
  expect_refused("", "is not a count");
  expect_refused("k", "is not a count");
  expect_refused("-4k", "must not be negative");
  expect_refused("0.3k", "is not a whole number");  // 307.2
  expect_refused("4.5", "is not a whole number");
  expect_refused("8T8", "is not a count");
  expect_refused("9999999T", "is beyond any count");
  expect_refused("nan", "is not a count");
  expect_refused("15X", "15T = 15,000,000,000,000", CountSuffix::kDecimal);
}

}  // namespace
}  // namespace scaleplan
