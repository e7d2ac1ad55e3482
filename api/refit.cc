// `refit` as a library call; contract in refit.h.
#include "api/refit.h"

#include <nlohmann/json.hpp>

#include <filesystem>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "calibrate/kernel_model.h"
#include "calibrate/roofline.h"
#include "hw_profiles/cluster.h"

namespace scaleplan::api {

Json RefitOutcome::to_json() const {
  const RefitRequest& o = request;
  const calibrate::RefitResult& r = result;
  Json errors = Json::array();
  for (const auto& e : r.errors)
    errors.push_back(Json{{"kind", e.kind},
                          {"shapes", e.shapes},
                          {"old_median", e.old_median},
                          {"new_median", e.new_median},
                          {"noise_median", e.noise_median}});
  Json models = Json::array();
  for (const auto& m : r.choices)
    models.push_back(
        Json{{"model", m.model}, {"source", m.source}, {"shapes", m.shapes}, {"reason", m.reason}});
  return Json{{"profile", o.profile},
              {"out", o.out},
              {"measured", o.measured},
              {"generator", generator},
              {"measured_ops", r.measured_ops},
              {"skipped_unfused", skipped_unfused},
              {"skipped_unread", skipped_unread},
              {"old_model", old_model},
              {"written", written},
              {"not_written", not_written},
              {"fitted_shapes", r.fitted_shapes},
              {"held_out_shapes", r.held_out_shapes},
              {"holdout", o.holdout},
              {"errors", errors},
              {"kept", r.kept},
              {"models", models},
              {"calibration", calibrate::to_json(r.calibration)}};
}

Result<RefitOutcome> refit(const RefitRequest& o) {
  if (o.profile.empty()) return Status::invalid("--profile is required");
  if (o.measured.empty()) return Status::invalid("--measured is required");
  if (o.out.empty()) return Status::invalid("--out is required");
  // A bundled name or a path, as every command takes a cluster; the file's own JSON is rewritten
  // (its `extends` kept), a bundled profile's is written whole.
  auto loaded = hw::load_cluster(o.profile);
  if (!loaded.is_ok()) return loaded.status().with_context("--profile");
  const hw::Cluster& cluster = *loaded;
  Json profile;
  if (std::filesystem::is_regular_file(o.profile)) {
    SP_ASSIGN_OR_RETURN(profile, read_json_file(o.profile));
  } else {
    profile = Json::parse(hw::cluster_to_json(cluster));
  }
  // A profile with kernel models refits them; one without (a bundled roofline profile, or a
  // calibration of collectives only) is compared against its roofline and gains the models the
  // measured shapes fit.
  calibrate::Calibration old;
  calibrate::Measurements own;
  // What a kind or curve without a fit is timed by, in the refit's report and in the written
  // profile (calibrate::kernel_cost_model_for builds the same one from the cluster's peaks).
  const auto roofline =
      std::make_shared<const calibrate::RooflineCostModel>(calibrate::peaks_of(cluster));
  const bool from_roofline = !(cluster.calibration && cluster.calibration->kernel_models);
  if (!from_roofline) {
    old = *cluster.calibration;
    const Json& section = profile["calibration"];
    if (json_has(section, "measurements")) {
      SP_ASSIGN_OR_RETURN(own, calibrate::measurements_from_json(section["measurements"],
                                                                 o.profile + ": calibration"));
    }
  } else {
    if (cluster.calibration) old = *cluster.calibration;
    old.kernel_models = false;  // calibrate::refit keeps the roofline where the fit is not better
    old.tiles = {128, std::max(1, cluster.gpu.sm_count)};
  }
  sim::MeasuredKernels measured;
  for (const std::string& path : o.measured)
    SP_RETURN_IF_ERROR(sim::read_measured_kernels(path, measured).with_context("--measured"));
  if (measured.ops.empty())
    return Status::invalid(
        "--measured: the traces hold no compute op with a kernel shape that refit reads (" +
        std::to_string(measured.skipped_unread) +
        " GEMM or attention ops skipped: fp32 or fp8 GEMMs, memory-efficient attention)");
  // Where a roofline profile's kernels were measured, as `profile` names its backend: the traces.
  if (from_roofline && old.backend.empty()) old.backend = measured.generator;
  if (from_roofline && old.device.empty()) old.device = cluster.gpu.name;
  calibrate::RefitOptions ro;
  ro.holdout = o.holdout;
  RefitOutcome out;
  SP_ASSIGN_OR_RETURN(out.result, calibrate::refit(old, own, measured.ops, ro, roofline));
  out.request = o;
  out.generator = measured.generator;
  out.skipped_unfused = measured.skipped_unfused;
  out.skipped_unread = measured.skipped_unread;
  out.old_model = from_roofline ? "roofline" : "fitted";
  // What the written profile will be simulated with must load: each kind fitted on enough
  // shapes or marked to keep the roofline (calibrate::refit marks every other one).
  const auto whole =
      calibrate::complete_fitted_kernel_model(out.result.calibration, o.out, roofline);
  if (!whole.is_ok()) {
    out.not_written = whole.status().message();
    return out;
  }
  Json out_section = calibrate::to_json(out.result.calibration);
  out_section["measurements"] = calibrate::to_json(out.result.measurements);
  profile["calibration"] = out_section;
  SP_RETURN_IF_ERROR(write_file_atomic(o.out, profile.dump(2) + "\n"));
  out.written = true;
  return out;
}

}  // namespace scaleplan::api
