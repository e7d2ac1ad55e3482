// The platform as data: each GPU's compute capability, GEMM ceilings and attention curves come
// from its profile (gpu.compute_capability, gpu.efficiency), each bundled value cited there, and
// no code decides anything by a GPU's name.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::hw {
namespace {

// What each bundled profile's GPU must give: the values the name ladders of calibrate/roofline.cc
// and hw_profiles/cluster.cc gave before the profiles held them (issue 46), which are the
// published figures the profiles cite: mamf-finder's best matmul over the datasheet peak (Bekman,
// ML Engineering Open Book: A100 0.869, H100 0.803, H200 fp8 0.734, B200 0.776 / 0.763, GB200
// 1822.0/2500 and 3615.6/5000, GB300 the GB200's; since 2026-11-30 the B300 takes what Transformer
// Engine's GEMM benchmark measured at training shapes back to back, bf16 0.674, fp8 0.666, NVFP4
// 0.455, and the GB300's NVFP4 the same die's NVFP4-to-fp8 ratio, 0.494: roofline_test
// B300GemmsAtTrainingShapesTakeTheirMeasuredTimes),
// FlashAttention-2's published H100 curve (0.343, 552 tokens, head dim half 23.4) and its A100
// 230 of 312 TFLOP/s (0.72), cuDNN's 1.62x FA2 on H100 (0.556, head dim half 42.6), and
// cudnn-frontend's SDPA training benchmark fits for B200 (cuDNN 0.628 / 4340, FA2 0.186 / 2370)
// and GB200 (0.619 / 1870, 0.156 / 790). Compute capability: CUDA's table (A100 8.0, Hopper 9.0,
// B200/GB200 10.0, B300/GB300 10.3). The H200 (issue 43) has its own component measurements
// (../shared/measured/h200-2026-11-28/, reproduced in roofline_test): cuDNN SDPA's forward 0.620 /
// 358 and backward 0.557 / 691, and memory-bound kernels by implementation (vectorized 0.843,
// _fused_rms_norm 0.542, fused AdamW 0.724; the cast loop 0.445, its largest bf16 -> fp32 copy
// timed on the H200 on 2026-11-30: roofline_test CastLoopRunsAtItsMeasuredRateOnTheH200). The GH100
// cards (H100, H200, H800 SXM: one die under one 700 W limit) state their SM clock model
// (docs/hw_profiles.md, "GH100 under its 700 W limit"), measured on that H200: maximum 1,980 MHz
// (clocks.max.sm), the eager step at tensor share 0.61 and 1,732 MHz (dmon.txt over the timed
// steps), back-to-back GEMMs at 1,500 MHz (the median clock sample), power as f^3; the GEMM ceiling
// stated at the step's 1,732 MHz, attention and the cast loop at the maximum.
struct Expected {
  const char* cluster;
  int compute_capability;
  GpuEfficiency e;
};

constexpr AttentionCurve kFa2H100{0.343, 552, 23.4}, kCudnnH100{0.556, 552, 42.6};
constexpr AttentionCurve kA100{0.72, 552, 23.4};
constexpr AttentionCurve kFa2B200{0.186, 2370, 23.4}, kCudnnB200{0.628, 4340, 42.6};
constexpr AttentionCurve kFa2Gb200{0.156, 790, 23.4}, kCudnnGb200{0.619, 1870, 42.6};
constexpr AttentionCurve kCudnnH200{0.620, 358, 42.6, 0.557, 691};
// GB300: the GB200's curve times the GB300/GB200 ratio of one cudnn-frontend run, per pass
// (docs/hw_profiles.md, "GB300's attention").
constexpr AttentionCurve kCudnnGb300{0.709, 1555, 42.6, 0.724, 2255};
constexpr MemoryPathEfficiency kMemoryH200{0.843, 0.445, 0.542, 0.724, 0.686, 0.231, 0.525, 0.205};
// max, tensor_share, mixed, tensor_bound, exponent; measured at: gemm, attention, cast_loop.
constexpr SmClock kGh100{1.98e9, 0.61, 1.732e9, 1.5e9, 3, 1.732e9, 1.98e9, 1.98e9};

// gemm_bf16, gemm_fp8, gemm_fp4 (0: no NVFP4 matmul measured, NVFP4 GEMMs take gemm_fp8; the
// Blackwell Ultra parts have one since 2026-11-30), the attention curves, memory paths, SM clock.
const std::vector<Expected>& expected() {
  static const std::vector<Expected> table = {
      {"dgx-a100-40g", 80, {0.869, 0.869, 0, kA100, kA100}},
      {"dgx-a100-80g", 80, {0.869, 0.869, 0, kA100, kA100}},
      {"dgx-h100", 90, {0.803, 0.709, 0, kFa2H100, kCudnnH100, {}, kGh100}},
      {"hf-h100", 90, {0.803, 0.709, 0, kFa2H100, kCudnnH100, {}, kGh100}},  // extends dgx-h100
      {"dgx-h800", 90, {0.803, 0.709, 0, kFa2H100, kCudnnH100, {}, kGh100}},
      {"hgx-h200", 90, {0.803, 0.734, 0, kFa2H100, kCudnnH200, kMemoryH200, kGh100}},
      {"dgx-b200", 100, {0.776, 0.763, 0, kFa2B200, kCudnnB200}},
      {"dgx-b300", 103, {0.674, 0.666, 0.455, kFa2B200, kCudnnB200}},
      {"gb200-nvl72", 100, {0.729, 0.723, 0, kFa2Gb200, kCudnnGb200}},
      {"gb300-nvl72", 103, {0.729, 0.723, 0.494, kFa2Gb200, kCudnnGb300}},
  };
  return table;
}

TEST(GpuPlatform, EachBundledProfileGivesItsGpusPublishedFigures) {
  for (const Expected& x : expected()) {
    auto c = load_cluster(x.cluster);
    ASSERT_TRUE(c.is_ok()) << x.cluster << ": " << c.status().message();
    EXPECT_EQ(c->gpu.compute_capability, x.compute_capability) << x.cluster;
    EXPECT_EQ(sm_version(c->gpu), x.compute_capability) << x.cluster;
    EXPECT_EQ(c->gpu.efficiency, x.e) << x.cluster;
    // The figures behind the rounded values: each is within 0.0005 of its source's ratio.
    if (std::string(x.cluster) == "gb200-nvl72") {
      EXPECT_NEAR(c->gpu.efficiency.gemm_bf16, 1822.0 / 2500, 5e-4);
      EXPECT_NEAR(c->gpu.efficiency.gemm_fp8, 3615.6 / 5000, 5e-4);
    }
  }
  // Every bundled profile is in the table: a new one states its own figures here too.
  EXPECT_EQ(bundled_cluster_names().size(), expected().size());
}

// Adding a GPU is adding a file: a profile that defines a GPU (gpu.name) states its compute
// capability and every efficiency, each with a source.
TEST(GpuPlatform, EveryBundledGpuCitesItsPlatformFigures) {
  const std::string dir = std::string(SCALEPLAN_SOURCE_DIR) + "/hw_profiles/bundled";
  int gpus = 0;
  for (const auto& f : std::filesystem::directory_iterator(dir)) {
    auto j = read_json_file(f.path().string());
    ASSERT_TRUE(j.is_ok()) << j.status().message();
    if (!j->contains("gpu") || !(*j)["gpu"].contains("name")) continue;  // extends another's GPU
    ++gpus;
    const Json& g = (*j)["gpu"];
    const std::string at = f.path().filename().string();
    EXPECT_TRUE(g.contains("compute_capability")) << at;
    EXPECT_TRUE(g["sources"].contains("compute_capability")) << at;
    ASSERT_TRUE(g.contains("efficiency")) << at;
    for (const char* key : {"gemm_bf16", "gemm_fp8", "flash2", "cudnn"}) {
      EXPECT_TRUE(g["efficiency"].contains(key)) << at << ": " << key;
      EXPECT_TRUE(g["efficiency"]["sources"].contains(key)) << at << ": " << key;
    }
  }
  EXPECT_GE(gpus, 9);
}

class PlatformProfile : public ::testing::Test {
 protected:
  Result<Cluster> load(const std::string& text) {
    path_ = ::testing::TempDir() + "/platform_profile_" + std::to_string(::getpid()) + ".json";
    std::ofstream(path_) << text;
    return load_cluster(path_);
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

// A profile of its own GPU that states no platform figures gets the documented defaults: the
// H100's efficiencies and an unknown compute capability, whatever its GPU is called (the name
// used to pick them: "H200-custom" got the H200's fp8 ceiling and sm 90).
TEST_F(PlatformProfile, WithoutFiguresGetsTheDocumentedDefaults) {
  auto c = load(R"({"name": "mine", "gpu": {"name": "H200-custom", "bf16_dense": "989TFLOP/s",
      "memory": "80GB", "memory_bandwidth": "3TB/s", "sm_count": 132},
      "node": {"gpus_per_node": 8, "nvlink_generation": "NVLink4", "nvlink_bandwidth": "450GB/s"},
      "network": {"fabric": "RoCE", "nics_per_node": 8, "nic_bandwidth": "400Gb/s"}})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->gpu.compute_capability, 0);
  EXPECT_EQ(c->gpu.efficiency, GpuEfficiency{});
  // The H100's figures, without its clock model: a clock measured on one GPU is not assumed of a
  // profile that does not state it (its times do not depend on the step).
  GpuEfficiency h100 = load_cluster("dgx-h100")->gpu.efficiency;
  EXPECT_TRUE(h100.sm_clock.enabled());
  h100.sm_clock = SmClock{};
  EXPECT_EQ(c->gpu.efficiency, h100);
}

