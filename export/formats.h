// Each format's writer, one file per framework (export/<framework>.cc); export_layout
// (export/exporters.h) checks the input and dispatches to them. Internal to export/: callers use
// export_layout. Each takes a resolved layout and a non-null model; pure, thread-safe.
#pragma once

#include "export/exporters.h"

namespace scaleplan::planner {

Result<Export> export_megatron(const ExportInput& in);         // export/megatron.cc
Result<Export> export_torchtitan_toml(const ExportInput& in);  // export/torchtitan_toml.cc
Result<Export> export_deepspeed(const ExportInput& in);        // export/deepspeed.cc
Result<Export> export_nanotron(const ExportInput& in);         // export/nanotron.cc
Result<Export> export_plan_json(const ExportInput& in);        // export/plan_file.cc

}  // namespace scaleplan::planner
