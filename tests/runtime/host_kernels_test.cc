// Host kernels against naive references written out in the test: triple-loop GEMMs, attention
// that materializes the full score matrix, and the memory-bound formulas one element at a time.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "runtime/launch.h"

namespace scaleplan::runtime {
namespace {

std::vector<float> random_vector(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

// Runs `fn` on one host rank.
void on_host(const std::function<Status(Backend&)>& fn) {
  const Status st = run_host_ranks(1, fn);
  ASSERT_TRUE(st.is_ok()) << st.message();
}

Result<Buffer> make(Backend& be, const std::vector<float>& v) {
  SP_ASSIGN_OR_RETURN(Buffer b, be.allocate(static_cast<int64_t>(v.size()), ElemType::kF32));
  SP_RETURN_IF_ERROR(be.upload(b, v.data()));
  return b;
}
std::vector<float> fetch(Backend& be, const Buffer& b) {
  std::vector<float> v(b.count);
  EXPECT_TRUE(be.download(b, v.data()).is_ok());
  return v;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, float tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::abs(want[i]))) << what << " element " << i;
  }
}

TEST(HostKernelsTest, GemmMatchesTripleLoopForEveryTransposeAndBatch) {
  const int64_t m = 37, n = 19, k = 23, batch = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const auto a = random_vector(batch * m * k, 1), b = random_vector(batch * k * n, 2);
      const auto c0 = random_vector(batch * m * n, 3);
      // C = 0.5·op(A)·op(B) + 2·C0, element by element.
      std::vector<float> want(batch * m * n);
      for (int64_t z = 0; z < batch; ++z) {
        for (int64_t i = 0; i < m; ++i) {
          for (int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (int64_t l = 0; l < k; ++l) {
              const float av = ta ? a[z * m * k + l * m + i] : a[z * m * k + i * k + l];
              const float bv = tb ? b[z * k * n + j * k + l] : b[z * k * n + l * n + j];
              s += static_cast<double>(av) * bv;
            }
            want[z * m * n + i * n + j] =
                static_cast<float>(0.5 * s + 2.0 * c0[z * m * n + i * n + j]);
          }
        }
      }
      on_host([&](Backend& be) {
        SP_ASSIGN_OR_RETURN(Buffer A, make(be, a));
        SP_ASSIGN_OR_RETURN(Buffer B, make(be, b));
        SP_ASSIGN_OR_RETURN(Buffer C, make(be, c0));
        GemmArgs g{GemmShape{m, n, k, batch}, ta, tb, 0.5f, 2.0f, A, B, C};
        SP_RETURN_IF_ERROR(be.gemm(g));
        expect_near_all(fetch(be, C), want, 1e-4f,
                        "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb));
        return Status::ok();
      });
    }
  }
}

TEST(HostKernelsTest, GemmRejectsShortBuffersNamingTheOperand) {
  on_host([](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer A, be.allocate(6, ElemType::kF32));
    SP_ASSIGN_OR_RETURN(Buffer B, be.allocate(5, ElemType::kF32));  // k·n = 6 needed
    SP_ASSIGN_OR_RETURN(Buffer C, be.allocate(4, ElemType::kF32));
    const Status st = be.gemm(GemmArgs{GemmShape{2, 2, 3}, false, false, 1, 0, A, B, C});
    EXPECT_FALSE(st.is_ok());
    EXPECT_NE(st.message().find("gemm: b"), std::string::npos) << st.message();
    return Status::ok();
  });
}

