// `scaleplan model`: parameters (total, active, per component) and training FLOPs per token of a
// model preset or HF config.json; `model list` shows the bundled presets.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/model.h"
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

void print_model(const api::ModelOutcome& o) {
  const models::ModelSpec& m = o.model;
  const models::ParamCounts& p = o.params;
  const models::FlopsPerToken& f = o.flops;
  const int64_t seq = o.seq;
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
    fmt::print("attention   no RoPE on {} of {} layers\n", m.num_layers - api::rope_layers(m),
               m.num_layers);
  if (m.attn_softcap > 0 || m.final_softcap > 0)
    fmt::print("soft-caps   attention logits {}, output logits {}\n", m.attn_softcap,
               m.final_softcap);
  std::string layer = std::string(api::ffn_name(m.ffn_kind)) + " FFN";
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
  for (Recompute r : api::kRecomputes) {
    fmt::print("  {:<22} {:>12}\n", fmt::format("hardware, {}", to_string(r)),
               format_count(f.hardware(r)));
  }
}

// `model list`: the bundled presets, in the listing style of `cluster list` (a table of name and
// what tells them apart; JSON {"models": [{"name", ...}]}).
Status run_list(bool json) {
  SP_ASSIGN_OR_RETURN(const api::ModelList list, api::model_list());
  if (json) {
    print_json(list.to_json());
    return Status::ok();
  }
  fmt::print("{:<18} {:<14} {:>10} {:>10}\n", "name", "model_type", "total", "active");
  for (const auto& p : list.presets) {
    fmt::print("{:<18} {:<14} {:>10} {:>10}\n", p.name, p.model_type, format_count(p.params_total),
               format_count(p.params_active));
  }
  return Status::ok();
}

Status run_model(const ModelOptions& o) {
  if (o.list) return run_list(o.json);
  SP_ASSIGN_OR_RETURN(const api::ModelOutcome outcome, api::model({o.model, o.seq}));
  if (o.json) {
    print_json(outcome.to_json());
  } else {
    print_model(outcome);
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
