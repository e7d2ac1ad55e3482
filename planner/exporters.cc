#include "planner/exporters.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/data_dir.h"
#include "core/json_util.h"
#include "planner/export_megatron_bridge.h"
#include "planner/export_torchtitan.h"
#include "planner/export_util.h"
#include "sim/framework.h"

namespace scaleplan::planner {
namespace {

using models::ModelSpec;

// One line per comment, for formats with '#' comments (shell, TOML, YAML).
// Formats without a sliding-window key: the model definition has to provide it.
std::string sliding_window_note(const models::ModelSpec& m, const std::string& format) {
  return format + " has no sliding-window key: scaleplan simulated " +
         std::to_string(m.num_sliding_layers()) + " of the " + std::to_string(m.num_layers) +
         " layers attending to the last " + std::to_string(m.sliding_window) +
         " tokens, which the model code must do; with full attention there the run is slower.";
}

int64_t accumulation(const Layout& l) { return l.num_microbatches(); }

// ---------------------------------------------------------------------------------------------
// Megatron-LM

class FlagList {
 public:
  void add(std::string flag) { flags_.push_back(std::move(flag)); }
  void add(std::string flag, const std::string& value) { flags_.push_back(flag + " " + value); }
  void add(std::string flag, int64_t value) { add(std::move(flag), std::to_string(value)); }
  std::string join(const std::string& indent) const {
    std::string s;
    for (size_t i = 0; i < flags_.size(); ++i) {
      s += indent + flags_[i] + (i + 1 < flags_.size() ? " \\\n" : "\n");
    }
    return s;
  }

