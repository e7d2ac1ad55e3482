// The plan file: the json export (export_layout with ExportFormat::kJson, export/plan_file.cc)
// read back, with what `simulate --plan` and `run` need to reproduce the plan exactly. Pure
// functions of their inputs (read_plan_file reads the file); thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/framework.h"
#include "core/layout.h"
#include "core/status.h"
#include "core/units.h"
#include "models/model_spec.h"

namespace scaleplan::planner {

// A plan file read back: what `simulate` and `run` need to reproduce the plan.
struct PlanFile {
  models::ModelSpec model;
  std::string model_name;
  std::string cluster;
  int64_t gpus = 0;
  int64_t seq_len = 0;
  Layout layout;
  FrameworkId framework = FrameworkId::kMegatron;  // "framework"; files before it: Megatron-core
  std::optional<Duration> host_launch;             // "host_launch_s"
  bool tp_comm_overlap = false;                    // "tp_comm_overlap"; files before it: false
  std::string compile;  // "compile": torchtitan's compile.components; files before it: eager
  std::optional<double> predicted_iteration_s;
};
// Errors name the file and the key ("plan.json: layout: missing").
Result<PlanFile> read_plan_file(const std::string& path);
Result<PlanFile> parse_plan(std::string_view text, const std::string& path);

}  // namespace scaleplan::planner
