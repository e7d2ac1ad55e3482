#include "calibrate/roofline.h"

#include "calibrate/unfused_attention.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace scaleplan::calibrate {

RooflineParams default_roofline_params(const hw::GpuEfficiency& e) {
  RooflineParams p;
  p.gemm_ceiling = e.gemm_bf16;
  p.gemm_ceiling_fp8 = e.gemm_fp8;
  p.gemm_ceiling_fp4 = e.gemm_fp4 > 0 ? e.gemm_fp4 : e.gemm_fp8;
  p.flash2 = e.flash2;
  p.cudnn = e.cudnn;
  p.memory_paths = e.memory;
  p.sm_clock = e.sm_clock;
  return p;
}

RooflineCostModel::RooflineCostModel(GpuPeaks peaks, RooflineParams params)
    : peaks_(std::move(peaks)), params_(params) {}

// The rate and ceiling of a GEMM of dtype `d`: a dtype the GPU has no tensor rate for runs at the
// next wider one's (fp4 at fp8's, fp8 at bf16's).
std::pair<FlopsPerSecond, double> RooflineCostModel::gemm_rate(DType d) const {
  if (d == DType::kFp4 && peaks_.fp4_dense.value() > 0)
    return {peaks_.fp4_dense, params_.gemm_ceiling_fp4};
  if (d != DType::kBf16 && peaks_.fp8_dense.value() > 0)
    return {peaks_.fp8_dense, params_.gemm_ceiling_fp8};
  return {peaks_.bf16_dense, params_.gemm_ceiling};
}

FlopsPerSecond RooflineCostModel::peak(DType d) const { return gemm_rate(d).first; }

Duration RooflineCostModel::memory_time(Bytes b) const {
  return memory_time(b, params_.memory_efficiency);
}

Duration RooflineCostModel::memory_time(Bytes b, double efficiency) const {
  return b / (peaks_.memory_bandwidth * efficiency);
}

int RooflineCostModel::gemm_sms(const GemmShape& s) const {
  if (peaks_.sm_count <= 0) return 0;
  return std::clamp(peaks_.sm_count - s.sm_margin, 1, peaks_.sm_count);
}

double RooflineCostModel::quantization_efficiency(const GemmShape& s) const {
  const int64_t sms = gemm_sms(s);
  if (sms <= 0 || s.m <= 0 || s.n <= 0 || s.batch <= 0) return 1.0;
  const double useful = static_cast<double>(s.m) * static_cast<double>(s.n) * s.batch;
  double best = 0;
  // The larger dimension takes the 256 side of the 256x128 tile (cuBLAS transposes as needed).
  for (const auto& [ta, tb] : {std::pair<int64_t, int64_t>{256, 128}, {128, 128}}) {
    const int64_t big = std::max(s.m, s.n), small = std::min(s.m, s.n);
    const int64_t tiles = ((big + ta - 1) / ta) * ((small + tb - 1) / tb) * s.batch;
    const int64_t waves = (tiles + sms - 1) / sms;
    best = std::max(best, useful / (static_cast<double>(waves) * sms * ta * tb));
  }
  return std::min(best, 1.0);
}

Duration RooflineCostModel::gemm(const GemmShape& s) const {
  return gemm(s, params_.memory_efficiency);
}

Duration RooflineCostModel::gemm(const GemmShape& s, double memory_efficiency) const {
  if (s.m <= 0 || s.n <= 0 || s.k <= 0 || s.batch <= 0) return Duration::zero();
  const auto [rate, ceiling] = gemm_rate(s.dtype);
  // On sms of the sm_count SMs (GemmShape::sm_margin) the peak is sms/sm_count of the GPU's and
  // the waves are of sms tiles.
  const int sms = gemm_sms(s);
  const double share = sms > 0 ? static_cast<double>(sms) / peaks_.sm_count : 1.0;
  const Duration ideal = (s.flops() / rate) * (1.0 / (share * quantization_efficiency(s)));
  const Duration compute =
      (ideal + params_.gemm_half) * (clock_factor(params_.sm_clock.gemm_at()) / ceiling);
  return std::max({compute, memory_time(s.bytes(), memory_efficiency), params_.min_kernel});
}

Duration RooflineCostModel::unfused_attention(const AttentionShape& a, bool backward) const {
  const double e = params_.unfused_score_efficiency;
  return unfused_core(
      a, backward, [&](const GemmShape& g) { return gemm(g, e); },
      [&](int64_t bytes) {
        return std::max(params_.memory_overhead + memory_time(Bytes(bytes), e), params_.min_kernel);
      });
}

Duration RooflineCostModel::unfused_attention_forward(const AttentionShape& s) const {
  return unfused_attention(s, false);
}