 private:
  std::vector<std::string> flags_;
};

// A float as YAML 1.1 (PyYAML, which nanotron's loader uses) reads a float: "1e-05" without a
// point is a string there, and nanotron's strict loader refuses a string or an int for a float.
std::string yaml_float(double v) {
  std::string s = number(v);
  const size_t e = s.find_first_of("eE");
  std::string mantissa = s.substr(0, e), exponent = e == std::string::npos ? "" : s.substr(e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  if (!exponent.empty() && exponent[1] != '-' && exponent[1] != '+') exponent.insert(1, "+");
  return mantissa + exponent;
}

// RoPE base and scaling as Megatron-LM's options say them (arguments.py: --rotary-base is an
// int; --use-rope-scaling applies Llama 3.1's scaling with low/high frequency factors 1 and 4 and
// 8,192 original positions, RotaryEmbedding._apply_scaling; MLA takes YaRN through
// MLATransformerConfig, whose original positions (4,096) and betas (32, 1) have no flag).
void megatron_rope(const ModelSpec& m, FlagList& f, std::vector<std::string>& notes) {
  const models::RopeSpec& r = m.rope;
  if (r.theta != std::floor(r.theta)) {
    notes.push_back("Megatron-LM's --rotary-base takes an integer; rope_theta " + number(r.theta) +
                    " is written rounded.");
  }
  f.add("--rotary-base", static_cast<int64_t>(std::llround(r.theta)));
  // The rotated share of each head (partial_rotary_factor; Nemotron 0.5).
  if (r.fraction < 1.0) f.add("--rotary-percent", number(r.fraction));
  if (r.scaling.empty()) return;
  if (r.scaling == "llama3") {
    f.add("--use-rope-scaling");
    f.add("--rope-scaling-factor", number(r.factor));
    if (r.low_freq_factor != 1.0 || r.high_freq_factor != 4.0 || r.original_max_position != 8192) {
      notes.push_back(
          "Megatron-LM's Llama 3 RoPE scaling fixes low_freq_factor 1, high_freq_factor 4 and "
          "8192 original positions; this config's differ, so the run's RoPE differs.");
    }
  } else if (r.scaling == "yarn" && m.mla) {
    f.add("--rope-type", "yarn");
    f.add("--rotary-scaling-factor", number(r.factor));
    f.add("--mscale", number(r.mscale));
    f.add("--mscale-all-dim", number(r.mscale_all_dim));
    if (r.original_max_position != 4096 || r.beta_fast != 32 || r.beta_slow != 1) {
      notes.push_back(
          "Megatron-LM's MLA YaRN takes original_max_position_embeddings 4096, beta_fast 32 and "
          "beta_slow 1 from MLATransformerConfig (no flags); this config's differ.");
    }
  } else if (r.scaling == "yarn") {
    f.add("--position-embedding-type", "yarn");
    f.add("--rotary-scaling-factor", number(r.factor));
    if (r.original_max_position > 0)
      f.add("--yarn-original-max-position-embeddings", r.original_max_position);
    f.add("--yarn-beta-fast", number(r.beta_fast));
    f.add("--yarn-beta-slow", number(r.beta_slow));
    f.add("--mscale", number(r.mscale));
    f.add("--mscale-all-dim", number(r.mscale_all_dim));
  } else if (r.scaling == "linear" && r.factor == std::floor(r.factor)) {
    f.add("--rotary-seq-len-interpolation-factor", static_cast<int64_t>(r.factor));
  } else {
    notes.push_back("Megatron-LM has no flag for " + r.scaling + " RoPE scaling (factor " +
                    number(r.factor) + "); the run uses unscaled RoPE.");
  }
}

// The router as the HF config sets it (moe_utils.topk_routing_with_score_function: softmax over
// the top-k logits by default, which is softmax-then-top-k renormalized; --moe-router-pre-softmax
// for softmax without renormalization; sigmoid scores are always renormalized for top-k > 1).
void megatron_router(const models::MoeSpec& e, FlagList& f, std::vector<std::string>& notes) {
  if (e.score_function == "sigmoid") {
    f.add("--moe-router-score-function", "sigmoid");
    if (!e.norm_topk_prob && e.top_k > 1) {
      notes.push_back(
          "Megatron-core renormalizes sigmoid router weights over the top-k; this "
          "config does not (norm_topk_prob false).");
    }
  } else if (!e.norm_topk_prob) {
    f.add("--moe-router-pre-softmax");
  }
  // DeepSeek-V3's aux-loss-free balancing: a per-expert bias added to the scores for the top-k
  // choice only (e_score_correction_bias).
  if (e.router_bias && e.score_function == "sigmoid") f.add("--moe-router-enable-expert-bias");
  if (e.routed_scaling != 1.0) f.add("--moe-router-topk-scaling-factor", number(e.routed_scaling));
  if (e.aux_loss_coeff > 0) {
    f.add("--moe-router-load-balancing-type", e.seq_aux ? "seq_aux_loss" : "aux_loss");
    f.add("--moe-aux-loss-coeff", number(e.aux_loss_coeff));
  } else {
    f.add("--moe-router-load-balancing-type", "none");
  }
}

// The site-specific values of a Megatron-LM script, as shell variables it requires: (name, what).
std::vector<std::pair<std::string, std::string>> megatron_placeholders(bool multi_node) {
  std::vector<std::pair<std::string, std::string>> v = {
      {"DATA_PATH", "your dataset prefix (tools/preprocess_data.py output, no .bin/.idx)"},
      {"TOKENIZER_MODEL", "your Hugging Face tokenizer name or folder"},
      {"TRAIN_ITERS", "the number of iterations"},
      {"LR", "the peak learning rate"},
      {"MIN_LR", "the final learning rate"},
      {"LR_WARMUP_ITERS", "the warm-up iterations"}};
  if (multi_node) {
    v.push_back({"NODE_RANK", "this node's index, 0 on the first"});
    v.push_back({"MASTER_ADDR", "the first node's address"});
  }
  return v;
}

// What Megatron-LM's arguments at the pinned version cannot build, each named: --emit megatron
// refuses the model rather than train another one.
Status megatron_model_supported(const ModelSpec& m, int64_t seq_len) {
  std::vector<std::string> missing;
  if (m.ffn_kind == models::FfnKind::kGeGlu)
    missing.push_back("a GeGLU FFN (--swiglu is SiLU-gated, --quick-geglu is gpt-oss's)");
  if (m.sandwich_norm) missing.push_back("norms on the attention and FFN outputs (Gemma-2/3)");
  if (m.parallel_residual)
    missing.push_back("a parallel attention and FFN residual (use_parallel_residual)");
  if (m.attn_softcap > 0 || m.final_softcap > 0) missing.push_back("logit soft-capping");
  if (m.attention_chunk > 0 && m.attention_chunk < seq_len && m.num_chunked_layers() > 0)
    missing.push_back("chunked attention (attention_chunk_size " +
                      std::to_string(m.attention_chunk) + " < seq " + std::to_string(seq_len) +
                      ")");
  if (!missing.empty()) {
    std::string list;
    for (size_t i = 0; i < missing.size(); ++i)
      list += (i == 0 ? "" : i + 1 == missing.size() ? " or " : ", ") + missing[i];
    return Status::invalid("Megatron-LM core_v0.19.0 has no argument for " + list + " (" +
                           m.model_type + "): --emit megatron would train another model");
  }
  // Llama 4 at a sequence within one chunk is expressible flag by flag (--no-rope-freq,
  // --qk-l2-norm, --moe-apply-probs-on-input, ...) but that combination has not been checked
  // against the pinned source: not written.
  if (m.model_type == "llama4_text")
    return Status::invalid(
        "--emit megatron does not write Llama 4 yet: its NoPE layers, q/k L2 norm and router "
        "scores on the expert input have not been checked together against Megatron-LM "
        "core_v0.19.0");
  return Status::ok();
}

Export megatron(const ExportInput& in) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
  Export out;
  FlagList f;
  // Model shape (examples/llama/train_llama3_8b_h100_fp8.sh; ecosystem.md §2.1).
  f.add("--num-layers", m.num_layers);
  f.add("--hidden-size", m.hidden);
  if (m.ffn > 0) f.add("--ffn-hidden-size", m.ffn);
  f.add("--num-attention-heads", m.num_heads);
  if (m.num_kv_heads != m.num_heads && !m.mla) {
    f.add("--group-query-attention");
    f.add("--num-query-groups", m.num_kv_heads);
  }
  if (!m.mla) f.add("--kv-channels", m.head_dim);
  f.add("--seq-length", in.seq_len);
  f.add("--max-position-embeddings", std::max(in.seq_len, m.max_position));
  f.add("--vocab-size", m.vocab);
  // Megatron pads the vocabulary to a multiple of make_vocab_size_divisible_by · tp (default 128):
  // the largest power of two up to 128 that keeps this vocabulary unpadded
  // (_vocab_size_with_padding).
  int64_t vocab_multiple = 128;
  while (vocab_multiple > 1 && m.vocab % (vocab_multiple * l.tp) != 0) vocab_multiple /= 2;
  f.add("--make-vocab-size-divisible-by", vocab_multiple);
  if (m.vocab % (vocab_multiple * l.tp) != 0) {
    out.notes.push_back("the vocabulary (" + std::to_string(m.vocab) +
                        ") does not divide by tp; Megatron-LM pads it to a multiple of " +
                        std::to_string(l.tp) + ".");
  }
  f.add("--norm-epsilon", number(m.norm_eps));
  if (m.learned_positions) {
    f.add("--position-embedding-type", "learned_absolute");
  } else {
    f.add("--position-embedding-type", "rope");
    megatron_rope(m, f, out.notes);
  }
  if (m.model_type == "gpt_oss") {
    // gpt-oss's gated unit: (up + 1) · gate · sigmoid(1.702 · gate), both clamped, as
    // Megatron-core's gpt-oss recipe spells it; its per-head sink logits are a learnable softmax
    // offset.
    f.add("--quick-geglu");
    f.add("--glu-linear-offset", "1.0");
    if (m.glu_clamp > 0) {
      char clamp[32];
      std::snprintf(clamp, sizeof clamp, "%g", m.glu_clamp);
      f.add("--activation-func-clamp-value", clamp);
    }
  } else if (m.ffn_kind == models::FfnKind::kSwiGlu) {
    f.add("--swiglu");
  }
  if (m.attention_sinks) f.add("--softmax-type", "learnable");
  if (m.ffn_kind == models::FfnKind::kRelu2) f.add("--squared-relu");
  f.add("--normalization", m.norm == models::NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm");
  // Nemotron's LayerNorm1P scales by 1 + weight (layernorm_zero_centered_gamma).
  if (m.model_type == "nemotron") f.add("--apply-layernorm-1p");
  if (!m.tied_embeddings) f.add("--untie-embeddings-and-output-weights");
  // Megatron-core's add_bias_linear puts a bias on every linear; add_qkv_bias on q, k, v alone
  // (Qwen2). A model with biases on some linears only has no other flag for it.
  if (!m.has_o_bias() && !m.has_ffn_bias()) {
    f.add("--disable-bias-linear");
    if (m.has_qkv_bias()) f.add("--add-qkv-bias");
  } else if (!(m.has_qkv_bias() && m.has_o_bias() && m.has_ffn_bias())) {
    out.notes.push_back(
        "Megatron-LM biases every linear (--add-bias-linear) or none but q, k, v "
        "(--add-qkv-bias); this model's biases on some linears only are written as biases on all.");
  }
  if (m.qk_norm) f.add("--qk-layernorm");
  if (m.sliding_window > 0) {
    // Megatron-core keeps keys j >= i - left (get_sliding_window_causal_mask): left = w - 1 gives
    // the config's w keys, itself included. Its pattern is 1-indexed, 1 = sliding
    // (is_layer_window_attention); omitted when every layer slides.
    f.add("--window-size", std::to_string(m.sliding_window - 1) + ",0");
    std::string pattern = "[";
    bool all = true;
    for (int64_t i = 0; i < m.num_layers; ++i) {
      const bool sliding = m.attention_window(i) > 0;
      all = all && sliding;
      pattern += (i ? "," : "") + std::string(sliding ? "1" : "0");
    }
    if (!all) f.add("--window-attn-skip-freq", "'" + pattern + "]'");
  }
  if (m.mla) {
    f.add("--multi-latent-attention");
    if (m.mla->q_lora_rank > 0) f.add("--q-lora-rank", m.mla->q_lora_rank);
    f.add("--kv-lora-rank", m.mla->kv_lora_rank);
    f.add("--qk-head-dim", m.mla->qk_nope_head_dim);
    f.add("--qk-pos-emb-head-dim", m.mla->qk_rope_head_dim);
    f.add("--v-head-dim", m.mla->v_head_dim);
  }
  if (m.moe) {
    const auto& e = *m.moe;
    f.add("--num-experts", e.num_experts);
    f.add("--moe-router-topk", e.top_k);
    f.add("--moe-ffn-hidden-size", e.expert_ffn);
    if (e.num_shared_experts > 0) {
      f.add("--moe-shared-expert-intermediate-size", e.num_shared_experts * e.shared_expert_ffn);
    }
    if (e.first_dense_layers > 0 || e.layer_freq != 1 || !e.dense_layers.empty()) {
      // Megatron takes the per-layer pattern as a Python list expression: 1 = MoE, 0 = dense.
      std::string pattern = "[";
      for (int64_t i = 0; i < m.num_layers; ++i) {
        pattern += (i ? "," : "") + std::string(m.is_moe_layer(i) ? "1" : "0");
      }
      f.add("--moe-layer-freq", "'" + pattern + "]'");
    }
    // DeepSeek's group-limited routing, which also bounds the nodes a token's dispatch reaches.
    if (e.n_group > 1 && e.topk_group > 0) {
      f.add("--moe-router-num-groups", e.n_group);
      f.add("--moe-router-group-topk", e.topk_group);
    }
    megatron_router(e, f, out.notes);
    f.add("--moe-grouped-gemm");
    if (e.dispatcher == models::MoeDispatcher::kDeepEp) {
      f.add("--moe-token-dispatcher-type", "flex");
      f.add("--moe-enable-deepep");
    } else {
      f.add("--moe-token-dispatcher-type", "alltoall");
    }
  }
  // DeepSeek's multi-token-prediction modules, trained on the last stage as simulated
  // (Megatron-core MultiTokenPredictionBlock; arguments.py --mtp-num-layers, off unless given).
  if (m.mtp_layers > 0) f.add("--mtp-num-layers", m.mtp_layers);
  // Batch.
  f.add("--micro-batch-size", l.mbs);
  f.add("--global-batch-size", l.global_batch());
  // Parallelism. DP is what is left: world / (TP·PP·CP) (arguments.py).
  f.add("--tensor-model-parallel-size", l.tp);
  f.add("--pipeline-model-parallel-size", l.pp);
  // DualPipeV runs as 1F1B here (note below): each stage takes its rank's two chunks.
  std::vector<int> chunks = chunk_layers(in);
  if (v_shaped(l.schedule) && chunks.size() == 2 * static_cast<size_t>(l.pp)) {
    const std::vector<int> v = chunks;
    chunks.resize(static_cast<size_t>(l.pp));
    for (size_t s = 0; s < chunks.size(); ++s) chunks[s] = v[s] + v[v.size() - 1 - s];
  }
  // Megatron-core's own way to count the embedding and the loss as layers of the split: the
  // units (layers + 1 for each) must divide by pp and each stage's by vpp
  // (TransformerConfig.__post_init__); other splits go through the explicit layout string.
  const int64_t units = m.num_layers + (l.pp_embedding ? 1 : 0) + (l.pp_loss ? 1 : 0);
  const int64_t chunk_count = static_cast<int64_t>(l.pp) * l.vpp_degree();
  const bool accounted =
      (l.pp_embedding || l.pp_loss) && !v_shaped(l.schedule) && units % chunk_count == 0;
  if (accounted) {
    if (l.pp_embedding) f.add("--account-for-embedding-in-pipeline-split");
    if (l.pp_loss) f.add("--account-for-loss-in-pipeline-split");
  }
  if (l.vpp_degree() > 1) {
    if (accounted) {
      f.add("--num-virtual-stages-per-pipeline-rank", l.vpp_degree());
    } else if (is_even(chunks)) {
      f.add("--num-layers-per-virtual-pipeline-stage", chunks.front());
    } else {
      // The layout string sets the virtual stages itself; validate_args refuses it together with
      // --num-virtual-stages-per-pipeline-rank ("No more than one of the following arguments").
      f.add("--pipeline-model-parallel-layout",
            "'" + megatron_layout_string(chunks, m.mtp_layers) + "'");
    }
    // The interleaved schedule's sends and receives run asynchronously, as simulated: Megatron-LM's
    // overlap_p2p_comm is on unless --no-overlap-p2p-communication (arguments.py), and without it
    // Megatron-LM would also refuse interleaving at pp = 2.
    // Megatron-core refuses a last micro-batch group of 1..pp-1 (schedules.py); the simulation
    // ran the group size that it accepts (core/layout.h, interleave_group_size).
    const int64_t group = interleave_group_size(l.pp, l.num_microbatches());
    if (group != l.pp) f.add("--microbatch-group-size-per-virtual-pipeline-stage", group);
  } else if (l.pp > 1 && !accounted && !is_even(chunks)) {
    // Megatron pins the first and last stages and splits the rest evenly; other uneven splits go
    // through the explicit layout string.
    const std::vector<int> middle(chunks.begin() + 1, chunks.end() - 1);
    if (middle.empty() || is_even(middle)) {
      const int mid = middle.empty() ? -1 : middle.front();
      if (chunks.front() != mid) f.add("--decoder-first-pipeline-num-layers", chunks.front());
      if (chunks.back() != mid) f.add("--decoder-last-pipeline-num-layers", chunks.back());
    } else {
      f.add("--pipeline-model-parallel-layout",
            "'" + megatron_layout_string(chunks, m.mtp_layers) + "'");
    }
  }
  if (l.sequence_parallel()) f.add("--sequence-parallel");
  if (l.tp > 1 && l.sequence_parallel() && in.tp_comm_overlap) {
    // Simulated with Transformer Engine's userbuffer overlap (plan --tp-comm-overlap); Megatron's
    // validate_args asserts sequence parallelism with it ("Tensor parallel communication/GEMM
    // overlap can happen only when sequence parallelism is enabled"), which the branch ensures.
    f.add("--tp-comm-overlap");
  } else if (l.tp > 1 && l.sequence_parallel()) {
    // The simulation exposes every TP collective (docs/simulator.md, "Known gaps"), so the plan
    // does not turn on Transformer Engine's userbuffer overlap (--tp-comm-overlap): the exported
    // run is the simulated one.
    out.notes.push_back(
        "TP communication is not overlapped with the GEMMs, as simulated; Transformer Engine's "
        "userbuffer overlap (tp-comm-overlap) may hide part of it where your cluster supports it.");
  }
  if (l.cp > 1) {
    f.add("--context-parallel-size", l.cp);
    if (m.sliding_window > 0 && l.cp_comm_type() == CpComm::kP2p) {
      // Transformer Engine refuses sliding windows on the K/V ring ("The context parallel
      // running configs cannot support sliding window attetnion!" unless cp_comm_type is a2a or
      // all_gather).
      f.add("--cp-comm-type", "all_gather");
      out.notes.push_back(
          "sliding-window layers need --cp-comm-type all_gather or a2a (Transformer Engine "
          "refuses them on the p2p ring); all_gather moves the same K/V bytes at once where "
          "scaleplan simulated the ring's cp - 1 steps beside the attention (cp_comm=all_gather "
          "simulates it).");
    } else {
      // As simulated: the ring (p2p), K/V gathered at once, or Ulysses all-to-alls.
      f.add("--cp-comm-type", std::string(to_string(l.cp_comm_type())));
    }
  }
  if (m.moe) {
    f.add("--expert-model-parallel-size", l.ep);
    f.add("--expert-tensor-parallel-size", l.etp);
  }
  if (l.recompute == Recompute::kSelective) {
    f.add("--recompute-granularity", "selective");  // recompute-modules default: core_attn
    if (l.recompute_modules) {
      std::string modules = format_recompute_modules(*l.recompute_modules);
      std::replace(modules.begin(), modules.end(), '+', ' ');
      f.add("--recompute-modules", modules);
    }
  } else if (l.recompute == Recompute::kFull) {
    f.add("--recompute-granularity", "full");
    f.add("--recompute-method", "uniform");
    f.add("--recompute-num-layers", 1);
  }
  // ZeRO: the distributed optimizer shards optimizer states (ZeRO-1); Megatron FSDP's sharding
  // strategies are documented as the ZeRO-2/3 equivalents (ecosystem.md §2.1). ZeRO-1/2 gather
  // the updated parameters as the simulation of Megatron-core's conventions does: overlapping the
  // next forward without pipelining, aligned across the stages with interleaving, after the step
  // otherwise.
  const sim::ParamGather megatron_gather =
      sim::param_gather_for(sim::framework(FrameworkId::kMegatron).timing, l);
  switch (l.zero) {
    case 0:
      f.add("--overlap-grad-reduce");
      break;
    case 1:
      f.add("--use-distributed-optimizer");
      f.add("--overlap-grad-reduce");
      // The parameter gather overlaps the next forward where the simulation overlaps it
      // (megatron_gather, sim::param_gather_for): without pipelining, and aligned across the
      // stages with interleaving, which Megatron-LM does by itself: align_param_gather is on
      // unless --no-align-param-gather, and validate_args turns it off for the other schedules.
      if (megatron_gather != sim::ParamGather::kAfterStep) f.add("--overlap-param-gather");
      break;
    case 2:
      f.add("--use-megatron-fsdp");
      f.add("--data-parallel-sharding-strategy", "optim_grads");
      f.add("--overlap-grad-reduce");
      if (megatron_gather != sim::ParamGather::kAfterStep) f.add("--overlap-param-gather");
      break;
    default:
      f.add("--use-megatron-fsdp");
      f.add("--data-parallel-sharding-strategy", "optim_grads_params");
      f.add("--overlap-grad-reduce");
      f.add("--overlap-param-gather");
      break;
  }
  // Megatron FSDP saves only fsdp_dtensor checkpoints ("Megatron FSDP only supports fsdp_dtensor
  // checkpoint format", arguments.py).
  if (l.zero >= 2) f.add("--ckpt-format", "fsdp_dtensor");
  f.add("--bf16");
  if (l.dtype == DType::kFp8) {
    f.add("--fp8-format", "hybrid");
  }
  // Data, tokenizer, schedule and length: the site's, from the variables the script requires.
  f.add("--data-path", "\"$DATA_PATH\"");
  f.add("--tokenizer-type", "HuggingFaceTokenizer");
  f.add("--tokenizer-model", "\"$TOKENIZER_MODEL\"");
  f.add("--train-iters", "\"$TRAIN_ITERS\"");
  f.add("--lr", "\"$LR\"");
  f.add("--min-lr", "\"$MIN_LR\"");
  f.add("--lr-decay-style", "cosine");
  f.add("--lr-warmup-iters", "\"$LR_WARMUP_ITERS\"");
  if (l.pp > 1) {
    if (l.schedule == Schedule::kAfab) {
      out.notes.push_back(
          "Megatron-LM runs pipelines with 1F1B; AFAB (GPipe) has no flag, and 1F1B has the same "
          "bubble with less activation memory.");
    } else if (l.schedule == Schedule::kZbH1) {
      out.notes.push_back(
          "Megatron-LM mainline has no ZB-H1 schedule; these flags run 1F1B, which has a larger "
          "bubble than the prediction assumes.");
    } else if (l.schedule == Schedule::kDualPipe) {
      out.notes.push_back("Megatron-LM has no DualPipe schedule; these flags run 1F1B.");
    } else if (v_shaped(l.schedule)) {
      out.notes.push_back("Megatron-LM mainline has no " +
                          std::string(l.schedule == Schedule::kZbV ? "ZB-V" : "DualPipeV") +
                          " schedule; these flags run 1F1B.");
    }
  }
  const int64_t nproc = std::min<int64_t>(in.gpus, in.gpus_per_node);
  const int64_t nnodes = (in.gpus + nproc - 1) / nproc;
  std::ostringstream o;
  o << "#!/bin/bash\n" << header_comment(in, out.notes);
  // Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP before Blackwell (one
  // hardware queue keeps the TP/CP communication kernels in issue order), unless Megatron FSDP
  // runs, which wants more queues and only warns (arguments.py, validate_args). Its example
  // scripts export it.
  if ((l.tp > 1 || l.cp > 1) && l.zero < 2 && in.gpu_sm < 100)
    o << "export CUDA_DEVICE_MAX_CONNECTIONS=1\n";
  // ... and Megatron FSDP asserts the opposite ("FSDP always requires CUDA_DEVICE_MAX_CONNECTIONS
  // value large than one"): a value of 1 left in the environment must go.
  if (l.zero >= 2) o << "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  // Site-specific values: the script stops with the variable's name when one is unset.
  o << "# Set these for your site; the values the simulation does not depend on are left to you.\n";
  for (const auto& [var, what] : megatron_placeholders(nnodes > 1))
    o << ": \"${" << var << ":?set " << var << " to " << what << "}\"\n";
  if (nnodes > 1) {
    o << "torchrun --nproc_per_node " << nproc << " --nnodes " << nnodes
      << " --node_rank \"$NODE_RANK\" --master_addr \"$MASTER_ADDR\" --master_port "
         "\"${MASTER_PORT:-6000}\" \\\n";
  } else {
    o << "torchrun --standalone --nproc_per_node " << nproc << " \\\n";
  }
  o << "    pretrain_gpt.py \\\n" << f.join("    ");
  out.content = o.str();
  return out;
}

// ---------------------------------------------------------------------------------------------
// torchtitan (TOML era, ecosystem.md §2.3)

}  // namespace

// Shared with the current-torchtitan exporter (planner/export_util.h).
std::string torchtitan_schedule(Schedule s) {
  switch (s) {
    case Schedule::kAfab:
      return "GPipe";
    case Schedule::k1F1B:
      return "1F1B";
    case Schedule::kInterleaved:
      return "Interleaved1F1B";
    case Schedule::kZbH1:
      return "InterleavedZeroBubble";
    case Schedule::kDualPipe:
    case Schedule::kDualPipeV:
      return "DualPipeV";
    case Schedule::kZbV:
      return "ZBVZeroBubble";
  }
  return "1F1B";
}

// The framework definitions scaleplan targets (planner/frameworks/<name>.json, extracted at the
// pinned commit by scripts/framework_defs/).
Result<Json> framework_defs(const std::string& name) {
  return read_json_file(data_dir() + "/planner/frameworks/" + name + ".json");
}

std::string short_commit(const Json& defs) {
  return defs.value("commit", std::string("?")).substr(0, 7);
}

// torchtitan's model module for a HF model_type (torchtitan/models/<module>), or "".
std::string torchtitan_module(const ModelSpec& m) {
  if (m.model_type == "llama") return "llama3";
  if (m.model_type == "qwen3" || m.model_type == "qwen3_moe") return "qwen3";
  if (m.model_type == "deepseek_v3") return "deepseek_v3";
  if (m.model_type == "llama4_text") return "llama4";
  return "";
}

// The value of a flavor's HF-equivalent field on this model, or nullopt for a field the model
// does not have.
std::optional<double> model_field(const ModelSpec& m, const std::string& key) {
  const auto* e = m.moe ? &*m.moe : nullptr;
  if (key == "hidden_size") return m.hidden;
  if (key == "num_hidden_layers") return m.num_layers;
  if (key == "num_attention_heads") return m.num_heads;
  if (key == "num_key_value_heads") return m.num_kv_heads;
  if (key == "head_dim") return m.head_dim;
  if (key == "intermediate_size") return m.ffn;
  if (key == "vocab_size") return m.vocab;
  if (key == "tie_word_embeddings") return m.tied_embeddings ? 1 : 0;
  if (key == "rope_theta") return m.rope.theta;
  if (key == "rms_norm_eps") return m.norm_eps;
  if (m.mla) {
    if (key == "q_lora_rank") return m.mla->q_lora_rank;
    if (key == "kv_lora_rank") return m.mla->kv_lora_rank;
    if (key == "qk_nope_head_dim") return m.mla->qk_nope_head_dim;
    if (key == "qk_rope_head_dim") return m.mla->qk_rope_head_dim;
    if (key == "v_head_dim") return m.mla->v_head_dim;
  }
  if (e != nullptr) {
    if (key == "num_experts" || key == "n_routed_experts") return e->num_experts;
    if (key == "num_experts_per_tok") return e->top_k;
    if (key == "moe_intermediate_size") return e->expert_ffn;
    if (key == "first_k_dense_replace") return e->first_dense_layers;
    if (key == "n_shared_experts") return e->num_shared_experts;
    if (key == "n_group") return e->n_group;
    if (key == "topk_group") return e->topk_group;
    if (key == "routed_scaling_factor") return e->routed_scaling;
  }
  return std::nullopt;
}

// The torchtitan flavor whose shape is this model's: every shape field equal; RoPE, norm epsilon
// and router details, which torchtitan keeps in the flavor too, listed where they differ.
Result<Flavor> torchtitan_flavor(const ModelSpec& m, const Json& defs) {
  const std::string version =
      "torchtitan " + defs.value("ref", std::string()) + " (" + short_commit(defs) + ")";
  const std::string module = torchtitan_module(m);
  if (module.empty() || !defs["flavors"].contains(module)) {
    std::string list;
    for (const auto& x : defs["supported_models"])
      list += (list.empty() ? "" : ", ") + x.get<std::string>();
    return Status::invalid(version + " has no model for model_type '" + m.model_type +
                           "' (its models: " + list + "); --emit torchtitan cannot express it");
  }
  static const std::set<std::string> kTraining = {
      "rope_theta", "rms_norm_eps", "rope_scaling", "scoring_func", "routed_scaling_factor",
      "n_group",    "topk_group"};
  int compared = 0;
  for (const auto& [name, flavor] : defs["flavors"][module].items()) {
    if (name.rfind("debugmodel", 0) == 0) continue;
    const Json& shape = flavor["hf_shape"];
    if (!shape.is_object()) continue;
    ++compared;
    bool same = true;
    Flavor f{module, name, {}};
    for (const auto& [key, want] : shape.items()) {
      if (key == "rope_scaling" || key == "scoring_func") {
        const std::string have = key == "rope_scaling" ? m.rope.scaling
                                 : m.moe               ? m.moe->score_function
                                                       : "";
        const std::string theirs =
            key == "rope_scaling" ? want.value("rope_type", "") : want.get<std::string>();
        if (have != theirs)
          f.differences.push_back(key + " " + (theirs.empty() ? "none" : theirs) +
                                  " (this model: " + (have.empty() ? "none" : have) + ")");
        continue;
      }
      if (!want.is_number() && !want.is_boolean()) continue;
      const double w = want.is_boolean() ? (want.get<bool>() ? 1 : 0) : want.get<double>();
      const std::optional<double> have = model_field(m, key);
      if (key == "intermediate_size" && m.num_moe_layers() == m.num_layers) continue;
      if (kTraining.count(key)) {
        if (!have || *have != w)
          f.differences.push_back(key + " " + number(w) + " (this model: " +
                                  (have ? number(*have) : std::string("none")) + ")");
        continue;
      }
      if (!have || *have != w) {
        same = false;
        break;
      }
    }
    if (same) return f;
  }
  if (compared == 0)
    return Status::invalid(version + "'s " + module +
                           " flavors have no extracted HF shape (planner/frameworks/"
                           "torchtitan.json), so no flavor can be checked to be " +
                           m.name + ": --emit torchtitan does not write it");
  return Status::invalid(version + " has no " + module + " flavor with this model's shape (" +
                         m.name + ": hidden " + std::to_string(m.hidden) + ", " +
                         std::to_string(m.num_layers) +
                         " layers); register one in "
                         "torchtitan/models/" +
                         module + "/__init__.py to export it");
}

namespace {

// The modules of each pipeline chunk, in model order, as torchtitan names them
// (generate_llm_fqn_per_model_part): the embedding with the first, the final norm and the output
// with the last.
std::string torchtitan_fqns(const std::vector<int>& chunks) {
  std::string s = "[";
  int layer = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    s += c ? ", [" : "[";
    bool first = true;
    auto add = [&](const std::string& name) {
      s += (first ? "\"" : ", \"") + name + "\"";
      first = false;
    };
    if (c == 0) add("tok_embeddings");
    for (int i = 0; i < chunks[c]; ++i) add("layers." + std::to_string(layer++));
    if (c + 1 == chunks.size()) {
      add("norm");
      add("output");
    }
    s += "]";
  }
  return s + "]";
}

Result<Export> torchtitan(const ExportInput& in) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
  Export out;
  SP_ASSIGN_OR_RETURN(const Json defs, framework_defs("torchtitan"));
  SP_ASSIGN_OR_RETURN(const Flavor flavor, torchtitan_flavor(m, defs));
  if (!flavor.differences.empty()) {
    std::string d;
    for (const auto& x : flavor.differences) d += (d.empty() ? "" : ", ") + x;
    out.notes.push_back("torchtitan's " + flavor.module + " flavor " + flavor.name +
                        " has this model's shape but sets " + d +
                        "; the run trains with the flavor's values.");
  }
  // torchtitan's FSDP2 shards parameters, gradients and optimizer states over the shard mesh
  // (ZeRO-3); resharding never after forward keeps the parameters gathered through the backward
  // (ZeRO-2-like); plain replication is ZeRO-0. There is no ZeRO-1 of its own.
  int64_t replicate = l.dp_degree(), shard = 1;
  std::string reshard = "default";
  if (l.zero >= 1) {
    replicate = 1;
    shard = l.dp_degree();
    reshard = l.zero == 3 ? "always" : "never";
  }
  if (l.zero == 1) {
    out.notes.push_back(
        "torchtitan has no ZeRO-1; FSDP2 with fsdp_reshard_after_forward = \"never\" (ZeRO-2-like) "
        "is the closest and also shards gradients.");
  }
  const std::vector<int> chunks = chunk_layers(in);
  if (l.pp > 1 && l.schedule == Schedule::kZbH1 && l.vpp_degree() == 1) {
    out.notes.push_back(
        "torchtitan's zero-bubble schedules are multi-stage (InterleavedZeroBubble, "
        "ZBVZeroBubble); "
        "with one stage per rank InterleavedZeroBubble is the closest to ZB-H1.");
  }
  if (l.pp > 1 && l.schedule == Schedule::kDualPipe) {
    out.notes.push_back(
        "torchtitan's DualPipeV is DualPipe cut in half: one copy of the parameters, the layers in "
        "2·pp chunks placed in a V. scaleplan simulated DualPipe itself (two copies, 2x the "
        "parameter, gradient and optimizer memory per GPU), so this run needs less memory.");
  }
  if (l.cp > 1 && l.cp_comm_type() == CpComm::kA2a) {
    out.notes.push_back(
        "torchtitan's context parallelism has no all-to-all (Ulysses) variant; this config runs "
        "the K/V ring, which scaleplan simulates with cp_comm=p2p.");
  }
  if (m.tied_embeddings && l.pp > 1) {
    out.notes.push_back(
        "torchtitan refuses tied embeddings under pipeline parallelism (\"Weight tying is not "
        "supported with Pipeline Parallel\"); this run needs the model untied "
        "(enable_weight_tying = False), which adds the output matrix to the last stage.");
  }
  if (m.sliding_window > 0) out.notes.push_back(sliding_window_note(m, "torchtitan's TOML"));
  if (m.mtp_layers > 0) {
    const std::string n = std::to_string(m.mtp_layers);
    out.notes.push_back(
        l.pp > 1 ? "torchtitan does not run DeepSeek's MTP modules under pipeline parallelism "
                   "(models/deepseek_v3/MTP.md); this run trains without the " +
                       n +
                       " scaleplan simulated on the last stage, so it needs less time and "
                       "memory there than predicted."
                 : "scaleplan simulated DeepSeek's " + n +
                       " MTP module(s); torchtitan trains them when its model config is built "
                       "with num_mtp_layers = " +
                       n + " (build_model_config; no TOML key).");
  }
  if (l.recompute == Recompute::kSelective &&
      !sim::framework(in.framework).ops.op_level_selective_ac) {
    out.notes.push_back(
        "torchtitan's selective AC (selective_ac_option = \"op\") saves matmul outputs and "
        "recomputes the rest; scaleplan's selective recompute recomputes the attention core only.");
  }
  std::ostringstream o;
  o << header_comment(in, out.notes);
  o << "# torchtitan " << defs.value("ref", std::string()) << " (commit " << short_commit(defs)
    << "), its last release configured by TOML: train.py --job.config_file this.toml.\n"
       "# torchtitan after it (from commit 9810191, 2026-02-23) configures runs in Python and does "
       "not read this file.\n"
       "# Placeholders for your site: model.hf_assets_path (tokenizer), training.dataset, "
       "training.steps, optimizer.lr.\n";
  if (l.pp > 1) {
    o << (v_shaped(l.schedule) ? "# Chunk layer counts (V: rank s runs chunks s and "
                                 "2·pp-1-s):"
                               : "# Stage layer counts:");
    for (int c : chunks) o << ' ' << c;
    o << "\n";
  }
  o << "\n[model]\nname = \"" << flavor.module << "\"\nflavor = \"" << flavor.name << "\"\n";
  o << "hf_assets_path = \"./assets/hf/" << m.name << "\"  # placeholder: the tokenizer folder\n";
  // fp8 linears come from the float8 model converter (register_model_converter
  // "quantize.linear.float8"); its section only tunes it.
  if (l.dtype == DType::kFp8) o << "converters = [\"quantize.linear.float8\"]\n";
  o << "\n[parallelism]\n";
  o << "data_parallel_replicate_degree = " << replicate << "\n";
  o << "data_parallel_shard_degree = " << shard << "\n";
  o << "fsdp_reshard_after_forward = \"" << reshard << "\"\n";
  o << "tensor_parallel_degree = " << l.tp << "\n";
  // Async TP stays off: torchtitan raises "Async TP requires torch.compile" without
  // [compile], and the run is the eager one simulated (its overlap is not modelled either).
  o << "enable_async_tensor_parallel = false\n";
  o << "pipeline_parallel_degree = " << l.pp << "\n";
  if (l.pp > 1) {
    o << "pipeline_parallel_schedule = \"" << torchtitan_schedule(l.schedule) << "\"\n";
    o << "pipeline_parallel_microbatch_size = " << l.mbs << "\n";
    // Each chunk's modules, so that torchtitan runs the simulated split: its own split
    // (pipeline_parallel_layers_per_stage) counts the embedding and the output as layers.
    o << "module_fqns_per_model_part = " << torchtitan_fqns(chunks) << "\n";
  }
  o << "context_parallel_degree = " << l.cp << "\n";
  // The K/V exchange scaleplan simulates: PyTorch's _AllToAllRotater passes each rank's K/V
  // shard to the next rank every step ("Use all_to_all to send the kv to the next rank"), the
  // ring; "allgather" (the default) gathers every shard in one collective, cp_comm=all_gather.
  if (l.cp > 1) {
    // PyTorch's rotaters: "alltoall" passes K/V around the ring, "allgather" gathers them at once.
    o << "context_parallel_rotate_method = \""
      << (l.cp_comm_type() == CpComm::kAllGather ? "allgather" : "alltoall") << "\"\n";
  }
  o << "expert_parallel_degree = " << l.ep << "\n";
  o << "expert_tensor_parallel_degree = " << l.etp << "\n";
  // With a pipeline, local_batch_size is one step's batch per DP rank, cut into micro-batches;
  // without one, it is the micro-batch and global_batch_size sets the gradient accumulation.
  const int64_t local = l.pp > 1 ? l.global_batch() / l.dp_degree() : l.mbs;
  o << "\n[optimizer]\nlr = 3e-4  # placeholder: your peak learning rate\n";
  o << "\n[training]\n";
  o << "local_batch_size = " << local << "\n";
  o << "global_batch_size = " << l.global_batch() << "\n";
  o << "seq_len = " << in.seq_len << "\n";
  o << "mixed_precision_param = \"bfloat16\"\n";
  o << "dataset = \"c4\"  # placeholder: your dataset\n";
  o << "steps = 1000  # placeholder: your training steps\n";
  o << "\n[activation_checkpoint]\n";
  o << "mode = \"" << to_string(l.recompute) << "\"\n";
  if (l.recompute == Recompute::kSelective) o << "selective_ac_option = \"op\"\n";
  if (l.dtype == DType::kFp8) {
    o << "\n[quantize.linear.float8]\nenable_fsdp_float8_all_gather = "
      << (l.zero >= 1 ? "true" : "false") << "\n";
  }
  out.content = o.str();
  return out;
}

// ---------------------------------------------------------------------------------------------
// DeepSpeed (ecosystem.md §2.2)

Result<Export> deepspeed(const ExportInput& in) {
  const Layout& l = in.layout;
  Export out;
  // DeepSpeed's engine takes its data-parallel size from the topology (mpu or dist world; its
  // only sequence split is Ulysses, sequence_parallel_size, runtime/config.py:697-711 at
  // v0.19.5), which has no ring or all-gather CP axis: a CP group would count as data-parallel
  // ranks and the batch assertion (config.py:924, train_batch == micro · accumulation ·
  // world_size) fails on keys written for dp = world/(tp·pp·cp).
  if (l.cp > 1) {
    return Status::invalid("DeepSpeed has no context parallelism (cp=" + std::to_string(l.cp) +
                           "): its topology would count the CP ranks as data-parallel and its "
                           "batch assertion (runtime/config.py) fails; plan with cp=1");
  }
  if (l.pp > 1) {
    out.notes.push_back("DeepSpeed's JSON has no pipeline degree; pass pp=" + std::to_string(l.pp) +
                        " to the launcher script (Megatron-DeepSpeed --pipeline-model-parallel-size"
                        ") or to deepspeed.pipe.PipelineModule(num_stages=...).");
  }
  if (l.ep > 1)
    out.notes.push_back("expert parallelism is set in the model (deepspeed.moe ep_size).");
  if (l.recompute != Recompute::kNone) {
    out.notes.push_back(
        "activation checkpointing is enabled in the model code "
        "(deepspeed.checkpointing); the JSON section only configures it.");
  }
  if (l.tp > 1 && l.zero == 3) {
    out.notes.push_back("DeepSpeed AutoTP training supports ZeRO stages 0-2 only.");
  }
  if (l.pp > 1 && l.zero >= 2) {
    out.notes.push_back(
        "DeepSpeed's pipeline engine refuses this: \"ZeRO-2 and ZeRO-3 are incompatible with "
        "pipeline parallelism\" (PipelineEngine); use zero_optimization.stage 0 or 1.");
  }
  if (l.dtype == DType::kFp8) {
    out.notes.push_back(
        "DeepSpeed's JSON has no fp8 setting; the fp8 linears simulated come from the model code "
        "(Transformer Engine), without which the run trains in bf16 and is slower.");
  }
  if (in.model->sliding_window > 0)
    out.notes.push_back(sliding_window_note(*in.model, "DeepSpeed's JSON"));
  if (in.model->mtp_layers > 0) {
    out.notes.push_back("the " + std::to_string(in.model->mtp_layers) +
                        " MTP module(s) scaleplan simulated on the last stage are part of the "
                        "model code, which DeepSpeed's JSON does not describe.");
  }
  Json j;
  // train_batch_size = micro · accumulation · data-parallel ranks (DeepSpeed checks it).
  j["train_batch_size"] = l.global_batch();
  j["train_micro_batch_size_per_gpu"] = l.mbs;
  j["gradient_accumulation_steps"] = accumulation(l);
  j["zero_optimization"] = {{"stage", l.zero},
                            {"overlap_comm", true},
                            {"contiguous_gradients", true},
                            {"reduce_scatter", true}};
  j["bf16"] = {{"enabled", true}};
  j["gradient_clipping"] = 1.0;
  if (l.tp > 1) j["tensor_parallel"] = {{"autotp_size", l.tp}};
  if (l.recompute != Recompute::kNone) {
    j["activation_checkpointing"] = {{"partition_activations", l.sequence_parallel()},
                                     {"contiguous_memory_optimization", false},
                                     {"cpu_checkpointing", false}};
  }
  j["steps_per_print"] = 10;
  j["wall_clock_breakdown"] = false;
  out.content = j.dump(2) + "\n";
  return out;
}

// ---------------------------------------------------------------------------------------------
// nanotron (ecosystem.md §2.4)

Result<Export> nanotron(const ExportInput& in) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
  Export out;
  SP_ASSIGN_OR_RETURN(const Json defs, framework_defs("nanotron"));
  const std::string version = "nanotron " + short_commit(defs);
  // What nanotron's Qwen2 model (src/nanotron/models/qwen.py, the one with MoE and context
  // parallelism) cannot build: refused, since the run would train another model.
  if (m.mla) {
    return Status::invalid(version + " has no multi-latent attention (" + m.name +
                           "): --emit nanotron cannot express it");
  }
  if (m.qk_norm) {
    return Status::invalid(version + "'s Qwen2Config has no per-head q/k norm (" + m.model_type +
                           " qk_norm): --emit nanotron would train another model");
  }
  if (m.learned_positions || m.norm == models::NormKind::kLayerNorm ||
      m.ffn_kind != models::FfnKind::kSwiGlu || m.has_o_bias() || m.has_ffn_bias() ||
      m.sandwich_norm || m.parallel_residual || m.attn_softcap > 0 || m.final_softcap > 0 ||
      m.qk_l2_norm || !m.nope_layers.empty() || m.rope.fraction < 1.0 ||
      m.num_chunked_layers() > 0) {
    return Status::invalid(version +
                           "'s Qwen2 model is RMSNorm, full RoPE on every layer and SwiGLU "
                           "without output or FFN biases, post-norms, soft-capping or chunked "
                           "attention; " +
                           m.name + " is not");
  }
  if (m.moe && (m.moe->num_shared_experts > 1 || m.moe->score_function != "softmax" ||
                !m.moe->norm_topk_prob || m.moe->first_dense_layers > 0 || m.moe->layer_freq != 1 ||
                !m.moe->dense_layers.empty())) {
    return Status::invalid(version +
                           "'s MoE routes by softmax over the top-k logits on every "
                           "layer with at most one shared expert; " +
                           m.name + "'s router differs");
  }
  if (l.zero > 1) {
    return Status::invalid(version + "'s optimizer takes zero_stage 0 or 1, not " +
                           std::to_string(l.zero));
  }
  if (l.cp > 1 && l.cp_comm_type() == CpComm::kA2a) {
    return Status::invalid(version +
                           " has no all-to-all (Ulysses) context parallelism; its ring "
                           "attention is cp_comm=p2p (ring) or all_gather (llama3_ring_attention)");
  }
  if (l.pp > 1 && l.schedule != Schedule::kAfab && l.schedule != Schedule::k1F1B) {
    out.notes.push_back("nanotron's pp_engine is afab or 1f1b; " +
                        std::string(to_string(l.schedule)) + " is written as 1f1b.");
  }
  if (l.recompute == Recompute::kSelective) {
    out.notes.push_back(
        "nanotron recomputes whole layers (recompute_layer) or nothing; selective "
        "recompute is written as recompute_layer: false.");
  }
  if (l.pp_first || l.pp_last || l.pp_embedding || l.pp_loss) {
    out.notes.push_back(
        "nanotron balances pipeline stages itself; the pinned first/last stage "
        "sizes are not expressible.");
  }
  if (l.dtype == DType::kFp8) {
    out.notes.push_back(
        "this config sets no fp8 training, so the run trains in bf16; the prediction is for fp8 "
        "linears, so the run will be slower.");
  }
  const bool all_slide = m.sliding_window > 0 && m.num_sliding_layers() == m.num_layers;
  if (m.sliding_window > 0 && !all_slide)
    out.notes.push_back(sliding_window_note(m, "nanotron's YAML"));
  if (m.mtp_layers > 0) {
    out.notes.push_back("nanotron has no DeepSeek MTP modules; this run trains without the " +
                        std::to_string(m.mtp_layers) +
                        " scaleplan simulated on the last stage (less time and memory there).");
  }
  if (!m.rope.scaling.empty()) {
    out.notes.push_back("rope_scaling (" + m.rope.scaling +
                        ") is passed to nanotron's Qwen2Config as the HF dict; check that your "
                        "nanotron applies it.");
  }
  std::ostringstream o;
  o << header_comment(in, out.notes);
  o << "# nanotron main at commit " << short_commit(defs)
    << " (no release since v0.5): run_train.py --config-file this.yaml.\n"
       "# Placeholders for your site: tokenizer, dataset, checkpoints_path, train_steps and the "
       "learning-rate schedule.\n";
  o << "general:\n  project: scaleplan\n  run: " << m.name << "_" << in.gpus
    << "gpus\n  seed: 42\n";
  o << "parallelism:\n";
  o << "  dp: " << l.dp_degree() << "\n";
  o << "  pp: " << l.pp << "\n";
  o << "  tp: " << l.tp << "\n";
  o << "  pp_engine: " << (l.schedule == Schedule::kAfab ? "afab" : "1f1b") << "\n";
  o << "  tp_mode: " << (l.sequence_parallel() ? "REDUCE_SCATTER" : "ALL_REDUCE") << "\n";
  o << "  tp_linear_async_communication: " << (l.sequence_parallel() ? "true" : "false") << "\n";
  o << "  expert_parallel_size: " << l.ep << "\n";
  o << "  context_parallel_size: " << l.cp << "\n";
  o << "  recompute_layer: " << (l.recompute == Recompute::kFull ? "true" : "false") << "\n";
  o << "model:\n  init_method:\n    std: 0.02\n  dtype: bfloat16\n  make_vocab_size_divisible_by: "
       "1\n";
  o << "  model_config:\n";
  o << "    is_qwen2_config: true\n";
  o << "    hidden_size: " << m.hidden << "\n";
  o << "    intermediate_size: " << m.ffn << "\n";
  o << "    num_attention_heads: " << m.num_heads << "\n";
  o << "    num_key_value_heads: " << m.num_kv_heads << "\n";
  o << "    num_hidden_layers: " << m.num_layers << "\n";
  o << "    vocab_size: " << m.vocab << "\n";
  o << "    max_position_embeddings: " << std::max(in.seq_len, m.max_position) << "\n";
  o << "    tie_word_embeddings: " << (m.tied_embeddings ? "true" : "false") << "\n";
  o << "    hidden_act: silu\n";
  o << "    rms_norm_eps: " << yaml_float(m.norm_eps) << "\n";
  o << "    rope_theta: " << yaml_float(m.rope.theta) << "\n";
  if (!m.rope.scaling.empty()) {
    o << "    rope_scaling:\n      rope_type: " << m.rope.scaling
      << "\n      factor: " << number(m.rope.factor) << "\n";
    if (m.rope.original_max_position > 0)
      o << "      original_max_position_embeddings: " << m.rope.original_max_position << "\n";
    if (m.rope.scaling == "llama3") {
      o << "      low_freq_factor: " << yaml_float(m.rope.low_freq_factor) << "\n";
      o << "      high_freq_factor: " << yaml_float(m.rope.high_freq_factor) << "\n";
    }
  }
  // Qwen2's attention bias is on q, k and v (qwen.py: "Qwen2 uses bias for QKV").
  o << "    attention_bias: " << (m.has_qkv_bias() ? "true" : "false") << "\n";
  if (all_slide) o << "    sliding_window_size: " << m.sliding_window << "\n";
  // Context parallelism needs a ring attention: nanotron's "ring" (ring_flash_attn, K/V passed
  // around the ring, cp_comm=p2p) or "llama3_ring_attention" (K/V all-gathered,
  // cp_comm=all_gather).
  if (l.cp > 1 && l.cp_comm_type() == CpComm::kAllGather) {
    o << "    _attn_implementation: llama3_ring_attention\n    ring_attn_heads_k_stride: 1\n";
  } else if (l.cp > 1) {
    o << "    _attn_implementation: ring\n";
  } else {
    o << "    _attn_implementation: flash_attention_2\n";
  }
  if (m.moe) {
    o << "    moe_config:\n";
    o << "      num_experts: " << m.moe->num_experts << "\n";
    o << "      top_k: " << m.moe->top_k << "\n";
    o << "      moe_intermediate_size: " << m.moe->expert_ffn << "\n";
    o << "      enable_shared_expert: " << (m.moe->num_shared_experts > 0 ? "true" : "false")
      << "\n";
    if (m.moe->num_shared_experts > 0)
      o << "      shared_expert_intermediate_size: " << m.moe->shared_expert_ffn << "\n";
    o << "      router_aux_loss_coef: " << yaml_float(m.moe->aux_loss_coeff) << "\n";
    o << "      token_dispatcher_type: alltoall\n";
  }
  o << "tokenizer:\n  tokenizer_name_or_path: ./assets/hf/" << m.name
    << "  # placeholder: your tokenizer\n";
  o << "checkpoints:\n  checkpoints_path: ./checkpoints  # placeholder\n"
       "  checkpoint_interval: 1000\n";
  o << "logging:\n  log_level: info\n  log_level_replica: info\n  iteration_step_info_interval: "
       "1\n";
  o << "tokens:\n";
  o << "  sequence_length: " << in.seq_len << "\n";
  o << "  train_steps: 1000  # placeholder: your training steps\n";
  o << "  micro_batch_size: " << l.mbs << "\n";
  o << "  batch_accumulation_per_replica: " << accumulation(l) << "\n";
  o << "optimizer:\n  optimizer_factory:\n    name: adamW\n    adam_beta1: 0.9\n"
       "    adam_beta2: 0.95\n    adam_eps: 1.0e-08\n    torch_adam_is_fused: true\n";
  o << "  zero_stage: " << l.zero << "\n";
  o << "  weight_decay: 0.1\n  clip_grad: 1.0\n  accumulate_grad_in_fp32: true\n";
  o << "  learning_rate_scheduler:  # placeholder: your schedule\n    learning_rate: 3.0e-04\n"
       "    lr_warmup_steps: 100\n    lr_warmup_style: linear\n    lr_decay_style: cosine\n"
       "    min_decay_lr: 3.0e-05\n";
  o << "data_stages:\n- name: stable\n  start_training_step: 1\n  data:\n    seed: 42\n"
       "    num_loading_workers: 1\n    dataset:  # placeholder: your dataset\n"
       "      hf_dataset_or_datasets: HuggingFaceFW/fineweb-edu\n      hf_dataset_splits: train\n"
       "      text_column_name: text\n";
  out.content = o.str();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Plan JSON

// The model's config.json: the user's file, or the bundled preset's.
Result<Json> model_config(const ExportInput& in) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(in.model_source, ec)) {
    return read_json_file(in.model_source);
  }
  return read_json_file(data_dir() + "/models/presets/" + in.model_source + ".json");
}

