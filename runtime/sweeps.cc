#include "runtime/sweeps.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>

#include "runtime/host/bf16.h"
#include "runtime/host/fp8.h"

namespace scaleplan::runtime {
namespace {

// ---- Deterministic inputs -----------------------------------------------------------------------

// A value in [-0.5, 0.5) from the element index, different per operand (`seed`).
float pattern(int64_t i, uint32_t seed) {
  uint64_t x = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull + seed * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return static_cast<float>(x % 1000) / 1000.0f - 0.5f;
}

// The value a backend holds for element i after `fill` with `f` (bf16 rounds).
float stored(ElemType t, float v) {
  return t == ElemType::kBf16 ? host::bf16_to_float(host::float_to_bf16(v)) : v;
}

// Fills `b` with f(i), converted to its element type, uploading in chunks of 1 Mi elements.
Status fill(Backend& be, const Buffer& b, const std::function<float(int64_t)>& f) {
  constexpr int64_t kChunk = int64_t{1} << 20;
  std::vector<char> host(static_cast<size_t>(std::min(b.count, kChunk) * element_size(b.type)) + 1);
  for (int64_t off = 0; off < b.count; off += kChunk) {
    const int64_t n = std::min(kChunk, b.count - off);
    for (int64_t i = 0; i < n; ++i) {
      const float v = f(off + i);
      switch (b.type) {
        case ElemType::kF32:
          reinterpret_cast<float*>(host.data())[i] = v;
          break;
        case ElemType::kBf16:
          reinterpret_cast<uint16_t*>(host.data())[i] = host::float_to_bf16(v);
          break;
        case ElemType::kI32:
          reinterpret_cast<int32_t*>(host.data())[i] = static_cast<int32_t>(v);
          break;
        case ElemType::kFp8E4m3:
          reinterpret_cast<uint8_t*>(host.data())[i] = host::float_to_e4m3(v);
          break;
        case ElemType::kE8m0:
          reinterpret_cast<uint8_t*>(host.data())[i] = host::float_to_e8m0_up(std::fabs(v));
          break;
      }
    }
    SP_RETURN_IF_ERROR(be.upload(b.slice(off, n), host.data()));
  }
  return Status::ok();
}

Result<std::vector<float>> fetch(Backend& be, const Buffer& b, int64_t offset, int64_t n) {
  std::vector<char> raw(static_cast<size_t>(n * element_size(b.type)) + 1);
  SP_RETURN_IF_ERROR(be.download(b.slice(offset, n), raw.data()));
  std::vector<float> out(n);
  for (int64_t i = 0; i < n; ++i) {
    switch (b.type) {
      case ElemType::kF32:
        out[i] = reinterpret_cast<float*>(raw.data())[i];
        break;
      case ElemType::kBf16:
        out[i] = host::bf16_to_float(reinterpret_cast<uint16_t*>(raw.data())[i]);
        break;
      case ElemType::kI32:
        out[i] = static_cast<float>(reinterpret_cast<int32_t*>(raw.data())[i]);
        break;
      case ElemType::kFp8E4m3:
        out[i] = host::e4m3_to_float(reinterpret_cast<uint8_t*>(raw.data())[i]);
        break;
      case ElemType::kE8m0:
        out[i] = host::e8m0_to_float(reinterpret_cast<uint8_t*>(raw.data())[i]);
        break;
    }
  }
  return out;
}

Status check_finite(Backend& be, const Buffer& b, std::string_view what) {
  const int64_t n = std::min<int64_t>(b.count, 1 << 16);
  SP_ASSIGN_OR_RETURN(const std::vector<float> v, fetch(be, b, b.count - n, n));
  for (float x : v) {
    if (!std::isfinite(x)) return Status::internal(std::string(what) + ": non-finite output");
  }
  return Status::ok();
}

// Buffers allocated for one point, released when it ends.
class Scratch {
 public:
  explicit Scratch(Backend& be) : be_(be) {}
  ~Scratch() {
    for (Buffer& b : owned_) be_.release(b);
  }
  Result<Buffer> make(int64_t count, ElemType t, uint32_t seed, float scale = 1.0f) {
    SP_ASSIGN_OR_RETURN(Buffer b, be_.allocate(std::max<int64_t>(count, 1), t));
    owned_.push_back(b);
    if (seed != 0)
      SP_RETURN_IF_ERROR(fill(be_, b, [&](int64_t i) { return scale * pattern(i, seed); }));
    return b;
  }