// Attention with the full score matrix, in double: O, LSE and the backward (dS = P∘(dP −
// rowsum(P∘dP)), the textbook softmax Jacobian, rather than the kernel's rowsum(dO∘O) shortcut).
struct NaiveAttention {
  std::vector<float> o, lse, dq, dk, dv;
};
NaiveAttention naive_attention(const AttentionShape& s, const std::vector<float>& q,
                               const std::vector<float>& k, const std::vector<float>& v,
                               const std::vector<float>& d_o) {
  const int64_t B = s.batch, H = s.heads, KH = s.kv_heads, Q = s.q_len, KV = s.kv_len,
                D = s.head_dim, DV = s.v_head_dim, G = H / KH;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  NaiveAttention r{std::vector<float>(B * H * Q * DV), std::vector<float>(B * H * Q),
                   std::vector<float>(B * H * Q * D), std::vector<float>(B * KH * KV * D, 0.0f),
                   std::vector<float>(B * KH * KV * DV, 0.0f)};
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < H; ++h) {
      const int64_t qh = b * H + h, kh = b * KH + h / G;
      for (int64_t i = 0; i < Q; ++i) {
        std::vector<double> p(KV, 0.0), dp(KV, 0.0);
        const int64_t vis = s.causal ? std::min<int64_t>(KV, KV - Q + i + 1) : KV;
        // A sliding window keeps the last `window` of those keys.
        const int64_t lo = s.causal && s.window > 0 ? std::max<int64_t>(vis - s.window, 0) : 0;
        double mx = -1e300;
        for (int64_t j = lo; j < vis; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += q[(qh * Q + i) * D + d] * k[(kh * KV + j) * D + d];
          p[j] = dot * scale;
          mx = std::max(mx, p[j]);
        }
        double l = 0;
        for (int64_t j = lo; j < vis; ++j) l += (p[j] = std::exp(p[j] - mx));
        for (int64_t j = lo; j < vis; ++j) p[j] /= l;
        r.lse[qh * Q + i] = static_cast<float>(mx + std::log(l));
        for (int64_t e = 0; e < DV; ++e) {
          double o = 0;
          for (int64_t j = lo; j < vis; ++j) o += p[j] * v[(kh * KV + j) * DV + e];
          r.o[(qh * Q + i) * DV + e] = static_cast<float>(o);
        }
        double pdp = 0;
        for (int64_t j = lo; j < vis; ++j) {
          for (int64_t e = 0; e < DV; ++e) {
            dp[j] += d_o[(qh * Q + i) * DV + e] * v[(kh * KV + j) * DV + e];
            r.dv[(kh * KV + j) * DV + e] += static_cast<float>(p[j] * d_o[(qh * Q + i) * DV + e]);
          }
          pdp += p[j] * dp[j];
        }
        for (int64_t d = 0; d < D; ++d) r.dq[(qh * Q + i) * D + d] = 0;
        for (int64_t j = lo; j < vis; ++j) {
          const double ds = p[j] * (dp[j] - pdp) * scale;
          for (int64_t d = 0; d < D; ++d) {
            r.dq[(qh * Q + i) * D + d] += static_cast<float>(ds * k[(kh * KV + j) * D + d]);
            r.dk[(kh * KV + j) * D + d] += static_cast<float>(ds * q[(qh * Q + i) * D + d]);
          }
        }
      }
    }
  }
  return r;
}

class HostAttention : public ::testing::TestWithParam<AttentionShape> {};

TEST_P(HostAttention, ForwardAndBackwardMatchTheFullScoreMatrix) {
  AttentionShape s = GetParam();
  const auto q = random_vector(s.batch * s.heads * s.q_len * s.head_dim, 11);
  const auto k = random_vector(s.batch * s.kv_heads * s.kv_len * s.head_dim, 12);
  const auto v = random_vector(s.batch * s.kv_heads * s.kv_len * s.v_head_dim, 13);
  const auto d_o = random_vector(s.batch * s.heads * s.q_len * s.v_head_dim, 14);
  const NaiveAttention want = naive_attention(s, q, k, v, d_o);
  on_host([&](Backend& be) {
    AttentionArgs a{s};
    SP_ASSIGN_OR_RETURN(a.q, make(be, q));
    SP_ASSIGN_OR_RETURN(a.k, make(be, k));
    SP_ASSIGN_OR_RETURN(a.v, make(be, v));
    SP_ASSIGN_OR_RETURN(a.d_o, make(be, d_o));
    SP_ASSIGN_OR_RETURN(a.o, be.allocate(static_cast<int64_t>(want.o.size()), ElemType::kF32));
    SP_ASSIGN_OR_RETURN(a.lse, be.allocate(static_cast<int64_t>(want.lse.size()), ElemType::kF32));
    SP_ASSIGN_OR_RETURN(a.dq, be.allocate(static_cast<int64_t>(want.dq.size()), ElemType::kF32));
    SP_ASSIGN_OR_RETURN(a.dk, be.allocate(static_cast<int64_t>(want.dk.size()), ElemType::kF32));
    SP_ASSIGN_OR_RETURN(a.dv, be.allocate(static_cast<int64_t>(want.dv.size()), ElemType::kF32));
    SP_RETURN_IF_ERROR(be.attention_forward(a));
    expect_near_all(fetch(be, a.o), want.o, 1e-4f, "o");
    expect_near_all(fetch(be, a.lse), want.lse, 1e-4f, "lse");
    SP_RETURN_IF_ERROR(be.attention_backward(a));
    expect_near_all(fetch(be, a.dq), want.dq, 1e-3f, "dq");
    expect_near_all(fetch(be, a.dk), want.dk, 1e-3f, "dk");
    expect_near_all(fetch(be, a.dv), want.dv, 1e-3f, "dv");
    return Status::ok();
  });
}