Json breakdown_json(const Breakdown& b) {
  Json j;
  j["compute_s"] = b.compute.to_seconds();
  j["recompute_s"] = b.recompute.to_seconds();
  j["bubble_s"] = b.bubble.to_seconds();
  Json comm = Json::object();
  for (int k = 0; k < kNumCommClasses; ++k)
    comm[std::string(to_string(static_cast<CommClass>(k)))] = b.exposed[k].to_seconds();
  j["exposed_comm_s"] = comm;
  j["other_s"] = b.other.to_seconds();
  return j;
}

Result<Export> plan_json(const ExportInput& in) {
  SP_ASSIGN_OR_RETURN(Json config, model_config(in));
  Export out;
  const Layout& l = in.layout;
  Json j;
  j["format"] = "scaleplan-plan";
  j["version"] = 1;
  j["model"] = {{"name", in.model->name}, {"source", in.model_source}, {"config", config}};
  // What is not in config.json but was simulated: the MoE load imbalance and dispatcher.
  if (const auto& moe = in.model->moe) {
    j["model"]["moe"] = {
        {"imbalance", moe->capacity_imbalance},
        {"dispatcher", moe->dispatcher == models::MoeDispatcher::kDeepEp ? "deepep" : "alltoall"}};
  }
  j["cluster"] = in.cluster;
  j["gpus"] = in.gpus;
  j["gpus_per_node"] = in.gpus_per_node;
  j["seq_len"] = in.seq_len;
  j["layout"] = format_layout(l);
  j["framework"] = std::string(to_string(in.framework));
  if (in.host_launch) j["host_launch_s"] = in.host_launch->to_seconds();
  if (in.tp_comm_overlap) j["tp_comm_overlap"] = true;
  j["gradient_accumulation"] = accumulation(l);
  Json stages = Json::array();
  for (int c : chunk_layers(in)) stages.push_back(c);
  j["chunk_layers"] = stages;
  if (in.prediction) {
    const Prediction& p = *in.prediction;
    j["predicted"] = {{"iteration_s", p.iteration.to_seconds()},
                      {"tokens_per_s_per_gpu", p.tokens_per_s_per_gpu},
                      {"mfu", p.mfu},
                      // "peak" as plan and simulate print it (docs/memory-model.md).
                      {"peak_memory_bytes", p.memory.allocated.value()},
                      {"reserved_memory_bytes", p.memory.peak.value()},
                      {"memory_capacity_bytes", p.memory.capacity.value()},
                      {"headroom_bytes", p.memory.headroom().value()},
                      {"breakdown", breakdown_json(p.breakdown)}};
  }
  out.content = j.dump(2) + "\n";
  return out;
}

}  // namespace