 private:
  Backend& be_;
  std::vector<Buffer> owned_;
};

// Times `op` with events on `stream`: the TimedRun of microbench.h.
TimedRun timed(Backend& be, StreamKind stream, const std::function<Status()>& op) {
  return [&be, stream, op](int reps) -> Result<Duration> {
    be.recycle_events();  // the previous repetition's two events were read: reuse them
    SP_ASSIGN_OR_RETURN(const Event start, be.record(stream));
    for (int i = 0; i < reps; ++i) SP_RETURN_IF_ERROR(op());
    SP_ASSIGN_OR_RETURN(const Event end, be.record(stream));
    return be.elapsed(start, end);
  };
}

// ---- Grids --------------------------------------------------------------------------------------

std::string shape_id(const GemmShape& g) {
  return "gemm/" + std::to_string(g.m) + "x" + std::to_string(g.n) + "x" + std::to_string(g.k);
}

// The GEMMs of one transformer layer with hidden h over T tokens (4h MLP): forward QKV, output
// projection, MLP up and down (m = T), and the weight gradients of QKV and MLP up (k = T).
std::vector<GemmShape> layer_gemms(int64_t h, int64_t t) {
  return {{t, 3 * h, h}, {t, h, h}, {t, 4 * h, h}, {t, h, 4 * h}, {h, 3 * h, t}, {h, 4 * h, t}};
}

void add_gemms(std::vector<SweepPoint>& out, const std::vector<int64_t>& hs,
               const std::vector<int64_t>& ts, double max_flops, bool holdout) {
  for (int64_t h : hs) {
    for (int64_t t : ts) {
      for (const GemmShape& g : layer_gemms(h, t)) {
        if (g.flops().value() > max_flops) continue;
        const std::string id = shape_id(g) + (holdout ? "/holdout" : "");
        if (std::any_of(out.begin(), out.end(), [&](const SweepPoint& p) { return p.id == id; }))
          continue;
        SweepPoint p;
        p.id = id;
        p.kind = PointKind::kGemm;
        p.gemm = g;
        p.holdout = holdout;
        out.push_back(p);
      }
    }
  }
}

void add_attention(std::vector<SweepPoint>& out, const std::vector<int64_t>& bhs,
                   const std::vector<int64_t>& seqs, const std::vector<int64_t>& dims,
                   double max_flops, bool holdout, const std::vector<bool>& causals = {true, false},
                   AttentionKernel kernel = AttentionKernel::kFlash2) {
  for (int64_t bh : bhs) {
    for (int64_t s : seqs) {
      for (int64_t d : dims) {
        for (bool causal : causals) {
          for (bool bwd : {false, true}) {
            AttentionShape a{1, bh, bh, s, s, d, d, causal, kernel};
            if (a.forward_flops().value() > max_flops) continue;
            SweepPoint p;
            p.kind = bwd ? PointKind::kAttentionBwd : PointKind::kAttentionFwd;
            p.attention = a;
            p.holdout = holdout;
            p.id = std::string(bwd ? "attn_bwd/" : "attn_fwd/") +
                   (kernel == AttentionKernel::kFlash2 ? std::string()
                                                       : std::string(to_string(kernel)) + "/") +
                   std::to_string(bh) + "x" + std::to_string(s) + "x" + std::to_string(d) +
                   (causal ? "/causal" : "/full") + (holdout ? "/holdout" : "");
            out.push_back(p);
          }
        }
      }
    }
  }
}

void add_memory(std::vector<SweepPoint>& out, const std::vector<MemOp>& ops,
                const std::vector<int64_t>& rows, int64_t cols, bool holdout) {
  for (MemOp op : ops) {
    for (int64_t r : rows) {
      SweepPoint p;
      p.kind = PointKind::kMemory;
      p.holdout = holdout;
      p.mem.op = op;
      p.mem.rows = r;
      p.mem.cols = op == MemOp::kMoeRouting ? 64 : cols;  // experts
      p.mem.p.top_k = 2;
      p.mem.p.vocab = 4096;
      p.mem.p.head_dim = 64;
      p.id = "mem/" + std::string(to_string(op)) + "/" + std::to_string(r) + "x" +
             std::to_string(p.mem.cols) + (holdout ? "/holdout" : "");
      out.push_back(p);
    }
  }
}

// Every MemOp: the operator list runs them all and the fitted model times each by its own curve.
std::vector<MemOp> all_mem_ops() {
  std::vector<MemOp> ops;
  for (int i = 0; i < kNumMemOps; ++i) ops.push_back(static_cast<MemOp>(i));
  return ops;
}
const std::vector<MemOp> kAllMemOps = all_mem_ops();

}  // namespace

std::vector<SweepPoint> kernel_points(const SweepOptions& o) {
  std::vector<SweepPoint> pts;
  if (o.backend == BackendKind::kHost) {
    // One CPU core per rank at ~10-50 GFLOP/s: keep each call under ~30 ms (quick) so that the
    // quick profile stays well under a minute on two shared cores.
    const double cap = o.quick ? 3e8 : 2e9;
    add_gemms(
        pts, o.quick ? std::vector<int64_t>{64, 128, 256} : std::vector<int64_t>{64, 128, 256, 512},
        o.quick ? std::vector<int64_t>{64, 256, 512} : std::vector<int64_t>{64, 256, 1024}, cap,
        false);
    add_gemms(pts, {96, 192}, {128, 384}, cap, true);
    add_attention(
        pts, {2, 8},
        o.quick ? std::vector<int64_t>{64, 128, 256} : std::vector<int64_t>{64, 128, 256, 512},
        {32, 64}, o.quick ? 1e8 : 1e9, false);
    add_attention(pts, {4}, {192}, {48}, 1e9, true);
    add_memory(
        pts, kAllMemOps,
        o.quick ? std::vector<int64_t>{16, 128, 1024} : std::vector<int64_t>{16, 128, 1024, 8192},
        512, false);
    add_memory(pts, {MemOp::kRmsNorm, MemOp::kSwiglu, MemOp::kAdd, MemOp::kSoftmax}, {384}, 512,
               true);
  } else {
    const double cap = 1e13;
    add_gemms(
        pts,
        o.quick ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{1024, 2048, 4096, 8192},
        o.quick ? std::vector<int64_t>{2048, 8192} : std::vector<int64_t>{1024, 4096, 16384}, cap,
        false);
    add_gemms(pts, {2560, 5120}, {3072}, cap, true);
    // The kernel the frameworks run on Hopper: cuDNN SDPA (torchtitan through PyTorch's SDPA,
    // Megatron-core through Transformer Engine; sim::framework_attention).
    const AttentionKernel cudnn = AttentionKernel::kCudnn;
    add_attention(pts, {16, 64},
                  o.quick ? std::vector<int64_t>{1024, 4096}
                          : std::vector<int64_t>{512, 1024, 2048, 4096, 8192},
                  {64, 128}, 1e13, false, {true, false}, cudnn);
    add_attention(pts, {32}, {3072}, {128}, 1e13, true, {true}, cudnn);
    // The unfused core of the 2022 conventions (Megatron-LM's FusedScaleMaskSoftmax between two
    // batched GEMMs), its own curve (calibrate::AttentionKernelFit).
    add_attention(pts, {16}, {1024, 2048, 4096}, {64, 128}, 1e13, false, {true, false},
                  AttentionKernel::kUnfused);
    add_memory(
        pts, kAllMemOps,
        o.quick ? std::vector<int64_t>{256, 16384} : std::vector<int64_t>{256, 2048, 16384, 65536},
        4096, false);
    add_memory(pts, {MemOp::kRmsNorm, MemOp::kSwiglu, MemOp::kAdd}, {6144}, 4096, true);
  }
  return pts;
}

std::vector<SweepPoint> collective_points(const SweepOptions& o, int world, int local) {
  std::vector<SweepPoint> pts;
  const bool host = o.backend == BackendKind::kHost;
  std::vector<int64_t> sizes;
  const int64_t lo = host ? 4 << 10 : 1 << 10;
  const int64_t hi =
      host ? (o.quick ? 4 << 20 : 16 << 20) : (o.quick ? int64_t{256} << 20 : int64_t{1} << 30);
  const int64_t step = o.quick ? 4 : 2;
  for (int64_t s = lo; s <= hi; s *= step) sizes.push_back(s);
  struct Shape {
    int ranks, stride;
    std::string placement;
  };
  std::vector<Shape> shapes;
  for (int n = 2; n <= std::min(world, local); n *= 2)
    shapes.push_back({n, 1, host ? "host" : "intra_node"});
  if (!host && world > local && local > 0) {
    for (int n = 2; n <= world / local; n *= 2) shapes.push_back({n, local, "inter_node"});
  }
  for (const Shape& sh : shapes) {
    for (int o_ = 0; o_ < kNumBackendCollectives; ++o_) {
      const auto op = static_cast<CollectiveOp>(o_);
      if (op == CollectiveOp::kBarrier) continue;
      const bool per_rank_blocks = op == CollectiveOp::kAllGather ||
                                   op == CollectiveOp::kReduceScatter ||
                                   op == CollectiveOp::kAllToAll || op == CollectiveOp::kGather ||
                                   op == CollectiveOp::kScatter;
      for (int64_t s : sizes) {
        SweepPoint p;
        p.kind = PointKind::kCollective;
        p.op = op;
        p.ranks = sh.ranks;
        p.stride = sh.stride;
        p.placement = sh.placement;
        // nccl-tests sizes are the whole buffer: per-rank blocks are size / n.
        p.count = std::max<int64_t>(1, s / 4 / (per_rank_blocks ? sh.ranks : 1));
        p.id = "coll/" + std::string(to_string(op)) + "/n" + std::to_string(sh.ranks) + "/" +
               sh.placement + "/" + std::to_string(s);
        pts.push_back(p);
      }
    }
  }
  return pts;
}

// ---- Kernel points ------------------------------------------------------------------------------

namespace {

Result<calibrate::KernelSample> run_gemm(Backend& be, const SweepPoint& p,
                                         const MeasureOptions& mo) {
  const GemmShape& g = p.gemm;
  const ElemType t = be.matmul_type();
  Scratch s(be);
  SP_ASSIGN_OR_RETURN(Buffer a, s.make(g.batch * g.m * g.k, t, 1));
  SP_ASSIGN_OR_RETURN(Buffer b, s.make(g.batch * g.k * g.n, t, 2));
  SP_ASSIGN_OR_RETURN(Buffer c, s.make(g.batch * g.m * g.n, t, 0));
  const GemmArgs args{g, false, false, 1.0f, 0.0f, a, b, c};
  SP_ASSIGN_OR_RETURN(const Measurement m,
                      measure(timed(be, StreamKind::kCompute, [&] { return be.gemm(args); }), mo));
  // Check C[0][0] and C[m-1][n-1] against dot products of the (rounded) inputs.
  for (const auto& [i, j] : {std::pair<int64_t, int64_t>{0, 0}, {g.m - 1, g.n - 1}}) {
    double want = 0, mag = 0;
    for (int64_t l = 0; l < g.k; ++l) {
      const double x = stored(t, pattern(i * g.k + l, 1)) *
                       static_cast<double>(stored(t, pattern(l * g.n + j, 2)));
      want += x;
      mag += std::abs(x);
    }
    SP_ASSIGN_OR_RETURN(const std::vector<float> got, fetch(be, c, i * g.n + j, 1));
    if (std::abs(got[0] - want) > 0.02 * mag + 1e-3) {
      return Status::internal(p.id + ": wrong result: C[" + std::to_string(i) + "][" +
                              std::to_string(j) + "] = " + std::to_string(got[0]) + ", expected " +
                              std::to_string(want));
    }
  }
  calibrate::KernelSample k;
  k.kind = KernelKind::kGemm;
  k.family = "gemm";
  k.gemm = g;
  k.time = m.estimate;
  k.noise = m.noise;
  k.holdout = p.holdout;
  return k;
}

Result<calibrate::KernelSample> run_attention(Backend& be, const SweepPoint& p,
                                              const MeasureOptions& mo) {
  const AttentionShape& a = p.attention;
  const bool bwd = p.kind == PointKind::kAttentionBwd;
  const ElemType t = be.matmul_type();
  Scratch s(be);
  const int64_t nq = a.batch * a.heads * a.q_len, nk = a.batch * a.kv_heads * a.kv_len;
  AttentionArgs args{a};
  SP_ASSIGN_OR_RETURN(args.q, s.make(nq * a.head_dim, t, 3));
  SP_ASSIGN_OR_RETURN(args.k, s.make(nk * a.head_dim, t, 4));
  SP_ASSIGN_OR_RETURN(args.v, s.make(nk * a.v_head_dim, t, 5));
  SP_ASSIGN_OR_RETURN(args.o, s.make(nq * a.v_head_dim, t, 0));
  SP_ASSIGN_OR_RETURN(args.lse, s.make(nq, ElemType::kF32, 0));
  if (bwd) {
    SP_ASSIGN_OR_RETURN(args.d_o, s.make(nq * a.v_head_dim, t, 6));
    SP_ASSIGN_OR_RETURN(args.dq, s.make(nq * a.head_dim, t, 0));
    SP_ASSIGN_OR_RETURN(args.dk, s.make(nk * a.head_dim, t, 0));
    SP_ASSIGN_OR_RETURN(args.dv, s.make(nk * a.v_head_dim, t, 0));
    SP_RETURN_IF_ERROR(be.attention_forward(args));  // the backward reads O and LSE
  }
  auto op = [&] { return bwd ? be.attention_backward(args) : be.attention_forward(args); };
  SP_ASSIGN_OR_RETURN(const Measurement m, measure(timed(be, StreamKind::kCompute, op), mo));
  if (bwd) {
    SP_RETURN_IF_ERROR(check_finite(be, args.dq, p.id + ": dq"));
    SP_RETURN_IF_ERROR(check_finite(be, args.dk, p.id + ": dk"));
  } else {
    // The last query of head 0 sees every key: O = softmax(q·K^T / sqrt(d)) · V, in double.
    const int64_t i = a.q_len - 1;
    std::vector<double> w(a.kv_len);
    double mx = -1e300, l = 0;
    for (int64_t j = 0; j < a.kv_len; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < a.head_dim; ++d) {
        dot += stored(t, pattern(i * a.head_dim + d, 3)) *
               static_cast<double>(stored(t, pattern(j * a.head_dim + d, 4)));
      }
      w[j] = dot / std::sqrt(static_cast<double>(a.head_dim));
      mx = std::max(mx, w[j]);
    }
    for (double& x : w) l += (x = std::exp(x - mx));
    SP_ASSIGN_OR_RETURN(const std::vector<float> got,
                        fetch(be, args.o, i * a.v_head_dim, a.v_head_dim));
    for (int64_t e = 0; e < a.v_head_dim; ++e) {
      double want = 0;
      for (int64_t j = 0; j < a.kv_len; ++j)
        want += w[j] / l * stored(t, pattern(j * a.v_head_dim + e, 5));
      if (std::abs(got[e] - want) > 0.02) {
        return Status::internal(p.id + ": wrong result: O[" + std::to_string(i) + "][" +
                                std::to_string(e) + "] = " + std::to_string(got[e]) +
                                ", expected " + std::to_string(want));
      }
    }
  }
  calibrate::KernelSample k;
  k.kind = bwd ? KernelKind::kAttentionBwd : KernelKind::kAttentionFwd;
  k.family = bwd ? "attention_bwd" : "attention_fwd";
  k.attention = a;
  k.implementation = be.attention_implementation(a);
  k.time = m.estimate;
  k.noise = m.noise;
  k.holdout = p.holdout;
  return k;
}

Result<calibrate::KernelSample> run_memory(Backend& be, const SweepPoint& p,
                                           const MeasureOptions& mo) {
  MemOpArgs a = p.mem;
  // The activations in the backend's storage (bf16 on cuda, as the executor runs them), each
  // operand as memory_operands sizes it, so that memory_shape counts what the kernel moved.
  a.storage = has_act_operands(a.op) ? be.activation_type() : ElemType::kF32;
  const MemOperands o = memory_operands(a);
  Scratch s(be);
  const bool moments = a.op == MemOp::kAdamW;
  SP_ASSIGN_OR_RETURN(a.x, s.make(o.x.count, o.x.type, 7, 4.0f));
  SP_ASSIGN_OR_RETURN(a.y, s.make(o.y.count, o.y.type, 8));
  SP_ASSIGN_OR_RETURN(a.w, s.make(o.w.count, o.w.type, 9));
  SP_ASSIGN_OR_RETURN(a.b, s.make(o.b.count, o.b.type, moments ? 0 : 10));
  if (moments) SP_RETURN_IF_ERROR(fill(be, a.b, [](int64_t) { return 0.01f; }));  // v > 0
  SP_ASSIGN_OR_RETURN(a.index, s.make(a.rows, ElemType::kI32, 0));
  const int64_t bound = a.op == MemOp::kEmbedding ? a.p.vocab : a.cols;
  SP_RETURN_IF_ERROR(
      fill(be, a.index, [&](int64_t i) { return static_cast<float>((i * 7919) % bound); }));
  SP_ASSIGN_OR_RETURN(a.out, s.make(o.out.count, o.out.type, 0));
  SP_ASSIGN_OR_RETURN(a.out2, s.make(o.out2.count, o.out2.type, 0));
  SP_ASSIGN_OR_RETURN(a.out_index, s.make(o.out_index.count, ElemType::kI32, 0));
  SP_ASSIGN_OR_RETURN(
      const Measurement m,
      measure(timed(be, StreamKind::kCompute, [&] { return be.memory_op(a); }), mo));
  SP_RETURN_IF_ERROR(check_finite(be, moments ? a.x : a.out, p.id));
  calibrate::KernelSample k;
  k.kind = KernelKind::kMemoryBound;
  k.family = std::string(to_string(a.op));
  k.memory = memory_shape(a);
  k.time = m.estimate;
  k.noise = m.noise;
  k.holdout = p.holdout;
  return k;
}

// all_reduce(max) of one value over a group, for microbench's Agree and for combining medians.
class GroupMax {
 public:
  GroupMax(Backend& be, const Group& g) : be_(be), g_(g), scratch_(be) {}
  Status init() {
    SP_ASSIGN_OR_RETURN(send_, scratch_.make(1, ElemType::kF32, 0));
    SP_ASSIGN_OR_RETURN(recv_, scratch_.make(1, ElemType::kF32, 0));
    return Status::ok();
  }
  Result<double> operator()(double v) {
    const float x = static_cast<float>(v);
    SP_RETURN_IF_ERROR(be_.upload(send_, &x));
    SP_RETURN_IF_ERROR(
        be_.collective(g_, {CollectiveOp::kAllReduce, send_, recv_, 1, ReduceOp::kMax}));
    float y = 0;
    SP_RETURN_IF_ERROR(be_.download(recv_, &y));
    return static_cast<double>(y);
  }
  Agree agree() {
    return [this](int64_t v) -> Result<int64_t> {
      SP_ASSIGN_OR_RETURN(const double r, (*this)(static_cast<double>(v)));
      return static_cast<int64_t>(r);
    };
  }

