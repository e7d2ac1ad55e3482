// The search-safety check (issue 45): on seeded problems, the planner's pruned search (branch and
// bound on sim::IterationBound) returns the same ranked plans as simulating every layout that
// fits. Shared by tests/planner/search_safety_test.cc (the CI set) and bench/search_safety_bench.cc
// (a larger set).
//
// The exhaustive side is the same `plan` driver given an evaluator whose bounds are zero
// (Evaluator's default: it prunes nothing), so it simulates every fitting candidate and ranks them
// with the same total order. Both sides share one ModelEvaluator, so a layout's simulated time is
// the same number on both sides: any difference in the top K is a layout the pruned search
// bounded out although it belongs there, i.e. a bound above a simulation that mattered, or a
// driver that stopped early. Expected outcome (derivation): identical lists, since the bound is a
// lower bound on every layout (tests/planner/iteration_bound_test.cc) and the driver's sequential
// definition only skips a layout whose bound exceeds the (K+1)-th best simulated time.
//
// Problems are drawn from a seed (std::mt19937_64, fixed distributions, so a seed names the same
// problem on every machine): a dense (Llama), MoE (Mixtral) or MLA MoE (DeepSeek-V3) model of a
// random shape written as an HF config.json, 8-512 GPUs of dgx-h100, a sequence length and a
// global batch, the conventions of megatron, torchtitan or nanotron, a schedule restriction among
// the default space (AFAB, 1F1B, interleaved, ZB-H1) and the two-chunk schedules (DualPipe,
// DualPipeV, ZB-V), sometimes an --emit target (its runnable values and refused combinations, as
// `plan --emit` sets them), fp8, the DeepEP dispatcher, an imbalance, top 1-5.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "calibrate/kernel_model.h"
#include "core/status.h"
#include "export/exporters.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"
#include "planner/model_evaluator.h"
#include "planner/planner.h"
#include "sim/framework.h"

namespace scaleplan::planner::safety {

struct Problem {
  uint64_t seed = 0;
  std::string kind;         // "dense", "moe", "mla-moe"
  std::string config_json;  // the model, as an HF config.json
  int64_t gpus = 0, seq = 0, gbs = 0;
  std::vector<std::string> fixes;    // --fix KEY=V1|V2...
  std::optional<ExportFormat> emit;  // --emit F: rank only what F runs
  FrameworkId framework = FrameworkId::kMegatron;
  double moe_imbalance = 1.0;
  std::string moe_dispatcher;  // "" for the model's own
  int top_k = 5;
  bool compare_with_next = true;  // false: a sweep point's search (prunes against the K-th)