// batch, heads, kv_heads, q_len, kv_len, head_dim, v_head_dim, causal[, kernel, window]. Lengths
// over 64 cross the kernel's query blocks; q_len < kv_len is a CP chunk or a KV cache; 4/2 heads
// is GQA; 24/16 MLA-like; a window shorter than the keys is sliding-window attention (within a
// block, across blocks, over a chunk, and one longer than the sequence, which changes nothing).
INSTANTIATE_TEST_SUITE_P(
    Shapes, HostAttention,
    ::testing::Values(AttentionShape{1, 2, 2, 5, 5, 8, 8, false},
                      AttentionShape{2, 4, 2, 70, 70, 16, 16, true},
                      AttentionShape{1, 2, 1, 33, 100, 8, 8, true},
                      AttentionShape{1, 3, 3, 130, 130, 24, 16, true},
                      AttentionShape{1, 2, 2, 65, 65, 8, 8, false},
                      AttentionShape{2, 4, 2, 70, 70, 16, 16, true, AttentionKernel::kFlash2, 5},
                      AttentionShape{1, 3, 3, 130, 130, 24, 16, true, AttentionKernel::kFlash2, 64},
                      AttentionShape{1, 2, 1, 33, 100, 8, 8, true, AttentionKernel::kFlash2, 40},
                      AttentionShape{1, 2, 2, 20, 20, 8, 8, true, AttentionKernel::kFlash2, 50}));

TEST(HostKernelsTest, AttentionRejectsHeadsNotAMultipleOfKvHeads) {
  on_host([](Backend& be) {
    AttentionArgs a{AttentionShape{1, 3, 2, 4, 4, 8, 8, true}};
    const Status st = be.attention_forward(a);
    EXPECT_NE(st.message().find("heads=3 is not a multiple of kv_heads=2"), std::string::npos)
        << st.message();
    return Status::ok();
  });
}

