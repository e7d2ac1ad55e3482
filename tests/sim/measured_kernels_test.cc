// Reading a trace's ops back as kernel shapes (for `refit`): the label text names every field of
// a shape, so parse_kernel_text(payload_text(p)) is p; a trace that is not scaleplan's is refused.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sim/measured_kernels.h"
#include "sim/op_class.h"
#include "sim/program.h"
#include "sim/recorded.h"

namespace scaleplan::sim {
namespace {

TEST(ParseKernelText, GemmRoundTrips) {
  GemmShape g{.m = 8192, .n = 1536, .k = 4096, .batch = 8, .dtype = DType::kFp8};
  auto p = parse_kernel_text(KernelKind::kGemm, payload_text(KernelPayload{KernelKind::kGemm, g}));
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const auto& back = std::get<GemmShape>(p->shape);
  EXPECT_EQ(back.m, g.m);
  EXPECT_EQ(back.n, g.n);
  EXPECT_EQ(back.k, g.k);
  EXPECT_EQ(back.batch, g.batch);
  EXPECT_EQ(back.dtype, g.dtype);
}

TEST(ParseKernelText, AttentionRoundTripsEveryField) {
  AttentionShape a;
  a.batch = 2;
  a.heads = 16;
  a.kv_heads = 4;
  a.q_len = 1024;
  a.kv_len = 4096;
  a.head_dim = 192;
  a.v_head_dim = 128;
  a.causal = false;
  a.window = 512;
  a.kernel = AttentionKernel::kCudnn;
  auto p = parse_kernel_text(KernelKind::kAttentionBwd,
                             payload_text(KernelPayload{KernelKind::kAttentionBwd, a}));
  ASSERT_TRUE(p.is_ok()) << p.status().message();
  const auto& b = std::get<AttentionShape>(p->shape);
  EXPECT_EQ(p->kind, KernelKind::kAttentionBwd);
  EXPECT_EQ(b.batch, a.batch);
  EXPECT_EQ(b.heads, a.heads);
  EXPECT_EQ(b.kv_heads, a.kv_heads);
  EXPECT_EQ(b.q_len, a.q_len);
  EXPECT_EQ(b.kv_len, a.kv_len);
  EXPECT_EQ(b.head_dim, a.head_dim);
  EXPECT_EQ(b.v_head_dim, a.v_head_dim);
  EXPECT_EQ(b.causal, a.causal);
  EXPECT_EQ(b.window, a.window);
  EXPECT_EQ(b.kernel, a.kernel);
  // The FLOPs, which the fit uses, follow from the shape alone.
  EXPECT_EQ(b.backward_flops().value(), a.backward_flops().value());
}

TEST(ParseKernelText, EveryMemoryBoundOpRoundTrips) {
  for (int i = 0; i < kNumMemOps; ++i) {
    MemoryBoundShape m{Bytes(12345 + i), Flops(0), static_cast<MemOp>(i)};
    auto p = parse_kernel_text(KernelKind::kMemoryBound,
                               payload_text(KernelPayload{KernelKind::kMemoryBound, m}));
    ASSERT_TRUE(p.is_ok()) << p.status().message();
    const auto& b = std::get<MemoryBoundShape>(p->shape);
    EXPECT_EQ(b.op, m.op);
    EXPECT_EQ(b.bytes.value(), m.bytes.value());
  }
}

TEST(ParseKernelText, BadFieldIsNamed) {
  auto p = parse_kernel_text(KernelKind::kGemm, "m=12 n=x k=4");
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("n: expected a non-negative integer, got \"x\""),
            std::string::npos)
      << p.status().message();
  auto q = parse_kernel_text(KernelKind::kMemoryBound, "bytes=10 op=warp");
  ASSERT_FALSE(q.is_ok());
  EXPECT_NE(q.status().message().find("op: not a memory-bound op: \"warp\""), std::string::npos);
}

constexpr const char* kScaleplanTrace =
    R"({"otherData": {"generator": "scaleplan run"}, "traceEvents": [
    {"ph": "X", "name": "L0.qkv", "pid": 0, "tid": 0, "ts": 0, "dur": 12.5,
     "args": {"op": 3, "class": "gemm", "shape": "m=64 n=96 k=32 batch=1 dtype=bf16"}},
    {"ph": "X", "name": "L0.norm", "pid": 0, "tid": 0, "ts": 13, "dur": 2.0,
     "args": {"op": 4, "class": "memory_bound", "shape": "bytes=4096 op=rmsnorm", "flops": 100}},
    {"ph": "X", "name": "tp.ar", "pid": 0, "tid": 1, "ts": 15, "dur": 40.0,
     "args": {"op": 5, "class": "all_reduce", "shape": "group=tp size=2 steps=1",
              "bytes": 4096, "collective": "all_reduce"}}]})";

