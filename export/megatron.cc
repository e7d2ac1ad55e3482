// Megatron-LM (ecosystem.md §2.1): a torchrun + pretrain_gpt.py script whose flags build the
// model, the batch and every parallelism as simulated (export/exporters.h).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "export/export_util.h"
#include "export/formats.h"
#include "sim/framework.h"

namespace scaleplan::planner {
namespace {

using models::ModelSpec;

// The flags of a pretrain_gpt.py command line, one per line in the script.

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

// Model shape (examples/llama/train_llama3_8b_h100_fp8.sh; ecosystem.md §2.1): sizes, vocabulary,
// positions, activation, norms, biases, attention windows and MLA.
void megatron_shape(const ExportInput& in, FlagList& f, std::vector<std::string>& notes) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
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
    notes.push_back("the vocabulary (" + std::to_string(m.vocab) +
                    ") does not divide by tp; Megatron-LM pads it to a multiple of " +
                    std::to_string(l.tp) + ".");
  }
  f.add("--norm-epsilon", number(m.norm_eps));
  if (m.learned_positions) {
    f.add("--position-embedding-type", "learned_absolute");
  } else {
    f.add("--position-embedding-type", "rope");
    megatron_rope(m, f, notes);
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
    notes.push_back(
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
}

// The experts: sizes, the dense/MoE layer pattern, the router and the token dispatcher.
void megatron_moe(const ModelSpec& m, FlagList& f, std::vector<std::string>& notes) {
  if (!m.moe) return;
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
  megatron_router(e, f, notes);
  f.add("--moe-grouped-gemm");
  if (e.dispatcher == models::MoeDispatcher::kDeepEp) {
    f.add("--moe-token-dispatcher-type", "flex");
    f.add("--moe-enable-deepep");
  } else {
    f.add("--moe-token-dispatcher-type", "alltoall");
  }
}

// Batch, TP and PP: the stage split (even, accounted for the embedding and loss, pinned first and
// last stages, or the explicit layout string) and the interleaving.
void megatron_pipeline(const ExportInput& in, FlagList& f) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
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
}

// Sequence, context and expert parallelism and recomputation.
void megatron_parallelism(const ExportInput& in, FlagList& f, std::vector<std::string>& notes) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
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
    notes.push_back(
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
      notes.push_back(
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
}

void megatron_zero(const Layout& l, FlagList& f) {
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
}

// Precision, then the data, tokenizer, schedule and length: the site's, from the variables the
// script requires.
void megatron_precision_and_site(const Layout& l, FlagList& f) {
  f.add("--bf16");
  if (l.dtype == DType::kFp8) {
    f.add("--fp8-format", "hybrid");
  }
  // Adam's moments in bf16: Transformer Engine's FusedAdam through Megatron-core's precision-aware
  // optimizer (megatron/training/arguments.py:3500-3517, megatron/core/optimizer/__init__.py
  // :562-567 at 5be9626). It also keeps the fp32 master as a 16-bit remainder of the bf16
  // parameter (OptimizerConfig.store_param_remainders, True by default, no flag at this commit):
  // 2 B/param/N_d less than simulated (docs/memory-model.md).
  if (l.moments == MomentDtype::kBf16) {
    f.add("--use-precision-aware-optimizer");
    f.add("--exp-avg-dtype", "bf16");
    f.add("--exp-avg-sq-dtype", "bf16");
  }
  f.add("--data-path", "\"$DATA_PATH\"");
  f.add("--tokenizer-type", "HuggingFaceTokenizer");
  f.add("--tokenizer-model", "\"$TOKENIZER_MODEL\"");
  f.add("--train-iters", "\"$TRAIN_ITERS\"");
  f.add("--lr", "\"$LR\"");
  f.add("--min-lr", "\"$MIN_LR\"");
  f.add("--lr-decay-style", "cosine");
  f.add("--lr-warmup-iters", "\"$LR_WARMUP_ITERS\"");
}

// The schedules Megatron-LM runs as 1F1B instead.
void megatron_schedule_notes(const Layout& l, std::vector<std::string>& notes) {
  if (l.pp > 1) {
    if (l.schedule == Schedule::kAfab) {
      notes.push_back(
          "Megatron-LM runs pipelines with 1F1B; AFAB (GPipe) has no flag, and 1F1B has the same "
          "bubble with less activation memory.");
    } else if (l.schedule == Schedule::kZbH1) {
      notes.push_back(
          "Megatron-LM mainline has no ZB-H1 schedule; these flags run 1F1B, which has a larger "
          "bubble than the prediction assumes.");
    } else if (l.schedule == Schedule::kDualPipe) {
      notes.push_back("Megatron-LM has no DualPipe schedule; these flags run 1F1B.");
    } else if (v_shaped(l.schedule)) {
      notes.push_back("Megatron-LM mainline has no " +
                      std::string(l.schedule == Schedule::kZbV ? "ZB-V" : "DualPipeV") +
                      " schedule; these flags run 1F1B.");
    }
  }
}

// The script: environment, site placeholders, the torchrun line and the flags.
std::string megatron_script(const ExportInput& in, const FlagList& f,
                            const std::vector<std::string>& notes) {
  const Layout& l = in.layout;
  const int64_t nproc = std::min<int64_t>(in.gpus, in.gpus_per_node);
  const int64_t nnodes = (in.gpus + nproc - 1) / nproc;
  std::ostringstream o;
  o << "#!/bin/bash\n" << header_comment(in, notes);
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
  return o.str();
}

}  // namespace

Result<Export> export_megatron(const ExportInput& in) {
  SP_RETURN_IF_ERROR(megatron_model_supported(*in.model, in.seq_len));
  const ModelSpec& m = *in.model;
  Export out;
  FlagList f;
  megatron_shape(in, f, out.notes);
  megatron_moe(m, f, out.notes);
  // DeepSeek's multi-token-prediction modules, trained on the last stage as simulated
  // (Megatron-core MultiTokenPredictionBlock; arguments.py --mtp-num-layers, off unless given).
  if (m.mtp_layers > 0) f.add("--mtp-num-layers", m.mtp_layers);
  megatron_pipeline(in, f);
  megatron_parallelism(in, f, out.notes);
  megatron_zero(in.layout, f);
  megatron_precision_and_site(in.layout, f);
  megatron_schedule_notes(in.layout, out.notes);
  out.content = megatron_script(in, f, out.notes);
  return out;
}

}  // namespace scaleplan::planner