Duration RooflineCostModel::unfused_attention_backward(const AttentionShape& s) const {
  return unfused_attention(s, true);
}

double RooflineCostModel::attention_head_dim_factor(double head_dim, AttentionKernel kernel) const {
  if (head_dim <= 0 || head_dim >= kAttentionReferenceHeadDim) return 1.0;
  const double k = attention_curve(kernel).head_dim_half;
  return (head_dim / (head_dim + k)) /
         (kAttentionReferenceHeadDim / (kAttentionReferenceHeadDim + k));
}

Duration RooflineCostModel::attention(const AttentionShape& s, Flops f, Bytes b,
                                      bool backward) const {
  if (f.value() <= 0) return Duration::zero();
  // The efficiency curves are read off causal benchmarks at sequence length L, whose queries
  // see L/2 keys on average. A sliding window w has queries see w: the curve is read at 2w.
  const int64_t curve_len = s.window > 0 ? std::min(s.kv_len, 2 * s.window) : s.kv_len;
  const double tokens = static_cast<double>(std::max<int64_t>(curve_len, 1));
  // MLA's query-key and value widths differ (192 and 128 for DeepSeek-V3): the kernel's work per
  // score is their sum, so the width that sets its efficiency is their mean.
  const double width = s.v_head_dim > 0 ? 0.5 * static_cast<double>(s.head_dim + s.v_head_dim)
                                        : static_cast<double>(s.head_dim);
  const AttentionCurve& c = attention_curve(s.kernel);
  const bool own_backward = backward && c.backward_ceiling > 0;
  const double ceiling = own_backward ? c.backward_ceiling : c.ceiling;
  const double half = own_backward ? c.backward_half_tokens : c.half_tokens;
  const double eff =
      ceiling * attention_head_dim_factor(width, s.kernel) * tokens / (tokens + half);
  const Duration compute =
      (f / (peak(DType::kBf16) * eff)) * clock_factor(params_.sm_clock.attention_at());
  return std::max({compute, memory_time(b), params_.min_kernel});
}

Duration RooflineCostModel::attention_forward(const AttentionShape& s) const {
  return attention(s, s.forward_flops(), s.bytes(), /*backward=*/false);
}

Duration RooflineCostModel::attention_backward(const AttentionShape& s) const {
  // The backward reads Q, K, V, O, dO and writes dQ, dK, dV: about twice the forward's bytes.
  return attention(s, s.backward_flops(), s.bytes() * 2, /*backward=*/true);
}

Duration RooflineCostModel::memory_bound(const MemoryBoundShape& s) const {
  if (s.bytes.value() <= 0 && s.flops.value() <= 0) return Duration::zero();
  // The casting loop's rate is elements per SM clock (hw::GpuEfficiency): it follows the clock.
  const double clock =
      s.path == MemPath::kCastLoop ? clock_factor(params_.sm_clock.cast_loop_at()) : 1.0;
  return std::max(
      params_.memory_overhead + memory_time(s.bytes, memory_path_efficiency(s.path)) * clock,
      params_.min_kernel);
}

double RooflineCostModel::clock_factor(double measured_hz) const {
  return params_.step_hz > 0 ? measured_hz / params_.step_hz : 1.0;
}

std::shared_ptr<const KernelCostModel> RooflineCostModel::at_sm_clock(double hz) const {
  if (!params_.sm_clock.enabled() || !(hz > 0)) return nullptr;
  RooflineParams p = params_;
  p.step_hz = hz;
  return std::make_shared<RooflineCostModel>(peaks_, p);
}

double RooflineCostModel::memory_path_efficiency(MemPath path) const {
  const hw::MemoryPathEfficiency& m = params_.memory_paths;
  // In MemPath's order.
  const double by_path[] = {m.vectorized, m.cast_loop,    m.row_norm, m.multi_tensor,
                            m.strided,    m.strided_copy, m.reduce,   m.segment_sum};
  const double e = by_path[static_cast<size_t>(path)];
  return e > 0 ? e : params_.memory_efficiency;
}

std::string RooflineCostModel::describe() const {
  char buf[240];
  std::snprintf(
      buf, sizeof buf, "roofline(%s: gemm<=%.3f, attention flash2<=%.3f cudnn<=%.3f, hbm %.2f%s%s)",
      peaks_.name.c_str(), params_.gemm_ceiling, params_.flash2.ceiling, params_.cudnn.ceiling,
      params_.memory_efficiency, params_.step_hz > 0 ? ", sm " : "",
      params_.step_hz > 0 ? hw::format_clock(params_.step_hz).c_str() : "");
  return buf;
}

}  // namespace scaleplan::calibrate
