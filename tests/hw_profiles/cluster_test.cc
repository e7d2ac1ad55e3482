// Profiles: the bundled ones load with their datasheet numbers; broken ones name file, key,
// problem.
#include "hw_profiles/cluster.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include <unistd.h>
#include <cstdio>
#include <fstream>

namespace scaleplan::hw {
namespace {

TEST(Profiles, AllBundledLoad) {
  auto names = bundled_cluster_names();
  EXPECT_EQ(names, (std::vector<std::string>{"dgx-a100-40g", "dgx-a100-80g", "dgx-b200", "dgx-b300",
                                             "dgx-h100", "dgx-h800", "gb200-nvl72", "gb300-nvl72",
                                             "hf-h100", "hgx-h200"}));
  for (const auto& n : names) {
    auto c = load_cluster(n);
    ASSERT_TRUE(c.is_ok()) << n << ": " << c.status().message();
    EXPECT_EQ(c->name, n);
    // Round trip through the unit-string JSON.
    auto back = parse_cluster(cluster_to_json(*c), n + ".roundtrip");
    ASSERT_TRUE(back.is_ok()) << back.status().message();
    EXPECT_NEAR(back->node.nvlink_bandwidth.value(), c->node.nvlink_bandwidth.value(), 1);
    EXPECT_EQ(back->gpu.memory, c->gpu.memory);
  }
}

TEST(Profiles, DatasheetNumbers) {
  auto h = *load_cluster("dgx-h100");
  EXPECT_DOUBLE_EQ(h.gpu.bf16_dense.value(), 989e12);
  EXPECT_DOUBLE_EQ(h.node.nvlink_bandwidth.value(), 450e9);  // 900 GB/s bidirectional
  EXPECT_EQ(h.gpu.memory.value(), 81559LL << 20);            // nvidia-smi 81559 MiB
  EXPECT_DOUBLE_EQ(h.network.nic_bandwidth.value(), 50e9);   // 400 Gb/s
  auto a = *load_cluster("dgx-a100-40g");
  EXPECT_DOUBLE_EQ(a.node.nvlink_bandwidth.value(), 300e9);
  EXPECT_DOUBLE_EQ(a.gpu.fp8_dense.value(), 0);
  EXPECT_DOUBLE_EQ(load_cluster("dgx-h800")->node.nvlink_bandwidth.value(), 200e9);
  auto nvl = *load_cluster("gb200-nvl72");
  EXPECT_EQ(nvl.gpus_per_node, 4);
  EXPECT_EQ(nvl.gpus_per_domain(), 72);
  // Blackwell Ultra (the profiles' sources: NVIDIA's Blackwell Ultra blog, the GB300 NVL72 and DGX
  // B300 datasheets, MLPerf Training v5.1's GB300 system, the ML Engineering Open Book): GB300
  // 2.5 / 5 PFLOPS dense bf16 / fp8, 284,208 MiB as the driver reports it, 8 TB/s, 72 GPUs in one
  // NVLink domain, trays of 4 with one 800 Gb/s ConnectX-8 per GPU; B300 2.25 / 4.5 PFLOPS,
  // 148 SMs, 8 per node with eight 800 Gb/s NICs.
  auto gb300 = *load_cluster("gb300-nvl72");
  EXPECT_DOUBLE_EQ(gb300.gpu.bf16_dense.value(), 2500e12);
  EXPECT_DOUBLE_EQ(gb300.gpu.fp8_dense.value(), 5000e12);
  EXPECT_EQ(gb300.gpu.memory.value(), 284208LL << 20);
  EXPECT_DOUBLE_EQ(gb300.gpu.memory_bandwidth.value(), 8e12);
  EXPECT_EQ(gb300.gpus_per_domain(), 72);
  EXPECT_DOUBLE_EQ(gb300.network.nic_bandwidth.value(), 100e9);  // 800 Gb/s
  EXPECT_EQ(sm_version(gb300.gpu), 103);  // compute capability 10.3, as the B300
  auto b300 = *load_cluster("dgx-b300");
  EXPECT_DOUBLE_EQ(b300.gpu.bf16_dense.value(), 2250e12);
  EXPECT_EQ(b300.gpu.sm_count, 148);
  EXPECT_EQ(b300.gpus_per_node, 8);
  EXPECT_EQ(b300.network.nics_per_node, 8);
  EXPECT_DOUBLE_EQ(b300.network.nic_bandwidth.value(), 100e9);
  EXPECT_EQ(sm_version(b300.gpu), 103);
}

class BadProfile : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    // One file per process: ctest runs these test cases concurrently as separate processes.
    path_ = ::testing::TempDir() + "/bad_profile_" + std::to_string(::getpid()) + ".json";
    std::ofstream(path_) << text;
    return path_;
  }
  void TearDown() override { std::remove(path_.c_str()); }
  std::string path_;
};

