#include "export/megatron_bridge.h"

#include <algorithm>
#include <sstream>
#include <utility>
#include <vector>

#include "export/export_util.h"
#include "sim/framework.h"

namespace scaleplan::planner {
namespace {

using models::ModelSpec;

// KEY=VALUE overrides in Hydra's grammar (hydra/core/override_parser): null, true/false, numbers,
// lists [a,b] and quoted strings where the value holds characters a bare string cannot.
class Overrides {
 public:
  void set(std::string key, std::string value) {
    kv_.emplace_back(std::move(key), std::move(value));
  }
  void set(std::string key, int64_t v) { set(std::move(key), std::to_string(v)); }
  void set_bool(std::string key, bool v) { set(std::move(key), std::string(v ? "true" : "false")); }
  void set_null(std::string key) { set(std::move(key), std::string("null")); }
  void set_string(std::string key, const std::string& v) { set(std::move(key), "\"" + v + "\""); }
  // One shell word each: single-quoted where the shell would read a character itself.
  std::string join(const std::string& indent) const {
    std::string s;
    for (size_t i = 0; i < kv_.size(); ++i) {
      std::string word = kv_[i].first + "=" + kv_[i].second;
      if (word.find_first_of("[]|\"*(),' ") != std::string::npos) word = "'" + word + "'";
      s += indent + word + (i + 1 < kv_.size() ? " \\\n" : "\n");
    }
    return s;
  }

