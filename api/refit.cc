// `refit` as a library call; contract in refit.h.
#include "api/refit.h"

#include <nlohmann/json.hpp>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"

namespace scaleplan::api {

Json RefitOutcome::to_json() const {
  const RefitRequest& o = request;
  const calibrate::RefitResult& r = result;
  Json errors = Json::array();
  for (const auto& e : r.errors)
    errors.push_back(Json{{"kind", e.kind},
                          {"shapes", e.shapes},
                          {"old_median", e.old_median},
                          {"new_median", e.new_median}});
  return Json{{"profile", o.profile},
              {"out", o.out},
              {"measured", o.measured},
              {"generator", generator},
              {"measured_ops", r.measured_ops},
              {"skipped_unfused", skipped_unfused},
              {"fitted_shapes", r.fitted_shapes},
              {"held_out_shapes", r.held_out_shapes},
              {"holdout", o.holdout},
              {"errors", errors},
              {"kept", r.kept},
              {"calibration", calibrate::to_json(r.calibration)}};
}

Result<RefitOutcome> refit(const RefitRequest& o) {
  if (o.profile.empty()) return Status::invalid("--profile is required");
  if (o.measured.empty()) return Status::invalid("--measured is required");
  if (o.out.empty()) return Status::invalid("--out is required");
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
  RefitOutcome out;
  SP_ASSIGN_OR_RETURN(out.result, calibrate::refit(old, own, measured.ops, ro));

  Json out_section = calibrate::to_json(out.result.calibration);
  out_section["measurements"] = calibrate::to_json(out.result.measurements);
  profile["calibration"] = out_section;
  SP_RETURN_IF_ERROR(write_file_atomic(o.out, profile.dump(2) + "\n"));
  out.request = o;
  out.generator = measured.generator;
  out.skipped_unfused = measured.skipped_unfused;
  return out;
}

}  // namespace scaleplan::api