 private:
  Backend& be_;
  Group g_;
  Scratch scratch_;
  Buffer send_, recv_;
};

float expected_collective(CollectiveOp op, int n, int me, int root, int64_t block) {
  // Every member's send buffer holds rank + 1 (group rank); block j of a gathered result is j + 1.
  switch (op) {
    case CollectiveOp::kAllReduce:
    case CollectiveOp::kReduce:
    case CollectiveOp::kReduceScatter:
      return static_cast<float>(n * (n + 1) / 2);
    case CollectiveOp::kAllGather:
    case CollectiveOp::kGather:
    case CollectiveOp::kAllToAll:
      return static_cast<float>(block + 1);
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kScatter:
      return static_cast<float>(root + 1);
    case CollectiveOp::kSendRecv:  // not a collective: rejected by collective()
    case CollectiveOp::kBarrier:
      return 0;
  }
  return 0;
}

}  // namespace

Result<calibrate::KernelSample> run_kernel_point(Backend& be, const SweepPoint& p,
                                                 const MeasureOptions& mo) {
  switch (p.kind) {
    case PointKind::kGemm:
      return run_gemm(be, p, mo);
    case PointKind::kAttentionFwd:
    case PointKind::kAttentionBwd:
      return run_attention(be, p, mo);
    case PointKind::kMemory:
      return run_memory(be, p, mo);
    case PointKind::kCollective:
      break;
  }
  return Status::internal(p.id + ": not a kernel point");
}