 private:
  std::vector<std::pair<std::string, std::string>> kv_;
};

struct Recipe {
  const char* name;        // the H100 recipe function (recipes/<family>/h100/<file>.py)
  const char* preset;      // scaleplan's preset of the Hugging Face config its AutoBridge reads
  const char* model_type;  // that config's model_type
};

// The recipes whose model is one of scaleplan's presets (the preset is the model's Hugging Face
// config.json; the recipe reads it by the hf_path in export/frameworks/megatron-bridge.json).
constexpr Recipe kRecipes[] = {
    {"llama3_8b_pretrain_2gpu_h100_bf16_config", "llama3-8b", "llama"},
    {"llama3_70b_pretrain_32gpu_h100_bf16_config", "llama3-70b", "llama"},
    {"deepseek_v3_pretrain_1024gpu_h100_bf16_config", "deepseek-v3", "deepseek_v3"},
};
constexpr const char* kVanillaGpt = "vanilla_gpt_pretrain_1gpu_h100_bf16_config";

// What the vanilla recipe's GPTModelProvider has no field for, each named: the model would be
// another one. (The mapped recipes get these from their Hugging Face bridge.)
Status vanilla_supported(const ModelSpec& m, int64_t seq_len) {
  std::vector<std::string> missing;
  if (m.mla)
    missing.push_back("multi-latent attention (an MLAModelProvider, which only a recipe builds)");
  if (m.sliding_window > 0) missing.push_back("sliding-window layers");
  if (!m.rope.scaling.empty()) missing.push_back("RoPE scaling '" + m.rope.scaling + "'");
  if (m.learned_positions) missing.push_back("learned positions");
  if (m.ffn_kind == models::FfnKind::kGeGlu) missing.push_back("a GeGLU FFN");
  if (m.attention_sinks || m.glu_clamp > 0) missing.push_back("gpt-oss's sinks and clamped GLU");
  if (m.sandwich_norm) missing.push_back("norms on the attention and FFN outputs");
  if (m.parallel_residual) missing.push_back("a parallel residual");
  if (m.attn_softcap > 0 || m.final_softcap > 0) missing.push_back("logit soft-capping");
  if (m.attention_chunk > 0 && m.attention_chunk < seq_len) missing.push_back("chunked attention");
  if (m.qk_l2_norm || !m.nope_layers.empty())
    missing.push_back("Llama 4's NoPE layers and q/k L2 norm");
  if (m.rope.fraction != 1.0 || m.model_type == "nemotron")
    missing.push_back("Nemotron's partial RoPE and LayerNorm1P");
  if (m.moe && m.moe->shared_expert_gate) missing.push_back("a gated shared expert");
  if (missing.empty()) return Status::ok();
  std::string list;
  for (size_t i = 0; i < missing.size(); ++i)
    list += (i == 0 ? "" : i + 1 == missing.size() ? " or " : ", ") + missing[i];
  return Status::invalid("Megatron-Bridge " + std::string(kMegatronBridgeVersion) +
                         " has no recipe for " + m.name + " (" + m.model_type +
                         "), and its vanilla GPT recipe has no field for " + list +
                         ": --emit megatron-bridge would train another model");
}

const char* activation(models::FfnKind k) {
  switch (k) {
    case models::FfnKind::kRelu:
      return "relu";
    case models::FfnKind::kRelu2:
      return "squared_relu";
    case models::FfnKind::kGelu:
    case models::FfnKind::kGeGlu:
      return "gelu";
    case models::FfnKind::kSwiGlu:
      break;
  }
  return "silu";
}

// The model shape as GPTModelProvider's fields (TransformerConfig at cd4afff); written for every
// recipe so that the run trains the simulated shape whatever the recipe's checkpoint config says.
void model_shape(const ModelSpec& m, const Layout& l, bool from_recipe, Overrides& o) {
  o.set("model.num_layers", m.num_layers);
  o.set("model.hidden_size", m.hidden);
  if (m.ffn > 0) o.set("model.ffn_hidden_size", m.ffn);
  o.set("model.num_attention_heads", m.num_heads);
  if (!m.mla) {
    o.set("model.num_query_groups", m.num_kv_heads);
    o.set("model.kv_channels", m.head_dim);
  } else {
    o.set("model.q_lora_rank", m.mla->q_lora_rank);
    o.set("model.kv_lora_rank", m.mla->kv_lora_rank);
    o.set("model.qk_head_dim", m.mla->qk_nope_head_dim);
    o.set("model.qk_pos_emb_head_dim", m.mla->qk_rope_head_dim);
    o.set("model.v_head_dim", m.mla->v_head_dim);
  }
  o.set("model.vocab_size", m.vocab);
  // Megatron-core pads the vocabulary to a multiple of make_vocab_size_divisible_by · tp
  // (Bridge's calculate_padded_vocab_size): the largest power of two up to 128 that keeps this one
  // unpadded, as the Megatron-LM export does.
  int64_t multiple = 128;
  while (multiple > 1 && m.vocab % (multiple * l.tp) != 0) multiple /= 2;
  o.set("model.make_vocab_size_divisible_by", multiple);
  o.set_bool("model.share_embeddings_and_output_weights", m.tied_embeddings);
  if (from_recipe) return;  // the rest comes from the model's Hugging Face config
  o.set("model.normalization",
        std::string(m.norm == models::NormKind::kRmsNorm ? "RMSNorm" : "LayerNorm"));
  o.set("model.layernorm_epsilon", number(m.norm_eps));
  o.set("model.activation_func", std::string(activation(m.ffn_kind)));
  o.set_bool("model.gated_linear_unit", m.gated_ffn());
  o.set("model.position_embedding_type", std::string("rope"));
  o.set("model.rotary_base", number(m.rope.theta));
  o.set_bool("model.add_bias_linear", m.has_o_bias() && m.has_ffn_bias());
  o.set_bool("model.add_qkv_bias", m.has_qkv_bias());
  o.set_bool("model.qk_layernorm", m.qk_norm);
  if (m.moe) {
    const models::MoeSpec& e = *m.moe;
    o.set("model.num_moe_experts", e.num_experts);
    o.set("model.moe_router_topk", e.top_k);
    o.set("model.moe_ffn_hidden_size", e.expert_ffn);
    if (e.num_shared_experts > 0)
      o.set("model.moe_shared_expert_intermediate_size",
            e.num_shared_experts * e.shared_expert_ffn);
    if (e.first_dense_layers > 0 || e.layer_freq != 1 || !e.dense_layers.empty()) {
      std::string pattern = "[";
      for (int64_t i = 0; i < m.num_layers; ++i) {
        if (i > 0) pattern += ',';
        pattern += m.is_moe_layer(i) ? '1' : '0';
      }
      o.set("model.moe_layer_freq", pattern + "]");
    }
    o.set("model.moe_router_score_function", e.score_function);
    // Megatron-core normalizes the top-k probabilities when the softmax follows the top-k
    // (moe_router_pre_softmax false): HF's norm_topk_prob.
    o.set_bool("model.moe_router_pre_softmax", !e.norm_topk_prob);
    o.set("model.moe_router_load_balancing_type",
          std::string(e.aux_loss_coeff > 0 ? (e.seq_aux ? "seq_aux_loss" : "aux_loss") : "none"));
    if (e.aux_loss_coeff > 0) o.set("model.moe_aux_loss_coeff", number(e.aux_loss_coeff));
    o.set_bool("model.moe_grouped_gemm", true);
  }
}

}  // namespace

std::string megatron_bridge_recipe(const ModelSpec& m) {
  for (const Recipe& r : kRecipes) {
    if (m.name == r.preset && m.model_type == r.model_type) return r.name;
  }
  return kVanillaGpt;
}

Result<Export> export_megatron_bridge(const ExportInput& in) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
  const std::string recipe = megatron_bridge_recipe(m);
  const bool from_recipe = recipe != kVanillaGpt;
  if (!from_recipe) {
    if (Status s = vanilla_supported(m, in.seq_len); !s.is_ok()) return s;
  }
  Export out;
  Overrides o;
  model_shape(m, l, from_recipe, o);
  // The dataset owns the sequence length; run_recipe.py copies it to the model after the
  // overrides (sync_model_dataset_sequence_length), and validate() asserts they agree.
  o.set("dataset.seq_length", in.seq_len);
  o.set("model.seq_length", in.seq_len);
  o.set("train.global_batch_size", l.global_batch());
  o.set("train.micro_batch_size", l.mbs);
  // Parallelism; dp is what is left, world / (tp·pp·cp) (ConfigContainer.get_data_parallel_size).
  o.set("model.tensor_model_parallel_size", l.tp);
  o.set("model.pipeline_model_parallel_size", l.pp);
  o.set("model.context_parallel_size", l.cp);
  o.set_bool("model.sequence_parallel", l.sequence_parallel());
  if (l.cp > 1) o.set("model.cp_comm_type", std::string(to_string(l.cp_comm_type())));
  if (m.moe) {
    o.set("model.expert_model_parallel_size", l.ep);
    o.set("model.expert_tensor_parallel_size", l.etp);
    const bool deepep = m.moe->dispatcher == models::MoeDispatcher::kDeepEp;
    // The recipe's own dispatcher (DeepSeek-V3's HybridEP, apply_flex_dispatcher_backend) is
    // replaced by the simulated one.
    o.set("model.moe_token_dispatcher_type", std::string(deepep ? "flex" : "alltoall"));
    if (deepep) {
      o.set("model.moe_flex_dispatcher_backend", std::string("deepep"));
    } else {
      o.set_null("model.moe_flex_dispatcher_backend");
    }
  }
  if (m.mtp_layers > 0) {
    o.set("model.mtp_num_layers", m.mtp_layers);
  } else {
    o.set_null("model.mtp_num_layers");
  }
  // The split: one explicit layout (Megatron-core's PipelineParallelLayerLayout) for every
  // pipeline, which also replaces a layout the recipe built for its own pp (DeepSeek-V3's for pp =
  // 16); the other split settings must then be unset (TransformerConfig.__post_init__ raises
  // "cannot be set with other pipeline layout arguments").
  const int vpp = l.vpp_degree();
  if (l.pp > 1) {
    o.set_string("model.pipeline_model_parallel_layout",
                 megatron_layout_string(chunk_layers(in), m.mtp_layers));
  } else {
    o.set_null("model.pipeline_model_parallel_layout");
  }
  o.set_null("model.num_layers_in_first_pipeline_stage");
  o.set_null("model.num_layers_in_last_pipeline_stage");
  o.set_bool("model.account_for_embedding_in_pipeline_split", false);
  o.set_bool("model.account_for_loss_in_pipeline_split", false);
  if (vpp > 1) {
    o.set("model.virtual_pipeline_model_parallel_size", vpp);
    // Megatron-core refuses a last micro-batch group of 1..pp-1 (schedules.py); the simulation ran
    // the group size that it accepts (core/layout.h, interleave_group_size).
    o.set("model.microbatch_group_size_per_vp_stage",
          interleave_group_size(l.pp, l.num_microbatches()));
  } else {
    o.set_null("model.virtual_pipeline_model_parallel_size");
  }
  if (l.recompute == Recompute::kSelective) {
    o.set("model.recompute_granularity", std::string("selective"));
    std::string modules = l.recompute_modules ? format_recompute_modules(*l.recompute_modules)
                                              : std::string("core_attn");
    std::replace(modules.begin(), modules.end(), '+', ',');
    o.set("model.recompute_modules", "[" + modules + "]");
    o.set_null("model.recompute_method");
    o.set_null("model.recompute_num_layers");
  } else if (l.recompute == Recompute::kFull) {
    o.set("model.recompute_granularity", std::string("full"));
    o.set("model.recompute_method", std::string("uniform"));
    o.set("model.recompute_num_layers", 1);
  } else {
    o.set_null("model.recompute_granularity");
    o.set_null("model.recompute_method");
    o.set_null("model.recompute_num_layers");
  }
  // ZeRO as Megatron-core says it: the distributed optimizer (ZeRO-1) or Megatron FSDP's
  // optim_grads / optim_grads_params (ZeRO-2/3). The parameter gather overlaps the next forward
  // where the simulation of Megatron-core's conventions overlaps it (sim::param_gather_for),
  // aligned across virtual stages with interleaving: Bridge leaves ddp.align_param_gather at its
  // default (off) unless a CommOverlapConfig sets it (training/comm_overlap.py), so it is written.
  const sim::ParamGather gather =
      sim::param_gather_for(sim::framework(FrameworkId::kMegatron).timing, l);
  const bool fsdp = l.zero >= 2;
  o.set_bool("ddp.use_distributed_optimizer", l.zero >= 1);
  o.set_bool("optimizer.use_distributed_optimizer", l.zero >= 1);
  // moments=bf16: Megatron-core's precision-aware optimizer (export/megatron.cc); the override's
  // string is turned back into the torch.dtype (omegaconf_utils.py _apply_overrides:
  // getattr(torch, value.split(".")[-1])). The fp32 master is kept whole, as simulated
  // (OptimizerConfig.store_param_remainders=False; True would keep a 16-bit remainder).
  if (l.moments == MomentDtype::kBf16) {
    o.set_bool("optimizer.use_precision_aware_optimizer", true);
    o.set("optimizer.exp_avg_dtype", std::string("torch.bfloat16"));
    o.set("optimizer.exp_avg_sq_dtype", std::string("torch.bfloat16"));
    o.set_bool("optimizer.store_param_remainders", false);
  }
  o.set_bool("ddp.use_megatron_fsdp", fsdp);
  o.set("ddp.data_parallel_sharding_strategy", std::string(l.zero == 2   ? "optim_grads"
                                                           : l.zero >= 3 ? "optim_grads_params"
                                                                         : "no_shard"));
  o.set_bool("ddp.overlap_grad_reduce", true);
  const bool overlap_gather =
      l.zero >= 3 || (l.zero >= 1 && gather != sim::ParamGather::kAfterStep);
  o.set_bool("ddp.overlap_param_gather", overlap_gather);
  o.set_bool("ddp.align_param_gather", overlap_gather && vpp > 1);
  // Megatron FSDP saves only fsdp_dtensor checkpoints (ConfigContainer
  // _validate_and_apply_megatron_fsdp_configs).
  o.set("checkpoint.ckpt_format", std::string(fsdp ? "fsdp_dtensor" : "torch_dist"));
  // Megatron-LM's --fp8-format hybrid with its default delayed scaling, as the Megatron-LM export.
  o.set("mixed_precision",
        std::string(l.dtype == DType::kFp8 ? "bf16_with_fp8_delayed_scaling_mixed" : "bf16_mixed"));
  if (l.pp > 1 && l.schedule != Schedule::k1F1B && l.schedule != Schedule::kInterleaved) {
    out.notes.push_back("Megatron-core runs pipelines with 1F1B or the interleaved schedule; the " +
                        std::string(to_string(l.schedule)) +
                        " schedule has no setting, so this runs 1F1B.");
  }
  if (l.tp > 1 && l.sequence_parallel()) {
    out.notes.push_back(
        "TP communication is not overlapped with the GEMMs, as simulated; the recipe's "
        "comm_overlap (tp_comm_overlap) may hide part of it where your cluster supports it.");
  }
  out.notes.push_back(
      "--dataset mock trains on generated tokens; name your data with --dataset and "
      "dataset.blend=... (run_recipe.py --help); the recipe's learning rate, iterations and "
      "checkpoint folder are kept.");
  const int64_t nproc = std::min<int64_t>(in.gpus, in.gpus_per_node);
  const int64_t nnodes = (in.gpus + nproc - 1) / nproc;
  std::ostringstream s;
  s << "#!/bin/bash\n" << header_comment(in, out.notes);
  s << "# Megatron-Bridge " << kMegatronBridgeVersion << " (" << kMegatronBridgeCommit
    << "): run from its repository root. Recipe " << recipe
    << (from_recipe ? "" : " (a bare GPTModelProvider: the whole model shape is overridden)")
    << "; each KEY=VALUE overrides one ConfigContainer field.\n";
  // Megatron FSDP asserts "FSDP requires CUDA_DEVICE_MAX_CONNECTIONS > 1 or unset."
  if (fsdp) s << "unset CUDA_DEVICE_MAX_CONNECTIONS\n";
  if (nnodes > 1) {
    s << ": \"${NODE_RANK:?set NODE_RANK to this node's index, 0 on the first}\"\n"
      << ": \"${MASTER_ADDR:?set MASTER_ADDR to the first node's address}\"\n"
      << "torchrun --nproc_per_node " << nproc << " --nnodes " << nnodes
      << " --node_rank \"$NODE_RANK\" --master_addr \"$MASTER_ADDR\" --master_port "
         "\"${MASTER_PORT:-6000}\" \\\n";
  } else {
    s << "torchrun --standalone --nproc_per_node " << nproc << " \\\n";
  }
  s << "    scripts/training/run_recipe.py \\\n"
    << "    --recipe " << recipe << " --mode pretrain --dataset mock \\\n"
    << o.join("    ");
  out.content = s.str();
  return out;
}

}  // namespace scaleplan::planner
