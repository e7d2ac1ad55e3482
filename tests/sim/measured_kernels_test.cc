// Reading a trace's ops back as kernel shapes (for `refit`): the label text names every field of
// a shape, so parse_kernel_text(payload_text(p)) is p; a trace that is not scaleplan's is refused.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "sim/measured_kernels.h"
#include "sim/program.h"

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

TEST(MeasuredKernels, KinetoTraceIsRefusedSayingWhy) {
  const std::string kineto = R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "sm90_xmma_gemm", "ts": 0, "dur": 5,
     "args": {"stream": 7}}]})";
  MeasuredKernels m;
  const Status s = parse_measured_kernels(kineto, "rank0.json", m);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("rank0.json: otherData.generator"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("not their shapes"), std::string::npos) << s.message();
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

}  // namespace
}  // namespace scaleplan::sim