TEST_F(PlatformProfile, ExtendsChangesOnlyTheFiguresItGives) {
  auto c = load(R"({"extends": "dgx-b200", "name": "mine",
      "gpu": {"compute_capability": "10.3", "efficiency": {"gemm_fp8": 0.7,
          "cudnn": {"ceiling": 0.6, "backward_ceiling": 0.5, "backward_half_tokens": 700},
          "memory": {"row_norm": 0.5}}}})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  GpuEfficiency want = load_cluster("dgx-b200")->gpu.efficiency;
  want.gemm_fp8 = 0.7;
  want.cudnn.ceiling = 0.6;
  want.memory.row_norm = 0.5;
  want.cudnn.backward_ceiling = 0.5;
  want.cudnn.backward_half_tokens = 700;
  EXPECT_EQ(c->gpu.efficiency, want);
  EXPECT_EQ(c->gpu.compute_capability, 103);
  // And they round-trip through cluster_to_json (cluster import-nccl writes profiles with it).
  auto back = parse_cluster(cluster_to_json(*c), "roundtrip");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->gpu.efficiency, want);
  EXPECT_EQ(back->gpu.compute_capability, 103);
}

TEST_F(PlatformProfile, BadFiguresNameTheFieldAndValue) {
  struct Case {
    const char* gpu;
    const char* message;
  };
  for (const Case& k : {
           Case{R"({"compute_capability": "9"})",
                R"(gpu: compute_capability: '9' is not CUDA's major.minor, e.g. "9.0")"},
           Case{R"({"compute_capability": "sm_90"})",
                R"(gpu: compute_capability: 'sm_90' is not CUDA's major.minor, e.g. "9.0")"},
           Case{R"({"efficiency": {"gemm_bf16": 1.5}})",
                "gpu: efficiency: gemm_bf16: must be in (0, 1], got 1.500000"},
           Case{R"({"efficiency": {"flash2": {"ceiling": 0}}})",
                "gpu: efficiency: flash2: ceiling: must be in (0, 1], got 0.000000"},
           Case{R"({"efficiency": {"cudnn": {"half_tokens": -1}}})",
                "gpu: efficiency: cudnn: half_tokens: must be between 0 and 1e9, got -1"},
           Case{R"({"efficiency": {"gemm": 0.8}})", "gpu: efficiency: gemm: unknown key"},
           Case{R"({"efficiency": {"memory": {"cast_loop": 1.2}}})",
                "gpu: efficiency: memory: cast_loop: must be between 0 and 1, got 1.2"},
           Case{R"({"efficiency": {"memory": {"copy": 0.5}}})",
                "gpu: efficiency: memory: copy: unknown key"},
           Case{R"({"efficiency": {"cudnn": {"backward_ceiling": 2}}})",
                "gpu: efficiency: cudnn: backward_ceiling: must be in (0, 1], got 2.000000"},
       }) {
    auto c = load(std::string(R"({"extends": "dgx-h100", "gpu": )") + k.gpu + "}");
    ASSERT_FALSE(c.is_ok()) << k.gpu;
    EXPECT_EQ(c.status().message(), path_ + ": " + k.message) << k.gpu;
  }
  auto number = load(R"({"extends": "dgx-h100", "gpu": {"compute_capability": 9.0}})");
  ASSERT_FALSE(number.is_ok());
  EXPECT_NE(number.status().message().find("compute_capability"), std::string::npos)
      << number.status().message();
}