TEST(MeasuredKernels, ComputeOpsBecomeSamplesAndCommIsSkipped) {
  const std::string trace = kScaleplanTrace;
  MeasuredKernels m;
  ASSERT_TRUE(parse_measured_kernels(trace, "t.json", m).is_ok());
  ASSERT_EQ(m.ops.size(), 2u);
  EXPECT_EQ(m.generator, "scaleplan run");
  EXPECT_EQ(m.ops[0].kind, KernelKind::kGemm);
  EXPECT_EQ(m.ops[0].gemm.n, 96);
  EXPECT_NEAR(m.ops[0].time.to_seconds(), 12.5e-6, 1e-15);
  EXPECT_EQ(m.ops[1].kind, KernelKind::kMemoryBound);
  EXPECT_EQ(m.ops[1].family, "rmsnorm");
  EXPECT_EQ(m.ops[1].memory.flops.value(), 100);
}

// A PyTorch profiler trace recorded with record_shapes, written by hand: each op's kernels carry
// its External id, and its "Input Dims" / "Input type" / "Concrete Inputs" are those of the
// PyTorch signatures (aten/src/ATen/native/native_functions.yaml). The expected samples below are
// these dims and the kernel durations summed by op.
constexpr const char* kKinetoShapes = R"({"schemaVersion": 1, "traceEvents": [
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 10,
   "args": {"External id": 10, "Input type": ["c10::BFloat16", "c10::BFloat16"],
            "Input Dims": [[4096, 4096], [4096, 1024]]}},
  {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_bf16", "pid": 0, "tid": 7, "ts": 100,
   "dur": 100, "args": {"External id": 10, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "splitKreduce_kernel", "pid": 0, "tid": 7, "ts": 201,
   "dur": 20, "args": {"External id": 10, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::linear", "pid": 1, "tid": 1, "ts": 20, "dur": 30,
   "args": {"External id": 11, "Input type": ["float", "float", ""],
            "Input Dims": [[1, 2048, 512], [256, 512], []]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 25, "dur": 20,
   "args": {"External id": 13, "Input type": ["c10::Half", "c10::Half"],
            "Input Dims": [[2048, 512], [512, 256]]}},
  {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm_f16", "pid": 0, "tid": 7, "ts": 300,
   "dur": 30, "args": {"External id": 13, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 1, "tid": 1, "ts": 60, "dur": 5,
   "args": {"External id": 14, "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16"],
            "Input Dims": [[256], [64, 128], [128, 256]]}},
  {"ph": "X", "cat": "kernel", "name": "gemv", "pid": 0, "tid": 7, "ts": 340, "dur": 5,
   "args": {"External id": 14, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::bmm", "pid": 1, "tid": 1, "ts": 70, "dur": 5,
   "args": {"External id": 15, "Input type": ["c10::BFloat16", "c10::BFloat16"],
            "Input Dims": [[8, 64, 32], [8, 32, 16]]}},
  {"ph": "X", "cat": "kernel", "name": "bmm_kernel", "pid": 0, "tid": 7, "ts": 350, "dur": 4,
   "args": {"External id": 15, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 80, "dur": 5,
   "args": {"External id": 16, "Input type": ["float", "float"],
            "Input Dims": [[64, 64], [64, 64]]}},
  {"ph": "X", "cat": "kernel", "name": "sgemm", "pid": 0, "tid": 7, "ts": 360, "dur": 6,
   "args": {"External id": 16, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_dot_product_cudnn_attention", "pid": 1,
   "tid": 1, "ts": 1000, "dur": 50,
   "args": {"External id": 20,
            "Input type": ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "", "Scalar",
                           "Scalar", "Scalar", "Scalar", ""],
            "Input Dims": [[2, 16, 1024, 128], [2, 4, 1024, 128], [2, 4, 1024, 64], [], [], [],
                           [], [], []],
            "Concrete Inputs": ["", "", "", "", "True", "0.", "True", "False", ""]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::_cudnn_attention_forward", "pid": 1, "tid": 1,
   "ts": 1005, "dur": 40,
   "args": {"External id": 21, "Input Dims": [[2, 16, 1024, 128]]}},
  {"ph": "X", "cat": "kernel", "name": "cudnn_generated_fort_native_sdpa_sm90", "pid": 0,
   "tid": 7, "ts": 1100, "dur": 25, "args": {"External id": 21, "stream": 7}},
  {"ph": "X", "cat": "kernel", "name": "cudnn_helper", "pid": 0, "tid": 7, "ts": 1130, "dur": 5,
   "args": {"External id": 21, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::_scaled_dot_product_cudnn_attention_backward",
   "pid": 1, "tid": 2, "ts": 2000, "dur": 100,
   "args": {"External id": 30,
            "Input Dims": [[2, 16, 1024, 64], [2, 16, 1024, 128], [2, 4, 1024, 128],
                           [2, 4, 1024, 64], [2, 16, 1024, 64], [2, 16, 1024, 1]],
            "Concrete Inputs": ["", "", "", "", "", "", "", "", "", "", "", "1024", "1024", "0.",
                                "False", ""]}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::_cudnn_attention_backward", "pid": 1, "tid": 2,
   "ts": 2010, "dur": 80, "args": {"External id": 31, "Input Dims": [[2, 16, 1024, 64]]}},
  {"ph": "X", "cat": "kernel", "name": "cudnn_generated_fort_native_sdpa_sm90_bprop", "pid": 0,
   "tid": 7, "ts": 2100, "dur": 70, "args": {"External id": 31, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::copy_", "pid": 1, "tid": 1, "ts": 3000, "dur": 5,
   "args": {"External id": 40, "Input type": ["c10::BFloat16", "float"],
            "Input Dims": [[4096], [4096]]}},
  {"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7, "ts": 3100,
   "dur": 3, "args": {"External id": 40, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 1, "tid": 2, "ts": 3200, "dur": 5,
   "args": {"External id": 41, "Input type": ["float", "float", "Scalar"],
            "Input Dims": [[1024, 1024], [1024, 1024], []]}},
  {"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7, "ts": 3300,
   "dur": 4, "args": {"External id": 41, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 3400, "dur": 5,
   "args": {"External id": 42, "Input type": ["c10::BFloat16", "c10::BFloat16"],
            "Input Dims": [[8, 64], [64]]}},
  {"ph": "X", "cat": "kernel", "name": "elementwise_kernel", "pid": 0, "tid": 7, "ts": 3500,
   "dur": 2, "args": {"External id": 42, "stream": 7}},
  {"ph": "X", "cat": "cpu_op", "name": "aten::_fused_rms_norm", "pid": 1, "tid": 1, "ts": 3600,
   "dur": 5, "args": {"External id": 43, "Input type": ["c10::BFloat16"],
                      "Input Dims": [[8, 64]]}},
  {"ph": "X", "cat": "kernel", "name": "rms_norm_kernel", "pid": 0, "tid": 7, "ts": 3700,
   "dur": 2, "args": {"External id": 43, "stream": 7}}]})";

TEST(MeasuredKernels, KinetoOpsWithShapesBecomeSamples) {
  MeasuredKernels m;
  const Status s = parse_measured_kernels(kKinetoShapes, "rank0.json", m);
  ASSERT_TRUE(s.is_ok()) << s.message();
  EXPECT_EQ(m.generator, "pytorch profiler");
  std::vector<calibrate::KernelSample> gemms, attention, memory;
  for (const auto& k : m.ops)
    (k.kind == KernelKind::kGemm          ? gemms
     : k.kind == KernelKind::kMemoryBound ? memory
                                          : attention)
        .push_back(k);
  ASSERT_EQ(gemms.size(), 4u);  // the fp32 mm is skipped, the copy_ is no GEMM
  EXPECT_EQ(m.skipped_unread, 1);
  struct Want {
    int64_t m, n, k, batch;
    double us;
  };
  const Want want[] = {{4096, 1024, 4096, 1, 120},  // its two kernels summed
                       {2048, 256, 512, 1, 30},     // the mm inside linear/matmul, fp16
                       {64, 256, 128, 1, 5},        // addmm(bias, mat1, mat2)
                       {64, 16, 32, 8, 4}};         // bmm: batch 8
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(gemms[i].gemm.m, want[i].m);
    EXPECT_EQ(gemms[i].gemm.n, want[i].n);
    EXPECT_EQ(gemms[i].gemm.k, want[i].k);
    EXPECT_EQ(gemms[i].gemm.batch, want[i].batch);
    EXPECT_EQ(gemms[i].gemm.dtype, DType::kBf16);
    EXPECT_NEAR(gemms[i].time.to_seconds(), want[i].us * 1e-6, 1e-12);
  }
  ASSERT_EQ(attention.size(), 2u);
  const auto& f = attention[0].kind == KernelKind::kAttentionFwd ? attention[0] : attention[1];
  const auto& b = attention[0].kind == KernelKind::kAttentionFwd ? attention[1] : attention[0];
  ASSERT_EQ(f.kind, KernelKind::kAttentionFwd);
  ASSERT_EQ(b.kind, KernelKind::kAttentionBwd);
  for (const auto* a : {&f, &b}) {
    EXPECT_EQ(a->attention.batch, 2);
    EXPECT_EQ(a->attention.heads, 16);
    EXPECT_EQ(a->attention.kv_heads, 4);
    EXPECT_EQ(a->attention.q_len, 1024);
    EXPECT_EQ(a->attention.kv_len, 1024);
    EXPECT_EQ(a->attention.head_dim, 128);
    EXPECT_EQ(a->attention.v_head_dim, 64);
    EXPECT_EQ(a->attention.kernel, AttentionKernel::kCudnn);
    EXPECT_EQ(a->implementation, "cudnn");
  }
  EXPECT_TRUE(f.attention.causal);   // is_causal, input 6 of the forward
  EXPECT_FALSE(b.attention.causal);  // is_causal, input 14 of the backward
  // The kernels of the nested _cudnn_attention_* op count to the SDPA op above it.
  EXPECT_NEAR(f.time.to_seconds(), 30e-6, 1e-12);
  EXPECT_NEAR(b.time.to_seconds(), 70e-6, 1e-12);
  // Elementwise ops by bytes (the RMSNorm, not elementwise, is not read):
  ASSERT_EQ(memory.size(), 3u);
  // copy_(bf16 dst, fp32 src): 4096 x 2 B written, 4096 x 4 B read; a cast (dtypes differ)
  EXPECT_EQ(memory[0].memory.bytes.value(), 4096 * 2 + 4096 * 4);
  EXPECT_EQ(memory[0].memory.op, MemOp::kCast);
  EXPECT_EQ(memory[0].family, "cast");
  EXPECT_NEAR(memory[0].time.to_seconds(), 3e-6, 1e-12);
  // add_(fp32 a, fp32 b) in place: a and b read, a written
  EXPECT_EQ(memory[1].memory.bytes.value(), 3 * 1024 * 1024 * 4);
  EXPECT_EQ(memory[1].memory.op, MemOp::kAdd);
  // mul(bf16 [8,64], bf16 [64]): both read, the broadcast [8,64] written
  EXPECT_EQ(memory[2].memory.bytes.value(), (8 * 64 + 64 + 8 * 64) * 2);
}

TEST(MeasuredKernels, KinetoTraceWithoutShapesIsRefusedSayingHowToRecord) {
  const std::string kineto = R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 5, "pid": 1, "tid": 1,
     "args": {"External id": 3}},
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "ts": 0, "dur": 5,
     "args": {"stream": 7, "External id": 3}}]})";
  MeasuredKernels m;
  const Status s = parse_measured_kernels(kineto, "rank0.json", m);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("rank0.json: no aten op carries \"Input Dims\""), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("record_shapes=True"), std::string::npos) << s.message();
}

