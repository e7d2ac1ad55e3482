// torchtitan v0.2.2, its last release configured by TOML (ecosystem.md §2.3): the job file
// (`--emit torchtitan-0.2.2`); and what both torchtitan exporters share (export/export_util.h):
// the model module, the flavor with this model's shape, its note and the FSDP mapping.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "export/export_util.h"
#include "export/formats.h"
#include "sim/framework.h"

namespace scaleplan::planner {

using models::ModelSpec;

std::string torchtitan_compile_components(const std::string& components) {
  std::string list;
  size_t from = 0;
  while (from <= components.size()) {
    const size_t comma = std::min(components.find(',', from), components.size());
    list += (list.empty() ? "[\"" : ", \"") + components.substr(from, comma - from) + "\"";
    from = comma + 1;
  }
  return list + "]";
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
static std::optional<double> model_field(const ModelSpec& m, const std::string& key) {
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
                           " flavors have no extracted HF shape (export/frameworks/"
                           "torchtitan.json), so no flavor can be checked to be " +
                           m.name + ": --emit torchtitan does not write it");
  return Status::invalid(version + " has no " + module + " flavor with this model's shape (" +
                         m.name + ": hidden " + std::to_string(m.hidden) + ", " +
                         std::to_string(m.num_layers) +
                         " layers); register one in "
                         "torchtitan/models/" +
                         module + "/__init__.py to export it");
}

void note_flavor_differences(const Flavor& flavor, std::vector<std::string>& notes) {
  if (flavor.differences.empty()) return;
  std::string d;
  for (const auto& x : flavor.differences) d += (d.empty() ? "" : ", ") + x;
  notes.push_back("torchtitan's " + flavor.module + " flavor " + flavor.name +
                  " has this model's shape but sets " + d +
                  "; the run trains with the flavor's values.");
}

TorchtitanDataParallel torchtitan_data_parallel(const Layout& l, std::vector<std::string>& notes) {
  TorchtitanDataParallel d;
  d.replicate = l.dp_degree();
  if (l.zero >= 1) {
    d.replicate = 1;
    d.shard = l.dp_degree();
    d.reshard = l.zero == 3 ? "always" : "never";
  }
  if (l.zero == 1) {
    notes.push_back(
        "torchtitan has no ZeRO-1; FSDP2 with fsdp_reshard_after_forward = \"never\" (ZeRO-2-like) "
        "is the closest and also shards gradients.");
  }
  return d;
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

}  // namespace

Result<Export> export_torchtitan_toml(const ExportInput& in) {
  const ModelSpec& m = *in.model;
  const Layout& l = in.layout;
  Export out;
  SP_ASSIGN_OR_RETURN(const Json defs, framework_defs("torchtitan"));
  SP_ASSIGN_OR_RETURN(const Flavor flavor, torchtitan_flavor(m, defs));
  note_flavor_differences(flavor, out.notes);
  const TorchtitanDataParallel data = torchtitan_data_parallel(l, out.notes);
  const int64_t replicate = data.replicate, shard = data.shard;
  const std::string& reshard = data.reshard;
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
  // torch.compile as predicted (plan --compile): torchtitan's [compile] section, off by default
  // (torchtitan/config/job_config.py:721-726 at v0.2.2: enable = False, components = ["model",
  // "loss"], backend "inductor").
  if (!in.compile.empty()) {
    o << "\n[compile]\nenable = true\ncomponents = " << torchtitan_compile_components(in.compile)
      << "\n";
  }
  if (l.dtype == DType::kFp8) {
    o << "\n[quantize.linear.float8]\nenable_fsdp_float8_all_gather = "
      << (l.zero >= 1 ? "true" : "false") << "\n";
  }
  out.content = o.str();
  return out;
}

}  // namespace scaleplan::planner