std::string_view to_string(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
      return "megatron";
    case ExportFormat::kTorchtitan:
      return "torchtitan-0.2.2";
    case ExportFormat::kTorchtitanMain:
      return "torchtitan";
    case ExportFormat::kDeepspeed:
      return "deepspeed";
    case ExportFormat::kNanotron:
      return "nanotron";
    case ExportFormat::kJson:
      return "json";
    case ExportFormat::kMegatronBridge:
      return "megatron-bridge";
  }
  return "?";
}

std::vector<std::pair<std::string, std::vector<std::string>>> runnable_values(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
    case ExportFormat::kMegatronBridge:  // Megatron-core's schedules
      return {{"schedule", {"1f1b", "interleaved"}}};
    case ExportFormat::kTorchtitan:
      return {{"schedule", {"afab", "1f1b", "interleaved", "zb-h1", "dualpipev", "zb-v"}},
              {"zero", {"0", "2", "3"}},
              {"recompute_modules", {"none", "core_attn"}},
              {"cp_comm", {"p2p", "all_gather"}}};  // no Ulysses in PyTorch's CP
    case ExportFormat::kTorchtitanMain:             // planner/export_torchtitan.h
      return {{"schedule", {"afab", "1f1b", "interleaved", "zb-h1", "dualpipev", "zb-v"}},
              {"zero", {"0", "2", "3"}},
              {"recompute_modules", {"none", "core_attn"}},
              {"etp", {"1"}}};  // experts shard over expert_parallel_degree only
    case ExportFormat::kNanotron:
      return {{"schedule", {"afab", "1f1b"}},
              {"zero", {"0", "1"}},
              {"cp_comm", {"p2p", "all_gather"}},  // ring and llama3_ring_attention
              {"recompute", {"none", "full"}},
              {"pp_first", {"none"}},
              {"pp_last", {"none"}},
              {"pp_embedding", {"off"}},
              {"pp_loss", {"off"}}};
    case ExportFormat::kDeepspeed:
      // DeepSpeed has no ring (or all-gather) context parallelism: its topology knows data,
      // pipe and model axes only (runtime/pipe/topology.py PipeModelDataParallelTopology), so
      // a CP group would be counted as data-parallel ranks and break the batch assertion.
      return {{"schedule", {"1f1b"}}, {"recompute_modules", {"none", "core_attn"}}, {"cp", {"1"}}};
    case ExportFormat::kJson:
      return {};
  }
  return {};
}

