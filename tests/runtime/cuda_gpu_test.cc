// The cuda backend against the host backend (kernels) and against the definition of each
// collective, on the GPUs of this machine. Every test here is named Gpu*, carries the ctest label
// `gpu`, and skips with the reason when there is no backend or no device.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/host/bf16.h"
#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace {

#define SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                       \
    if (!cuda_backend_compiled()) GTEST_SKIP() << "no CUDA device: cuda backend not built";  \
    if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: cudaGetDeviceCount is 0"; \
  } while (0)

std::vector<float> random_vector(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = host::bf16_to_float(host::float_to_bf16(d(gen)));  // exact in bf16 too
  return v;
}

Result<Buffer> make(Backend& be, const std::vector<float>& v, ElemType t) {
  SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(static_cast<int64_t>(v.size()), t));
  if (t == ElemType::kBf16) {
    std::vector<uint16_t> h(v.size());
    for (size_t i = 0; i < v.size(); ++i) h[i] = host::float_to_bf16(v[i]);
    SP_RETURN_IF_ERROR(be.upload(b, h.data()));
  } else {
    SP_RETURN_IF_ERROR(be.upload(b, v.data()));
  }
  return b;
}

Result<std::vector<float>> fetch(Backend& be, const Buffer& b) {
  std::vector<float> v(b.count);
  if (b.type == ElemType::kBf16) {
    std::vector<uint16_t> h(b.count);
    SP_RETURN_IF_ERROR(be.download(b, h.data()));
    for (int64_t i = 0; i < b.count; ++i) v[i] = host::bf16_to_float(h[i]);
  } else {
    SP_RETURN_IF_ERROR(be.download(b, v.data()));
  }
  return v;
}

// Runs `fn` once on the host backend and once on one GPU; fn returns the outputs to compare.
// `gpu_options`: how the GPU rank is launched (reference_attention: the oracle kernels).
using Outputs = std::vector<std::vector<float>>;
// `names`, when given, names each output in a failure's message.
void compare_backends(const std::function<Result<Outputs>(Backend&)>& fn, float tol,
                      const std::string& what,
                      const LaunchOptions& gpu_options = {BackendKind::kCuda, 1},
                      const std::vector<std::string>& names = {}) {
  Outputs host, gpu;
  ASSERT_TRUE(run_host_ranks(1, [&](Backend& be) -> Status {
                SP_ASSIGN_OR_RETURN(host, fn(be));
                return Status::ok();
              }).is_ok());
  const Status st = run_cuda_ranks(gpu_options, [&](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(gpu, fn(be));
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  ASSERT_EQ(host.size(), gpu.size());
  for (size_t o = 0; o < host.size(); ++o) {
    ASSERT_EQ(host[o].size(), gpu[o].size());
    for (size_t i = 0; i < host[o].size(); ++i) {
      ASSERT_NEAR(gpu[o][i], host[o][i], tol * (1 + std::abs(host[o][i])))
          << what << " output " << (o < names.size() ? names[o] : std::to_string(o)) << " [" << i
          << "]";
    }
  }
}

TEST(CudaGpuTest, GpuGemmMatchesHost) {
  SKIP_WITHOUT_GPU();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const GemmShape g{96, 80, 64, 2};  // multiples of 8: 16-byte aligned rows in bf16
      const auto a = random_vector(g.batch * g.m * g.k, 1),
                 b = random_vector(g.batch * g.k * g.n, 2);
      // bf16 output of a 64-term fp32 sum of products in [-1, 1]: ~2^-8 relative, up to ~8
      // absolute.
      compare_backends(
          [&](Backend& be) -> Result<Outputs> {
            const ElemType t = be.matmul_type();
            SP_ASSIGN_OR_RETURN(Buffer A, make(be, a, t));
            SP_ASSIGN_OR_RETURN(Buffer B, make(be, b, t));
            SP_ASSIGN_OR_RETURN(Buffer C, be.allocate(g.batch * g.m * g.n, t));
            SP_RETURN_IF_ERROR(be.gemm({g, ta, tb, 1.0f, 0.0f, A, B, C}));
            SP_ASSIGN_OR_RETURN(auto c, fetch(be, C));
            return Outputs{c};
          },
          1e-2f, "gemm");
    }
  }
}

