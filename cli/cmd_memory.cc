// `scaleplan memory`: per-GPU memory of every pipeline stage of a layout, by category, and whether
// it fits; `--validate FILE` compares the memory model with the measured runs of a validation
// record file (validate/validation.h, the rules `validate` uses too).
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "api/memory.h"
#include "cli/command.h"
#include "cli/model_options.h"
#include "cli/options.h"
#include "cli/output.h"
#include "core/layout.h"
#include "core/units.h"
#include "models/memory.h"

namespace scaleplan::cli {
namespace {

struct MemoryCliOptions {
  api::MemoryRequest request;
  std::string validate, validate_framework;
  bool json = false;
};

double gib(Bytes b) { return to_gib(b); }

void print_table(const models::MemoryResult& r, const std::string& model, const Layout& l,
                 const std::string& framework) {
  fmt::print("model {}  layout {}  framework {}\n", model, format_layout(l), framework);
  fmt::print("per GPU, GiB; activations = micro-batches in flight x one micro-batch\n\n");
  fmt::print("{:>5} {:>6} {:>9} {:>9} {:>9} {:>9} {:>11} {:>9} {:>9} {:>10} {:>9}\n", "stage",
             "layers", "weights", "grads", "optim", "in-flight", "activations", "buffers", "total",
             "fragment", "reserved");
  for (const auto& s : r.stages) {
    fmt::print(
        "{:>5} {:>6} {:>9.2f} {:>9.2f} {:>9.2f} {:>9.2f} {:>11.2f} {:>9.2f} {:>9.2f} {:>10.2f} "
        "{:>9.2f}\n",
        s.stage, s.layers, gib(s.weights + s.fp8_weight_copies), gib(s.gradients), gib(s.optimizer),
        s.in_flight, gib(s.activations), gib(s.buffers), gib(s.total), gib(s.fragmentation),
        gib(s.reserved));
  }
  if (r.stages.front().fp8_weight_copies.value() > 0) {
    fmt::print(
        "\nweights include the fp8 copies and transposes of the decoder weights ({:.2f} GiB "
        "on stage 0)\n",
        gib(r.stages.front().fp8_weight_copies));
  }
  fmt::print("\npeak allocated {:.2f} GiB, peak reserved {:.2f} GiB (stage {})\n",
             gib(r.peak_allocated), gib(r.peak_reserved), r.peak_stage);
  fmt::print("CUDA context + NCCL {:.2f} GiB, margin {:.2f} GiB, GPU memory {:.2f} GiB\n",
             gib(r.overhead), gib(r.margin), gib(r.gpu_memory));
  fmt::print("{}: headroom {:.2f} GiB\n", r.fits ? "fits" : "DOES NOT FIT", gib(r.headroom));
}

Status run_validate(const MemoryCliOptions& o) {
  SP_ASSIGN_OR_RETURN(const api::MemoryValidateOutcome out,
                      api::memory_validate({o.validate, o.validate_framework}));
  if (o.json) {
    print_json(out.to_json());
    return Status::ok();
  }
  const planner::MemoryValidation& v = out.validation;
  fmt::print("{:<22} {:>6} {:>9} {:>9} {:>9} {:>9} {:>5}  {}\n", "id", "status", "alloc", "meas",
             "reserved", "meas", "fits", "layout");
  for (const auto& r : v.rows) {
    auto m = [](const std::optional<double>& x) { return x ? fmt::format("{:.2f}", *x) : "-"; };
    fmt::print("{:<22} {:>6} {:>9.2f} {:>9} {:>9.2f} {:>9} {:>5}  {}\n", r.id, r.status,
               r.predicted_allocated_gib, m(r.measured_allocated_gib), r.predicted_reserved_gib,
               m(r.measured_reserved_gib), r.predicted_fits ? "yes" : "no", r.layout);
  }
  fmt::print("\n{} records evaluated, {} skipped\n", v.rows.size(), v.skipped);
  for (const std::string& why : v.skip_reasons) fmt::print("  skipped: {}\n", why);
  fmt::print(
      "allocated peak vs measured (GiB, first stage): median |err| {:.1f}%, worst {:.1f}% ({}), "
      "n={}\n",
      100 * v.allocated.median, 100 * v.allocated.worst, v.allocated.worst_id, v.allocated.n);
  fmt::print(
      "reserved vs measured:                          median |err| {:.1f}%, worst {:.1f}% ({}), "
      "n={}\n",
      100 * v.reserved.median, 100 * v.reserved.worst, v.reserved.worst_id, v.reserved.n);
  fmt::print("OOM rows called 'does not fit': {} of {}\n", v.oom_called_oom, v.oom_rows);
  fmt::print("rows that ran but called 'does not fit' (false OOM): {} of {}\n", v.ok_called_oom,
             v.ok_rows);
  return Status::ok();
}

Status run_memory(const MemoryCliOptions& c) {
  if (!c.validate.empty()) return run_validate(c);
  SP_ASSIGN_OR_RETURN(const api::MemoryOutcome out, api::memory(c.request));
  if (c.json) {
    print_json(out.to_json());
  } else {
    print_table(out.result, out.model, out.layout, std::string(to_string(out.framework)));
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    memory, "memory", "Per-GPU memory of each pipeline stage of a layout, and whether it fits",
    [](CLI::App& sub) -> Runner {
      auto c = std::make_shared<MemoryCliOptions>();
      api::MemoryRequest* o = &c->request;
      sub.add_option("--model,-m", o->model, "Preset name or path to a HF config.json");
      sub.add_option("--cluster,-c", o->cluster, "Bundled cluster profile name or profile path");
      sub.add_option("--gpu-memory", o->gpu_memory, "GPU memory instead of a cluster (\"80GiB\")");
      add_count(sub, "--seq", o->seq, "Sequence length in tokens");
      sub.add_option("--layout,-l", o->layout, "Layout string (tp=8,pp=2,dp=4,...)");
      add_count(sub, "--gpus", o->gpus,
                "GPU count (default: derived from the layout; dp=1 when neither is given)");
      add_choice(sub, "--framework", o->framework, kFrameworksWithHistoric,
                 "Memory conventions (default megatron)");
      sub.add_option("--moe-imbalance", o->moe_imbalance, kMoeImbalanceHelp);
      sub.add_option("--margin", o->margin, "Memory kept free on purpose (\"2GiB\"; default 0)");
      sub.add_option("--validate", c->validate,
                     "Validation record file or bundled set (dev_runs, dev_runs_2026): compare "
                     "the model with measured runs");
      sub.add_option("--validate-framework", c->validate_framework,
                     "With --validate: only records whose framework contains this (e.g. nanotron)");
      sub.add_flag("--json", c->json, "Machine-readable output on stdout");
      return [c] { return run_memory(*c); };
    },
    20);

}  // namespace scaleplan::cli
