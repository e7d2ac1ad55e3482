// Kineto import on real public PyTorch profiler traces (tests/data/kineto/README.md says where
// they come from). Every expected figure is computed here from the JSON with the test's own
// simple rules (nlohmann + zlib), not by the importer: kernels belong to the ProfilerStep during
// whose span their cudaLaunchKernel ran, NCCL kernels are those whose name starts with
// "ncclKernel_<Op>", and exposed communication is the union of NCCL kernel spans minus the union
// of the other kernels' spans.
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sim/compare.h"
#include "sim/op_class.h"
#include "sim/recorded.h"

namespace scaleplan::sim {
namespace {

using nlohmann::json;

const std::string kData = std::string(SCALEPLAN_SOURCE_DIR) + "/tests/data/kineto/";

json read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::string text;
  char buf[65536];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) text.append(buf, static_cast<size_t>(n));
  gzclose(f);
  return json::parse(text);
}

using Span = std::pair<int64_t, int64_t>;

std::vector<Span> merged(std::vector<Span> v) {
  std::sort(v.begin(), v.end());
  std::vector<Span> out;
  for (const Span& s : v) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

int64_t length(const std::vector<Span>& v) {
  int64_t n = 0;
  for (const Span& s : v) n += s.second - s.first;
  return n;
}

// Length of `a` (merged) not covered by `b` (merged).
int64_t uncovered(const std::vector<Span>& a, const std::vector<Span>& b) {
  int64_t covered = 0;
  for (const Span& x : a)
    for (const Span& y : b)
      covered += std::max<int64_t>(0, std::min(x.second, y.second) - std::max(x.first, y.first));
  return length(a) - covered;
}

// The test's own reading of one rank's trace, per ProfilerStep.
struct Expected {
  std::string name;
  int64_t wall = 0;                     // the annotation's duration
  int64_t kernels = 0;                  // kernel + memcpy + memset events
  int64_t gpu_time = 0;                 // their summed durations
  std::map<std::string, int64_t> nccl;  // "AllReduce" -> summed duration
  int64_t exposed = 0;
  int64_t first = INT64_MAX, last = INT64_MIN;  // of the step's GPU events
  int64_t compute_busy = 0;                     // union of non-NCCL kernel spans
};

std::vector<Expected> expected_steps(const json& trace) {
  const json& ev = trace["traceEvents"];
  // Microseconds since the trace's first event (absolute timestamps in picoseconds overflow).
  double base = 1e300;
  for (const json& e : ev)
    if (e.value("ph", "") == "X" && e.contains("ts")) base = std::min(base, e["ts"].get<double>());
  const auto ps = [base](double us) -> int64_t { return std::llround((us - base) * 1e6); };
  std::vector<std::pair<double, double>> spans;
  std::vector<Expected> steps;
  for (const json& e : ev) {
    if (e.value("ph", "") == "X" && e.value("name", "").rfind("ProfilerStep#", 0) == 0) {
      spans.push_back({e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
      steps.push_back({e["name"], ps(e["ts"].get<double>() + e["dur"].get<double>()) -
                                      ps(e["ts"].get<double>())});
    }
  }
  std::map<int64_t, double> launch;
  for (const json& e : ev)
    if (e.value("cat", "") == "cuda_runtime" && e.contains("args") &&
        e["args"].contains("correlation"))
      launch[e["args"]["correlation"].get<int64_t>()] = e["ts"].get<double>();
  std::vector<std::vector<Span>> comm(steps.size()), compute(steps.size());
  for (const json& e : ev) {
    const std::string cat = e.value("cat", "");
    if (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset") continue;
    const double ts = e["ts"].get<double>();
    double at = ts;
    if (auto it = launch.find(e["args"].value("correlation", int64_t{-1})); it != launch.end())
      at = it->second;
    for (size_t i = 0; i < spans.size(); ++i) {
      if (at < spans[i].first || at >= spans[i].second) continue;
      Expected& x = steps[i];
      const int64_t d = ps(ts + e["dur"].get<double>()) - ps(ts);
      ++x.kernels;
      x.gpu_time += d;
      x.first = std::min(x.first, ps(ts));
      x.last = std::max(x.last, ps(ts) + d);
      const std::string name = e["name"];
      if (name.rfind("ncclKernel_", 0) == 0) {
        const std::string op = name.substr(11, name.find('_', 11) - 11);
        x.nccl[op] += d;
        comm[i].push_back({ps(ts), ps(ts) + d});
      } else if (cat == "kernel") {
        compute[i].push_back({ps(ts), ps(ts) + d});
      }
    }
  }
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].exposed = uncovered(merged(comm[i]), merged(compute[i]));
    steps[i].compute_busy = length(merged(compute[i]));
  }
  return steps;
}

int64_t all_classes(const IterationSummary& s) {
  int64_t n = 0;
  for (Duration d : s.time) n += d.count();
  return n;
}

int64_t all_counts(const IterationSummary& s) {
  int64_t n = 0;
  for (int64_t c : s.count) n += c;
  return n;
}

// Picosecond figures from microsecond doubles: the importer rebases timestamps before rounding,
// so a span may differ from the test's by a rounding step per event.
constexpr int64_t kTolerancePs = 1000;  // 1 ns

void check_rank(const RecordedRank& rank, const json& trace) {
  const std::vector<Expected> want = expected_steps(trace);
  const std::vector<IterationSummary> got = summarize(rank);
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    EXPECT_EQ(got[i].name, want[i].name);
    EXPECT_NEAR(got[i].wall.count(), want[i].wall, kTolerancePs);
    EXPECT_EQ(all_counts(got[i]), want[i].kernels);
    EXPECT_NEAR(all_classes(got[i]), want[i].gpu_time, kTolerancePs * want[i].kernels);
    const std::map<std::string, OpClass> nccl = {{"AllReduce", OpClass::kAllReduce},
                                                 {"SendRecv", OpClass::kSendRecv},
                                                 {"Broadcast", OpClass::kBroadcast}};
    int64_t comm_total = 0;
    for (const auto& [op, d] : want[i].nccl) {
      ASSERT_TRUE(nccl.count(op)) << op;
      EXPECT_NEAR(got[i].time[static_cast<size_t>(nccl.at(op))].count(), d, kTolerancePs * 100);
      comm_total += d;
    }
    EXPECT_GT(comm_total, 0) << "every step of these traces runs NCCL kernels";
    EXPECT_NEAR(got[i].exposed_total().count(), want[i].exposed, kTolerancePs * 100);
    EXPECT_NEAR(got[i].gpu_span.count(), want[i].last - want[i].first, kTolerancePs);
    EXPECT_NEAR(got[i].compute_busy.count(), want[i].compute_busy, kTolerancePs * 100);
    // Idle is what is left of the span: neither compute nor communication.
    EXPECT_NEAR(got[i].idle().count(),
                want[i].last - want[i].first - want[i].compute_busy - want[i].exposed,
                kTolerancePs * 200);
  }
}

// Two ranks of a 128-GPU recommendation-model job (HTA tests/data/trace_filter): NCCL SendRecv on
// its own stream beside CUTLASS GEMMs and elementwise kernels.
// Found by the trace fuzzer (tests/data/fuzz/trace/overflow-summed-spans): summarize_side summed
// the ranks' iteration spans in 64 bits, and two ranks with one 90-day kernel each overflowed
// (UBSan); the summary is the mean over ranks and iterations, which fits the clock again.
TEST(Kineto, SummaryOfDayLongIterationsIsTheirMean) {
  const int64_t dur_us = 7'000'000'000'000;  // 81 days: 7e18 ps, two of them pass int64's end
  RecordedTimeline t;
  for (int rank = 0; rank < 2; ++rank) {
    const json trace = {
        {"distributedInfo", {{"rank", rank}, {"world_size", 2}}},
        {"traceEvents", json::array({{{"ph", "X"},
                                      {"cat", "user_annotation"},
                                      {"name", "ProfilerStep#1"},
                                      {"pid", 1},
                                      {"tid", 1},
                                      {"ts", 0},
                                      {"dur", dur_us + 10}},
                                     {{"ph", "X"},
                                      {"cat", "kernel"},
                                      {"name", "ampere_sgemm_128x64_nn"},
                                      {"pid", 0},
                                      {"tid", 7},
                                      {"ts", 5},
                                      {"dur", dur_us},
                                      {"args", {{"stream", 7}, {"correlation", 1}}}}})}};
    ASSERT_TRUE(parse_kineto_trace(trace.dump(), "rank.json", rank, t).is_ok());
  }
  const SideSummary s = summarize_side(t);
  ASSERT_EQ(s.samples, 2);
  EXPECT_EQ(s.gpu_span, Duration::microseconds(dur_us));
  EXPECT_EQ(s.time[static_cast<size_t>(OpClass::kGemm)], Duration::microseconds(dur_us));
}

TEST(Kineto, TwoRanksOfAMultiGpuJob) {
  auto t =
      load_recorded({kData + "hta_sampled/rank-0.json.gz", kData + "hta_sampled/rank-1.json.gz"});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(t->format, TraceFormat::kKineto);
  ASSERT_EQ(t->ranks.size(), 2u);
  EXPECT_EQ(t->ranks[0].rank, 0);  // distributedInfo.rank
  EXPECT_EQ(t->ranks[1].rank, 1);
  check_rank(t->ranks[0], read_gz(kData + "hta_sampled/rank-0.json.gz"));
  check_rank(t->ranks[1], read_gz(kData + "hta_sampled/rank-1.json.gz"));
  // The CUTLASS kernels are GEMMs.
  const auto s = summarize(t->ranks[0]);
  EXPECT_GT(s[0].time[static_cast<size_t>(OpClass::kGemm)], Duration::zero());
}

// A 2-GPU DDP ResNet (HTA tests/data/nccl_parser_config): AllReduce buckets overlapping the
// backward; three ProfilerSteps; fractional-microsecond timestamps.
TEST(Kineto, DdpAllReduceAndExposedCommunication) {
  auto t = load_recorded({kData + "hta_resnet_ddp/rank-0.json.gz"});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ASSERT_EQ(t->ranks.size(), 1u);
  check_rank(t->ranks[0], read_gz(kData + "hta_resnet_ddp/rank-0.json.gz"));
}

// A directory is read as its trace files in name order.
TEST(Kineto, DirectoryOfRanks) {
  auto t = load_recorded({kData + "hta_sampled"});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ASSERT_EQ(t->ranks.size(), 2u);
  EXPECT_EQ(t->ranks[1].label, "rank-1.json.gz");
  // Two traces of rank 0 (of different jobs) cannot be one timeline.
  auto clash = load_recorded({kData + "hta_sampled", kData + "hta_resnet_ddp"});
  ASSERT_FALSE(clash.is_ok());
  EXPECT_NE(clash.status().message().find("distributedInfo.rank 0"), std::string::npos)
      << clash.status().message();
}

TEST(Kineto, BadInputNamesTheFile) {
  auto missing = load_recorded({kData + "no-such-trace.json"});
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("no-such-trace.json"), std::string::npos);
  RecordedTimeline t;
  Status s = parse_kineto_trace(R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm",
      "ts":1,"dur":2}]})",
                                "cpu.json", 0, t);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("cpu.json: no GPU kernels"), std::string::npos) << s.message();
  // Times a timeline cannot hold (Duration is int64 picoseconds) are refused, not wrapped.
  s = parse_kineto_trace(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"k","ts":0,"dur":5,
      "args":{}},{"ph":"X","cat":"kernel","name":"late","ts":1e300,"dur":5,"args":{}}]})",
                         "far.json", 0, t);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("far.json: event 'late'"), std::string::npos) << s.message();
  s = parse_kineto_trace(R"({"traceEvents":[{"ph":"X","cat":"kernel","name":"neg","ts":0,
      "dur":-3,"args":{}}]})",
                         "neg.json", 0, t);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("neg.json: event 'neg'"), std::string::npos) << s.message();
  auto device = load_recorded({"/dev/null"});
  ASSERT_FALSE(device.is_ok());
  EXPECT_NE(device.status().message().find("/dev/null: not a regular file"), std::string::npos);
  s = parse_kineto_trace(R"({"foo":1})", "x.json", 0, t);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("x.json: traceEvents"), std::string::npos) << s.message();
}

