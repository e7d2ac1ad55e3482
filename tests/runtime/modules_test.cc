// The runtime's loadable modules (runtime/modules.h): CUDA, cuDNN, NCCL and MPI are mapped into a
// process only when a command asks for the cuda backend or MPI, and a module that cannot be
// loaded is named with where it was looked for and why.
#include "runtime/modules.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace scaleplan::runtime {
namespace {

// The shared objects mapped into this process (/proc/self/maps names each file mapping).
std::string mapped_files() {
  std::ifstream in("/proc/self/maps");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// ctest runs every test in its own process, so nothing before this test loaded a module.
TEST(LoadableModules, NoCudaNcclOrMpiLibraryIsMappedUntilAsked) {
  const std::string before = mapped_files();
  ASSERT_FALSE(before.empty()) << "/proc/self/maps is not readable";
  for (const char* lib : {"libcudart", "libcublasLt", "libcudnn", "libnccl", "libnvrtc", "libmpi",
                          "libscaleplan_cuda", "libscaleplan_mpi"}) {
    EXPECT_EQ(before.find(lib), std::string::npos) << lib << " is mapped before any use";
  }
  if (!cuda_backend_compiled()) GTEST_SKIP() << "no cuda backend in this build";
  // Asking for the devices loads the cuda module and, with it, the CUDA runtime it links.
  (void)cuda_device_count();
  const std::string after = mapped_files();
  EXPECT_NE(after.find("libscaleplan_cuda.so"), std::string::npos);
  EXPECT_NE(after.find("libcudart"), std::string::npos);
}

TEST(LoadableModules, BuiltModulesLoadWithThisBuildsAbi) {
  if (cuda_backend_compiled()) {
    auto m = cuda_module();
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m.value()->abi, kModuleAbi);
    EXPECT_NE(m.value()->run_ranks, nullptr);
  }
  if (mpi_compiled()) {
    auto m = mpi_module();
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ(m.value()->abi, kModuleAbi);
    EXPECT_NE(m.value()->transport, nullptr);
  }
}

TEST(LoadableModules, AMissingModuleIsNamedWithWhereItWasLookedFor) {
  const std::string dir = ::testing::TempDir();
  auto r = open_module("scaleplan_nosuch", "cuda backend", {dir});
  ASSERT_FALSE(r.is_ok());
  const std::string msg = r.status().message();
  EXPECT_EQ(msg.rfind("cuda backend: cannot load libscaleplan_nosuch.so", 0), 0u) << msg;
  EXPECT_NE(msg.find(dir), std::string::npos) << msg;
  EXPECT_NE(msg.find("Loadable modules"), std::string::npos) << msg;
}

TEST(LoadableModules, AFileThatIsNoLibraryReportsTheLinkersReason) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / "scaleplan_modules_test";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "libscaleplan_broken.so") << "not an ELF file\n";
  auto r = open_module("scaleplan_broken", "host backend over MPI", {dir.string()});
  ASSERT_FALSE(r.is_ok());
  const std::string msg = r.status().message();
  // Found in `dir`, so the message names that path and dlerror's reason rather than the search.
  EXPECT_NE(msg.find((dir / "libscaleplan_broken.so").string()), std::string::npos) << msg;
  EXPECT_EQ(msg.find("nor on the library path"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

TEST(LoadableModules, SearchStartsBesideTheBinaryThatLoads) {
  const std::vector<std::string> dirs = module_dirs();
  ASSERT_FALSE(dirs.empty());
  // This test binary lives in <build>/tests: the first place is its own directory.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  EXPECT_EQ(std::filesystem::weakly_canonical(dirs.front()),
            std::filesystem::weakly_canonical(self));
}

}  // namespace
}  // namespace scaleplan::runtime