std::vector<std::pair<std::string, std::vector<std::string>>> runnable_values(
    ExportFormat f, const ModelSpec& model) {
  auto out = runnable_values(f);
  if ((f == ExportFormat::kTorchtitan || f == ExportFormat::kTorchtitanMain) &&
      model.tied_embeddings)
    out.push_back({"pp", {"1"}});
  return out;
}

std::vector<RefusedCombination> refused_combinations(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
    case ExportFormat::kMegatronBridge:  // the same TransformerConfig check
      return {{"sp=on with ep and tp > 1",
               [](const Layout& l) { return l.ep > 1 && l.tp > 1 && !l.sequence_parallel(); },
               "sp"}};
    case ExportFormat::kDeepspeed:
      return {{"zero=0|1 with pp > 1", [](const Layout& l) { return l.pp > 1 && l.zero >= 2; },
               "zero"}};
    case ExportFormat::kTorchtitanMain:
      // ParallelDims._validate: "expert_parallel_degree must divide dp_shard * cp * tp"; the
      // shard mesh is dp under FSDP (zero >= 1), 1 under DDP.
      return {
          {"ep dividing dp_shard*cp*tp",
           [](const Layout& l) {
             const int64_t shard = l.zero >= 1 ? l.dp_degree() : 1;
             return l.ep > 1 && (shard * l.cp * l.tp) % l.ep != 0;
           },
           "ep"},
          // torchtitan main sets no rotate method: PyTorch's default all-gathers K/V.
          {"cp_comm=all_gather with cp > 1",
           [](const Layout& l) { return l.cp > 1 && l.cp_comm_type() != CpComm::kAllGather; },
           "cp_comm"},
          // PyTorch's interleaved schedules' rounds rule holds for torchtitan main too (it runs
          // the same torch.distributed.pipelining schedules): see kTorchtitan below.
          {"interleaved and zb-h1 with micro-batches a multiple of max(1, m/pp) (PyTorch's "
           "rounds rule)",
           [](const Layout& l) { return !torchtitan_rounds_accept(l); }, "mbs"},
      };
    case ExportFormat::kTorchtitan:
      return {
          // models/llama3/infra/parallelize.py:148-151 (v0.2.2; deepseek_v3, llama4, gpt_oss
          // alike): without FSDP, replication is DDP, which raises "DDP has not supported > 1D
          // parallelism" unless the replicate mesh is the whole world. (qwen3's parallelize.py
          // checks only the mesh's ndim; the rule is kept for every module, the safe direction.)
          {"zero=2|3 with dp > 1 and tp or pp > 1 (torchtitan's DDP refuses > 1D parallelism)",
           [](const Layout& l) {
             return l.zero == 0 && l.dp.value_or(1) > 1 && (l.tp > 1 || l.pp > 1);
           },
           "zero"},
          // parallel_dims.py:136-138: the expert mesh is efsdp = dp_shard·cp·tp / (etp·ep), and
          // ZeRO-0 exports dp_shard = 1, so ep·etp must divide cp·tp.
          {"zero=2|3 with ep·etp not dividing tp·cp (torchtitan's expert mesh borrows from the "
           "FSDP shard degree)",
           [](const Layout& l) {
             return l.zero == 0 && l.ep > 1 &&
                    (int64_t{l.tp} * l.cp) % (int64_t{l.ep} * l.etp) != 0;
           },
           "zero"},
          // distributed/parallel_dims.py:334 fsdp_enabled = dp_shard_enabled or cp_enabled: with
          // cp > 1 torchtitan always shards the model states over the CP ranks, so ZeRO-0 is
          // never what it runs.
          {"zero=2|3 with cp > 1 (torchtitan turns FSDP on over the CP ranks)",
           [](const Layout& l) { return l.zero == 0 && l.cp > 1; }, "zero"},
          // PyTorch's ScheduleInterleaved1F1B and ScheduleInterleavedZeroBubble (which torchtitan
          // runs for interleaved and zb-h1) raise unless the micro-batches are a multiple of
          // number_of_rounds = max(1, m // pp), and run groups of m / number_of_rounds.
          {"interleaved and zb-h1 with micro-batches a multiple of max(1, m/pp) (PyTorch's "
           "rounds rule)",
           // Lifted by naming the micro-batch size (which sets the count), not the schedule: a
           // --fix schedule=interleaved still gets only counts PyTorch accepts.
           [](const Layout& l) { return !torchtitan_rounds_accept(l); }, "mbs"},
      };
    default:
      return {};
  }
}

