// Unit strings ("900GB/s", "2us", "80GiB", "989TFLOP/s"): any text gives a non-negative finite
// quantity or an invalid-input error; a parsed duration or size is within range of its integer
// type (no saturation passed off as a value).
#include <cmath>

#include "core/units.h"
#include "fuzz/fuzz_util.h"

SCALEPLAN_FUZZ_TARGET(units) {
  using namespace scaleplan;
  const std::string_view text = fuzz::as_text(data, size);
  if (auto b = parse_bytes(text, "bytes"); b) {
    if (b->value() < 0) fuzz::broken("parse_bytes", "negative bytes");
    (void)format_bytes(*b);
  } else {
    fuzz::check_contract(b.status(), "parse_bytes");
  }
  if (auto bw = parse_bandwidth(text, "bandwidth"); bw) {
    if (bw->value() < 0 || !std::isfinite(bw->value()))
      fuzz::broken("parse_bandwidth", "negative or not finite");
    (void)format_bandwidth(*bw);
  } else {
    fuzz::check_contract(bw.status(), "parse_bandwidth");
  }
  if (auto d = parse_duration(text, "duration"); d) {
    if (d->count() < 0 || *d == Duration::infinite())
      fuzz::broken("parse_duration", "out of range");
    (void)format_duration(*d);
  } else {
    fuzz::check_contract(d.status(), "parse_duration");
  }
  if (auto f = parse_flop_rate(text, "flops"); f) {
    if (f->value() < 0 || !std::isfinite(f->value()))
      fuzz::broken("parse_flop_rate", "negative or not finite");
    (void)format_flop_rate(*f);
  } else {
    fuzz::check_contract(f.status(), "parse_flop_rate");
  }
  return 0;
}
