// `scaleplan model`: parameters (total, active, per component) and training FLOPs per token of a
// model preset or HF config.json; `model list` shows the bundled presets.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/layout.h"
#include "core/units.h"
#include "models/accounting.h"
#include "models/model_spec.h"

namespace scaleplan::cli {
namespace {

struct ModelOptions {
  std::string model;
  int64_t seq = 4096;
  bool json = false;
  bool list = false;
};

constexpr Recompute kRecomputes[] = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};

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

Json model_json(const models::ModelSpec& m, const models::ParamCounts& p,
                const models::FlopsPerToken& f, int64_t seq) {
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

void print_model(const models::ModelSpec& m, const models::ParamCounts& p,
                 const models::FlopsPerToken& f, int64_t seq) {
  fmt::print("model       {} ({})\n", m.name, m.model_type);
  fmt::print("shape       h={} L={} heads={} kv={} head_dim={} ffn={} vocab={}{}\n", m.hidden,
             m.num_layers, m.num_heads, m.num_kv_heads, m.head_dim, m.ffn, m.vocab,
             m.tied_embeddings ? " (tied)" : "");
  if (m.moe) {
    fmt::print("experts     {} routed (top {}, width {}), {} shared, {} of {} layers MoE\n",
               m.moe->num_experts, m.moe->top_k, m.moe->expert_ffn, m.moe->num_shared_experts,
               m.num_moe_layers(), m.num_layers);
  }
  if (m.sliding_window > 0) {
    fmt::print("attention   sliding window of {} tokens on {} of {} layers\n", m.sliding_window,
               m.num_sliding_layers(), m.num_layers);
  }
  if (m.attention_chunk > 0) {
    fmt::print("attention   chunks of {} tokens on {} of {} layers\n", m.attention_chunk,
               m.num_chunked_layers(), m.num_layers);
  }
  if (!m.nope_layers.empty())
    fmt::print("attention   no RoPE on {} of {} layers\n", m.num_layers - rope_layers(m),
               m.num_layers);
  if (m.attn_softcap > 0 || m.final_softcap > 0)
    fmt::print("soft-caps   attention logits {}, output logits {}\n", m.attn_softcap,
               m.final_softcap);
  std::string layer = std::string(ffn_name(m.ffn_kind)) + " FFN";
  if (m.sandwich_norm) layer += ", norms before and after attention and FFN";
  if (m.parallel_residual) layer += ", parallel attention and FFN residual";
  fmt::print("layers      {}\n", layer);
  for (const std::string& note : m.notes) fmt::print("note        {}\n", note);
  fmt::print("\nparameters  total {}  active {}  ({} exact total)\n", format_count(p.total),
             format_count(p.active), p.total);
  if (p.mtp > 0) fmt::print("            + MTP modules {} (not in total)\n", format_count(p.mtp));
  fmt::print("  {:<16} {:>18} {:>8}\n", "component", "parameters", "share");
  for (const auto& [c, n] : p.by_component) {
    fmt::print("  {:<16} {:>18} {:>7.2f}%\n", to_string(c), n,
               100.0 * static_cast<double>(n) / static_cast<double>(p.total));
  }
  fmt::print("\nFLOPs per token (seq {}, causal attention, multiply-add = 2)\n", seq);
  fmt::print("  {:<22} {:>12}\n", "forward", format_count(f.forward));
  fmt::print("  {:<22} {:>12}\n", "  of which attention", format_count(f.attention_forward));
  if (f.mtp_forward > 0)
    fmt::print("  {:<22} {:>12}\n", "  of which MTP modules", format_count(f.mtp_forward));
  fmt::print("  {:<22} {:>12}\n", "backward", format_count(f.backward));
  fmt::print("  {:<22} {:>12}\n", "model (MFU)", format_count(f.model()));
  for (Recompute r : kRecomputes) {
    fmt::print("  {:<22} {:>12}\n", fmt::format("hardware, {}", to_string(r)),
               format_count(f.hardware(r)));
  }
}

// `model list`: the bundled presets, in the listing style of `cluster list` (a table of name and
// what tells them apart; JSON {"models": [{"name", ...}]}).
Status run_list(bool json) {
  Json out = Json::array();
  if (!json) fmt::print("{:<18} {:<14} {:>10} {:>10}\n", "name", "model_type", "total", "active");
  for (const std::string& name : models::preset_names()) {
    auto m = models::load_model(name);
    if (!m) return Status::internal("bundled preset " + name + ": " + m.status().message());
    models::ParamCounts p = models::count_params(*m);
    if (json) {
      out.push_back({{"name", name},
                     {"model_type", m->model_type},
                     {"params_total", p.total},
                     {"params_active", p.active}});
    } else {
      fmt::print("{:<18} {:<14} {:>10} {:>10}\n", name, m->model_type, format_count(p.total),
                 format_count(p.active));
    }
  }
  if (json) print_json(Json{{"models", out}});
  return Status::ok();
}

Status run_model(const ModelOptions& o) {
  if (o.list) return run_list(o.json);
  if (o.model.empty())
    return Status::invalid(
        "--model is required (a preset name or a config.json path; see `model list`)");
  if (o.seq <= 0) return Status::invalid("--seq: must be positive, got " + std::to_string(o.seq));
  if (o.seq > kMaxSeqLen)
    return Status::invalid("--seq: " + std::to_string(o.seq) + " is more than the " +
                           std::to_string(kMaxSeqLen) + " tokens scaleplan models");
  SP_ASSIGN_OR_RETURN(models::ModelSpec m, models::load_model(o.model));
  models::ParamCounts p = models::count_params(m);
  models::FlopsPerToken f = models::flops_per_token(m, o.seq);
  if (o.json) {
    print_json(model_json(m, p, f, o.seq));
  } else {
    print_model(m, p, f, o.seq);
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    model, "model", "Parameters (total, active, per component) and FLOPs per token of a model",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<ModelOptions>();
      sub.add_option("--model,-m", o->model,
                     "Preset name (see `model list`) or path to a HF config.json");
      add_count(sub, "--seq", o->seq, "Sequence length for attention FLOPs")->default_val(4096);
      sub.add_flag("--json", o->json, "Machine-readable output on stdout");
      CLI::App* list = sub.add_subcommand("list", "List the bundled presets");
      list->add_flag("--json", o->json, "Machine-readable output on stdout");
      // The older spelling, kept working but not shown.
      sub.add_flag("--list", o->list, "List the bundled presets")->group("");
      return [o, list] {
        if (list->parsed()) o->list = true;
        return run_model(*o);
      };
    },
    10);

}  // namespace scaleplan::cli