bool torchtitan_rounds_accept(const Layout& l) {
  if (l.pp <= 1 || (l.schedule != Schedule::kInterleaved && l.schedule != Schedule::kZbH1))
    return true;
  const int64_t m = l.num_microbatches();
  const int64_t rounds = std::max<int64_t>(1, m / l.pp);
  if (m % rounds != 0) return false;
  // The group PyTorch runs must be the one simulated (core's interleave_group_size), or the run
  // is another schedule than predicted; zb-h1 is simulated without groups.
  return l.schedule != Schedule::kInterleaved || m < l.pp ||
         m / rounds == interleave_group_size(l.pp, m);
}

std::vector<FrameworkVerdict> framework_verdicts(const Layout& l, const ModelSpec& model) {
  std::vector<FrameworkVerdict> out;
  // The four targets in their first order, then the two added later (Megatron-Bridge, torchtitan
  // main), so that a reader indexing the first four keeps its meaning.
  for (ExportFormat f :
       {ExportFormat::kMegatron, ExportFormat::kTorchtitan, ExportFormat::kDeepspeed,
        ExportFormat::kNanotron, ExportFormat::kMegatronBridge, ExportFormat::kTorchtitanMain}) {
    FrameworkVerdict v{f, ""};
    for (const auto& [key, values] : runnable_values(f, model)) {
      if (std::find(values.begin(), values.end(), layout_value(l, key)) != values.end()) continue;
      std::string alts;
      for (const auto& x : values) alts += (alts.empty() ? "" : "|") + x;
      v.rule = key + "=" + alts;
      break;
    }
    if (v.rule.empty()) {
      for (const RefusedCombination& r : refused_combinations(f)) {
        if (r.refuses(l)) {
          v.rule = r.text;
          break;
        }
      }
    }
    out.push_back(std::move(v));
  }
  return out;
}