// Peak memory from PyTorch's `[memory]` instant events (profile_memory=True): the public test
// traces have none, so this one is written here in the format recent PyTorch releases write
// (torch/csrc/autograd/profiler_kineto.cpp: "Device Type" is c10::DeviceType, 1 for CUDA; "Total
// Allocated" and "Total Reserved" are the caching allocator's totals). CPU events do not count.
TEST(Kineto, PeakMemoryFromMemoryEvents) {
  RecordedTimeline t;
  const Status s = parse_kineto_trace(R"({"traceEvents":[
      {"ph":"X","cat":"kernel","name":"ampere_sgemm_128x64_nn","pid":0,"tid":7,"ts":10,"dur":5,
       "args":{"stream":7,"correlation":1}},
      {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":9,
       "args":{"Device Type":1,"Device Id":0,"Bytes":1024,"Total Allocated":3000,
               "Total Reserved":8192}},
      {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":12,
       "args":{"Device Type":1,"Device Id":0,"Bytes":-1024,"Total Allocated":1976,
               "Total Reserved":8192}},
      {"ph":"i","cat":"cpu_instant_event","s":"t","name":"[memory]","pid":1,"tid":1,"ts":13,
       "args":{"Device Type":0,"Device Id":-1,"Bytes":99999,"Total Allocated":99999,
               "Total Reserved":99999}}]})",
                                      "mem.json", 0, t);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(t.ranks[0].peak_allocated, 3000);
  EXPECT_EQ(t.ranks[0].peak_reserved, 8192);
  // The HTA traces were recorded without profile_memory: not recorded, not zero.
  auto hta = load_recorded({kData + "hta_resnet_ddp"});
  ASSERT_TRUE(hta.is_ok());
  EXPECT_EQ(hta->ranks[0].peak_allocated, -1);
}

