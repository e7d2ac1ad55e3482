// nanotron (ecosystem.md §2.4): its YAML config, checked against the Qwen2 model it builds.
#include <nlohmann/json.hpp>
#include <sstream>

#include "export/export_util.h"
#include "export/formats.h"

namespace scaleplan::planner {

namespace {

// A float as YAML 1.1 (PyYAML, which nanotron's loader uses) reads a float: "1e-05" without a
// point is a string there, and nanotron's strict loader refuses a string or an int for a float.
std::string yaml_float(double v) {
  std::string s = number(v);
  const size_t e = s.find_first_of("eE");
  std::string mantissa = s.substr(0, e), exponent = e == std::string::npos ? "" : s.substr(e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  if (!exponent.empty() && exponent[1] != '-' && exponent[1] != '+')
    exponent = exponent.substr(0, 1) + "+" + exponent.substr(1);
  return mantissa + exponent;
}

}  // namespace

using models::ModelSpec;

// nanotron (ecosystem.md §2.4)

Result<Export> export_nanotron(const ExportInput& in) {
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
  o << "  batch_accumulation_per_replica: " << l.num_microbatches() << "\n";
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

}  // namespace scaleplan::planner