TEST(HostKernelsTest, MemoryBoundOpsMatchTheirFormulas) {
  const int64_t R = 6, C = 8;
  const auto x = random_vector(R * 2 * C, 21), y = random_vector(R * C, 22),
             w = random_vector(C, 23), b = random_vector(C, 24);
  on_host([&](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer X, make(be, x));
    SP_ASSIGN_OR_RETURN(Buffer Y, make(be, y));
    SP_ASSIGN_OR_RETURN(Buffer W, make(be, w));
    SP_ASSIGN_OR_RETURN(Buffer Bb, make(be, b));
    SP_ASSIGN_OR_RETURN(Buffer O, be.allocate(R * C, ElemType::kF32));
    SP_ASSIGN_OR_RETURN(Buffer O2, be.allocate(R * C, ElemType::kF32));
    MemOpArgs a{MemOp::kRmsNorm, R, C, X, Y, W, Bb, {}, O, O2};
    // RMSNorm: x / sqrt(mean(x²) + eps) · w.
    SP_RETURN_IF_ERROR(be.memory_op(a));
    std::vector<float> want(R * C);
    for (int64_t r = 0; r < R; ++r) {
      double ss = 0;
      for (int64_t c = 0; c < C; ++c) ss += x[r * C + c] * x[r * C + c];
      for (int64_t c = 0; c < C; ++c)
        want[r * C + c] = static_cast<float>(x[r * C + c] / std::sqrt(ss / C + 1e-5) * w[c]);
    }
    expect_near_all(fetch(be, O), want, 1e-5f, "rmsnorm");
    // LayerNorm: each row of the output, less b and divided by w, has mean 0 and variance ~1.
    a.op = MemOp::kLayerNorm;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    auto ln = fetch(be, O);
    double mean = 0, var = 0;
    for (int64_t c = 0; c < C; ++c) mean += (ln[c] - b[c]) / w[c] / C;
    for (int64_t c = 0; c < C; ++c) var += std::pow((ln[c] - b[c]) / w[c] - mean, 2) / C;
    EXPECT_NEAR(mean, 0.0, 1e-5);
    EXPECT_NEAR(var, 1.0, 1e-3);
    // SwiGLU: silu(gate)·up with x = [gate | up] per row.
    a.op = MemOp::kSwiglu;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < C; ++c) {
        const float g = x[r * 2 * C + c], u = x[r * 2 * C + C + c];
        want[r * C + c] = g / (1 + std::exp(-g)) * u;
      }
    }
    expect_near_all(fetch(be, O), want, 1e-5f, "swiglu");
    // GELU (tanh form): gelu(0) = 0 and gelu(x) → x for large x; compare with the formula.
    a.op = MemOp::kGelu;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    for (int64_t i = 0; i < R * C; ++i) {
      const double v = x[i];
      want[i] = static_cast<float>(
          0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
    }
    expect_near_all(fetch(be, O), want, 1e-5f, "gelu");
    // Softmax rows sum to one.
    a.op = MemOp::kSoftmax;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    auto sm = fetch(be, O);
    for (int64_t r = 0; r < R; ++r) {
      double s = 0;
      for (int64_t c = 0; c < C; ++c) s += sm[r * C + c];
      EXPECT_NEAR(s, 1.0, 1e-5);
    }
    // Residual add.
    a.op = MemOp::kAdd;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    for (int64_t i = 0; i < R * C; ++i) want[i] = x[i] + y[i];
    expect_near_all(fetch(be, O), want, 0, "add");
    // RoPE keeps each pair's norm and leaves position 0 unchanged.
    a.op = MemOp::kRope;
    a.p.head_dim = 4;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    auto ro = fetch(be, O);
    for (int64_t c = 0; c < C; ++c) EXPECT_NEAR(ro[c], x[c], 1e-6);
    for (int64_t i = 0; i < R * C; i += 2) {
      EXPECT_NEAR(std::hypot(ro[i], ro[i + 1]), std::hypot(x[i], x[i + 1]), 1e-5);
    }
    return Status::ok();
  });
}

