// Profile and nccl-tests log inputs that used to crash or write a profile that does not load back
// (docs/reliability.md); each case is a reproducer of issue 33's mutation campaign.
#include <gtest/gtest.h>

#include <string>

#include "hw_profiles/cluster.h"
#include "hw_profiles/nccl_tests.h"

namespace scaleplan::hw {
namespace {

std::string profile_error(const std::string& text) {
  auto c = parse_cluster(text, "p.json");
  EXPECT_FALSE(c.is_ok()) << text;
  if (c.is_ok()) return "";
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidInput);
  return c.status().message();
}

TEST(ProfileBounds, CountsBeyondIntAreRefusedNotTruncatedToZero) {
  // gpus_per_node or nvlink_domain_gpus of 2^32 became 0 in an int and divided by zero (SIGFPE)
  // in `collective` and `simulate`.
  EXPECT_EQ(profile_error(R"({"extends": "dgx-h100", "node": {"gpus_per_node": 4294967296}})"),
            "p.json: node: gpus_per_node: 4294967296 is too large (at most 1024)");
  EXPECT_EQ(profile_error(R"({"extends": "dgx-h100", "node": {"nvlink_domain_gpus": 4294967296}})"),
            "p.json: node: nvlink_domain_gpus: 4294967296 is too large (at most 65536)");
  EXPECT_NE(profile_error(R"({"extends": "dgx-h100", "network": {"nic_bandwidth": "1e-300Gb/s"}})")
                .find("below 0.1 B/s"),
            std::string::npos);
  EXPECT_NE(
      profile_error(R"({"extends": "dgx-h100", "cost_model": {"network_step_latency": "1e7s"}})")
          .find("longer than an hour"),
      std::string::npos);
}

TEST(ProfileBounds, ExtendsWithAnOverlongNameIsNotFoundNotAnException) {
  // std::filesystem threw for names over 255 characters (exit 1 with the library's text).
  auto c = parse_cluster(R"({"extends": ")" + std::string(300, 'x') + R"("})", "p.json");
  ASSERT_FALSE(c.is_ok());
  EXPECT_NE(c.status().code(), Status::Code::kInternal);
  EXPECT_LT(c.status().message().size(), 400u);
}

TEST(NcclLogInput, NanInfNegativeAndZeroRowsAreRefused) {
  // Such rows were accepted and fitted into a profile (base_latency "-9.22337e+12us") that
  // `cluster show` then rejected.
  const std::string head =
      "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n";
  for (const std::string row :
       {"8 2 float sum -1 nan 0.1 0.1 0 1 1 1 0", "8 2 float sum -1 inf 0.1 0.1 0 1 1 1 0",
        "8 2 float sum -1 5 inf 0.1 0 1 1 1 0", "-8 2 float sum -1 5 0.1 0.1 0 1 1 1 0",
        "0 0 float sum -1 5 0.1 0.1 0 1 1 1 0", "8 2 float sum -1 0 0.1 0.1 0 1 1 1 0"}) {
    SCOPED_TRACE(row);
    auto log = parse_nccl_tests_log(head + row + "\n", "x.log");
    ASSERT_FALSE(log.is_ok());
    EXPECT_EQ(log.status().code(), Status::Code::kInvalidInput);
    EXPECT_EQ(log.status().message().rfind("x.log: line 2: ", 0), 0u) << log.status().message();
  }
}

TEST(NcclLogInput, AFittedProfileLoadsBack) {
  // Extreme but valid rows (an hour-long 1 EiB transfer) still give a profile that parses.
  const std::string text =
      "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"
      "8 2 float sum -1 3599999999 0.0 0.0 0 1 1 1 0\n"
      "1152921504606846976 2 float sum -1 3600000000 0.3 0.5 0 1 1 1 0\n";
  auto log = parse_nccl_tests_log(text, "x.log");
  ASSERT_TRUE(log.is_ok()) << log.status().message();
  log->op = CollectiveOp::kAllReduce;
  log->ranks = 8;
  log->nodes = 1;
  auto fit = fit_to_nccl_log(*load_cluster("dgx-h100"), *log, "x.log");
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  auto back = parse_cluster(cluster_to_json(fit->cluster), "fitted.json");
  EXPECT_TRUE(back.is_ok()) << back.status().message();
}

}  // namespace
}  // namespace scaleplan::hw