Result<std::optional<calibrate::CollectiveSample>> run_collective_point(Backend& be,
                                                                        const SweepPoint& p,
                                                                        const MeasureOptions& mo,
                                                                        GroupCache& groups) {
  const int r = be.rank();
  auto it = groups.find({p.ranks, p.stride});
  if (it == groups.end()) {
    const bool member = r % p.stride == 0 && r / p.stride < p.ranks;
    SP_ASSIGN_OR_RETURN(const Group g, be.split(be.world(), member ? 0 : -1, r));
    it = groups.emplace(std::pair{p.ranks, p.stride}, g).first;
  }
  const Group g = it->second;
  std::optional<calibrate::CollectiveSample> out;
  if (g.member()) {
    const int n = g.size, me = g.rank;
    const int64_t big = n * p.count;
    Scratch s(be);
    SP_ASSIGN_OR_RETURN(Buffer send, s.make(big, ElemType::kF32, 0));
    SP_ASSIGN_OR_RETURN(Buffer recv, s.make(big, ElemType::kF32, 0));
    SP_RETURN_IF_ERROR(fill(be, send, [&](int64_t) { return static_cast<float>(me + 1); }));
    const CollectiveArgs args{p.op, send, recv, p.count, ReduceOp::kSum, 0, StreamKind::kDp};
    GroupMax group_max(be, g);
    SP_RETURN_IF_ERROR(group_max.init());
    SP_ASSIGN_OR_RETURN(const Measurement m,
                        measure(timed(be, StreamKind::kDp, [&] { return be.collective(g, args); }),
                                mo, group_max.agree()));
    // Check the first element of every block this member receives.
    const bool receives =
        !((p.op == CollectiveOp::kReduce || p.op == CollectiveOp::kGather) && me != 0);
    if (receives) {
      const bool blocks = p.op == CollectiveOp::kAllGather || p.op == CollectiveOp::kGather ||
                          p.op == CollectiveOp::kAllToAll;
      for (int64_t j = 0; j < (blocks ? n : 1); ++j) {
        SP_ASSIGN_OR_RETURN(const std::vector<float> got, fetch(be, recv, j * p.count, 1));
        const float want = expected_collective(p.op, n, me, 0, j);
        if (got[0] != want) {
          return Status::internal(p.id + ": wrong result on group rank " + std::to_string(me) +
                                  ": block " + std::to_string(j) + " holds " +
                                  std::to_string(got[0]) + ", expected " + std::to_string(want));
        }
      }
    }
    // The collective is done when its slowest member is: report the slowest member's estimate.
    SP_ASSIGN_OR_RETURN(const double slowest, group_max(m.estimate.to_seconds()));
    SP_ASSIGN_OR_RETURN(const double noise, group_max(m.noise));
    if (r == 0) {
      calibrate::CollectiveSample c;
      static_assert(static_cast<int>(CollectiveOp::kBarrier) == 8,
                    "runtime ops follow CollectiveOp order");
      c.op = std::string(to_string(p.op));
      c.ranks = n;
      c.placement = p.placement;
      c.size = collective_size(args, n);
      c.time = Duration::seconds(slowest);
      c.noise = noise;
      c.source = "profile";
      out = c;
    }
  }
  // Non-members wait here so that the next point starts together.
  SP_RETURN_IF_ERROR(be.collective(be.world(), {CollectiveOp::kBarrier}));
  return out;
}

