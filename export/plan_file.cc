// The plan file (`--emit json`): written from a plan, read back by `simulate --plan` and `run`.
#include "export/plan_file.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/data_dir.h"
#include "core/json_util.h"
#include "export/export_util.h"
#include "export/formats.h"

namespace scaleplan::planner {
namespace {

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

}  // namespace

Result<Export> export_plan_json(const ExportInput& in) {
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
  if (!in.compile.empty()) j["compile"] = in.compile;
  j["gradient_accumulation"] = l.num_microbatches();
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
  if (json_has(j, "compile")) {
    SP_ASSIGN_OR_RETURN(p.compile, json_string(j, "compile", path));
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
