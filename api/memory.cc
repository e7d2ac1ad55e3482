// `memory` as a library call; contract in memory.h.
#include "api/memory.h"

#include <nlohmann/json.hpp>

#include "api/options.h"
#include "core/json_util.h"
#include "hw_profiles/cluster.h"
#include "models/model_spec.h"

namespace scaleplan::api {
namespace {

Json stage_json(const models::StageMemory& s) {
  return {{"stage", s.stage},
          {"layers", s.layers},
          {"params", s.params},
          {"microbatches_in_flight", s.in_flight},
          {"weights", s.weights.value()},
          {"fp8_weight_copies", s.fp8_weight_copies.value()},
          {"autocast_weight_cache", s.autocast_weight_cache.value()},
          {"gradients", s.gradients.value()},
          {"optimizer", s.optimizer.value()},
          {"activations", s.activations.value()},
          {"activations_per_microbatch", s.activations_per_microbatch.value()},
          {"buffers", s.buffers.value()},
          {"buffers_detail",
           {{"logits_transient", s.logits_transient.value()},
            {"backward_transient", s.backward_transient.value()},
            {"comm_buffers", s.comm_buffers.value()}}},
          {"optimizer_step_transient", s.optimizer_transient.value()},
          {"fwd_bwd_peak", s.fwd_bwd_peak.value()},
          {"optimizer_step_peak", s.step_peak.value()},
          {"total", s.total.value()},
          {"fragmentation", s.fragmentation.value()},
          {"reserved", s.reserved.value()}};
}

Result<Bytes> cluster_memory(const std::string& name) {
  Result<hw::Cluster> c = hw::load_cluster(name);
  if (!c) return c.status().with_context("--cluster");
  return c->gpu.memory;
}

Json error_json(const planner::ErrorStats& s) {
  return {{"compared", s.n},
          {"median_abs_error", s.median},
          {"worst_abs_error", s.worst},
          {"worst_id", s.worst_id}};
}

}  // namespace

Json MemoryOutcome::to_json() const {
  const models::MemoryResult& r = result;
  Json stages = Json::array();
  for (const auto& s : r.stages) stages.push_back(stage_json(s));
  return {{"model", model},
          {"layout", format_layout(layout)},
          {"framework", to_string(framework)},
          {"seq", seq},
          {"fits", r.fits},
          {"gpu_memory_bytes", r.gpu_memory.value()},
          {"peak_bytes", r.peak_reserved.value()},
          {"peak_allocated_bytes", r.peak_allocated.value()},
          {"peak_reserved_bytes", r.peak_reserved.value()},
          {"peak_stage", r.peak_stage},
          {"overhead_bytes", r.overhead.value()},
          {"margin_bytes", r.margin.value()},
          {"headroom_bytes", r.headroom.value()},
          {"stages", stages}};
}

Result<MemoryOutcome> memory(const MemoryRequest& o) {
  if (o.model.empty())
    return Status::invalid("--model is required (a preset name or a config.json path)");
  if (o.seq < 0) return Status::invalid("--seq is required (the sequence length in tokens)");
  if (o.seq == 0) return Status::invalid("--seq: must be positive, got 0");
  if (o.layout.empty()) return Status::invalid("--layout is required (e.g. tp=8,pp=2,dp=4)");
  if (o.cluster.empty() && o.gpu_memory.empty()) {
    return Status::invalid("--cluster or --gpu-memory is required");
  }
  SP_ASSIGN_OR_RETURN(models::ModelSpec m, models::load_model(o.model));
  SP_RETURN_IF_ERROR(apply_moe_imbalance(m, o.moe_imbalance));
  SP_ASSIGN_OR_RETURN(Layout parsed, parse_layout(o.layout));
  // Memory is per GPU: without --gpus or dp the data-parallel degree only matters for ZeRO, so a
  // layout without either is read as one replica (dp=1).
  if (!parsed.dp && o.gpus <= 0) parsed.dp = 1;
  MemoryOutcome out;
  SP_ASSIGN_OR_RETURN(out.layout,
                      resolve_layout(parsed, models::layout_constraints(m, o.seq), o.gpus));
  models::MemoryOptions opt;
  SP_ASSIGN_OR_RETURN(out.framework, parse_framework(o.framework));
  opt.framework = models::framework_memory(out.framework);
  opt.ops = models::framework_ops(out.framework);
  if (!o.gpu_memory.empty()) {
    SP_ASSIGN_OR_RETURN(opt.gpu_memory, parse_bytes(o.gpu_memory, "--gpu-memory"));
  } else {
    SP_ASSIGN_OR_RETURN(opt.gpu_memory, cluster_memory(o.cluster));
  }
  SP_ASSIGN_OR_RETURN(opt.margin, parse_bytes(o.margin, "--margin"));
  SP_ASSIGN_OR_RETURN(out.result, models::estimate_memory(m, out.layout, o.seq, opt));
  out.model = m.name;
  out.seq = o.seq;
  return out;
}

Json MemoryValidateOutcome::to_json() const {
  const planner::MemoryValidation& v = validation;
  Json rows = Json::array();
  for (const auto& r : v.rows) {
    Json j = {{"id", r.id},
              {"status", r.status},
              {"layout", r.layout},
              {"predicted_fits", r.predicted_fits},
              {"predicted_allocated_gib", r.predicted_allocated_gib},
              {"predicted_reserved_gib", r.predicted_reserved_gib},
              {"predicted_peak_reserved_gib", r.predicted_peak_reserved_gib}};
    j["measured_allocated_gib"] =
        r.measured_allocated_gib ? Json(*r.measured_allocated_gib) : Json();
    j["measured_reserved_gib"] = r.measured_reserved_gib ? Json(*r.measured_reserved_gib) : Json();
    rows.push_back(j);
  }
  return {{"records", rows},
          {"skipped", v.skipped},
          {"skip_reasons", v.skip_reasons},
          {"allocated", error_json(v.allocated)},
          {"reserved", error_json(v.reserved)},
          {"oom_rows", v.oom_rows},
          {"oom_called_oom", v.oom_called_oom},
          {"ok_rows", v.ok_rows},
          {"ok_called_oom", v.ok_called_oom}};
}

Result<MemoryValidateOutcome> memory_validate(const MemoryValidateRequest& o) {
  const Result<std::string> path = planner::validation_file(o.file);
  if (!path) return path.status().with_context("--validate");
  SP_ASSIGN_OR_RETURN(Json file, read_json_file(*path));
  SP_ASSIGN_OR_RETURN(const std::vector<planner::RunRecord> records,
                      planner::parse_run_records(file, *path));
  planner::ClusterSet clusters;
  for (const auto& rec : records) {
    if (clusters.count(rec.cluster)) continue;
    if (Result<hw::Cluster> c = hw::load_cluster(rec.cluster)) clusters.emplace(rec.cluster, *c);
  }
  MemoryValidateOutcome out;
  out.request = o;
  out.validation = planner::validate_memory(records, clusters, o.framework);
  return out;
}

}  // namespace scaleplan::api