// issue 44: gzip is told by content, not by the name: a gzipped scaleplan trace (any name) reads
// as the plain one, and a plain trace named .gz is read too.
TEST(MeasuredKernels, GzipIsDetectedByContent) {
  const std::string dir = ::testing::TempDir();
  const std::string gz = dir + "/scaleplan_trace_gz.json.gz";
  const std::string odd = dir + "/scaleplan_trace_plain.gz";
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_GT(gzwrite(f, kScaleplanTrace, static_cast<unsigned>(std::strlen(kScaleplanTrace))), 0);
  gzclose(f);
  std::ofstream(odd) << kScaleplanTrace;
  for (const std::string& path : {gz, odd}) {
    MeasuredKernels m;
    const Status s = read_measured_kernels(path, m);
    ASSERT_TRUE(s.is_ok()) << path << ": " << s.message();
    EXPECT_EQ(m.ops.size(), 2u) << path;  // the GEMM and the norm, as from the text itself
  }
  std::remove(gz.c_str());
  std::remove(odd.c_str());
}

// issue 43: the kernel names of CUDALoops.cuh's launchers, as the H200 trace records them (cut
// after the functor), name the implementation an element-wise op ran.
TEST(MemoryPathOfKernel, LaunchersOfCudaLoopsNameThePath) {
  EXPECT_EQ(memory_path_of_kernel("void at::native::unrolled_elementwise_kernel<at::native::"
                                  "direct_copy_kernel_cuda(at::TensorIteratorBase&)",
                                  "aten::copy_"),
            MemPath::kCastLoop);
  EXPECT_EQ(memory_path_of_kernel("void at::native::vectorized_elementwise_kernel<8, at::native::"
                                  "bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)",
                                  "aten::copy_"),
            MemPath::kVectorized);
  EXPECT_EQ(memory_path_of_kernel("void at::native::elementwise_kernel<128, 4, at::native::"
                                  "gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda",
                                  "aten::copy_"),
            MemPath::kStridedCopy);
  EXPECT_EQ(memory_path_of_kernel("void at::native::elementwise_kernel<128, 2, at::native::"
                                  "gpu_kernel_impl_nocast<at::native::BinaryFunctor",
                                  "aten::mul"),
            MemPath::kStrided);
  EXPECT_EQ(memory_path_of_kernel("triton_poi_fused_add_0", "aten::add"), MemPath::kVectorized);
}

