// The simulator's time for the expert GEMMs measured on one H200 (docs/measured/h200-2026-11-30/,
// call 1 moe_gemm.py and call S callS_moe_gemm_streams_compact.py): shared by
// bench/expert_gemm_table.cc, which prints the whole table, and tests/sim/expert_gemm_h200_test.cc,
// which checks the records' regime. For a rank holding `local` experts of `rows` rows each, it
// builds the layer the simulator builds (the model's preset, tp=1, ep = experts / local,
// seq·mbs = rows × local / top-k, bf16) and times that rank's expert GEMM ops with a kernel model,
// as Megatron-core (FrameworkOps::expert_gemm_streams = 4: ceil(E/4) rounds of at most 4 experts,
// Transformer Engine's multi_stream_cublas_gemm) and as torchtitan (one torch._grouped_mm) launch
// them, with two references: one GEMM of the same FLOPs and E single-expert GEMMs in a row.
#pragma once

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "calibrate/cost_model.h"
#include "core/framework.h"
#include "core/layout.h"
#include "core/status.h"
#include "models/model_spec.h"
#include "models/operators.h"

namespace scaleplan::expert_gemms {

// Seconds of one expert GEMM of a rank, by how it is launched.
struct Simulated {
  double megatron = 0;    // Megatron-core: ceil(E/4) rounds of at most 4 experts (TE's streams)
  double torchtitan = 0;  // torchtitan: one grouped kernel over the E experts
  double dense = 0;       // one GEMM of the same FLOPs (the dense rate)
  double loop = 0;        // E single-expert GEMMs one after another (one stream)
};

// The model presets of call S's short names ("oss", "q30", "q235", "dsv3").
inline const std::map<std::string, std::string>& streams_presets() {
  static const std::map<std::string, std::string> presets = {{"oss", "gpt-oss-120b"},
                                                             {"q30", "qwen3-30b-a3b"},
                                                             {"q235", "qwen3-235b-a22b"},
                                                             {"dsv3", "deepseek-v3"}};
  return presets;
}

// The median of `v` (0 when empty).
inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// The median SM clock (Hz) of the nvidia-smi rows "date time, C MHz, P W, reasons" whose power
// exceeds 200 W and whose time of day lies in [from, to) ("" = unbounded).
inline double busy_clock_hz(const std::string& path, const std::string& from,
                            const std::string& to) {
  std::ifstream in(path);
  std::string line;
  std::vector<double> mhz;
  while (std::getline(in, line)) {
    int y, mo, d, hh, mm;
    double ss, clock, watts;
    if (std::sscanf(line.c_str(), "%d/%d/%d %d:%d:%lf, %lf MHz, %lf W", &y, &mo, &d, &hh, &mm, &ss,
                    &clock, &watts) != 8)
      continue;
    char tod[16];
    std::snprintf(tod, sizeof tod, "%02d:%02d:%02d", hh, mm, static_cast<int>(ss));
    if ((!from.empty() && tod < from) || (!to.empty() && tod >= to) || watts <= 200) continue;
    mhz.push_back(clock);
  }
  return median(mhz) * 1e6;
}

// The models read so far, by preset name.
inline Result<const models::ModelSpec*> model_of(const std::string& name) {
  static std::map<std::string, models::ModelSpec> cache;
  if (auto it = cache.find(name); it != cache.end()) return &it->second;
  SP_ASSIGN_OR_RETURN(models::ModelSpec m, models::load_model(name));
  if (!m.moe) return Status::invalid(name + ": not a MoE model");
  return &cache.emplace(name, std::move(m)).first->second;
}

// The times of one rank's expert GEMM `gemm` ("fc1" or "fc2", the model's gated fc1 or its down
// projection) in `pass` ("fwd", "dgrad", "wgrad") for `local` experts of `rows` rows each, under
// the kernel model `k`.
inline Result<Simulated> simulated(const std::string& model, int64_t local, int64_t rows,
                                   const std::string& gemm, const std::string& pass,
                                   const calibrate::KernelCostModel& k) {
  SP_ASSIGN_OR_RETURN(const models::ModelSpec* mp, model_of(model));
  const models::ModelSpec& m = *mp;
  const int64_t ep = m.moe->num_experts / local, seq = rows * local / m.moe->top_k;
  SP_ASSIGN_OR_RETURN(const Layout parsed,
                      parse_layout("tp=1,pp=1,dp=" + std::to_string(ep) +
                                   ",ep=" + std::to_string(ep) + ",mbs=1,dtype=bf16"));
  SP_ASSIGN_OR_RETURN(const Layout l,
                      resolve_layout(parsed, models::layout_constraints(m, seq), ep));
  int64_t layer = 0;
  while (!m.is_moe_layer(layer)) ++layer;
  const std::string name = "moe.expert." + std::string(gemm == "fc1" ? "fc1" : "down") +
                           (pass == "fwd" ? "" : "." + pass);
  Simulated s;
  for (const auto fw : {FrameworkId::kMegatron, FrameworkId::kTorchtitan}) {
    SP_ASSIGN_OR_RETURN(
        auto ops, models::framework_layer_operators(m, l, seq, layer, models::framework_ops(fw)));
    for (const models::Op& op : ops) {
      if (op.name != name) continue;
      const GemmShape g = *op.gemm();
      (fw == FrameworkId::kMegatron ? s.megatron : s.torchtitan) += k.gemm(g).to_seconds();
      if (fw != FrameworkId::kTorchtitan) continue;
      // The same FLOPs as one GEMM: the experts' rows stacked (forward, input gradient) or the
      // reduction over all of them (weight gradient, whose k is the rows).
      GemmShape d = g, one = g;
      (pass == "wgrad" ? d.k : d.m) *= g.batch;
      d.batch = one.batch = 1;
      s.dense = k.gemm(d).to_seconds();
      s.loop = static_cast<double>(g.batch) * k.gemm(one).to_seconds();
    }
  }
  if (s.torchtitan == 0) return Status::invalid(model + ": no op " + name);
  return s;
}

}  // namespace scaleplan::expert_gemms