// Forward and backward of every shape on the host and on the GPU: through cuDNN SDPA (the kernel
// the shapes name, as torchtitan and Megatron-core run it on Hopper) and through the reference
// kernels (the oracle, LaunchOptions::reference_attention). bf16 operands, fp32 accumulation:
// outputs within 3% (+3e-2 absolute) of the host's f32.
void attention_matches_host(const std::vector<AttentionShape>& shapes, bool reference) {
  for (const AttentionShape& s : shapes) {
    const int64_t nq = s.batch * s.heads * s.q_len, nk = s.batch * s.kv_heads * s.kv_len;
    LaunchOptions options{BackendKind::kCuda, 1};
    options.reference_attention = reference;
    const auto q = random_vector(nq * s.head_dim, 3), k = random_vector(nk * s.head_dim, 4),
               v = random_vector(nk * s.v_head_dim, 5), d_o = random_vector(nq * s.v_head_dim, 6);
    compare_backends(
        [&](Backend& be) -> Result<Outputs> {
          const ElemType t = be.matmul_type();
          AttentionArgs a;
          a.shape = s;
          SP_ASSIGN_OR_RETURN(a.q, make(be, q, t));
          SP_ASSIGN_OR_RETURN(a.k, make(be, k, t));
          SP_ASSIGN_OR_RETURN(a.v, make(be, v, t));
          SP_ASSIGN_OR_RETURN(a.d_o, make(be, d_o, t));
          SP_ASSIGN_OR_RETURN(a.o, be.allocate(nq * s.v_head_dim, t));
          SP_ASSIGN_OR_RETURN(a.lse, be.allocate(nq, ElemType::kF32));
          SP_ASSIGN_OR_RETURN(a.dq, be.allocate(nq * s.head_dim, t));
          SP_ASSIGN_OR_RETURN(a.dk, be.allocate(nk * s.head_dim, t));
          SP_ASSIGN_OR_RETURN(a.dv, be.allocate(nk * s.v_head_dim, t));
          SP_RETURN_IF_ERROR(be.attention_forward(a));
          SP_RETURN_IF_ERROR(be.attention_backward(a));
          Outputs out;
          for (const Buffer* b : {&a.o, &a.lse, &a.dq, &a.dk, &a.dv}) {
            SP_ASSIGN_OR_RETURN(auto x, fetch(be, *b));
            out.push_back(std::move(x));
          }
          return out;
        },
        3e-2f, std::string(reference ? "reference " : "cudnn ") + "attention", options);
  }
}

const std::vector<AttentionShape> kAttentionShapes = {
    AttentionShape{2, 4, 2, 100, 100, 64, 64, true, AttentionKernel::kCudnn},  // GQA 2:1
    AttentionShape{1, 2, 2, 33, 80, 128, 128, true, AttentionKernel::kCudnn},  // q_len < kv_len
    AttentionShape{1, 3, 3, 70, 70, 32, 32, false, AttentionKernel::kCudnn},
    AttentionShape{1, 8, 2, 128, 128, 128, 128, true, AttentionKernel::kCudnn},  // GQA 4:1
    AttentionShape{1, 2, 1, 64, 64, 256, 256, true, AttentionKernel::kCudnn},    // head dim 256
    // Sliding windows: shorter than a key tile, across query blocks, and over a CP-like chunk
    // (q_len < kv_len).
    AttentionShape{1, 2, 2, 150, 150, 64, 64, true, AttentionKernel::kCudnn, 5},
    AttentionShape{2, 4, 2, 100, 100, 64, 64, true, AttentionKernel::kCudnn, 70},
    AttentionShape{1, 2, 2, 33, 80, 128, 128, true, AttentionKernel::kCudnn, 20}};