TEST_F(BadProfile, MissingField) {
  auto p = write(R"({"extends": "dgx-h100", "gpu": {"memory_bandwidth": null}})");
  auto c = load_cluster(p);
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), Status::Code::kInvalidInput);
  EXPECT_EQ(c.status().message(), p + ": gpu: memory_bandwidth: missing");
}

TEST_F(BadProfile, BadUnit) {
  auto p = write(R"({"extends": "dgx-h100", "node": {"nvlink_bandwidth": "450 parsecs"}})");
  auto c = load_cluster(p);
  ASSERT_FALSE(c.is_ok());
  const std::string m = c.status().message();
  EXPECT_NE(m.find(p + ": node: nvlink_bandwidth"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown unit"), std::string::npos) << m;
}

TEST_F(BadProfile, NegativeBandwidth) {
  auto p = write(R"({"extends": "dgx-h100", "network": {"nic_bandwidth": "-400Gb/s"}})");
  auto c = load_cluster(p);
  ASSERT_FALSE(c.is_ok());
  const std::string m = c.status().message();
  EXPECT_NE(m.find(p + ": network: nic_bandwidth"), std::string::npos) << m;
  EXPECT_NE(m.find("non-negative"), std::string::npos) << m;
}

TEST_F(BadProfile, UnknownKeyAndZeroBandwidth) {
  auto p = write(R"({"extends": "dgx-h100", "node": {"nvlink_bandwith": "1GB/s"}})");
  EXPECT_EQ(load_cluster(p).status().message(), p + ": node: nvlink_bandwith: unknown key");
  p = write(R"({"extends": "dgx-h100", "node": {"nvlink_bandwidth": 0}})");
  EXPECT_EQ(load_cluster(p).status().message(),
            p + ": node: nvlink_bandwidth: must be positive, got 0");
}

// issue 44: a quantity without a unit is refused naming the file, the field and the value: read
// in base units, "memory": 80 was an 80-byte GPU (and a misleading "smaller batch" error later),
// "bf16_dense": 989 a 989 FLOP/s one. Zero is zero in any unit and goes on to the range checks.
TEST_F(BadProfile, QuantitiesWithoutAUnitAreRefused) {
  for (const auto& [section, key, value] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"gpu", "memory", "80"},
           {"gpu", "bf16_dense", "989"},
           {"node", "nvlink_bandwidth", "900"},
           {"network", "nic_latency", "2"}}) {
    auto p = write(R"({"extends": "dgx-h100", ")" + section + R"(": {")" + key + R"(": )" + value +
                   "}}");
    auto c = load_cluster(p);
    ASSERT_FALSE(c.is_ok()) << key;
    const std::string m = c.status().message();
    EXPECT_NE(m.find(p + ": " + section + ": " + key + ": " + value + " has no unit"),
              std::string::npos)
        << m;
  }
  // With its unit the same value loads: 80 GB = 80e9 bytes.
  auto p = write(R"({"extends": "dgx-h100", "gpu": {"memory": "80GB"}})");
  auto c = load_cluster(p);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->gpu.memory.value(), int64_t{80'000'000'000});
}

TEST_F(BadProfile, ExtendsOverridesOnlyWhatItSays) {
  auto p = write(R"({"extends": "dgx-a100-40g", "name": "mine", "network": {"nics_per_node": 4}})");
  auto c = load_cluster(p);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->name, "mine");
  EXPECT_EQ(c->network.nics_per_node, 4);
  EXPECT_DOUBLE_EQ(c->network.nic_bandwidth.value(), 25e9);  // kept from the base: 200 Gb/s
}