TEST(HostKernelsTest, CrossEntropyEmbeddingRoutingAndAdamW) {
  const int64_t R = 4, V = 5;
  const auto logits = random_vector(R * V, 31);
  const std::vector<int32_t> labels = {0, 4, 2, 2};
  on_host([&](Backend& be) {
    SP_ASSIGN_OR_RETURN(Buffer X, make(be, logits));
    SP_ASSIGN_OR_RETURN(Buffer L, be.allocate(R, ElemType::kI32));
    SP_RETURN_IF_ERROR(be.upload(L, labels.data()));
    SP_ASSIGN_OR_RETURN(Buffer loss, be.allocate(R, ElemType::kF32));
    SP_ASSIGN_OR_RETURN(Buffer grad, be.allocate(R * V, ElemType::kF32));
    MemOpArgs a{MemOp::kCrossEntropy, R, V};
    a.x = X;
    a.index = L;
    a.out = loss;
    a.out2 = grad;
    SP_RETURN_IF_ERROR(be.memory_op(a));
    // loss = logsumexp(row) − logit[label]; gradient rows sum to zero (softmax − one-hot) / R.
    auto lv = fetch(be, loss), gv = fetch(be, grad);
    for (int64_t r = 0; r < R; ++r) {
      double lse = 0, gs = 0;
      for (int64_t c = 0; c < V; ++c) lse += std::exp(logits[r * V + c]);
      EXPECT_NEAR(lv[r], std::log(lse) - logits[r * V + labels[r]], 1e-5);
      for (int64_t c = 0; c < V; ++c) gs += gv[r * V + c];
      EXPECT_NEAR(gs, 0.0, 1e-6);
      EXPECT_LT(gv[r * V + labels[r]], 0.0f);
    }
    // Embedding: row r of the output is table row labels[r].
    SP_ASSIGN_OR_RETURN(Buffer E, be.allocate(R * 3, ElemType::kF32));
    MemOpArgs e{MemOp::kEmbedding, R, 3};
    e.index = L;
    e.w = X;  // a 5 × ... table: reuse the logits as a vocab-5, width-3 table (first 15 floats)
    e.p.vocab = V;
    e.out = E;
    SP_RETURN_IF_ERROR(be.memory_op(e));
    auto ev = fetch(be, E);
    for (int64_t r = 0; r < R; ++r) {
      for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(ev[r * 3 + c], logits[labels[r] * 3 + c]);
    }
    // MoE routing, top-2 of 5 experts: the two largest logits, weights renormalized to sum 1.
    SP_ASSIGN_OR_RETURN(Buffer RW, be.allocate(R * 2, ElemType::kF32));
    SP_ASSIGN_OR_RETURN(Buffer RI, be.allocate(R * 2, ElemType::kI32));
    MemOpArgs m{MemOp::kMoeRouting, R, V};
    m.x = X;
    m.out = RW;
    m.out_index = RI;
    m.p.top_k = 2;
    SP_RETURN_IF_ERROR(be.memory_op(m));
    auto rw = fetch(be, RW);
    std::vector<int32_t> ri(R * 2);
    SP_RETURN_IF_ERROR(be.download(RI, ri.data()));
    for (int64_t r = 0; r < R; ++r) {
      std::vector<int> order = {0, 1, 2, 3, 4};
      std::sort(order.begin(), order.end(),
                [&](int i, int j) { return logits[r * V + i] > logits[r * V + j]; });
      EXPECT_EQ(ri[r * 2], order[0]);
      EXPECT_EQ(ri[r * 2 + 1], order[1]);
      EXPECT_NEAR(rw[r * 2] + rw[r * 2 + 1], 1.0, 1e-6);
    }
    // AdamW step 1 from m = v = 0: m̂ = g, v̂ = g², so w ← w − lr·(sign(g)·~1 + wd·w).
    std::vector<float> w0 = {1.0f, -2.0f}, g = {0.5f, -0.25f};
    SP_ASSIGN_OR_RETURN(Buffer P, make(be, w0));
    SP_ASSIGN_OR_RETURN(Buffer G, make(be, g));
    SP_ASSIGN_OR_RETURN(Buffer M, be.allocate(2, ElemType::kF32));
    SP_ASSIGN_OR_RETURN(Buffer Vv, be.allocate(2, ElemType::kF32));
    MemOpArgs ad{MemOp::kAdamW, 1, 2, P, G, M, Vv};
    SP_RETURN_IF_ERROR(be.memory_op(ad));
    auto pw = fetch(be, P);
    EXPECT_NEAR(pw[0], 1.0 - 1e-3 * (1.0 + 0.1 * 1.0), 1e-6);
    EXPECT_NEAR(pw[1], -2.0 - 1e-3 * (-1.0 + 0.1 * -2.0), 1e-6);
    return Status::ok();
  });
}

// Runs `a` on a host rank with x, y (dy) and w as given (each as memory_operands sizes it; an
// unused one empty) and returns out.
std::vector<float> host_run(MemOpArgs a, const std::vector<float>& x, const std::vector<float>& y,
                            const std::vector<float>& w) {
  std::vector<float> result;
  on_host([&](Backend& be) -> Status {
    SP_ASSIGN_OR_RETURN(a.x, make(be, x));
    SP_ASSIGN_OR_RETURN(a.y, make(be, y));
    SP_ASSIGN_OR_RETURN(a.w, make(be, w));
    SP_ASSIGN_OR_RETURN(a.out, be.allocate(memory_operands(a).out.count, ElemType::kF32));
    SP_RETURN_IF_ERROR(be.memory_op(a));
    result = fetch(be, a.out);
    return Status::ok();
  });
  return result;
}

