// The input contract of core (docs/reliability.md): readers refuse what would crash, hang or
// overflow with an invalid-input error naming the field and the value; writes are atomic and never
// follow a planted link. Each case is a reproducer of issue 33's mutation campaign.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

#include "core/json_util.h"
#include "core/layout.h"
#include "core/units.h"

namespace scaleplan {
namespace {

namespace fs = std::filesystem;

std::string temp_dir() {
  const std::string d = ::testing::TempDir() + "/reliability_" + std::to_string(::getpid()) + "_" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name();
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(JsonInput, DeepNestingIsInvalidInputNotAStackOverflow) {
  // 100,000 nested arrays (a 200 KB file) used to overflow the stack in json::dump() and the
  // recursive destructor; kMaxJsonDepth levels parse, one more does not.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  auto r = parse_json(deep, "d.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.status().message().find("d.json: malformed JSON: nested deeper than 128"),
            std::string::npos)
      << r.status().message();
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(ok, "x").is_ok());
  const std::string one_more =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(parse_json(one_more, "x").is_ok());
  // Brackets inside strings do not count.
  EXPECT_TRUE(parse_json("{\"a\": \"" + std::string(1000, '[') + "\"}", "x").is_ok());
}

TEST(JsonInput, NumbersBeyondADoubleAreInvalidInput) {
  // nlohmann throws out_of_range (406) on 1e309; it used to surface as exit 1.
  auto r = parse_json(R"({"a": 1e309})", "n.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.status().message().find("n.json: malformed JSON"), std::string::npos);
}

TEST(JsonInput, IntegersAreBoundedAndQuoteTheValue) {
  const Json j = Json::parse(
      R"({"big": 4294967296, "huge": 18446744073709551615, "f": 1e300, "neg": -5, "s": "x"})");
  // 2^32 used to be truncated to 0 by the callers' int and divide by zero.
  auto big = json_int(j, "big", "p.json");
  ASSERT_FALSE(big.is_ok());
  EXPECT_EQ(big.status().message(), "p.json: big: 4294967296 is too large (at most 2147483647)");
  EXPECT_FALSE(json_int(j, "huge", "p.json", std::nullopt, true, int64_t{1} << 62).is_ok());
  // A double beyond int64 is undefined to convert: refused before.
  EXPECT_FALSE(json_int(j, "f", "p.json", std::nullopt, true, int64_t{1} << 62).is_ok());
  EXPECT_EQ(json_int(j, "neg", "p.json").status().message(),
            "p.json: neg: must be positive, got -5");
  EXPECT_EQ(json_int(j, "big", "p.json", std::nullopt, true, int64_t{1} << 40).value(),
            int64_t{1} << 32);
}

TEST(JsonInput, MessagesQuoteLongValuesBriefly) {
  // A 100 KB string used to be echoed whole into the one-line error.
  const Json j = {{"name", std::string(100000, 'a')}};
  auto r = json_int(j, "name", "p.json");
  ASSERT_FALSE(r.is_ok());
  EXPECT_LT(r.status().message().size(), 160u) << r.status().message();
  EXPECT_NE(r.status().message().find("(100002 characters)"), std::string::npos);
  // The cut never splits a UTF-8 character ("µ" is two bytes).
  std::string micro;
  for (int i = 0; i < 100; ++i) micro += "\xC2\xB5";
  const std::string cut = text_brief(micro);
  EXPECT_EQ(cut.substr(0, cut.find("...")).size() % 2, 0u);
}

TEST(FileInput, DevicesFifosAndDirectoriesAreRefusedNotReadForever) {
  // `--model /dev/zero` read until memory ran out; a FIFO blocked for ever.
  auto zero = read_text_file("/dev/zero");
  ASSERT_FALSE(zero.is_ok());
  EXPECT_EQ(zero.status().message(), "/dev/zero: not a regular file");
  const std::string dir = temp_dir();
  const std::string fifo = dir + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto f = read_text_file(fifo);
  ASSERT_FALSE(f.is_ok());
  EXPECT_EQ(f.status().code(), Status::Code::kInvalidInput);
  EXPECT_FALSE(read_text_file(dir).is_ok());
  // A name over the file system's 255 bytes is "cannot open", not an exception.
  auto longname = read_text_file(dir + "/" + std::string(300, 'x'));
  ASSERT_FALSE(longname.is_ok());
  EXPECT_NE(longname.status().message().find("cannot open file"), std::string::npos);
  fs::remove_all(dir);
}

TEST(AtomicWrite, ReplacesWholeAndLeavesNoTemporary) {
  const std::string dir = temp_dir();
  const std::string target = dir + "/out.json";
  ASSERT_TRUE(write_file_atomic(target, "old\n").is_ok());
  ASSERT_TRUE(write_file_atomic(target, "new\n").is_ok());
  EXPECT_EQ(slurp(target), "new\n");
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);  // no temporary left beside it
  fs::remove_all(dir);
}

TEST(AtomicWrite, RefusesToReplaceALinkOrADevice) {
  // rename() would replace a symbolic link (or, as root, /dev/null) at the target.
  const std::string dir = temp_dir();
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep";
  const std::string link = dir + "/link.json";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  auto r = write_file_atomic(link, "x");
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.code(), Status::Code::kInvalidInput);
  EXPECT_NE(r.message().find("exists and is not a regular file (a symbolic link)"),
            std::string::npos)
      << r.message();
  EXPECT_EQ(slurp(victim), "keep");
  EXPECT_TRUE(fs::is_symlink(link));
  auto dev = write_file_atomic("/dev/null", "x");
  ASSERT_FALSE(dev.is_ok());
  EXPECT_NE(dev.message().find("a device, FIFO or socket"), std::string::npos);
  fs::remove_all(dir);
}

