// Calibration sections (the `calibration` object `scaleplan profile` writes, and the partial
// state `profile --resume` reads): any text gives a Calibration / Measurements or an
// invalid-input error; an accepted calibration predicts a kernel time without crashing.
#include <nlohmann/json.hpp>

#include "calibrate/calibration.h"
#include "calibrate/fitted_model.h"
#include "core/json_util.h"
#include "fuzz/fuzz_util.h"

SCALEPLAN_FUZZ_TARGET(calibration) {
  using namespace scaleplan;
  auto j = parse_json(fuzz::as_text(data, size), "fuzz.json");
  fuzz::check_contract(j.status(), "parse_json");
  if (!j) return 0;
  fuzz::check_contract(calibrate::check_calibration_format(*j, "fuzz.json"), "check_format");
  auto c = calibrate::calibration_from_json(*j, "fuzz.json");
  fuzz::check_contract(c.status(), "calibration_from_json");
  if (c) {
    calibrate::KernelSample s;
    s.gemm = {4096, 4096, 4096};
    (void)calibrate::predict_seconds(*c, s);
  }
  auto k = calibrate::fitted_kernel_model(*j, "fuzz.json");
  fuzz::check_contract(k.status(), "fitted_kernel_model");
  if (j->is_object() && j->contains("measurements")) {
    auto m = calibrate::measurements_from_json((*j)["measurements"], "fuzz.json");
    fuzz::check_contract(m.status(), "measurements_from_json");
  }
  return 0;
}