FrameworkId conventions_for(ExportFormat f) {
  switch (f) {
    case ExportFormat::kTorchtitan:
    case ExportFormat::kTorchtitanMain:
      return FrameworkId::kTorchtitan;
    case ExportFormat::kNanotron:
      return FrameworkId::kNanotron;
    default:
      return FrameworkId::kMegatron;
  }
}

std::string_view framework_name(ExportFormat f) {
  switch (f) {
    case ExportFormat::kMegatron:
      return "Megatron-LM";
    case ExportFormat::kTorchtitan:
    case ExportFormat::kTorchtitanMain:
      return "torchtitan";
    case ExportFormat::kDeepspeed:
      return "DeepSpeed";
    case ExportFormat::kNanotron:
      return "nanotron";
    case ExportFormat::kJson:
      return "scaleplan";
    case ExportFormat::kMegatronBridge:
      return "Megatron-Bridge";
  }
  return "?";
}

Result<ExportFormat> parse_export_format(std::string_view text) {
  for (ExportFormat f : {ExportFormat::kMegatron, ExportFormat::kMegatronBridge,
                         ExportFormat::kTorchtitanMain, ExportFormat::kTorchtitan,
                         ExportFormat::kDeepspeed, ExportFormat::kNanotron, ExportFormat::kJson}) {
    if (text == to_string(f)) return f;
  }
  return Status::invalid("--emit: '" + std::string(text) +
                         "' is not one of megatron, megatron-bridge, torchtitan, "
                         "torchtitan-0.2.2, deepspeed, nanotron, json");
}