TEST(AtomicWrite, APlantedTemporaryNameIsNeverFollowed) {
  // The old temporary name, <target>.tmp.<pid>, could be planted as a link to another file; the
  // new one is random and opened with O_EXCL | O_NOFOLLOW. Plant the old name and check that the
  // file it points at is untouched.
  const std::string dir = temp_dir();
  const std::string victim = dir + "/victim";
  std::ofstream(victim) << "keep";
  const std::string target = dir + "/out.json";
  const std::string old_tmp = target + ".tmp." + std::to_string(::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), old_tmp.c_str()), 0);
  ASSERT_TRUE(write_file_atomic(target, "data").is_ok());
  EXPECT_EQ(slurp(victim), "keep");
  EXPECT_EQ(slurp(target), "data");
  fs::remove_all(dir);
}

TEST(UnitStrings, OutOfRangeValuesNameTheLimit) {
  // "1e-300Gb/s" made every transfer take longer than the clock holds ("negative duration").
  auto slow = parse_bandwidth("1e-300Gb/s", "network.nic_bandwidth");
  ASSERT_FALSE(slow.is_ok());
  EXPECT_EQ(slow.status().message(),
            "network.nic_bandwidth: '1e-300Gb/s' is below 0.1 B/s, the least a rate may be");
  auto long_latency = parse_duration("1e7s", "cost_model.network_step_latency");
  ASSERT_FALSE(long_latency.is_ok());
  EXPECT_NE(long_latency.status().message().find("longer than an hour"), std::string::npos);
  // 8191 PiB is beyond int64 bytes: refused rather than rounded to garbage.
  EXPECT_FALSE(parse_bytes("8191PiB", "--sweep").is_ok());
  EXPECT_TRUE(parse_bytes("1024PiB", "x").is_ok());  // exactly 1 EiB
  EXPECT_FALSE(parse_flop_rate("1e30FLOP/s", "gpu.bf16_dense").is_ok());
  EXPECT_EQ(parse_bandwidth("0GB/s", "x")->value(), 0);  // "none" stays expressible
}

TEST(UnitStrings, JsonNumbersTakeTheSameChecks) {
  const Json j = {{"bw", 1e-300}, {"lat", 1e7}, {"mem", 1e30}, {"ok", 2e-6}};
  EXPECT_FALSE(json_bandwidth(j, "bw", "p").is_ok());
  EXPECT_FALSE(json_duration(j, "lat", "p").is_ok());
  EXPECT_FALSE(json_bytes(j, "mem", "p").is_ok());
  EXPECT_EQ(json_duration(j, "ok", "p")->count(), 2'000'000);  // 2 us in picoseconds
}

TEST(Durations, SaturateInsteadOfWrapping) {
  // 1e7 s is past the int64 picosecond clock (9.2e6 s): the largest value, never negative.
  EXPECT_EQ(Duration::seconds(1e7), Duration::infinite());
  EXPECT_EQ(Duration::seconds(std::nan("")), Duration::infinite());
  EXPECT_EQ(Duration::infinite() + Duration::seconds(1), Duration::infinite());
  EXPECT_EQ((Time::zero() + Duration::infinite()) + Duration::ticks(1),
            Time::at(Duration::infinite()));
  EXPECT_EQ(Duration::infinite() * 2, Duration::infinite());
  EXPECT_EQ(Bytes(int64_t{1} << 62) * int64_t{4}, Bytes(std::numeric_limits<int64_t>::max()));
}

TEST(LayoutInput, GpuCountsAndProductsBeyondTheBoundAreRefused) {
  // --gpus 2^40 gave dp = 0 (int truncation) and a division by zero.
  const LayoutConstraints m{80, 64, 8, 0, 4096, false};
  auto huge = resolve_layout(*parse_layout("tp=8"), m, int64_t{1} << 40);
  ASSERT_FALSE(huge.is_ok());
  EXPECT_EQ(huge.status().message(),
            "layout: 1099511627776 GPUs, more than the 1048576 scaleplan models");
  // tp·pp·cp·dp beyond the bound, each degree within it.
  auto product = resolve_layout(*parse_layout("tp=1048576,pp=1048576,dp=2"), m, 0);
  ASSERT_FALSE(product.is_ok());
  EXPECT_NE(product.status().message().find("more than the 1048576"), std::string::npos);
  auto seq = resolve_layout(*parse_layout("tp=8"), {80, 64, 8, 0, int64_t{1} << 31, false}, 8);
  ASSERT_FALSE(seq.is_ok());
  EXPECT_NE(seq.status().message().find("sequence length 2147483648"), std::string::npos);
  EXPECT_FALSE(parse_layout("gbs=1099511627776").is_ok());
}

TEST(LayoutInput, TheDefaultBatchKeepsTheBoundOfAnExplicitOne) {
  // Found by the layout fuzzer (tests/data/fuzz/layout/crash-default-gbs-beyond-bound): mbs=1647
  // on 16,384 GPUs defaulted gbs to mbs·dp = 26,984,448, which format_layout printed and
  // parse_layout then refused.
  const LayoutConstraints m{80, 64, 8, 0, 4096, false};
  auto r = resolve_layout(*parse_layout("mbs=1647"), m, 16384);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().message(),
            "layout: gbs = mbs·dp = 1647·16384 = 26984448 sequences, more than the 16777216 "
            "scaleplan models");
}

}  // namespace
}  // namespace scaleplan