// fp8 e4m3 GEMM with per-tensor scales (1.0) into bf16, in cuBLASLt's TN form: C = A · B^T with
// A [m, k] and B stored [n, k]. The inputs are values e4m3 holds exactly (±(1 + f/8)·2^e for
// e in {-1, 0}, and 0), so the expected C is their exact product sum, computed here in double;
// the bf16 output rounds it to 2^-8 relative.
uint8_t e4m3(int sign, int e, int f) {  // (1 + f/8) · 2^e, bias 7; 0 when e < -6
  return e < -6 ? 0 : static_cast<uint8_t>(sign << 7 | (e + 7) << 3 | f);
}
TEST(CudaGpuTest, GpuFp8GemmMatchesItsDefinition) {
  SKIP_WITHOUT_GPU();
  const int64_t m = 64, n = 48, k = 96;  // multiples of 16, as cuBLASLt's fp8 kernels need
  std::mt19937 gen(11);
  std::vector<uint8_t> a8(m * k), b8(n * k);
  std::vector<double> a(m * k), b(n * k);
  auto draw = [&](uint8_t& bits, double& value) {
    const int sign = gen() % 2, e = static_cast<int>(gen() % 3) - 2, f = gen() % 8;
    bits = e4m3(sign, e == -2 ? -7 : e, f);  // e = -2 stands for 0
    value = e == -2 ? 0.0 : (sign ? -1 : 1) * (1 + f / 8.0) * std::ldexp(1.0, e);
  };
  for (int64_t i = 0; i < m * k; ++i) draw(a8[i], a[i]);
  for (int64_t i = 0; i < n * k; ++i) draw(b8[i], b[i]);
  std::vector<float> got;
  const Status st = run_cuda_ranks(1, [&](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(Buffer A, be.allocate(m * k / 2, ElemType::kBf16));  // m·k bytes
    SP_ASSIGN_OR_RETURN(Buffer B, be.allocate(n * k / 2, ElemType::kBf16));
    SP_ASSIGN_OR_RETURN(Buffer C, be.allocate(m * n, ElemType::kBf16));
    SP_RETURN_IF_ERROR(be.upload(A, a8.data()));
    SP_RETURN_IF_ERROR(be.upload(B, b8.data()));
    GemmArgs g{GemmShape{m, n, k, 1, DType::kFp8}, false, true, 1.0f, 0.0f, A, B, C};
    g.a.count = m * k;  // the element counts the backend checks (one byte each)
    g.b.count = n * k;
    SP_RETURN_IF_ERROR(be.gemm(g));
    SP_ASSIGN_OR_RETURN(got, fetch(be, C));
    return Status::ok();
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t l = 0; l < k; ++l) want += a[i * k + l] * b[j * k + l];
      ASSERT_NEAR(got[i * n + j], want, 1e-2 * (1 + std::abs(want))) << i << "," << j;
    }
  }
}

// AdamW's 128-bit path covers n / 4 groups of four and the scalar kernel the n % 4 others: 3 × 37
// = 111 parameters, 27 groups and 3 left over, against the host's loop.
TEST(CudaGpuTest, GpuAdamWWithARemainderMatchesHost) {
  SKIP_WITHOUT_GPU();
  const int64_t R = 3, C = 37, n = R * C;
  const auto p = random_vector(n, 21), g = random_vector(n, 22), m = random_vector(n, 23),
             v = random_vector(n, 24);
  compare_backends(
      [&](Backend& be) -> Result<Outputs> {
        MemOpArgs a;
        a.op = MemOp::kAdamW;
        a.rows = R;
        a.cols = C;
        a.p.step = 3;
        std::vector<float> vv(v);
        for (float& x : vv) x = std::abs(x);  // a second moment is never negative
        SP_ASSIGN_OR_RETURN(a.x, make(be, p, ElemType::kF32));
        SP_ASSIGN_OR_RETURN(a.y, make(be, g, ElemType::kF32));
        SP_ASSIGN_OR_RETURN(a.w, make(be, m, ElemType::kF32));
        SP_ASSIGN_OR_RETURN(a.b, make(be, vv, ElemType::kF32));
        SP_RETURN_IF_ERROR(be.memory_op(a));
        Outputs out;
        for (const Buffer* b : {&a.x, &a.w, &a.b}) {
          SP_ASSIGN_OR_RETURN(auto x, fetch(be, *b));
          out.push_back(std::move(x));
        }
        return out;
      },
      1e-4f, "adamw");
}

TEST(CudaGpuTest, GpuAttentionMatchesHost) {
  SKIP_WITHOUT_GPU();
  attention_matches_host(kAttentionShapes, /*reference=*/false);
}

