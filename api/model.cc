// `model` as a library call; contract in model.h.
#include "api/model.h"

#include <nlohmann/json.hpp>

#include "core/layout.h"

namespace scaleplan::api {
namespace {

Status check_seq(int64_t seq) {
  if (seq <= 0) return Status::invalid("--seq: must be positive, got " + std::to_string(seq));
  if (seq > kMaxSeqLen)
    return Status::invalid("--seq: " + std::to_string(seq) + " is more than the " +
                           std::to_string(kMaxSeqLen) + " tokens scaleplan models");
  return Status::ok();
}

}  // namespace

std::string_view ffn_name(models::FfnKind k) {
  switch (k) {
    case models::FfnKind::kSwiGlu:
      return "swiglu";
    case models::FfnKind::kGeGlu:
      return "geglu";
    case models::FfnKind::kGelu:
      return "gelu";
    case models::FfnKind::kRelu:
      return "relu";
    case models::FfnKind::kRelu2:
      return "relu2";
  }
  return "?";
}

int64_t rope_layers(const models::ModelSpec& m) {
  int64_t n = 0;
  for (int64_t l = 0; l < m.num_layers; ++l) n += m.uses_rope(l) ? 1 : 0;
  return n;
}

Json ModelOutcome::to_json() const {
  const models::ModelSpec& m = model;
  const models::ParamCounts& p = params;
  const models::FlopsPerToken& f = flops;
  Json by_component = Json::object();
  for (const auto& [c, n] : p.by_component) by_component[std::string(to_string(c))] = n;
  Json hardware = Json::object();
  for (Recompute r : kRecomputes) hardware[std::string(to_string(r))] = f.hardware(r);
  Json arch = {{"hidden_size", m.hidden},
               {"num_hidden_layers", m.num_layers},
               {"num_attention_heads", m.num_heads},
               {"num_key_value_heads", m.num_kv_heads},
               {"head_dim", m.head_dim},
               {"intermediate_size", m.ffn},
               {"vocab_size", m.vocab},
               {"tie_word_embeddings", m.tied_embeddings},
               {"mla", m.mla.has_value()}};
  if (m.moe) {
    arch["num_experts"] = m.moe->num_experts;
    arch["num_experts_per_tok"] = m.moe->top_k;
    arch["moe_intermediate_size"] = m.moe->expert_ffn;
    arch["num_shared_experts"] = m.moe->num_shared_experts;
    arch["num_moe_layers"] = m.num_moe_layers();
  }
  if (m.sliding_window > 0) {
    arch["sliding_window"] = m.sliding_window;
    arch["num_sliding_layers"] = m.num_sliding_layers();
  }
  arch["ffn"] = ffn_name(m.ffn_kind);
  if (m.attention_chunk > 0) {
    arch["attention_chunk_size"] = m.attention_chunk;
    arch["num_chunked_layers"] = m.num_chunked_layers();
  }
  if (!m.nope_layers.empty()) arch["num_nope_layers"] = m.num_layers - rope_layers(m);
  if (m.sandwich_norm) arch["post_norms"] = true;
  if (m.parallel_residual) arch["parallel_residual"] = true;
  if (m.attn_softcap > 0) arch["attn_logit_softcapping"] = m.attn_softcap;
  if (m.final_softcap > 0) arch["final_logit_softcapping"] = m.final_softcap;
  if (m.rope.fraction < 1) arch["partial_rotary_factor"] = m.rope.fraction;
  return {{"model", m.name},
          {"model_type", m.model_type},
          {"seq", seq},
          {"params_total", p.total},
          {"params_active", p.active},
          {"params_embedding", p.embedding},
          {"params_mtp", p.mtp},
          {"params_by_component", by_component},
          {"flops_per_token", f.model()},
          {"flops",
           {{"forward", f.forward},
            {"backward", f.backward},
            {"attention_forward", f.attention_forward},
            {"mtp_forward", f.mtp_forward},
            {"model", f.model()},
            {"hardware", hardware}}},
          {"architecture", arch},
          {"notes", m.notes}};
}

Result<ModelOutcome> model(const models::ModelSpec& spec, int64_t seq) {
  SP_RETURN_IF_ERROR(check_seq(seq));
  ModelOutcome out;
  out.model = spec;
  out.params = models::count_params(spec);
  out.flops = models::flops_per_token(spec, seq);
  out.seq = seq;
  return out;
}

Result<ModelOutcome> model(const ModelRequest& o) {
  if (o.model.empty())
    return Status::invalid(
        "--model is required (a preset name or a config.json path; see `model list`)");
  SP_RETURN_IF_ERROR(check_seq(o.seq));
  SP_ASSIGN_OR_RETURN(models::ModelSpec m, models::load_model(o.model));
  return model(m, o.seq);
}

Json ModelList::to_json() const {
  Json out = Json::array();
  for (const auto& p : presets) {
    out.push_back({{"name", p.name},
                   {"model_type", p.model_type},
                   {"params_total", p.params_total},
                   {"params_active", p.params_active}});
  }
  return Json{{"models", out}};
}

Result<ModelList> model_list() {
  ModelList list;
  for (const std::string& name : models::preset_names()) {
    auto m = models::load_model(name);
    if (!m) return Status::internal("bundled preset " + name + ": " + m.status().message());
    models::ParamCounts p = models::count_params(*m);
    list.presets.push_back({name, m->model_type, p.total, p.active});
  }
  return list;
}

}  // namespace scaleplan::api
