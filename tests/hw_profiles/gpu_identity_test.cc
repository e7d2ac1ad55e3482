// Measured GPUs against cluster profiles: a calibration of one GPU is never silently paired with
// a profile of another.
#include "hw_profiles/gpu_identity.h"

#include <gtest/gtest.h>

#include <string>

#include "core/json_util.h"
#include "hw_profiles/nccl_tests.h"

namespace scaleplan::hw {
namespace {

// Devices as cudaGetDeviceProperties names them (name, totalGlobalMem, multiProcessorCount):
// an H100 SXM reports 81,559 MiB and 132 SMs, the PCIe card 114 SMs (NVIDIA H100 datasheet).
const DeviceIdentity kH100Sxm{"NVIDIA H100 80GB HBM3", Bytes(81559LL << 20), 132};
const DeviceIdentity kH100Pcie{"NVIDIA H100 PCIe", Bytes(81559LL << 20), 114};
const DeviceIdentity kA100_40{"NVIDIA A100-SXM4-40GB", Bytes(40960LL << 20), 108};
const DeviceIdentity kL40s{"NVIDIA L40S", Bytes(46068LL << 20), 142};

GpuSpec gpu_of(const std::string& cluster) {
  auto c = load_cluster(cluster);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  return c.is_ok() ? c->gpu : GpuSpec{};
}

void expect_refused(const Status& s, const std::string& needle) {
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.code(), Status::Code::kInvalidInput);
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message();
}

TEST(GpuIdentity, SameGpuByModelFormMemoryAndSms) {
  EXPECT_TRUE(check_same_gpu(kH100Sxm, gpu_of("dgx-h100"), "dgx-h100").is_ok());
  // An H200 reports no size in its name; its memory and SMs decide.
  EXPECT_TRUE(
      check_same_gpu({"NVIDIA H200", Bytes(143771LL << 20), 132}, gpu_of("hgx-h200"), "hgx-h200")
          .is_ok());
  expect_refused(check_same_gpu(kH100Sxm, gpu_of("dgx-a100-80g"), "dgx-a100-80g"),
                 "the model is H100, not A100");
  expect_refused(check_same_gpu(kH100Sxm, gpu_of("dgx-h800"), "dgx-h800"),
                 "the model is H100, not H800");
  expect_refused(check_same_gpu(kH100Pcie, gpu_of("dgx-h100"), "dgx-h100"),
                 "the PCIE form factor is not the SXM one");
  expect_refused(check_same_gpu(kA100_40, gpu_of("dgx-a100-80g"), "dgx-a100-80g"),
                 "40 GB is not 80 GB");
  // A name alone (an nccl-tests log) is checked as far as it goes.
  EXPECT_TRUE(check_same_gpu({"NVIDIA A100-SXM4-80GB"}, gpu_of("dgx-a100-80g"), "x").is_ok());
}

TEST(GpuIdentity, ProfileBaseIsTheBundledProfileOfTheGpuFound) {
  auto base = choose_profile_base({kH100Sxm, kH100Sxm}, "", false);
  ASSERT_TRUE(base.is_ok()) << base.status().message();
  EXPECT_EQ(base->cluster, "dgx-h100");  // first of the H100 SXM profiles, by name
  EXPECT_NE(base->note.find("also hf-h100"), std::string::npos) << base->note;
  EXPECT_EQ(base->device.name, kH100Sxm.name);
  auto a100 = choose_profile_base({kA100_40}, "", false);
  ASSERT_TRUE(a100.is_ok());
  EXPECT_EQ(a100->cluster, "dgx-a100-40g");
}

TEST(GpuIdentity, ProfileBaseOfAnotherGpuIsRefusedUnlessForced) {
  auto wrong = choose_profile_base({kH100Sxm}, "dgx-a100-80g", false);
  ASSERT_FALSE(wrong.is_ok());
  expect_refused(wrong.status(), "--cluster dgx-a100-80g describes A100-SXM4-80GB");
  expect_refused(wrong.status(), "pass --force-base");
  auto forced = choose_profile_base({kH100Sxm}, "dgx-a100-80g", true);
  ASSERT_TRUE(forced.is_ok());
  EXPECT_EQ(forced->cluster, "dgx-a100-80g");
  EXPECT_NE(forced->note.find("warning"), std::string::npos) << forced->note;
  auto right = choose_profile_base({kH100Sxm}, "hf-h100", false);
  ASSERT_TRUE(right.is_ok());
  EXPECT_EQ(right->cluster, "hf-h100");
}

TEST(GpuIdentity, NoGpuMixedGpusAndUnknownGpusAreRefused) {
  expect_refused(choose_profile_base({}, "", false).status(), "no GPU visible");
  expect_refused(choose_profile_base({kH100Sxm, kH100Pcie}, "", false).status(),
                 "the visible GPUs differ");
  expect_refused(choose_profile_base({kL40s}, "", false).status(),
                 "no bundled profile has this GPU (NVIDIA L40S (142 SMs, 45.0 GiB))");
}

// An nccl-tests log names its GPU on every "# Rank" line; a log of another GPU than the
// cluster's is refused (what `cluster import-nccl` and `profile --nccl-log` check).
TEST(GpuIdentity, NcclLogOfAnotherGpuIsRefused) {
  const std::string text =
      "# Collective test starting: all_reduce_perf\n"
      "#  Rank  0 Group  0 Pid  1 on node1 device  0 [0x07] NVIDIA A100-SXM4-80GB\n"
      "#  Rank  1 Group  0 Pid  1 on node1 device  1 [0x17] NVIDIA A100-SXM4-80GB\n"
      "#       size         count      type   redop    root     time   algbw   busbw #wrong\n"
      "    1048576        262144     float     sum      -1    101.9   10.29   10.29      0\n";
  auto log = parse_nccl_tests_log(text, "a100.log");
  ASSERT_TRUE(log.is_ok()) << log.status().message();
  EXPECT_EQ(log->gpu, "NVIDIA A100-SXM4-80GB");
  auto h100 = load_cluster("dgx-h100");
  auto a100 = load_cluster("dgx-a100-80g");
  ASSERT_TRUE(h100.is_ok() && a100.is_ok());
  EXPECT_TRUE(check_log_gpu(*log, *a100, "dgx-a100-80g", "a100.log").is_ok());
  expect_refused(check_log_gpu(*log, *h100, "dgx-h100", "a100.log"),
                 "a100.log: the GPU measured is NVIDIA A100-SXM4-80GB, but dgx-h100 describes");
  std::string mixed = text;
  mixed.replace(mixed.find("[0x17] NVIDIA A100-SXM4-80GB"), 28, "[0x17] NVIDIA H100 80GB HBM3");
  auto mlog = parse_nccl_tests_log(mixed, "mixed.log");
  ASSERT_TRUE(mlog.is_ok());
  expect_refused(check_log_gpu(*mlog, *a100, "dgx-a100-80g", "mixed.log"), "different GPUs");
  // A log without device names cannot be checked, and says so.
  NcclTestLog bare = *log;
  bare.gpu.clear();
  bool unchecked = false;
  EXPECT_TRUE(check_log_gpu(bare, *h100, "dgx-h100", "bare.log", &unchecked).is_ok());
  EXPECT_TRUE(unchecked);
}

// A fit from one message size, or one that moves a parameter more than 10x, is flagged: an
// 8-rank A100 log whose only size is 1 MiB fits every parameter from that point, and a 1 MiB
// all-reduce 100x slower than NVLink drags the base latency far from the profile's.
TEST(GpuIdentity, DoubtfulNcclFitsAreWarned) {
  std::string text = "# Collective test starting: all_reduce_perf\n";
  for (int r = 0; r < 8; ++r)
    text += "#  Rank  " + std::to_string(r) + " Group  0 Pid  1 on node1 device  " +
            std::to_string(r) + " [0x07] NVIDIA A100-SXM4-80GB\n";
  text += "#       size         count      type   redop    root     time   algbw   busbw #wrong\n";
  auto one = parse_nccl_tests_log(
      text +
          "       32768          8192     float     sum      -1   4380.0    0.01    0.01      0\n",
      "one.log");
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  auto a100 = load_cluster("dgx-a100-80g");
  ASSERT_TRUE(a100.is_ok());
  auto fit = fit_to_nccl_log(*a100, *one, "one.log");
  ASSERT_TRUE(fit.is_ok()) << fit.status().message();
  std::string all;
  for (const auto& w : fit->warnings) all += w + "\n";
  EXPECT_NE(all.find("single message size"), std::string::npos) << all;
  EXPECT_NE(all.find("base_latency moved more than 10x"), std::string::npos) << all;
  // The example log (nine sizes, one of them <= 64 KiB, busbw near the profile's) warns only
  // about its single small size.
  auto sample =
      parse_nccl_tests_log(*read_text_file(std::string(SCALEPLAN_SOURCE_DIR) +
                                           "/examples/nccl-tests/a100_8gpu_all_reduce.log"),
                           "sample");
  ASSERT_TRUE(sample.is_ok());
  auto good = fit_to_nccl_log(*a100, *sample, "sample");
  ASSERT_TRUE(good.is_ok());
  ASSERT_EQ(good->warnings.size(), 1u);
  EXPECT_NE(good->warnings[0].find("base_latency is fitted from a single size"), std::string::npos);
}

}  // namespace
}  // namespace scaleplan::hw