  std::string describe() const {
    std::string s = "seed " + std::to_string(seed) + ": " + kind + " model, " +
                    std::to_string(gpus) + " GPUs, seq " + std::to_string(seq) + ", gbs " +
                    std::to_string(gbs) + ", framework " + std::string(to_string(framework)) +
                    ", top " + std::to_string(top_k) + (compare_with_next ? "" : " (sweep)");
    for (const auto& f : fixes) s += ", --fix " + f;
    if (emit) s += ", --emit " + std::string(to_string(*emit));
    if (moe_imbalance > 1.0) s += ", imbalance " + std::to_string(moe_imbalance);
    if (!moe_dispatcher.empty()) s += ", dispatcher " + moe_dispatcher;
    return s;
  }
};

// `large`: the benchmark's distribution (more layers, up to 512 GPUs more often); otherwise the CI
// test's, sized so that the exhaustive side of ~40 problems takes seconds.
inline Problem make_problem(uint64_t seed, bool large = false) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  auto pick = [&](auto const& values) {
    return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)];
  };
  auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
  Problem p;
  p.seed = seed;
  const int kind = static_cast<int>(seed % 3);  // every third problem of each kind
  p.kind = kind == 0 ? "dense" : kind == 1 ? "moe" : "mla-moe";
  // Layers: including counts that do not divide by pp (uneven and pinned splits).
  const int layers =
      large ? pick(std::vector<int>{6, 8, 9, 12, 16, 18}) : pick(std::vector<int>{3, 4, 5, 6, 8});
  const int hidden = pick(std::vector<int>{1024, 2048, 4096});
  const int heads = hidden / pick(std::vector<int>{64, 128});
  const int vocab = pick(std::vector<int>{32000, 50304, 128256});
  const bool tied = kind == 0 && chance(0.2);
  char buf[2048];
  if (kind == 0) {
    const int kv = pick(std::vector<int>{heads, 8, 4});
    std::snprintf(
        buf, sizeof buf,
        R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_act":"silu",)"
        R"("hidden_size":%d,"intermediate_size":%d,"num_attention_heads":%d,)"
        R"("num_key_value_heads":%d,"num_hidden_layers":%d,"vocab_size":%d,)"
        R"("max_position_embeddings":32768,"rms_norm_eps":1e-5,"rope_theta":500000.0,)"
        R"("tie_word_embeddings":%s,"torch_dtype":"bfloat16"})",
        hidden, hidden * 7 / 2 / 256 * 256, heads, std::min(kv, heads), layers, vocab,
        tied ? "true" : "false");
  } else if (kind == 1) {
    const int experts = pick(std::vector<int>{4, 8, 16});
    std::snprintf(buf, sizeof buf,
                  R"({"architectures":["MixtralForCausalLM"],"model_type":"mixtral",)"
                  R"("hidden_act":"silu","hidden_size":%d,"intermediate_size":%d,)"
                  R"("num_attention_heads":%d,"num_key_value_heads":8,"num_hidden_layers":%d,)"
                  R"("num_local_experts":%d,"num_experts_per_tok":2,"vocab_size":%d,)"
                  R"("max_position_embeddings":32768,"rms_norm_eps":1e-5,"rope_theta":1000000.0,)"
                  R"("tie_word_embeddings":false,"torch_dtype":"bfloat16"})",
                  hidden, hidden * 2, heads, layers, experts, vocab);
  } else {
    const int experts = pick(std::vector<int>{8, 16, 32});
    const int mtp = chance(0.3) ? 1 : 0;
    std::snprintf(buf, sizeof buf,
                  R"({"architectures":["DeepseekV3ForCausalLM"],"model_type":"deepseek_v3",)"
                  R"("hidden_act":"silu","hidden_size":%d,"intermediate_size":%d,)"
                  R"("moe_intermediate_size":%d,"first_k_dense_replace":1,"moe_layer_freq":1,)"
                  R"("n_routed_experts":%d,"n_shared_experts":1,"num_experts_per_tok":%d,)"
                  R"("num_attention_heads":%d,"num_key_value_heads":%d,"num_hidden_layers":%d,)"
                  R"("kv_lora_rank":%d,"q_lora_rank":%d,"qk_nope_head_dim":64,)"
                  R"("qk_rope_head_dim":32,"v_head_dim":64,"num_nextn_predict_layers":%d,)"
                  R"("vocab_size":%d,"max_position_embeddings":32768,"rms_norm_eps":1e-6,)"
                  R"("rope_theta":10000,"tie_word_embeddings":false,"torch_dtype":"bfloat16"})",
                  hidden, hidden * 3, hidden / 2, experts, experts >= 16 ? 4 : 2, heads, heads,
                  layers, hidden / 8, hidden / 4, mtp, vocab);
  }
  p.config_json = buf;
  p.gpus = large ? pick(std::vector<int64_t>{16, 32, 64, 128, 256, 512, 512})
                 : pick(std::vector<int64_t>{8, 8, 16, 16, 24, 32, 64, 128, 256, 512});
  p.seq = pick(std::vector<int64_t>{1024, 2048, 4096});
  // The batch: a few sequences per GPU at most, so that the micro-batch choices stay few at 512.
  const int64_t per_gpu_max = p.gpus >= 128 ? 1 : large ? 4 : 2;
  p.gbs = p.gpus * std::uniform_int_distribution<int64_t>(1, per_gpu_max)(rng) /
          pick(std::vector<int64_t>{1, 2, 4});
  p.gbs = std::max<int64_t>(p.gbs, 8);
  // The schedules: the default space, or one of the two-chunk schedules asked for by name.
  const std::string sched =
      pick(std::vector<std::string>{"", "", "", "dualpipe", "dualpipev", "zb-v",
                                    "afab|1f1b|interleaved|zb-h1|dualpipe|dualpipev|zb-v"});
  if (!sched.empty()) p.fixes.push_back("schedule=" + sched);
  if (kind > 0 && (large || p.gpus <= 16) && chance(0.3)) p.fixes.push_back("dtype=fp8|bf16");
  if (kind > 0 && chance(0.3)) p.moe_dispatcher = "deepep";
  if (kind > 0 && chance(0.3)) p.moe_imbalance = 1.3;
  if (p.seq >= 2048 && (large || p.gpus <= 32) && chance(0.25))
    p.fixes.push_back("cp_comm=p2p|all_gather|a2a");
  // The benchmark's MoE problems from 128 GPUs on keep etp at 1: with every expert-TP degree a
  // single one holds ~90,000 fitting layouts (an hour of exhaustive simulation on 2 cores).
  if (large && kind > 0 && p.gpus >= 128) p.fixes.push_back("etp=1");
  if (!large) {
    // CI's problems restrict a few inner keys as a user's --fix would (each key still takes each
    // value over the set), so that the exhaustive side of a problem is a few hundred simulations.
    // One value each (two for the dense model below 64 GPUs), and from 64 GPUs on one
    // micro-batch size: the grids are many there.
    const bool big = p.gpus >= 64;
    const bool two = kind == 0 && !big;
    p.fixes.push_back("zero=" + (two ? pick(std::vector<std::string>{"0|1", "1|3", "2|3"})
                                     : pick(std::vector<std::string>{"0", "1", "2", "3"})));
    p.fixes.push_back("recompute=" +
                      (two ? std::string("none|full")
                           : pick(std::vector<std::string>{"none", "selective", "full"})));
    if (kind > 0 || big || chance(0.5))
      p.fixes.push_back("sp=" + pick(std::vector<std::string>{"on", "off"}));
    if (kind > 0) p.fixes.push_back("etp=1");
    if (big) p.fixes.push_back("mbs=1");
  }
  // Without an --emit target, the conventions of one of the planned frameworks.
  if (chance(0.4)) {
    p.emit = pick(std::vector<ExportFormat>{ExportFormat::kMegatron, ExportFormat::kTorchtitan,
                                            ExportFormat::kNanotron, ExportFormat::kDeepspeed});
    p.framework = conventions_for(*p.emit);
  } else {
    p.framework = pick(std::vector<FrameworkId>{FrameworkId::kMegatron, FrameworkId::kMegatron,
                                                FrameworkId::kTorchtitan, FrameworkId::kNanotron});
  }
  p.top_k = pick(std::vector<int>{1, 3, 5});
  p.compare_with_next = !chance(0.2);
  return p;
}