// issue 43: the measured H200 step (tests/data/kineto/README.md) casts both ways, and PyTorch
// runs the two directions differently (aten/src/ATen/native/cuda/Copy.cu): fp32 -> bf16 through
// bfloat16_copy_kernel_cuda's vectorized loop, bf16 -> fp32 through direct_copy_kernel_cuda,
// whose functor takes the destination dtype, so the contiguous loop casts each element
// (unrolled_elementwise_kernel). The expected counts come from the trace's dtypes alone: every
// aten::copy_ (inputs: destination, source) with a kernel, fp32 into bf16 or bf16 into fp32.
TEST(MeasuredKernels, H200TraceCastsSplitByPathAsTheirDtypesSay) {
  const std::string path = std::string(SCALEPLAN_SOURCE_DIR) +
                           "/tests/data/kineto/h200_llama3_4l_2026-11-30/rank-0.json.gz";
  const auto text = read_trace_text(path);
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  const nlohmann::json j = nlohmann::json::parse(*text);
  std::set<int64_t> launched;
  for (const auto& e : j["traceEvents"])
    if (e.value("cat", "") == "kernel" && e.contains("args") && e["args"].contains("External id"))
      launched.insert(e["args"]["External id"].get<int64_t>());
  std::map<int64_t, std::string> copy_direction;  // External id -> "narrow" / "widen"
  for (const auto& e : j["traceEvents"]) {
    if (e.value("cat", "") != "cpu_op" || e.value("name", "") != "aten::copy_") continue;
    const auto& a = e["args"];
    if (!a.contains("External id") || !launched.count(a["External id"].get<int64_t>())) continue;
    const auto& ty = a["Input type"];
    if (ty[0] == "c10::BFloat16" && ty[1] == "float") copy_direction[a["External id"]] = "narrow";
    if (ty[0] == "float" && ty[1] == "c10::BFloat16") copy_direction[a["External id"]] = "widen";
  }
  int narrow = 0, widen = 0;
  for (const auto& [ext, d] : copy_direction) (d == "narrow" ? narrow : widen) += 1;
  ASSERT_GT(narrow, 0);
  ASSERT_GT(widen, 0);

  MeasuredKernels m;
  ASSERT_TRUE(read_measured_kernels(path, m).is_ok());
  int vectorized = 0, cast_loop = 0, other = 0;
  for (const auto& k : m.ops) {
    if (k.kind != KernelKind::kMemoryBound || k.memory.op != MemOp::kCast) continue;
    (k.memory.path == MemPath::kVectorized ? vectorized
     : k.memory.path == MemPath::kCastLoop ? cast_loop
                                           : other) += 1;
  }
  EXPECT_EQ(vectorized, narrow);
  EXPECT_EQ(cast_loop, widen);
  EXPECT_EQ(other, 0);
}

}  // namespace
}  // namespace scaleplan::sim
