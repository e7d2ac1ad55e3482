// Trace readers (sim/recorded.h): any text read as a PyTorch profiler (Kineto) trace or as a
// scaleplan trace gives a RecordedTimeline or an invalid-input error; an accepted one can be
// summarised and compared with itself (the op-for-op match and the combined trace) without
// crashing, and its summaries add up (every rank-iteration's span splits into compute, exposed
// communication and idle).
#include <nlohmann/json.hpp>
#include <string>

#include "core/json_util.h"
#include "fuzz/fuzz_util.h"
#include "sim/compare.h"
#include "sim/recorded.h"

namespace {

void exercise(const scaleplan::sim::RecordedTimeline& t) {
  using namespace scaleplan;
  for (const auto& r : t.ranks) {
    for (const auto& it : sim::summarize(r)) {
      if (it.idle() < Duration::zero() && it.gpu_span > Duration::zero())
        fuzz::broken("summarize", "negative GPU idle in " + it.name);
    }
  }
  const sim::Comparison c = sim::compare(t, t);
  if (c.ops.possible && (c.ops.predicted_only != 0 || c.ops.measured_only != 0))
    fuzz::broken("compare", "a timeline compared with itself left ops unmatched");
  (void)sim::comparison_trace(t, t, c);
}

}  // namespace

SCALEPLAN_FUZZ_TARGET(trace) {
  using namespace scaleplan;
  const std::string_view text = fuzz::as_text(data, size);
  auto s = sim::parse_scaleplan_trace(text, "fuzz.json");
  fuzz::check_contract(s.status(), "parse_scaleplan_trace");
  if (s) exercise(*s);
  sim::RecordedTimeline k;
  const Status st = sim::parse_kineto_trace(text, "fuzz.json", 0, k);
  fuzz::check_contract(st, "parse_kineto_trace");
  if (st.is_ok()) exercise(k);
  return 0;
}