// PyTorch 1.8-1.9 named the categories "Kernel", "Memcpy", "Runtime", "Operator"; such a trace
// reads as a current one.
TEST(Kineto, OlderCategoryNames) {
  RecordedTimeline t;
  const Status s = parse_kineto_trace(R"({"traceEvents":[
      {"ph":"X","cat":"Operator","name":"ProfilerStep#3","pid":1,"tid":1,"ts":100,"dur":40},
      {"ph":"X","cat":"Runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":101,"dur":2,
       "args":{"correlation":5}},
      {"ph":"X","cat":"Kernel","name":"ampere_sgemm_128x64_nn","pid":0,"tid":7,"ts":150,"dur":10,
       "args":{"stream":7,"correlation":5}},
      {"ph":"X","cat":"Memcpy","name":"Memcpy HtoD","pid":0,"tid":7,"ts":160,"dur":4,
       "args":{"stream":7,"correlation":6}}]})",
                                      "old.json", 0, t);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const auto it = summarize(t.ranks[0]);
  ASSERT_EQ(it.size(), 1u);
  EXPECT_EQ(it[0].name, "ProfilerStep#3");
  // The kernel ran after the step's CPU span but was launched in it: it belongs to the step.
  EXPECT_EQ(it[0].count[static_cast<size_t>(OpClass::kGemm)], 1);
  EXPECT_EQ(it[0].time[static_cast<size_t>(OpClass::kGemm)], Duration::microseconds(10));
  // The memcpy has no launch record: it counts where it started, after the step: outside it.
  EXPECT_EQ(it[0].count[static_cast<size_t>(OpClass::kMemcpy)], 0);
}