TEST_F(BadProfile, CalibrationSectionIsParsedOnceAndKept) {
  // `scaleplan profile` writes {"extends": BASE, "calibration": {...}}; the loader parses the
  // section into Cluster::calibration (calibrate/ builds the kernel model from it), keeps its text
  // for cluster_to_json, which round-trips it, and rejects a non-object.
  auto p = write(R"({"extends": "hgx-h200", "name": "measured",
                     "calibration": {"format": 1, "backend": "cuda", "device": "NVIDIA H200"}})");
  auto c = load_cluster(p);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_TRUE(c->calibration.has_value());
  EXPECT_EQ(c->calibration->backend, "cuda");
  EXPECT_EQ(c->calibration->device, "NVIDIA H200");
  EXPECT_FALSE(c->calibration->kernel_models);  // collectives only: the kernels stay roofline
  auto back = parse_cluster(cluster_to_json(*c), "roundtrip");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->calibration_section, c->calibration_section);
  EXPECT_EQ(back->calibration->backend, "cuda");
  EXPECT_FALSE(load_cluster("dgx-h100")->calibration.has_value());
  auto bad = write(R"({"extends": "hgx-h200", "calibration": 3})");
  auto e = load_cluster(bad);
  ASSERT_FALSE(e.is_ok());
  EXPECT_EQ(e.status().message(), bad + ": calibration: expected an object");
  auto unversioned = write(R"({"extends": "hgx-h200", "calibration": {"version": 1}})");
  auto u = load_cluster(unversioned);
  ASSERT_FALSE(u.is_ok());
  EXPECT_EQ(u.status().message(), unversioned + ": calibration: format: missing");
}

TEST_F(BadProfile, NetworkScalingParsesRoundTripsAndInterpolates) {
  auto p = write(R"({"extends": "dgx-h100", "cost_model": {"network_scaling": [
      {"nodes": 2, "fraction": 0.8}, {"nodes": 8, "fraction": 0.2},
      {"op": "allgather", "nodes": 4, "fraction": 0.5}]}})");
  auto c = load_cluster(p);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  ASSERT_EQ(c->cost.network_scaling.size(), 3u);
  EXPECT_EQ(c->cost.network_scaling[2].op, "all_gather");  // canonical nccl-tests name
  const auto generic = c->cost.network_scaling_for("all_reduce");
  ASSERT_EQ(generic.size(), 2u);
  // Log-log interpolation: 4 nodes is halfway between 2 and 8 in log(nodes), so the fraction is
  // the geometric mean sqrt(0.8 x 0.2) = 0.4; held flat outside the points.
  EXPECT_NEAR(interpolate_network_fraction(generic, 4), 0.4, 1e-12);
  EXPECT_DOUBLE_EQ(interpolate_network_fraction(generic, 2), 0.8);
  EXPECT_DOUBLE_EQ(interpolate_network_fraction(generic, 64), 0.2);
  EXPECT_DOUBLE_EQ(interpolate_network_fraction({}, 64), 1.0);
  // An op with its own points uses only those.
  const auto ag = c->cost.network_scaling_for("all_gather");
  ASSERT_EQ(ag.size(), 1u);
  EXPECT_DOUBLE_EQ(interpolate_network_fraction(ag, 16), 0.5);
  auto back = parse_cluster(cluster_to_json(*c), "roundtrip");
  ASSERT_TRUE(back.is_ok()) << back.status().message();
  EXPECT_EQ(back->cost.network_scaling, c->cost.network_scaling);
}

TEST_F(BadProfile, NetworkScalingErrorsNameThePoint) {
  auto p = write(R"({"extends": "dgx-h100", "cost_model": {"network_scaling": [
      {"nodes": 4, "fraction": 0.5}, {"nodes": 2, "fraction": 0.8}]}})");
  EXPECT_EQ(
      load_cluster(p).status().message(),
      p + ": cost_model: network_scaling[1]: nodes: must increase within op '', got 2 after 4");
  p = write(R"({"extends": "dgx-h100", "cost_model": {"network_scaling": [
      {"nodes": 2, "fraction": 1.5}]}})");
  EXPECT_NE(load_cluster(p).status().message().find(
                p + ": cost_model: network_scaling[0]: fraction: must be positive"),
            std::string::npos);
  p = write(R"({"extends": "dgx-h100", "cost_model": {"network_scaling": [
      {"op": "all_smash", "nodes": 2, "fraction": 0.5}]}})");
  EXPECT_NE(load_cluster(p).status().message().find(p + ": cost_model: network_scaling[0]: op:"),
            std::string::npos);
  p = write(R"({"extends": "dgx-h100", "cost_model": {"network_scaling": [
      {"nodes": 1, "fraction": 0.5}]}})");
  EXPECT_EQ(load_cluster(p).status().message(),
            p + ": cost_model: network_scaling[0]: nodes: must be at least 2, got 1");
}

TEST(Profiles, NotFoundListsBundled) {
  auto c = load_cluster("dgx-z9000");
  ASSERT_FALSE(c.is_ok());
  EXPECT_EQ(c.status().code(), Status::Code::kNotFound);
  EXPECT_NE(c.status().message().find("dgx-h100"), std::string::npos);
}

}  // namespace
}  // namespace scaleplan::hw