Result<Export> export_layout(const ExportInput& in, ExportFormat format) {
  if (in.model == nullptr) return Status::internal("export: no model");
  if (!in.layout.dp || !in.layout.gbs) {
    return Status::internal("export: the layout is not resolved (dp or gbs unset)");
  }
  switch (format) {
    case ExportFormat::kMegatron:
      SP_RETURN_IF_ERROR(megatron_model_supported(*in.model, in.seq_len));
      return megatron(in);
    case ExportFormat::kTorchtitan:
      return torchtitan(in);
    case ExportFormat::kDeepspeed:
      return deepspeed(in);
    case ExportFormat::kNanotron:
      return nanotron(in);
    case ExportFormat::kJson:
      return plan_json(in);
    case ExportFormat::kMegatronBridge:
      return export_megatron_bridge(in);
    case ExportFormat::kTorchtitanMain:
      return export_torchtitan_main(in);
  }
  return Status::internal("export: unknown format");
}

Result<PlanFile> parse_plan(std::string_view text, const std::string& path) {
  SP_ASSIGN_OR_RETURN(Json j, parse_json(text, path));
  if (!j.is_object()) return Status::invalid(path + ": not a JSON object");
  SP_ASSIGN_OR_RETURN(std::string format, json_string(j, "format", path));
  if (format != "scaleplan-plan") {
    return Status::invalid(path + ": format: '" + format + "' is not scaleplan-plan");
  }
  PlanFile p;
  if (!json_has(j, "model") || !j["model"].is_object()) {
    return Status::invalid(path + ": model: missing");
  }
  const std::string mctx = path + ": model";
  SP_ASSIGN_OR_RETURN(p.model_name, json_string(j["model"], "name", mctx));
  if (!json_has(j["model"], "config") || !j["model"]["config"].is_object()) {
    return Status::invalid(mctx + ": config: missing");
  }
  SP_ASSIGN_OR_RETURN(
      p.model, models::model_from_config(j["model"]["config"], p.model_name, mctx + ": config"));
  if (json_has(j["model"], "moe") && p.model.moe) {
    const std::string moe_ctx = mctx + ": moe";
    SP_ASSIGN_OR_RETURN(const double imbalance,
                        json_number(j["model"]["moe"], "imbalance", moe_ctx, 1.0));
    SP_RETURN_IF_ERROR(
        models::set_moe_imbalance(p.model, imbalance).with_context(moe_ctx + ": imbalance"));
    SP_ASSIGN_OR_RETURN(const std::string dispatcher,
                        json_string(j["model"]["moe"], "dispatcher", moe_ctx, "alltoall"));
    SP_RETURN_IF_ERROR(
        models::set_moe_dispatcher(p.model, dispatcher).with_context(moe_ctx + ": dispatcher"));
  }
  SP_ASSIGN_OR_RETURN(p.cluster, json_string(j, "cluster", path));
  SP_ASSIGN_OR_RETURN(p.gpus, json_int(j, "gpus", path));
  SP_ASSIGN_OR_RETURN(p.seq_len, json_int(j, "seq_len", path));
  SP_ASSIGN_OR_RETURN(std::string layout, json_string(j, "layout", path));
  auto parsed = parse_layout(layout);
  if (!parsed) return parsed.status().with_context(path);
  auto resolved = resolve_layout(*parsed, models::layout_constraints(p.model, p.seq_len), p.gpus);
  if (!resolved) return resolved.status().with_context(path);
  p.layout = *resolved;
  if (json_has(j, "framework")) {
    SP_ASSIGN_OR_RETURN(const std::string framework, json_string(j, "framework", path));
    auto id = parse_framework(framework);
    if (!id) return id.status().with_context(path);
    p.framework = *id;
  }
  if (json_has(j, "host_launch_s")) {
    SP_ASSIGN_OR_RETURN(const double seconds, json_number(j, "host_launch_s", path));
    if (!(seconds >= 0))
      return Status::invalid(path + ": host_launch_s: must be a non-negative number of seconds");
    p.host_launch = Duration::seconds(seconds);
  }
  if (json_has(j, "tp_comm_overlap")) {
    if (!j["tp_comm_overlap"].is_boolean())
      return Status::invalid(path + ": tp_comm_overlap: must be true or false");
    p.tp_comm_overlap = j["tp_comm_overlap"].get<bool>();
  }
  if (json_has(j, "predicted") && j["predicted"].is_object()) {
    SP_ASSIGN_OR_RETURN(double it,
                        json_number(j["predicted"], "iteration_s", path + ": predicted"));
    p.predicted_iteration_s = it;
  }
  return p;
}

Result<PlanFile> read_plan_file(const std::string& path) {
  SP_ASSIGN_OR_RETURN(std::string text, read_text_file(path));
  return parse_plan(text, path);
}

}  // namespace scaleplan::planner