// Kernel names as the libraries emit them; the source of each is in docs/compare.md.
TEST(Kineto, ClassifiesKernelNames) {
  const std::vector<std::pair<std::string, OpClass>> cases = {
      // NCCL <= 2.18 and >= 2.19 names (HTA traces above; NCCL src/device/generate.py).
      {"ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
       OpClass::kAllReduce},
      {"ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
       OpClass::kAllGather},
      {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
       OpClass::kReduceScatter},
      {"ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
       OpClass::kSendRecv},
      {"ncclKernel_Broadcast_RING_LL_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
       OpClass::kBroadcast},
      // GEMMs: cuBLAS, CUTLASS, cuBLASLt split-K, nvjet (cuBLAS on Hopper), cuDNN implicit GEMM.
      {"ampere_sgemm_128x64_nn", OpClass::kGemm},
      {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4>("
       "cutlass_80_tensorop_s1688gemm_128x128_32x5_tn_align4::Params)",
       OpClass::kGemm},
      {"void cublasLt::splitKreduce_kernel<32, 16, int, float, float>", OpClass::kGemm},
      {"nvjet_tst_192x192_64x4_2x1_v_bz_coopA_NTT", OpClass::kGemm},
      {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1",
       OpClass::kGemm},
      {"sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", OpClass::kGemm},
      // Attention: FlashAttention-2 (flash-attn csrc/flash_attn/src/flash_fwd_launch_template.h,
      // flash_bwd_launch_template.h), its PyTorch SDPA copy, FA3, xformers / SDPA mem-efficient.
      {"void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
       "cutlass::bfloat16_t>, false, true, false, false, true, true, false>(Flash_fwd_params)",
       OpClass::kAttentionFwd},
      {"void flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128>>("
       "Flash_bwd_params)",
       OpClass::kAttentionBwd},
      {"void flash_bwd_dot_do_o_kernel<true, Flash_bwd_kernel_traits<128>>(Flash_bwd_params)",
       OpClass::kAttentionBwd},
      {"void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64>>",
       OpClass::kAttentionFwd},
      {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<"
       "flash::CollectiveMainloopFwdSm90<2>>>>",
       OpClass::kAttentionFwd},
      {"void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnBwdSm90<"
       "flash::CollectiveMainloopBwdSm90<2>>>>",
       OpClass::kAttentionBwd},
      {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel)",
       OpClass::kAttentionFwd},
      {"fmha_cutlassB_bf16_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKernel)",
       OpClass::kAttentionBwd},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x128",
       OpClass::kAttentionFwd},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_bprop_wgmma_f16_knob_5_64x128x128",
       OpClass::kAttentionBwd},
      // Optimizer: PyTorch's foreach/fused multi-tensor apply, Apex/Megatron fused Adam.
      {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
       "namespace)::TensorListMetadata<4>, at::native::(anonymous "
       "namespace)::FusedAdamMathFunctor<float, 4>>",
       OpClass::kOptimizer},
      {"void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float>",
       OpClass::kOptimizer},
      // Memory-bound: PyTorch elementwise, reductions, norms, softmax, copies; Inductor's Triton.
      {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
       OpClass::kMemoryBound},
      {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>",
       OpClass::kMemoryBound},
      {"void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, true, false>",
       OpClass::kMemoryBound},
      {"triton_poi_fused_add_mul_0", OpClass::kMemoryBound},
      {"triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_1", OpClass::kMemoryBound},
      {"void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 32, true, 1, true>",
       OpClass::kMemoryBound},
      {"my_custom_kernel", OpClass::kOtherCompute},
  };
  for (const auto& [name, want] : cases)
    EXPECT_EQ(to_string(classify_kernel(name)), to_string(want)) << name;
}

}  // namespace
}  // namespace scaleplan::sim