// The backward forms against central differences of L(x) = sum(dy · forward(x)): dL/dx_i =
// (L(x + h·e_i) - L(x - h·e_i)) / 2h, in double from the f32 forward, h = 1e-2 (the forward's
// f32 rounding, ~1e-7 of L, stays far below h² · f''' of these smooth functions).
TEST(HostKernelsTest, BackwardFormsAreTheGradientsOfTheForward) {
  const int64_t R = 3, C = 8;
  for (MemOp op : {MemOp::kRmsNorm, MemOp::kSwiglu, MemOp::kGelu}) {
    MemOpArgs a;
    a.op = op;
    a.rows = R;
    a.cols = C;
    const int64_t nx = op == MemOp::kSwiglu ? 2 * R * C : R * C;
    const auto x = random_vector(nx, 31), dy = random_vector(R * C, 32), w = random_vector(C, 33);
    a.backward = true;
    const std::vector<float> dx = host_run(a, x, dy, w);
    ASSERT_EQ(static_cast<int64_t>(dx.size()), nx) << to_string(op);
    a.backward = false;
    auto loss = [&](std::vector<float> xs) {
      const std::vector<float> out = host_run(a, xs, {}, w);
      double l = 0;
      for (size_t j = 0; j < out.size(); ++j) l += static_cast<double>(dy[j]) * out[j];
      return l;
    };
    constexpr float h = 1e-2f;
    for (int64_t i = 0; i < nx; ++i) {
      std::vector<float> up = x, down = x;
      up[i] += h;
      down[i] -= h;
      const double want = (loss(up) - loss(down)) / (2.0 * h);
      EXPECT_NEAR(dx[i], want, 2e-3 * (1 + std::abs(want))) << to_string(op) << " dx[" << i << "]";
    }
  }
}

// A rotation's gradient is the inverse rotation: RoPE backward after RoPE forward gives x back.
TEST(HostKernelsTest, RopeBackwardUndoesTheForwardRotation) {
  MemOpArgs a;
  a.op = MemOp::kRope;
  a.rows = 5;
  a.cols = 16;
  a.p.head_dim = 8;
  const auto x = random_vector(a.rows * a.cols, 34);
  const std::vector<float> y = host_run(a, x, {}, {});
  a.backward = true;
  const std::vector<float> back = host_run(a, y, {}, {});
  ASSERT_EQ(back.size(), x.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(back[i], x[i], 1e-5f) << i;
  // The rotation moved the rows past position 0 (row 0 is position 0: no rotation).
  double moved = 0;
  for (size_t i = static_cast<size_t>(a.cols); i < x.size(); ++i) moved += std::abs(y[i] - x[i]);
  EXPECT_GT(moved, 1.0);
}

TEST(HostBackendTest, EventsGiveNonNegativeElapsedAndReportTheirRank) {
  const Status st = run_host_ranks(2, [](Backend& be) {
    SP_ASSIGN_OR_RETURN(Event a, be.record(StreamKind::kCompute));
    SP_ASSIGN_OR_RETURN(Event b, be.record(StreamKind::kDp));
    SP_ASSIGN_OR_RETURN(Duration d, be.elapsed(a, b));
    SP_ASSIGN_OR_RETURN(Duration t, be.since_start(b));
    if (d < Duration::zero() || t < d) return Status::internal("timestamps out of order");
    if (be.elapsed(a, Event{99}).is_ok()) return Status::internal("unknown event accepted");
    return be.name() == "host" ? Status::ok() : Status::internal("name");
  });
  EXPECT_TRUE(st.is_ok()) << st.message();
}

TEST(LaunchTest, CudaBackendReportsWhyItCannotRun) {
  // Without the backend, or without a device, asking for cuda is a clear error, not a crash.
  if (cuda_backend_compiled() && cuda_device_count() > 0) GTEST_SKIP() << "a GPU is present";
  const Status st = run_ranks({BackendKind::kCuda, 1}, [](Backend&) { return Status::ok(); });
  ASSERT_FALSE(st.is_ok());
  const std::string want = cuda_backend_compiled() ? "no CUDA device" : "without the CUDA toolkit";
  EXPECT_NE(st.message().find(want), std::string::npos) << st.message();
}

}  // namespace
}  // namespace scaleplan::runtime