// No code compares a GPU's name: a string literal that starts with a GPU model ("H100",
// "NVIDIA A100", "GB200-...") outside a comment, in the source folders, is what the name ladders
// were made of.
TEST(GpuPlatform, NoGpuNameIsComparedInCode) {
  const std::regex model(R"re(["'](NVIDIA )?(A|B|H|L|GB|GH|MI)[0-9]{2,3})re");
  std::vector<std::string> hits;
  for (const char* folder :
       {"core", "models", "hw_profiles", "calibrate", "sim", "planner", "validate", "export",
        "runtime", "api", "cli", "python/src", "python/scaleplan"}) {
    const std::filesystem::path root = std::filesystem::path(SCALEPLAN_SOURCE_DIR) / folder;
    std::error_code ec;
    if (!std::filesystem::is_directory(root, ec)) continue;
    for (const auto& f : std::filesystem::recursive_directory_iterator(root)) {
      const std::string ext = f.path().extension().string();
      const bool py = ext == ".py";
      if (!(py || ext == ".cc" || ext == ".h" || ext == ".cu" || ext == ".cuh")) continue;
      std::ifstream in(f.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const size_t comment = line.find(py ? "#" : "//");
        if (comment != std::string::npos) line.resize(comment);
        if (std::regex_search(line, model))
          hits.push_back(f.path().string() + ":" + std::to_string(n) + ": " + line);
      }
    }
  }
  EXPECT_TRUE(hits.empty()) << hits.size() << " GPU names in code, first: " << hits.front();
}

}  // namespace
}  // namespace scaleplan::hw
