// HF config.json (models::model_from_config_text): any text gives a ModelSpec or an invalid-input
// error; an accepted model's parameter and FLOP accounting and its layout constraints are
// computed without overflow (UBSan) or crash.
#include "fuzz/fuzz_util.h"
#include "models/accounting.h"
#include "models/model_spec.h"

SCALEPLAN_FUZZ_TARGET(hf_config) {
  using namespace scaleplan;
  auto m = models::model_from_config_text(fuzz::as_text(data, size), "fuzz", "config.json");
  fuzz::check_contract(m.status(), "model_from_config_text");
  if (!m) return 0;
  // The accounting walks every layer; deep models (up to the 4096-layer bound) would slow the
  // search a hundredfold for no new code, so they are counted only up to 256 layers here
  // (tests/models/reliability_test.cc counts the largest presets).
  if (m->num_layers > 256) return 0;
  (void)models::count_params(*m);
  (void)models::flops_per_token(*m, 4096);
  (void)models::layout_constraints(*m, 4096);
  return 0;
}
