// Self-contained HTML reports: `compare --html` and `plan --html`.
//
// Each page is one file with no network access: inline CSS, inline SVG for every timeline and
// chart, and a small inline script for zoom (wheel, drag; double-click resets), hover details and
// a status the browser test reads (`body[data-status]` becomes "ok" once the script has run
// without an error). Element classes and ids are the page's contract with
// tests/browser/check_pages.py:
//   compare: svg.timeline (one per rank and side shown), rect.op (one per drawn slice),
//            table#summary, table#classes, table#exposed, table#streams (tr.data-row per row),
//            svg#class-chart (rect.bar: two per class row), table#ops (when ops were matched);
//   plan:    table#plans (tr.data-row per plan), svg#throughput (rect.bar per plan),
//            svg#breakdown (g.stack per plan), svg#memory (rect.bar per plan, line.capacity),
//            table#how-sure (tr.data-row per perturbation, when the ranking was checked);
//   sweep:   table#points (tr.data-row per GPU count), svg#throughput and svg#mfu (circle.point
//            per count with a plan, line.change per count where the best layout changes).
// Formatting only: the numbers come from sim::Comparison and from `plan --json`'s and
// `sweep --json`'s objects.
#pragma once

#include <string>

#include "core/json_util.h"
#include "sim/compare.h"
#include "sim/recorded.h"

namespace scaleplan::cli {

// At most this many ranks per side are drawn as timelines, and this many slices per timeline
// (the shortest are left out beyond it; the page says how many).
inline constexpr int kHtmlMaxRanks = 8;
inline constexpr size_t kHtmlMaxSlices = 6000;

std::string compare_html(const sim::RecordedTimeline& predicted,
                         const sim::RecordedTimeline& measured, const sim::Comparison& comparison,
                         const std::string& command);

// `plan` is the object `plan --json` prints.
std::string plan_html(const Json& plan, const std::string& command);

// `sweep` is the object `sweep --json` prints.
std::string sweep_html(const Json& sweep, const std::string& command);

}  // namespace scaleplan::cli