namespace scaleplan::sim {
namespace {

// The H200 step (tests/data/kineto/README.md): Llama-3-8B cut to 4 layers, 4 micro-batches, fp32
// parameters under autocast. Each kernel carries the External id of the PyTorch op that launched
// it; the importer ties them (RecordedSlice::op, mem_op). Expected figures follow from the model
// and from the test's own reading of the JSON.
TEST(Kineto, TiesEveryKernelToTheOpThatLaunchedIt) {
  const std::string path = kData + "h200_llama3_4l/rank-0.json.gz";
  auto t = load_recorded({path});
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  ASSERT_EQ(t->ranks.size(), 1u);
  const RecordedRank& r = t->ranks[0];
  std::map<std::string, int> by_op;
  std::map<std::string, int64_t> time_by_base;  // ps, by op name without the dtypes
  std::map<int, int> by_kind;
  for (const RecordedSlice& s : r.slices) {
    if (s.op < 0) continue;
    const std::string& op = t->names[static_cast<size_t>(s.op)];
    ++by_op[op];
    time_by_base[op.substr(0, op.find(" ("))] += (s.end - s.start).count();
    if (s.mem_op >= 0) ++by_kind[s.mem_op];
  }
  // Forward RMSNorms: 2 per layer and the final one, per micro-batch: 9 * 4, on the fp32
  // residual stream (autocast runs rms_norm in fp32).
  EXPECT_EQ(by_op["aten::_fused_rms_norm (float, float)"], 36);  // input, weight
  // One cuDNN attention forward kernel (sdpa ... fprop) per layer and micro-batch; one
  // log-softmax per micro-batch.
  int fprop = 0;
  for (const RecordedSlice& s : r.slices) {
    if (s.op < 0) continue;
    const std::string& op = t->names[static_cast<size_t>(s.op)];
    if (op.starts_with("aten::_cudnn_attention_forward") &&
        t->names[s.name].find("fprop") != std::string::npos)
      ++fprop;
  }
  EXPECT_EQ(fprop, 16);
  EXPECT_EQ(by_op["aten::_log_softmax (float)"], 4);
  // Autocast's weight casts: each of the 7 matrices of a layer and the LM head, fp32 -> bf16, in
  // every micro-batch's forward ((4 * 7 + 1) * 4 = 116), among the other float -> bf16 copies.
  EXPECT_GE(by_op["aten::copy_ (c10::BFloat16, float)"], 116);
  // AccumulateGrad's fp32 adds: 39 parameter tensors (4 * 9 per layer, the embedding, the final
  // norm, the LM head) in micro-batches 2-4: 117, besides the fp32 residual-gradient adds.
  EXPECT_GE(by_op["aten::add_ (float, float)"], 117);
  EXPECT_GT(by_kind[static_cast<int>(MemOp::kCast)], 0);
  EXPECT_GT(by_kind[static_cast<int>(MemOp::kCrossEntropy)], 0);

  // The test's own reading: GPU time (kernels, memsets, memcpys: cuBLAS zero-fills its split-K
  // workspace inside aten::mm) by the name of the cpu_op with the event's External id.
  const json j = read_gz(path);
  std::map<int64_t, std::string> ops;
  for (const json& e : j["traceEvents"])
    if (e.value("cat", "") == "cpu_op" && e.contains("args") && e["args"].contains("External id"))
      ops[e["args"]["External id"].get<int64_t>()] = e["name"].get<std::string>();
  std::map<std::string, double> us;
  for (const json& e : j["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat != "kernel" && cat != "gpu_memset" && cat != "gpu_memcpy") continue;
    const auto it = ops.find(e["args"].value("External id", int64_t{-1}));
    if (it != ops.end()) us[it->second] += e["dur"].get<double>();
  }
  for (const char* op : {"aten::mm", "aten::copy_", "aten::add_", "aten::_fused_adamw_"}) {
    SCOPED_TRACE(op);
    EXPECT_GT(us[op], 0);
    EXPECT_NEAR(static_cast<double>(time_by_base[op]) * 1e-6, us[op], 1e-3 * us[op]);
  }

  // Peak memory: the [memory] events' largest Total Allocated / Reserved equal what PyTorch's
  // torch.cuda.max_memory_allocated / max_memory_reserved reported for the timed steps of the
  // same run (torch_4l_s4096_gas4.json: 44,716,499,456 and 48,228,204,544 bytes).
  EXPECT_EQ(r.peak_allocated, 44'716'499'456);
  EXPECT_EQ(r.peak_reserved, 48'228'204'544);
}

TEST(Kineto, ClassifiesAtenOpsIntoTheProgramsKinds) {
  EXPECT_EQ(classify_aten_op("aten::copy_", "c10::BFloat16", "float"), MemOp::kCast);
  EXPECT_EQ(classify_aten_op("aten::copy_", "c10::BFloat16", "c10::BFloat16"), MemOp::kCopy);
  EXPECT_EQ(classify_aten_op("aten::add_", "float", "float"), MemOp::kAdd);
  EXPECT_EQ(classify_aten_op("aten::_fused_rms_norm_backward", "float", "float"),
            MemOp::kRmsNorm);
  EXPECT_EQ(classify_aten_op("aten::mul", "c10::complex<float>", "c10::complex<float>"),
            MemOp::kRope);
  EXPECT_EQ(classify_aten_op("aten::silu_backward", "c10::BFloat16", "c10::BFloat16"),
            MemOp::kSwiglu);
  EXPECT_EQ(classify_aten_op("aten::_log_softmax_backward_data", "float", "float"),
            MemOp::kCrossEntropy);
  EXPECT_EQ(classify_aten_op("aten::fill_", "float", ""), MemOp::kFill);
  EXPECT_EQ(classify_aten_op("aten::embedding_dense_backward", "float", "long"),
            MemOp::kEmbedding);
  EXPECT_EQ(classify_aten_op("aten::_fused_adamw_", "TensorList", "TensorList"), MemOp::kAdamW);
  EXPECT_EQ(classify_aten_op("aten::where", "bool", "float"), MemOp::kElementwise);
}

}  // namespace
}  // namespace scaleplan::sim