Result<double> run_overlap_point(Backend& be, const MeasureOptions& mo, bool quick) {
  const bool host = be.name() == "host";
  const int64_t d = host ? 256 : (quick ? 4096 : 8192);
  const GemmShape g{d, 4 * d, d};
  const ElemType t = be.matmul_type();
  Scratch s(be);
  SP_ASSIGN_OR_RETURN(Buffer a, s.make(g.m * g.k, t, 1));
  SP_ASSIGN_OR_RETURN(Buffer b, s.make(g.k * g.n, t, 2));
  SP_ASSIGN_OR_RETURN(Buffer c, s.make(g.m * g.n, t, 0));
  const int64_t count = host ? (1 << 20) : (64 << 20);  // f32: 4 MiB host, 256 MiB cuda
  SP_ASSIGN_OR_RETURN(Buffer cs, s.make(count, ElemType::kF32, 0));
  SP_ASSIGN_OR_RETURN(Buffer cr, s.make(count, ElemType::kF32, 0));
  const GemmArgs args{g, false, false, 1.0f, 0.0f, a, b, c};
  GroupMax world_max(be, be.world());
  SP_RETURN_IF_ERROR(world_max.init());
  auto gemms = [&](int reps) -> Result<Duration> {
    be.recycle_events();
    SP_ASSIGN_OR_RETURN(const Event start, be.record(StreamKind::kCompute));
    for (int i = 0; i < reps; ++i) SP_RETURN_IF_ERROR(be.gemm(args));
    SP_ASSIGN_OR_RETURN(const Event end, be.record(StreamKind::kCompute));
    return be.elapsed(start, end);
  };
  SP_ASSIGN_OR_RETURN(const Measurement alone, measure(gemms, mo, world_max.agree()));
  auto beside = [&](int reps) -> Result<Duration> {
    // The all-reduce is enqueued first on its own stream so that it runs under the GEMMs.
    for (int i = 0; i < std::max(1, reps / 2); ++i) {
      SP_RETURN_IF_ERROR(be.collective(be.world(), {CollectiveOp::kAllReduce, cs, cr, count}));
    }
    SP_ASSIGN_OR_RETURN(const Duration t_, gemms(reps));
    SP_RETURN_IF_ERROR(be.synchronize());
    return t_;
  };
  SP_ASSIGN_OR_RETURN(const Measurement with, measure(beside, mo, world_max.agree()));
  return be.rank() == 0 ? std::max(1.0, with.estimate / alone.estimate) : 1.0;
}

}  // namespace scaleplan::runtime
