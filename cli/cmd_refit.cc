// `scaleplan refit`: fold measured kernel times into a calibrated profile.
//   refit --profile P --measured M... --out P2 [--holdout F] [--json]
// Reads the compute ops of `run --trace` files (sim/measured_kernels.h), refits the profile's
// kernel models with them and the profile's own measurements (calibrate/refit.h), prints the old
// and the new model's error on the measured shapes held out of the fit, and writes P2 (atomically):
// P with its calibration section replaced.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "calibrate/refit.h"
#include "cli/command.h"
#include "cli/output.h"
#include "core/json_util.h"
#include "sim/measured_kernels.h"

namespace scaleplan::cli {
namespace {

struct RefitCliOptions {
  std::string profile, out;
  std::vector<std::string> measured;
  double holdout = 0.2;
  bool json = false;
};

std::string pct(double x) { return fmt::format("{:.1f}%", 100 * x); }

Status run(const RefitCliOptions& o) {
  SP_ASSIGN_OR_RETURN(Json profile, read_json_file(o.profile));
  if (!profile.is_object() || !calibrate::has_calibration(profile))
    return Status::invalid("--profile: " + o.profile +
                           " has no calibration section (write one with scaleplan profile)");
  const Json& section = profile["calibration"];
  SP_ASSIGN_OR_RETURN(const calibrate::Calibration old,
                      calibrate::calibration_from_json(section, o.profile));
  calibrate::Measurements own;
  if (json_has(section, "measurements")) {
    SP_ASSIGN_OR_RETURN(own, calibrate::measurements_from_json(section["measurements"],
                                                               o.profile + ": calibration"));
  }
  sim::MeasuredKernels measured;
  for (const std::string& path : o.measured)
    SP_RETURN_IF_ERROR(sim::read_measured_kernels(path, measured).with_context("--measured"));
  if (measured.ops.empty())
    return Status::invalid("--measured: the traces hold no compute op with a kernel shape");
  calibrate::RefitOptions ro;
  ro.holdout = o.holdout;
  SP_ASSIGN_OR_RETURN(const calibrate::RefitResult r, calibrate::refit(old, own, measured.ops, ro));

  Json out_section = calibrate::to_json(r.calibration);
  out_section["measurements"] = calibrate::to_json(r.measurements);
  profile["calibration"] = out_section;
  SP_RETURN_IF_ERROR(write_output_file(o.out, profile.dump(2) + "\n"));

  if (o.json) {
    Json errors = Json::array();
    for (const auto& e : r.errors)
      errors.push_back(Json{{"kind", e.kind},
                            {"shapes", e.shapes},
                            {"old_median", e.old_median},
                            {"new_median", e.new_median}});
    print_json(Json{{"profile", o.profile},
                    {"out", o.out},
                    {"measured", o.measured},
                    {"generator", measured.generator},
                    {"measured_ops", r.measured_ops},
                    {"skipped_unfused", measured.skipped_unfused},
                    {"fitted_shapes", r.fitted_shapes},
                    {"held_out_shapes", r.held_out_shapes},
                    {"holdout", o.holdout},
                    {"errors", errors},
                    {"kept", r.kept},
                    {"calibration", calibrate::to_json(r.calibration)}});
    return Status::ok();
  }
  fmt::print("refit {} with {} measured ops ({} shapes fitted, {} held out)\n", o.profile,
             r.measured_ops, r.fitted_shapes, r.held_out_shapes);
  if (measured.skipped_unfused > 0)
    fmt::print("skipped {} unfused attention ops (no fused kernel to fit)\n",
               measured.skipped_unfused);
  fmt::print("\nheld-out error, median |predicted - measured| / measured\n");
  fmt::print("{:<16} {:>7} {:>10} {:>10}\n", "kind", "shapes", "old", "new");
  for (const auto& e : r.errors)
    fmt::print("{:<16} {:>7} {:>10} {:>10}\n", e.kind, e.shapes, pct(e.old_median),
               pct(e.new_median));
  if (r.errors.empty()) fmt::print("(no shape held out: raise --holdout)\n");
  for (const std::string& k : r.kept) fmt::print("kept the old {}\n", k);
  fmt::print("\nwrote {}\n", o.out);
  return Status::ok();
}

}  // namespace

SCALEPLAN_COMMAND(
    refit, "refit",
    "Fold measured kernel times (run --trace) into a calibrated profile's fitted models",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<RefitCliOptions>();
      sub.add_option("--profile", o->profile, "calibrated profile (scaleplan profile --out)")
          ->required();
      sub.add_option("--measured", o->measured, "scaleplan run --trace files")->required();
      sub.add_option("--out", o->out, "refitted profile to write")->required();
      sub.add_option("--holdout", o->holdout,
                     "fraction of the measured shapes left out of the fit to measure the error "
                     "(default 0.2)");
      sub.add_flag("--json", o->json, "machine-readable output");
      return [o] { return run(*o); };
    },
    72);

}  // namespace scaleplan::cli