// The unfused core (batched cuBLASLt GEMMs + softmax, the 2022 frameworks' attention): lengths
// multiples of 8, which cuBLASLt's bf16 kernels need for their 16-byte aligned rows.
TEST(CudaGpuTest, GpuUnfusedAttentionMatchesHost) {
  SKIP_WITHOUT_GPU();
  const AttentionKernel u = AttentionKernel::kUnfused;
  attention_matches_host({AttentionShape{2, 4, 2, 128, 128, 64, 64, true, u},
                          AttentionShape{1, 2, 2, 64, 128, 64, 64, true, u},
                          AttentionShape{1, 3, 3, 96, 96, 32, 32, false, u},
                          AttentionShape{1, 8, 2, 128, 128, 128, 128, true, u},
                          AttentionShape{1, 2, 2, 128, 128, 64, 64, true, u, 40}},
                         /*reference=*/false);
}

TEST(CudaGpuTest, GpuReferenceAttentionMatchesHost) {
  SKIP_WITHOUT_GPU();
  attention_matches_host(kAttentionShapes, /*reference=*/true);
}

TEST(CudaGpuTest, GpuAttentionRefusesAKernelItDoesNotHave) {
  // nanotron runs FlashAttention-2 (sim::framework_attention); this build links no FA-2 library,
  // so the backend refuses rather than time another kernel in its place.
  SKIP_WITHOUT_GPU();
  const Status st = run_cuda_ranks(1, [](Backend& be) -> Status {
    AttentionArgs a;
    a.shape = AttentionShape{1, 2, 2, 64, 64, 64, 64, true, AttentionKernel::kFlash2};
    const int64_t n = 2 * 64 * 64;
    SP_ASSIGN_OR_RETURN(a.q, be.allocate(n, ElemType::kBf16));
    a.k = a.v = a.o = a.q;
    SP_ASSIGN_OR_RETURN(a.lse, be.allocate(2 * 64, ElemType::kF32));
    if (be.attention_implementation(a.shape) != "flash2")
      return Status::internal("implementation " + be.attention_implementation(a.shape));
    const Status fwd = be.attention_forward(a);
    if (fwd.message().find("no FlashAttention-2 library") == std::string::npos)
      return Status::internal("unexpected: " + fwd.message());
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

// Every memory-bound op, forward and (where it has one) backward, as the executor runs it:
// activations in the backend's activation_type (bf16 on the GPU, f32 on the host), every operand
// as memory_operands sizes it. C = 256: the 16-byte path (8 bf16 or 4 f32 per access); C = 74:
// rows of 148 B, the element-by-element path of the row kernels, and flat passes of 37·74 = 2738
// elements, 2 past the last group of 8 (the tail). bf16 results of fp32 math within 1e-2 of the
// host's f32 (bf16 keeps 8 significant bits: 2^-9 relative rounding), f32 results (loss and its
// gradient, routing, AdamW, fill, sum of squares) within 1e-4.
TEST(CudaGpuTest, GpuMemoryOpsMatchHost) {
  SKIP_WITHOUT_GPU();
  const int64_t R = 37;
  // One host run and one GPU run per (width, tolerance class), every op in it: a GPU rank's
  // start-up (NCCL, cuBLASLt, cuDNN handles) is paid 4 times, not 42, within gpu_check.sh's time.
  for (int64_t C : {256, 74}) {
    for (bool act : {true, false}) {
      std::vector<std::pair<MemOp, bool>> cases;  // (op, backward)
      std::vector<std::string> names;
      for (int i = 0; i < kNumMemOps; ++i) {
        const MemOp op = static_cast<MemOp>(i);
        // The fp8 quantizations write e4m3 and E8M0 bytes: compared byte for byte by their own
        // test below.
        if (has_act_operands(op) != act || op == MemOp::kFp8CastTranspose ||
            op == MemOp::kFp8Cast || op == MemOp::kMxfp8Quantize)
          continue;
        for (bool bwd : {false, true}) {
          if (bwd && !has_backward_form(op)) continue;
          cases.emplace_back(op, bwd);
          for (const char* b : {"out", "out2", "x", "w", "b", "out_index"})
            names.push_back(std::string(to_string(op)) + (bwd ? " backward " : " ") + b);
        }
      }
      compare_backends(
          [&](Backend& be) -> Result<Outputs> {
            Outputs out;
            for (const auto& [case_op, bwd] : cases) {
              const MemOp op = case_op;  // a copy: clang 14 cannot capture a structured binding
              MemOpArgs a;
              a.op = op;
              a.rows = R;
              a.cols = op == MemOp::kMoeRouting ? 64 : C;
              a.p.head_dim = C % 64 == 0 ? 64 : C;
              a.p.vocab = 4096;
              a.p.top_k = 2;
              a.p.value = 0.5f;
              a.p.step = 3;
              a.storage = be.activation_type();
              a.backward = bwd;
              const MemOperands o = memory_operands(a);
              auto input = [&](const MemOperand& m, unsigned seed) -> Result<Buffer> {
                auto v = random_vector(std::max<int64_t>(m.count, 1), seed);
                if (op == MemOp::kAdamW && seed == 4) {
                  for (float& x : v) x = std::abs(x);  // a second moment is never negative
                }
                return make(be, v, m.type);
              };
              SP_ASSIGN_OR_RETURN(a.x, input(o.x, 1));
              SP_ASSIGN_OR_RETURN(a.y, input(o.y, 2));
              SP_ASSIGN_OR_RETURN(a.w, input(o.w, 3));
              SP_ASSIGN_OR_RETURN(a.b, input(o.b, 4));
              std::vector<int32_t> ids(R);
              for (int64_t r = 0; r < R; ++r)
                ids[r] = static_cast<int32_t>((r * 31) % (op == MemOp::kEmbedding ? 4096 : C));
              SP_ASSIGN_OR_RETURN(a.index, be.allocate(R, ElemType::kI32));
              SP_RETURN_IF_ERROR(be.upload(a.index, ids.data()));
              auto output = [&](const MemOperand& m, ElemType t) {
                return be.allocate(std::max<int64_t>(m.count, 1), t);
              };
              SP_ASSIGN_OR_RETURN(a.out, output(o.out, o.out.type));
              SP_ASSIGN_OR_RETURN(a.out2, output(o.out2, ElemType::kF32));
              SP_ASSIGN_OR_RETURN(a.out_index, output(o.out_index, ElemType::kI32));
              SP_RETURN_IF_ERROR(be.memory_op(a));
              for (Buffer* b : {&a.out, &a.out2, &a.x, &a.w, &a.b, &a.out_index}) {
                SP_ASSIGN_OR_RETURN(auto v, fetch(be, *b));
                out.push_back(std::move(v));
                be.release(*b);
              }
              be.release(a.y);
              be.release(a.index);
            }
            return out;
          },
          act ? 1e-2f : 1e-4f, "memory ops, cols " + std::to_string(C), {BackendKind::kCuda, 1},
          names);
    }
  }
}

// Transformer Engine's fp8 quantizations (runtime/cuda/fp8_cast.cu, fp8_quantize.cu) against the
// host's (runtime/host/fp8.h, the OCP E4M3 conversion and TE's E8M0 rounding): every output byte
// the same, and the amax, bit for bit, since x · scale is one fp32 product on both and the
// conversions are exact roundings. Inputs are bf16-exact values up to ±64 times a scale of 16:
// many saturate at ±448, the smallest land among the subnormals. 64 × 256 takes the 16-byte path
// over whole tiles and whole MX blocks; 37 × 74 the element-wise one with partial tiles and short
// MX blocks; 130 × 72 the wide path with a partial tile.
TEST(CudaGpuTest, GpuFp8QuantizationsMatchHost) {
  SKIP_WITHOUT_GPU();
  for (MemOp op : {MemOp::kFp8CastTranspose, MemOp::kFp8Cast, MemOp::kMxfp8Quantize}) {
    for (const auto& shape : {std::pair<int64_t, int64_t>{64, 256}, {37, 74}, {130, 72}}) {
      const int64_t R = shape.first, C = shape.second;  // clang 14 cannot capture a binding
      std::vector<float> x = random_vector(R * C, 5);
      for (int64_t i = 0; i < R * C; ++i)
        x[i] = host::bf16_to_float(host::float_to_bf16(x[i] * std::ldexp(1.0f, (i % 13) - 6)));
      // The raw bytes of out, out2, w and b after the op (the casts' w is the scale they read, b
      // the amax they raise; MXFP8's w and b are its row and column scales).
      auto run = [&](Backend& be, std::vector<std::vector<uint8_t>>& bytes) -> Status {
        MemOpArgs a;
        a.op = op;
        a.rows = R;
        a.cols = C;
        a.storage = be.activation_type();
        const MemOperands o = memory_operands(a);
        SP_ASSIGN_OR_RETURN(a.x, make(be, x, o.x.type));
        const bool cast = op != MemOp::kMxfp8Quantize;
        SP_ASSIGN_OR_RETURN(
            a.w, cast ? make(be, {16.0f}, ElemType::kF32) : be.allocate(o.w.count, o.w.type));
        SP_ASSIGN_OR_RETURN(
            a.b, cast ? make(be, {0.25f}, ElemType::kF32) : be.allocate(o.b.count, o.b.type));
        SP_ASSIGN_OR_RETURN(a.out, be.allocate(o.out.count, o.out.type));
        if (o.out2.count > 0) {
          SP_ASSIGN_OR_RETURN(a.out2, be.allocate(o.out2.count, o.out2.type));
        }
        SP_RETURN_IF_ERROR(be.memory_op(a));
        for (const Buffer* b : {&a.out, &a.out2, &a.w, &a.b}) {
          bytes.emplace_back(static_cast<size_t>(b->count * element_size(b->type)));
          if (b->count > 0) SP_RETURN_IF_ERROR(be.download(*b, bytes.back().data()));
        }
        return Status::ok();
      };
      std::vector<std::vector<uint8_t>> host_bytes, gpu_bytes;
      ASSERT_TRUE(run_host_ranks(1, [&](Backend& be) { return run(be, host_bytes); }).is_ok());
      const Status st = run_cuda_ranks(1, [&](Backend& be) { return run(be, gpu_bytes); });
      ASSERT_TRUE(st.is_ok()) << st.message();
      ASSERT_EQ(gpu_bytes.size(), host_bytes.size());
      for (size_t k = 0; k < host_bytes.size(); ++k) {
        ASSERT_EQ(gpu_bytes[k].size(), host_bytes[k].size());
        for (size_t i = 0; i < host_bytes[k].size(); ++i)
          ASSERT_EQ(gpu_bytes[k][i], host_bytes[k][i])
              << to_string(op) << " " << R << "x" << C << " operand " << k << " byte " << i;
      }
    }
  }
}

// The RoPE table is built once per shape and kept: a second call of the same shape allocates
// nothing more, a new sequence length one more table.
TEST(CudaGpuTest, GpuRopeBuildsItsTableOncePerShape) {
  SKIP_WITHOUT_GPU();
  const Status st = run_cuda_ranks(1, [](Backend& be) -> Status {
    MemOpArgs a;
    a.op = MemOp::kRope;
    a.rows = 16;
    a.cols = 128;
    a.p.head_dim = 64;
    a.storage = be.activation_type();
    SP_ASSIGN_OR_RETURN(a.x, be.allocate(a.rows * a.cols, a.storage));
    SP_ASSIGN_OR_RETURN(a.out, be.allocate(a.rows * a.cols, a.storage));
    SP_RETURN_IF_ERROR(be.memory_op(a));
    const Bytes first = be.memory_stats().live;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    if (be.memory_stats().live != first) return Status::internal("second call allocated");
    a.p.seq_len = 8;  // 8 positions × 32 pairs × 8 B: at least 2 KiB more
    SP_RETURN_IF_ERROR(be.memory_op(a));
    if (be.memory_stats().live.value() < first.value() + 8 * 32 * 8)
      return Status::internal("a new shape did not get its table");
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

// The executor's report (runtime/executor.cc, `gather`): allocate, upload from pageable host
// memory, gather at once, download. On an H200 (2026-11-30) the gather read the buffer before
// cudaMemcpy's DMA had landed, since the backend's streams do not wait for the legacy stream's
// copy, and `run` failed with "rank 0 reported 0 ops". 64 MiB makes the copy outlast the launch.
TEST(CudaGpuTest, GpuGatherSeesAFreshAllocationsUpload) {
  SKIP_WITHOUT_GPU();
  const int64_t words = int64_t{16} << 20;
  std::vector<int32_t> host(static_cast<size_t>(words));
  for (int64_t i = 0; i < words; ++i) host[static_cast<size_t>(i)] = static_cast<int32_t>(i + 1);
  std::vector<int32_t> got(host.size(), 0);
  const Status st = run_cuda_ranks(1, [&](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(Buffer send, be.allocate(words, ElemType::kI32));
    SP_ASSIGN_OR_RETURN(Buffer recv, be.allocate(words, ElemType::kI32));
    SP_RETURN_IF_ERROR(be.upload(send, host.data()));
    CollectiveArgs a;
    a.op = CollectiveOp::kGather;
    a.send = send;
    a.recv = recv;
    a.count = words;
    SP_RETURN_IF_ERROR(be.collective(be.world(), a));
    return be.download(recv, got.data());
  });
  ASSERT_TRUE(st.is_ok()) << st.message();
  for (int64_t i = 0; i < words; i += 4099) ASSERT_EQ(got[static_cast<size_t>(i)], i + 1) << i;
  EXPECT_EQ(got.back(), words);
}

TEST(CudaGpuTest, GpuCollectivesMatchTheirDefinition) {
  SKIP_WITHOUT_GPU();
  // All local GPUs; every member sends rank + 1, so sums are n(n+1)/2 and block j of a gathered
  // result is j + 1 (the same check as the profile's, here on every element).
  const int n = cuda_device_count();
  const int64_t c = 1000;
  for (int o = 0; o < kNumBackendCollectives; ++o) {
    const auto op = static_cast<CollectiveOp>(o);
    const Status st = run_cuda_ranks(n, [&](Backend& be) -> Status {
      const int me = be.rank();
      SP_ASSIGN_OR_RETURN(
          Buffer send,
          make(be, std::vector<float>(n * c, static_cast<float>(me + 1)), ElemType::kF32));
      SP_ASSIGN_OR_RETURN(Buffer recv, be.allocate(n * c, ElemType::kF32));
      SP_RETURN_IF_ERROR(be.collective(be.world(), {op, send, recv, c}));
      SP_ASSIGN_OR_RETURN(auto got, fetch(be, recv));
      for (int64_t i = 0; i < n * c; ++i) {
        const int64_t block = i / c;
        float want = -1;
        switch (op) {
          case CollectiveOp::kAllReduce:
            want = i < c ? n * (n + 1) / 2.0f : 0;
            break;
          case CollectiveOp::kReduce:
            want = i < c && me == 0 ? n * (n + 1) / 2.0f : 0;
            break;
          case CollectiveOp::kReduceScatter:
            want = i < c ? n * (n + 1) / 2.0f : 0;
            break;
          case CollectiveOp::kAllGather:
          case CollectiveOp::kAllToAll:
            want = static_cast<float>(block + 1);
            break;
          case CollectiveOp::kGather:
            want = me == 0 ? static_cast<float>(block + 1) : 0;
            break;
          case CollectiveOp::kBroadcast:
          case CollectiveOp::kScatter:
            want = i < c ? 1.0f : 0;
            break;
          case CollectiveOp::kSendRecv:  // not a collective: rejected by collective()
          case CollectiveOp::kBarrier:
            want = 0;
            break;
        }
        if (got[i] != want) {
          return Status::internal(std::string(to_string(op)) + " rank " + std::to_string(me) +
                                  " [" + std::to_string(i) + "] = " + std::to_string(got[i]) +
                                  ", want " + std::to_string(want));
        }
      }
      return Status::ok();
    });
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
}

TEST(CudaGpuTest, GpuErrorsNameTheOpInsteadOfCrashing) {
  SKIP_WITHOUT_GPU();
  const Status st = run_cuda_ranks(1, [](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(Buffer f32, be.allocate(64, ElemType::kF32));
    const Status gemm = be.gemm({GemmShape{8, 8, 8}, false, false, 1, 0, f32, f32, f32});
    if (gemm.message().find("gemm: a: element type f32, expected bf16") == std::string::npos) {
      return Status::internal("unexpected: " + gemm.message());
    }
    AttentionArgs a;
    a.shape = AttentionShape{1, 1, 1, 8, 8, 512, 512, true};
    const Status attn = be.attention_forward(a);
    if (attn.message().find("attention_forward: head dim 512") == std::string::npos) {
      return Status::internal("unexpected: " + attn.message());
    }
    return Status::ok();
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

}  // namespace
}  // namespace scaleplan::runtime
