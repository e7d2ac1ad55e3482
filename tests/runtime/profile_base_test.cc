// The base of a profile run follows the GPU the device query finds; the query is injected, so
// these run on any machine.
#include <gtest/gtest.h>

#include <string>

#include "runtime/profile.h"

namespace scaleplan::runtime {
namespace {

DeviceQuery gpus(std::vector<hw::DeviceIdentity> devices) {
  return [devices] { return devices; };
}

TEST(ProfileBase, CudaBaseIsTheProfileOfTheGpuFound) {
  const hw::DeviceIdentity h200{"NVIDIA H200", Bytes(143771LL << 20), 132};
  auto base = profile_base(BackendKind::kCuda, "", false, gpus({h200, h200}));
  ASSERT_TRUE(base.is_ok()) << base.status().message();
  EXPECT_EQ(base->cluster, "hgx-h200");
  // A B200 profile for an H200 is refused: its peaks and memory are another GPU's.
  auto wrong = profile_base(BackendKind::kCuda, "dgx-b200", false, gpus({h200}));
  ASSERT_FALSE(wrong.is_ok());
  EXPECT_NE(wrong.status().message().find("--force-base"), std::string::npos);
  EXPECT_TRUE(profile_base(BackendKind::kCuda, "dgx-b200", true, gpus({h200})).is_ok());
}

TEST(ProfileBase, NoGpuVisibleIsBadInput) {
  auto none = profile_base(BackendKind::kCuda, "", false, gpus({}));
  ASSERT_FALSE(none.is_ok());
  EXPECT_EQ(none.status().code(), Status::Code::kInvalidInput);  // exit 2
  EXPECT_NE(none.status().message().find("no GPU visible"), std::string::npos);
}

TEST(ProfileBase, HostKeepsItsTopologyOnlyBase) {
  // The host has no GPU to check: any profile serves for the topology fields.
  auto base = profile_base(BackendKind::kHost, "", false, gpus({}));
  ASSERT_TRUE(base.is_ok());
  EXPECT_EQ(base->cluster, "hgx-h200");
  EXPECT_EQ(profile_base(BackendKind::kHost, "dgx-a100-80g", false, gpus({}))->cluster,
            "dgx-a100-80g");
}

}  // namespace
}  // namespace scaleplan::runtime