// The exhaustive side: the real memory model and simulator, no bound (Evaluator's zero).
class NoBound : public Evaluator {
 public:
  explicit NoBound(const Evaluator& inner) : inner_(inner) {}
  Result<MemoryVerdict> memory(const Layout& l) const override { return inner_.memory(l); }
  Result<Prediction> simulate(const Layout& l) const override { return inner_.simulate(l); }

 private:
  const Evaluator& inner_;
};

struct Outcome {
  bool same = true;
  std::string difference;  // the first difference, when not the same
  int64_t candidates = 0, fit = 0, simulated_pruned = 0, simulated_exhaustive = 0;
  double pruned_s = 0, exhaustive_s = 0;
};

// Runs the problem both ways. Errors: the problem could not be set up or searched (a bug in the
// generator or the planner, never a difference).
inline Result<Outcome> check(const Problem& p, int threads = 1) {
  const std::string path = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                           "/scaleplan_safety_" + std::to_string(p.seed) + "_" +
                           std::to_string(reinterpret_cast<uintptr_t>(&p)) + ".json";
  {
    std::ofstream f(path);
    f << p.config_json;
  }
  auto model = models::load_model(path);
  std::remove(path.c_str());
  if (!model) return model.status().with_context("seed " + std::to_string(p.seed));
  if (p.moe_imbalance > 1.0) SP_RETURN_IF_ERROR(models::set_moe_imbalance(*model, p.moe_imbalance));
  if (!p.moe_dispatcher.empty())
    SP_RETURN_IF_ERROR(models::set_moe_dispatcher(*model, p.moe_dispatcher));
  SP_ASSIGN_OR_RETURN(hw::Cluster cluster, hw::load_cluster("dgx-h100"));
  SP_ASSIGN_OR_RETURN(auto kernels, calibrate::kernel_cost_model_for(cluster));
  const ModelEvaluator ev(*model, cluster, p.seq, sim::framework(p.framework), std::move(kernels));
  PlanRequest req;
  req.search.model = models::layout_constraints(*model, p.seq);
  req.search.gpus = p.gpus;
  req.search.gbs = p.gbs;
  req.search.nvlink_domain_gpus = cluster.gpus_per_domain();
  for (const auto& f : p.fixes) SP_RETURN_IF_ERROR(req.search.fixes.add(f));
  if (p.emit) {  // as api::plan sets them for --emit
    req.search.runnable = runnable_values(*p.emit, *model);
    req.search.runnable_by = std::string(framework_name(*p.emit));
    req.search.refused = refused_combinations(*p.emit);
  }
  req.top_k = p.top_k;
  req.compare_with_next = p.compare_with_next;
  req.threads = threads;
  SP_ASSIGN_OR_RETURN(PlanResult pruned, plan(req, ev));
  const NoBound all(ev);
  SP_ASSIGN_OR_RETURN(PlanResult exhaustive, plan(req, all));

  Outcome o;
  o.candidates = pruned.candidates;
  o.fit = pruned.fit;
  o.simulated_pruned = pruned.simulated;
  o.simulated_exhaustive = exhaustive.simulated;
  o.pruned_s = pruned.search_s;
  o.exhaustive_s = exhaustive.search_s;
  auto differ = [&](const std::string& what) {
    if (o.same) o.difference = what;
    o.same = false;
  };
  if (exhaustive.bounded != 0 || exhaustive.simulated + exhaustive.failed != exhaustive.fit)
    differ("the exhaustive side did not simulate every fitting layout");
  if (pruned.fit != exhaustive.fit) differ("the two sides fit different counts");
  if (pruned.plans.size() != exhaustive.plans.size()) {
    differ("pruned search ranked " + std::to_string(pruned.plans.size()) + " plans, exhaustive " +
           std::to_string(exhaustive.plans.size()));
  }
  for (size_t i = 0; i < std::min(pruned.plans.size(), exhaustive.plans.size()); ++i) {
    const RankedPlan& a = pruned.plans[i];
    const RankedPlan& b = exhaustive.plans[i];
    const std::string la = format_layout(a.layout), lb = format_layout(b.layout);
    if (la != lb || a.prediction.iteration != b.prediction.iteration) {
      differ("#" + std::to_string(i + 1) + ": pruned " + la + " (" +
             format_duration(a.prediction.iteration) + ", bound " + format_duration(a.lower_bound) +
             "), exhaustive " + lb + " (" + format_duration(b.prediction.iteration) + ")");
    } else if (a.reason != b.reason) {
      // The reason compares #i with #i+1: the same text means the same next layout.
      differ("#" + std::to_string(i + 1) + " " + la + ": reasons differ (pruned \"" + a.reason +
             "\", exhaustive \"" + b.reason + "\")");
    }
  }
  return o;
}

}  // namespace scaleplan::planner::safety
