// `scaleplan refit`: fold measured kernel times into a calibrated profile.
//   refit --profile P --measured M... --out P2 [--holdout F] [--json]
// Reads the compute ops of `run --trace` files or of PyTorch profiler traces recorded with
// record_shapes (sim/measured_kernels.h), refits the profile's
// kernel models with them and the profile's own measurements (calibrate/refit.h), prints the old
// and the new model's error on the measured shapes held out of the fit, and writes P2 (atomically):
// P with its calibration section replaced.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/refit.h"
#include "cli/command.h"
#include "cli/output.h"

namespace scaleplan::cli {
namespace {

struct RefitCliOptions {
  api::RefitRequest request;
  bool json = false;
};

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

Status run(const RefitCliOptions& cli) {
  SP_ASSIGN_OR_RETURN(const api::RefitOutcome out, api::refit(cli.request));
  if (cli.json) {
    print_json(out.to_json());
    return Status::ok();
  }
  const api::RefitRequest& o = out.request;
  const calibrate::RefitResult& r = out.result;
  fmt::print(
      "refit {} ({} kernel models) with {} measured ops of {} ({} shapes fitted, {} held "
      "out)\n",
      o.profile, out.old_model, r.measured_ops, out.generator, r.fitted_shapes, r.held_out_shapes);
  if (out.skipped_unfused > 0)
    fmt::print("skipped {} unfused attention ops (no fused kernel to fit)\n", out.skipped_unfused);
  if (out.skipped_unread > 0)
    fmt::print("skipped {} GEMM or attention ops of a dtype or kernel refit does not read\n",
               out.skipped_unread);
  fmt::print("\nheld-out error, median |predicted - measured| / measured\n");
  fmt::print("{:<16} {:>7} {:>10} {:>10}\n", "kind", "shapes", "old", "new");
  for (const auto& e : r.errors)
    fmt::print("{:<16} {:>7} {:>10} {:>10}\n", e.kind, e.shapes, pct(e.old_median),
               pct(e.new_median));
  if (r.errors.empty()) fmt::print("(no shape held out: raise --holdout)\n");
  // How the written profile times each model: fitted, the old profile's, or the roofline.
  fmt::print("\n{:<30} {:<9} {}\n", "model", "timed by", "why");
  // "old" is the profile's own model, kept (its `kept` line says "kept the profile's").
  for (const auto& m : r.choices)
    fmt::print("{:<30} {:<9} {}\n", m.model, m.source == "old" ? "profile's" : m.source, m.reason);
  if (out.written) {
    fmt::print("\nwrote {}\n", o.out);
  } else {
    fmt::print("\nnot written: {}\n", out.not_written);
  }
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    refit, "refit",
    "Fold measured kernel times (run --trace, or a PyTorch profiler trace with shapes) into a "
    "profile's kernel models",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<RefitCliOptions>();
      api::RefitRequest& r = o->request;
      sub.add_option("--profile", r.profile,
                     "profile: a bundled name or a file (scaleplan profile --out)")
          ->required();
      sub.add_option("--measured", r.measured,
                     "scaleplan run --trace files, or PyTorch profiler traces with record_shapes")
          ->required();
      sub.add_option("--out", r.out, "refitted profile to write")->required();
      sub.add_option("--holdout", r.holdout,
                     "fraction of the measured shapes left out of the fit to measure the error "
                     "(default 0.2)");
      sub.add_flag("--json", o->json, "machine-readable output");
      return [o] { return run(*o); };
    },
    72);

}  // namespace scaleplan::cli
