#include "cli/html_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "cli/sweep_output.h"

namespace scaleplan::cli {
namespace {

std::string esc(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

// JSON text safe inside <script>: no "</" that could close the element.
std::string script_json(const Json& j) {
  std::string s = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<' && i + 1 < s.size() && s[i + 1] == '/') {
      out += "<\\/";
      ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

std::string ms(double seconds) { return fmt::format("{:.3f}", seconds * 1e3); }
std::string pct(double e) { return std::isnan(e) ? "&ndash;" : fmt::format("{:+.1f}%", 100 * e); }

constexpr std::string_view kCss = R"(
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 8px}h3{font-size:14px;margin:14px 0 4px}
code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f3f3f3;padding:2px 4px;word-break:break-all}
.meta{color:#555;margin:2px 0}.note{background:#fff6d8;border-left:4px solid #e0b000;padding:6px 10px}
table{border-collapse:collapse;margin:6px 0}th,td{padding:3px 10px;text-align:right;border-bottom:1px solid #e4e4e4}
th:first-child,td:first-child{text-align:left}th{background:#f6f6f6}
#plans td:nth-child(2),#plans th:nth-child(2){text-align:left}
svg{display:block;width:100%;max-width:1200px;background:#fff}svg text{font:11px system-ui,sans-serif;fill:#333}
svg.timeline{border:1px solid #ddd;margin:2px 0;cursor:grab}
.legend span{display:inline-block;margin-right:12px}.legend i{display:inline-block;width:11px;height:11px;margin-right:4px;vertical-align:-1px}
#tip{position:fixed;display:none;pointer-events:none;background:#222;color:#fff;padding:4px 8px;border-radius:3px;font-size:12px;max-width:600px;z-index:9}
.c-gemm{fill:#4e79a7;background:#4e79a7}.c-attention_fwd{fill:#f28e2b;background:#f28e2b}
.c-attention_bwd{fill:#e15759;background:#e15759}.c-memory_bound{fill:#76b7b2;background:#76b7b2}
.c-optimizer{fill:#59a14f;background:#59a14f}.c-other{fill:#bab0ac;background:#bab0ac}
.c-all_reduce{fill:#edc948;background:#edc948}.c-all_gather{fill:#b07aa1;background:#b07aa1}
.c-reduce_scatter{fill:#ff9da7;background:#ff9da7}.c-all_to_all{fill:#9c755f;background:#9c755f}
.c-send_recv{fill:#86bcb6;background:#86bcb6}.c-broadcast{fill:#d4a6c8;background:#d4a6c8}
.c-other_comm{fill:#8cd17d;background:#8cd17d}.c-memcpy{fill:#79706e;background:#79706e}
.c-host{fill:#d7d7d7;background:#d7d7d7}
.s-predicted{fill:#4e79a7;background:#4e79a7}.s-measured{fill:#f28e2b;background:#f28e2b}
.k-compute{fill:#4e79a7;background:#4e79a7}.k-recompute{fill:#a0cbe8;background:#a0cbe8}
.k-bubble{fill:#bab0ac;background:#bab0ac}.k-other{fill:#d7d7d7;background:#d7d7d7}
.k-tp{fill:#edc948;background:#edc948}.k-dp{fill:#b07aa1;background:#b07aa1}.k-pp{fill:#ff9da7;background:#ff9da7}
.k-cp{fill:#9c755f;background:#9c755f}.k-ep{fill:#86bcb6;background:#86bcb6}
line.capacity{stroke:#c00;stroke-width:2;stroke-dasharray:5 3}
line.change{stroke:#e15759;stroke-width:1.5;stroke-dasharray:4 3}line.axis{stroke:#888}
line.grid{stroke:#eee}polyline.series{fill:none;stroke:#4e79a7;stroke-width:2}
circle.point{fill:#4e79a7}tr.changed td{background:#fdecec}
)";

// Zoom and pan of every timeline at once (they share one time axis), hover details from data-*
// attributes, and the status the browser test reads.
constexpr std::string_view kScript = R"(
(function(){
  var tip=document.getElementById('tip');
  var names=window.SCALEPLAN_NAMES||[];
  var W=1000,k=1,tx=0,drag=null;
  var zooms=Array.prototype.slice.call(document.querySelectorAll('svg.timeline g.zoom'));
  function apply(){tx=Math.min(0,Math.max(tx,W-W*k));zooms.forEach(function(g){g.setAttribute('transform','translate('+tx+',0) scale('+k+',1)');});}
  function plotX(svg,clientX){var r=svg.getBoundingClientRect();var vb=svg.viewBox.baseVal;return (clientX-r.left)/r.width*vb.width-Number(svg.dataset.label);}
  document.querySelectorAll('svg.timeline').forEach(function(svg){
    svg.addEventListener('wheel',function(e){e.preventDefault();var x=plotX(svg,e.clientX);var nk=Math.min(Math.max(k*(e.deltaY<0?1.25:0.8),1),5000);tx=x-(x-tx)*nk/k;k=nk;apply();},{passive:false});
    svg.addEventListener('mousedown',function(e){drag={x:plotX(svg,e.clientX),tx:tx,svg:svg};});
    svg.addEventListener('dblclick',function(){k=1;tx=0;apply();});
  });
  window.addEventListener('mousemove',function(e){
    if(drag){tx=drag.tx+plotX(drag.svg,e.clientX)-drag.x;apply();}
    var t=e.target,text=null;
    if(t.classList&&t.classList.contains('op')){text=(names[Number(t.dataset.n)]||'')+' \u00b7 '+t.classList[1].slice(2)+' \u00b7 start '+t.dataset.s+' \u00b5s \u00b7 '+t.dataset.d+' \u00b5s';}
    else if(t.dataset&&t.dataset.tip){text=t.dataset.tip;}
    if(text){tip.textContent=text;tip.style.left=(e.clientX+12)+'px';tip.style.top=(e.clientY+12)+'px';tip.style.display='block';}else{tip.style.display='none';}
  });
  window.addEventListener('mouseup',function(){drag=null;});
  document.body.dataset.status='ok';
})();
)";

std::string page(const std::string& title, const std::string& body, const std::string& data) {
  std::string out = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>" +
                    esc(title) + "</title>\n<style>" + std::string(kCss) +
                    "</style></head>\n<body data-status=\"loading\">\n" + body +
                    "<div id=\"tip\"></div>\n<script>" + data + "</script>\n<script>" +
                    std::string(kScript) + "</script>\n</body></html>\n";
  return out;
}

// --- compare ----------------------------------------------------------------------------------

// The slices of a rank that the page draws: one iteration (scaleplan: the only one; Kineto: the
// first with GPU work), from its start, at most kHtmlMaxSlices of them (the longest).
struct Shown {
  std::vector<const sim::RecordedSlice*> slices;
  size_t total = 0;
  Time origin;
  Duration span;  // the iteration's span, or the last slice's end if later
  std::string iteration;
};

Shown shown_slices(const sim::RecordedRank& r) {
  Shown s;
  int32_t it = -1;
  for (const auto& x : r.slices)
    if (x.iteration >= 0 && (it < 0 || x.iteration < it)) it = x.iteration;
  if (it < 0) return s;
  const auto& iter = r.iterations[static_cast<size_t>(it)];
  s.origin = iter.start;
  s.span = iter.end - iter.start;
  s.iteration = iter.name;
  for (const auto& x : r.slices) {
    if (x.iteration != it) continue;
    s.slices.push_back(&x);
    s.span = std::max(s.span, x.end - s.origin);
  }
  s.total = s.slices.size();
  if (s.slices.size() > kHtmlMaxSlices) {
    std::stable_sort(s.slices.begin(), s.slices.end(), [](const auto* a, const auto* b) {
      return a->end - a->start > b->end - b->start;
    });
    s.slices.resize(kHtmlMaxSlices);
  }
  return s;
}

constexpr double kLabel = 130, kWidth = 1000, kRow = 14, kGap = 3;

// One rank's timeline: a row per lane; `scale` is the shared time axis (seconds for kWidth).
// `name_offset`: where this side's names start in the page's name table.
std::string timeline_svg(const sim::RecordedRank& r, const Shown& s, const std::string& side,
                         double axis_s, int id, size_t name_offset) {
  const double h = static_cast<double>(r.lanes.size()) * (kRow + kGap) + 18;
  std::string out = fmt::format(
      "<svg class=\"timeline\" data-side=\"{}\" data-rank=\"{}\" data-label=\"{}\" viewBox=\"0 0 "
      "{} {}\" preserveAspectRatio=\"none\" style=\"height:{}px\">\n",
      side, r.rank, kLabel, kLabel + kWidth, h, h);
  out += fmt::format(
      "<clipPath id=\"clip{}\"><rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\"/></clipPath>\n", id,
      kWidth, h);
  for (size_t l = 0; l < r.lanes.size(); ++l)
    out += fmt::format("<text x=\"4\" y=\"{:.1f}\">{}</text>\n",
                       static_cast<double>(l) * (kRow + kGap) + kRow - 3, esc(r.lanes[l].name));
  out += fmt::format(
      "<text x=\"{}\" y=\"{}\">0</text><text x=\"{}\" y=\"{}\" "
      "text-anchor=\"end\">{} ms</text>\n",
      kLabel, h - 4, kLabel + kWidth - 2, h - 4, ms(axis_s));
  out += fmt::format(
      "<g transform=\"translate({},0)\" clip-path=\"url(#clip{})\"><g class=\"zoom\">\n", kLabel,
      id);
  const double per_s = axis_s > 0 ? kWidth / axis_s : 0;
  for (const auto* x : s.slices) {
    const double start = (x->start - s.origin).to_seconds();
    const double dur = (x->end - x->start).to_seconds();
    out += fmt::format(
        "<rect class=\"op c-{}\" x=\"{:.3f}\" y=\"{:.1f}\" width=\"{:.3f}\" height=\"{}\" "
        "data-n=\"{}\" data-s=\"{:.3f}\" data-d=\"{:.3f}\"/>\n",
        sim::to_string(x->cls), start * per_s, static_cast<double>(x->lane) * (kRow + kGap),
        std::max(dur * per_s, 0.15), kRow, name_offset + x->name, start * 1e6, dur * 1e6);
  }
  out += "</g></g></svg>\n";
  return out;
}

std::string table_rows(const std::vector<sim::CompareRow>& rows, bool counts) {
  std::string out;
  for (const auto& r : rows) {
    out += "<tr class=\"data-row\"><td>" + esc(r.name) + "</td><td>" +
           ms(r.predicted.to_seconds()) + "</td><td>" + ms(r.measured.to_seconds()) + "</td><td>" +
           pct(r.error()) + "</td>";
    if (counts)
      out += fmt::format("<td>{:.1f}</td><td>{:.1f}</td>", r.predicted_count, r.measured_count);
    out += "</tr>\n";
  }
  return out;
}

std::string class_chart(const std::vector<sim::CompareRow>& rows) {
  double top = 0;
  for (const auto& r : rows)
    top = std::max({top, r.predicted.to_seconds(), r.measured.to_seconds()});
  const double bar = 10, label = 130, width = 700;
  const double h = static_cast<double>(rows.size()) * (2 * bar + 8) + 24;
  std::string out = fmt::format(
      "<svg class=\"chart\" id=\"class-chart\" viewBox=\"0 0 {} {}\" style=\"max-width:900px\">\n",
      label + width + 70, h);
  double y = 4;
  for (const auto& r : rows) {
    out += fmt::format("<text x=\"0\" y=\"{:.1f}\">{}</text>\n", y + bar + 3, esc(r.name));
    for (int side = 0; side < 2; ++side) {
      const double v = (side == 0 ? r.predicted : r.measured).to_seconds();
      const double w = top > 0 ? v / top * width : 0;
      out += fmt::format(
          "<rect class=\"bar s-{0}\" x=\"{1}\" y=\"{2:.1f}\" width=\"{3:.2f}\" height=\"{4}\" "
          "data-tip=\"{5} {0}: {6} ms\"/><text x=\"{7:.1f}\" y=\"{8:.1f}\">{6}</text>\n",
          side == 0 ? "predicted" : "measured", label, y, std::max(w, 0.5), bar, esc(r.name), ms(v),
          label + std::max(w, 0.5) + 4, y + bar - 1);
      y += bar;
    }
    y += 8;
  }
  out += fmt::format(
      "<rect class=\"s-predicted\" x=\"{0}\" y=\"{1:.1f}\" width=\"10\" height=\"10\"/><text "
      "x=\"{2}\" y=\"{3:.1f}\">predicted</text><rect class=\"s-measured\" x=\"{4}\" y=\"{1:.1f}\" "
      "width=\"10\" height=\"10\"/><text x=\"{5}\" y=\"{3:.1f}\">measured</text>\n",
      label, y, label + 14, y + 9, label + 100, label + 114);
  out += "</svg>\n";
  return out;
}

std::string legend(const std::vector<sim::OpClass>& classes) {
  std::string out = "<p class=\"legend\">";
  for (auto c : classes)
    out += fmt::format("<span><i class=\"c-{0}\"></i>{0}</span>", sim::to_string(c));
  return out + "</p>\n";
}

// The match by structure against a Kineto trace (sim/op_match.h): counts, matched time by class
// and kind, per layer and per micro-batch, unmatched ops by reason, the largest errors.
std::string structured_html(const sim::StructuredMatch& s) {
  const int layers = std::min(s.layers_predicted, s.layers_measured);
  std::string b = fmt::format(
      "<h2>Ops, matched by structure</h2>\n<p class=\"meta\">{} micro-batches predicted, {} "
      "measured; {} layers predicted, {} measured. Predicted ops: {} matched, {} only predicted; "
      "measured ops: {} matched, {} only measured; {} groups.</p>\n",
      s.microbatches_predicted, s.microbatches_measured, s.layers_predicted, s.layers_measured,
      s.matched_predicted, s.predicted_only, s.matched_measured, s.measured_only, s.groups.size());
  const auto matched = [](const std::vector<sim::MatchedTime>& v) {
    std::vector<sim::CompareRow> rows;
    for (const auto& r : v) rows.push_back({r.name, r.predicted, r.measured});
    return table_rows(rows, false);
  };
  const auto segments = [&](const std::vector<sim::SegmentRow>& v) {
    std::vector<sim::CompareRow> rows;
    for (const auto& r : v)
      rows.push_back({sim::to_string(r.segment, layers), r.predicted, r.measured});
    return table_rows(rows, false);
  };
  const char* head = "<th>predicted ms</th><th>measured ms</th><th>error</th></tr>\n";
  b += std::string("<h3>Matched ops by class</h3>\n<table id=\"op-classes\"><tr><th>class</th>") +
       head + matched(s.by_class) + "</table>\n";
  b += std::string("<h3>Matched ops by kind</h3>\n<table id=\"op-kinds\"><tr><th>kind</th>") +
       head + matched(s.by_kind) + "</table>\n";
  b += std::string(
           "<h3>Per layer (all micro-batches)</h3>\n<table id=\"op-layers\"><tr>"
           "<th>segment</th>") +
       head + segments(s.layers) + "</table>\n";
  b += std::string(
           "<h3>Per micro-batch</h3>\n<table id=\"op-microbatches\"><tr>"
           "<th>segment</th>") +
       head + segments(s.microbatches) + "</table>\n";
  b += "<h3>Unmatched ops by reason</h3>\n<table id=\"op-reasons\"><tr><th>side</th>"
       "<th>reason</th><th>ops</th><th>ms</th></tr>\n";
  for (const auto& r : s.reasons)
    b += fmt::format("<tr class=\"data-row\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                     r.predicted ? "predicted" : "measured", esc(r.reason), r.count,
                     ms(r.time.to_seconds()));
  b += "</table>\n<h3>Largest errors</h3>\n<table id=\"ops\"><tr><th>segment</th>"
       "<th>predicted op</th><th>ops</th><th>measured op</th><th>ops</th><th>predicted ms</th>"
       "<th>measured ms</th></tr>\n";
  for (size_t i : s.largest) {
    const sim::OpGroup& g = s.groups[i];
    b += fmt::format(
        "<tr class=\"data-row\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
        "<td>{}</td></tr>\n",
        esc(sim::to_string(g.segment, layers)), esc(g.predicted_name), g.predicted.size(),
        esc(g.measured_name), g.measured.size(), ms(g.predicted_time.to_seconds()),
        ms(g.measured_time.to_seconds()));
  }
  return b + "</table>\n";
}

std::string side_text(const sim::SideSummary& s) {
  return fmt::format("{} trace <code>{}</code>, {} rank{}, {} rank-iteration{} averaged",
                     sim::to_string(s.format), esc(s.title), s.ranks, s.ranks == 1 ? "" : "s",
                     s.samples, s.samples == 1 ? "" : "s");
}

}  // namespace

std::string compare_html(const sim::RecordedTimeline& predicted,
                         const sim::RecordedTimeline& measured, const sim::Comparison& c,
                         const std::string& command) {
  std::string b = "<header><h1>Predicted vs measured</h1>\n";
  if (!c.predicted.model.empty())
    b += "<p class=\"meta\">model <b>" + esc(c.predicted.model) + "</b> &middot; cluster <b>" +
         esc(c.predicted.cluster) + "</b> &middot; layout <code>" + esc(c.predicted.title) +
         "</code></p>\n";
  b += "<p class=\"meta\">predicted: " + side_text(c.predicted) + "</p>\n";
  b += "<p class=\"meta\">measured: " + side_text(c.measured) + "</p>\n";
  b += "<p class=\"meta\">command: <code>" + esc(command) + "</code></p>\n";
  b += "<p class=\"note\">" + esc(c.ops.note) + "</p></header>\n";

  b += "<h2>Iteration (ms per rank-iteration)</h2>\n<table id=\"summary\"><tr><th></th>"
       "<th>predicted</th><th>measured</th><th>error</th></tr>\n";
  b += table_rows({{"iteration", c.predicted.iteration, c.measured.iteration},
                   {"GPU span", c.predicted.gpu_span, c.measured.gpu_span},
                   {"exposed comm", c.predicted.exposed_total(), c.measured.exposed_total()},
                   {"GPU idle", c.predicted.idle, c.measured.idle}},
                  false);
  b += "</table>\n";

  // Timelines: rank pairs, predicted above measured, on one time axis.
  const size_t pairs =
      std::min<size_t>(std::max(predicted.ranks.size(), measured.ranks.size()), kHtmlMaxRanks);
  std::vector<Shown> ps, mss;
  double axis = 0;
  for (size_t i = 0; i < pairs; ++i) {
    ps.push_back(i < predicted.ranks.size() ? shown_slices(predicted.ranks[i]) : Shown{});
    mss.push_back(i < measured.ranks.size() ? shown_slices(measured.ranks[i]) : Shown{});
    axis = std::max({axis, ps.back().span.to_seconds(), mss.back().span.to_seconds()});
  }
  std::vector<bool> present(sim::kNumOpClasses, false);
  for (const auto* v : {&ps, &mss})
    for (const Shown& s : *v)
      for (const auto* x : s.slices) present[static_cast<size_t>(x->cls)] = true;
  std::vector<sim::OpClass> classes;
  for (int k = 0; k < sim::kNumOpClasses; ++k)
    if (present[static_cast<size_t>(k)]) classes.push_back(static_cast<sim::OpClass>(k));
  b += "<h2>Timelines</h2>\n<p class=\"meta\">One iteration per rank on one time axis; wheel to "
       "zoom, drag to pan, double-click to reset; hover a slice for its name and times.";
  if (std::max(predicted.ranks.size(), measured.ranks.size()) > pairs)
    b += fmt::format(" The first {} ranks of each side are drawn.", pairs);
  b += "</p>\n" + legend(classes);
  int id = 0;
  for (size_t i = 0; i < pairs; ++i) {
    b += "<div class=\"pair\">";
    for (int side = 0; side < 2; ++side) {
      const auto& t = side == 0 ? predicted : measured;
      const Shown& s = side == 0 ? ps[i] : mss[i];
      if (i >= t.ranks.size()) continue;
      const auto& r = t.ranks[i];
      b += fmt::format("<h3>{} &middot; {}{}</h3>\n", side == 0 ? "predicted" : "measured",
                       esc(r.label), s.iteration.empty() ? "" : " &middot; " + esc(s.iteration));
      if (s.slices.size() < s.total)
        b += fmt::format("<p class=\"meta\">{} longest of {} slices drawn</p>\n", s.slices.size(),
                         s.total);
      b += timeline_svg(r, s, side == 0 ? "predicted" : "measured", axis, id++,
                        side == 0 ? 0 : predicted.names.size());
    }
    b += "</div>\n";
  }

  // Peak memory per rank, paired in rank order as the timelines are.
  b += "<h2>Peak memory per rank (GiB allocated)</h2>\n";
  if (c.measured.memory.empty())
    b += "<p class=\"meta\">The measured trace records no device memory (PyTorch writes "
         "<code>[memory]</code> events with <code>profile_memory=True</code>).</p>\n";
  b += "<table id=\"memory\"><tr><th>#</th><th>predicted rank</th><th>predicted</th>"
       "<th>measured rank</th><th>measured</th></tr>\n";
  const size_t mem_rows = std::max(c.predicted.memory.size(), c.measured.memory.size());
  const auto gib = [](int64_t v) {
    return fmt::format("{:.2f}", static_cast<double>(v) / (1 << 30));
  };
  for (size_t i = 0; i < mem_rows; ++i) {
    const bool p = i < c.predicted.memory.size(), m = i < c.measured.memory.size();
    b += fmt::format(
        "<tr class=\"data-row\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n", i,
        p ? std::to_string(c.predicted.memory[i].rank) : "&ndash;",
        p ? gib(c.predicted.memory[i].allocated) : "&ndash;",
        m ? std::to_string(c.measured.memory[i].rank) : "&ndash;",
        m ? gib(c.measured.memory[i].allocated) : "&ndash;");
  }
  b += "</table>\n";

  const auto crow = sim::class_rows(c);
  b += "<h2>Time by op class (ms per rank-iteration)</h2>\n" + class_chart(crow);
  b += "<table id=\"classes\"><tr><th>class</th><th>predicted</th><th>measured</th><th>error</th>"
       "<th>predicted ops</th><th>measured kernels</th></tr>\n" +
       table_rows(crow, true) + "</table>\n";
  b += "<h2>Exposed communication (ms per rank-iteration)</h2>\n<p class=\"meta\">Communication "
       "while no compute kernel runs; where several kinds run at once the time is split "
       "equally.</p>\n<table id=\"exposed\"><tr><th>class</th><th>predicted</th><th>measured</th>"
       "<th>error</th></tr>\n" +
       table_rows(sim::exposed_rows(c), false) + "</table>\n";
  b += "<h2>Time by stream (ms per rank-iteration)</h2>\n";
  if (!c.ops.possible)
    b += "<p class=\"meta\">A foreign trace's CUDA streams are not scaleplan's streams: each "
         "side's streams are listed, not matched.</p>\n";
  b += "<table id=\"streams\"><tr><th>stream</th><th>predicted</th><th>measured</th>"
       "<th>error</th></tr>\n" +
       table_rows(sim::stream_rows(c), false) + "</table>\n";
  if (c.ops.by_structure) {
    b += structured_html(c.ops.structured);
  } else if (c.ops.possible) {
    b += fmt::format(
        "<h2>Ops</h2>\n<p class=\"meta\">{} matched, {} only predicted, {} only measured. The "
        "largest absolute errors:</p>\n<table id=\"ops\"><tr><th>op</th><th>rank</th>"
        "<th>stream</th><th>#</th><th>predicted ms</th><th>measured ms</th></tr>\n",
        c.ops.matched, c.ops.predicted_only, c.ops.measured_only);
    for (size_t i : c.ops.largest) {
      const auto& p = c.ops.pairs[i];
      b += fmt::format(
          "<tr class=\"data-row\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
          "<td>{}</td></tr>\n",
          esc(p.name), p.rank, esc(p.lane), p.occurrence, ms(p.predicted.to_seconds()),
          ms(p.measured.to_seconds()));
    }
    b += "</table>\n";
  }
  // The slices' names, for hover: the predicted names, then the measured ones.
  Json names = Json::array();
  for (const auto& n : predicted.names) names.push_back(n);
  for (const auto& n : measured.names) names.push_back(n);
  return page("scaleplan compare", b, "window.SCALEPLAN_NAMES=" + script_json(names) + ";");
}

// --- plan ---------------------------------------------------------------------------------------

namespace {

// One horizontal bar per item, scaled to `top` (the largest value when 0); with `mark_at` > 0 a
// dashed line.capacity at that value, labelled `mark`.
struct Bar {
  std::string label;
  double value;
  std::string tip, text;
};

constexpr double kBarLabel = 60, kBarWidth = 800, kBar = 16, kBarGap = 6;

std::string bar_chart(const std::string& id, const std::string& cls, const std::vector<Bar>& bars,
                      double top, const std::string& mark, double mark_at = 0) {
  if (top <= 0)
    for (const Bar& x : bars) top = std::max(top, x.value);
  const double h = static_cast<double>(bars.size()) * (kBar + kBarGap) + 30;
  std::string out = fmt::format("<svg class=\"chart\" id=\"{}\" viewBox=\"0 0 {} {}\">\n", id,
                                kBarLabel + kBarWidth + 160, h);
  double y = 4;
  for (const Bar& x : bars) {
    const double w = top > 0 ? std::max(x.value / top * kBarWidth, 0.5) : 0.5;
    out += fmt::format(
        "<text x=\"0\" y=\"{0:.1f}\">{1}</text><rect class=\"bar {2}\" x=\"{3}\" y=\"{4:.1f}\" "
        "width=\"{5:.2f}\" height=\"{6}\" data-tip=\"{7}\"/><text x=\"{8:.1f}\" "
        "y=\"{0:.1f}\">{9}</text>\n",
        y + kBar - 4, esc(x.label), cls, kBarLabel, y, w, kBar, esc(x.tip), kBarLabel + w + 4,
        x.text);
    y += kBar + kBarGap;
  }
  if (mark_at > 0 && top > 0) {
    const double x = kBarLabel + mark_at / top * kBarWidth;
    out += fmt::format(
        "<line class=\"capacity\" x1=\"{0:.1f}\" y1=\"0\" x2=\"{0:.1f}\" y2=\"{1:.1f}\"/><text "
        "x=\"{0:.1f}\" y=\"{2:.1f}\" text-anchor=\"middle\">{3}</text>\n",
        x, h - 16, h - 4, esc(mark));
  }
  return out + "</svg>\n";
}

}  // namespace

std::string plan_html(const Json& plan, const std::string& command) {
  const Json& plans = plan.at("plans");
  std::string b = "<header><h1>Plan: ranked layouts</h1>\n";
  b += fmt::format(
      "<p class=\"meta\">model <b>{}</b> &middot; cluster <b>{}</b> &middot; {} GPUs &middot; "
      "seq {} &middot; gbs {} &middot; framework {}</p>\n",
      esc(plan.value("model", "")), esc(plan.value("cluster", "")), plan.value("gpus", 0),
      plan.value("seq", 0), plan.value("gbs", 0), esc(plan.value("framework", "")));
  b += fmt::format("<p class=\"meta\">{} candidates, {} fit in memory, {} simulated</p>\n",
                   plan.value("candidates", 0), plan.value("fit", 0), plan.value("simulated", 0));
  b += "<p class=\"meta\">command: <code>" + esc(command) + "</code></p></header>\n";
  if (plans.empty()) {
    b += "<p class=\"note\">" + esc(plan.value("no_fit", std::string("no layout fits"))) + "</p>\n";
  }

  b += "<h2>Layouts</h2>\n<table id=\"plans\"><tr><th>#</th><th>layout</th><th>iteration s</th>"
       "<th>tokens/s/GPU</th><th>MFU</th><th>peak memory GiB</th><th>capacity GiB</th></tr>\n";
  const double gib = 1024.0 * 1024.0 * 1024.0;
  for (const Json& p : plans) {
    b += fmt::format(
        "<tr class=\"data-row\"><td>{}</td><td><code>{}</code></td><td>{:.4f}</td><td>{:.0f}</td>"
        "<td>{:.1f}%</td><td>{:.2f}</td><td>{:.2f}</td></tr>\n",
        p.value("rank", 0), esc(p.value("layout", "")), p.value("iteration_s", 0.0),
        p.value("tokens_per_s_per_gpu", 0.0), 100 * p.value("mfu", 0.0),
        p.value("peak_memory_bytes", 0.0) / gib, p.value("memory_capacity_bytes", 0.0) / gib);
  }
  b += "</table>\n";

  // Throughput.
  std::vector<Bar> bars;
  for (const Json& p : plans) {
    const double v = p.value("tokens_per_s_per_gpu", 0.0);
    const double mfu = 100 * p.value("mfu", 0.0);
    bars.push_back({fmt::format("#{}", p.value("rank", 0)), v,
                    fmt::format("#{} {}: {:.0f} tokens/s/GPU, MFU {:.1f}%", p.value("rank", 0),
                                p.value("layout", ""), v, mfu),
                    fmt::format("{:.0f} &middot; MFU {:.1f}%", v, mfu)});
  }
  b += "<h2>Tokens/s per GPU and MFU</h2>\n" + bar_chart("throughput", "s-predicted", bars, 0, "");

  // Stacked breakdown of the bottleneck stage's iteration.
  b += "<h2>Where the time goes (bottleneck stage, seconds)</h2>\n<p class=\"legend\">";
  const std::vector<std::string> comm = {"tp", "dp", "pp", "cp", "ep"};
  for (const char* k : {"compute", "bubble", "other"})
    b += fmt::format("<span><i class=\"k-{0}\"></i>{0}</span>", k);
  for (const auto& k : comm) b += fmt::format("<span><i class=\"k-{0}\"></i>exposed {0}</span>", k);
  b += "</p>\n";
  double longest = 0;
  for (const Json& p : plans) longest = std::max(longest, p.value("iteration_s", 0.0));
  const double h = static_cast<double>(plans.size()) * (kBar + kBarGap) + 30;
  b += fmt::format("<svg class=\"chart\" id=\"breakdown\" viewBox=\"0 0 {} {}\">\n",
                   kBarLabel + kBarWidth + 80, h);
  double y = 4;
  for (const Json& p : plans) {
    const Json bd = p.value("breakdown", Json::object());
    std::vector<std::pair<std::string, double>> parts = {{"compute", bd.value("compute_s", 0.0)}};
    const Json ex = bd.value("exposed_comm_s", Json::object());
    for (const auto& k : comm) parts.push_back({k, ex.value(k, 0.0)});
    parts.push_back({"bubble", bd.value("bubble_s", 0.0)});
    parts.push_back({"other", bd.value("other_s", 0.0)});
    b += fmt::format("<text x=\"0\" y=\"{:.1f}\">#{}</text><g class=\"stack\">", y + kBar - 4,
                     p.value("rank", 0));
    double x = kBarLabel;
    for (const auto& [k, v] : parts) {
      if (v <= 0 || longest <= 0) continue;
      const double w = v / longest * kBarWidth;
      b += fmt::format(
          "<rect class=\"seg k-{0}\" x=\"{1:.2f}\" y=\"{2:.1f}\" width=\"{3:.2f}\" height=\"{4}\" "
          "data-tip=\"#{5} {0}: {6:.4f} s\"/>",
          k, x, y, w, kBar, p.value("rank", 0), v);
      x += w;
    }
    b += fmt::format("</g><text x=\"{:.1f}\" y=\"{:.1f}\">{:.3f} s</text>\n", x + 4, y + kBar - 4,
                     p.value("iteration_s", 0.0));
    y += kBar + kBarGap;
  }
  b += "</svg>\n";

  // Memory of the worst stage against the GPU's capacity.
  double cap = 0, peak_max = 0;
  for (const Json& p : plans) {
    cap = std::max(cap, p.value("memory_capacity_bytes", 0.0));
    peak_max = std::max(peak_max, p.value("peak_memory_bytes", 0.0));
  }
  bars.clear();
  for (const Json& p : plans) {
    const double v = p.value("peak_memory_bytes", 0.0);
    bars.push_back({fmt::format("#{}", p.value("rank", 0)), v,
                    fmt::format("#{}: {:.2f} GiB", p.value("rank", 0), v / gib),
                    fmt::format("{:.2f} GiB", v / gib)});
  }
  b += "<h2>Peak memory of the fullest stage against the GPU's capacity</h2>\n" +
       bar_chart("memory", "k-dp", bars, std::max(cap, peak_max) * 1.05,
                 fmt::format("capacity {:.1f} GiB", cap / gib), cap);

  if (plan.contains("robustness")) {
    const Json& r = plan["robustness"];
    b += "<h2>How sure</h2>\n<p class=\"meta\">" + esc(r.value("summary", "")) + "</p>\n";
    b += "<table id=\"how-sure\"><tr><th>perturbation</th><th>first</th><th>#1 iteration s</th>"
         "</tr>\n";
    for (const Json& p : r.value("perturbations", Json::array())) {
      const Json times = p.value("iteration_s", Json::array());
      const std::string t1 = !times.empty() && times[0].is_number()
                                 ? fmt::format("{:.4f}", times[0].get<double>())
                                 : "&ndash;";
      b += fmt::format("<tr class=\"data-row\"><td>{}</td><td>#{}</td><td>{}</td></tr>\n",
                       esc(p.value("name", "")), p.value("first_rank", 0), t1);
    }
    b += "</table>\n";
  }
  return page("scaleplan plan", b, "");
}

}  // namespace scaleplan::cli

// --- sweep --------------------------------------------------------------------------------------

namespace scaleplan::cli {
namespace {

// One value per GPU count, drawn against log2(GPUs) (a sweep's counts are usually powers of two).
struct SweepValue {
  double gpus, value;
  std::string tip;
};

constexpr double kPlotLeft = 70, kPlotWidth = 820, kPlotTop = 20, kPlotHeight = 220;

// A line chart of `values`, y from 0 to the largest value, with a dashed line.change at every
// count in `changes` (labelled with what changed).
std::string line_chart(const std::string& id, const std::vector<SweepValue>& values,
                       const std::vector<std::pair<double, std::string>>& changes,
                       const std::string& y_label, double scale, const std::string& unit) {
  double x0 = 0, x1 = 0, top = 0;
  bool first = true;
  auto extend = [&](double g) {
    const double l = std::log2(g);
    x0 = first ? l : std::min(x0, l);
    x1 = first ? l : std::max(x1, l);
    first = false;
  };
  for (const SweepValue& v : values) {
    extend(v.gpus);
    top = std::max(top, v.value);
  }
  for (const auto& c : changes) extend(c.first);
  top = top > 0 ? top * 1.1 : 1;
  auto X = [&](double g) {
    return x1 > x0 ? kPlotLeft + (std::log2(g) - x0) / (x1 - x0) * kPlotWidth
                   : kPlotLeft + kPlotWidth / 2;
  };
  auto Y = [&](double v) { return kPlotTop + kPlotHeight * (1 - v / top); };
  std::string out = fmt::format("<svg class=\"chart\" id=\"{}\" viewBox=\"0 0 {} {}\">\n", id,
                                kPlotLeft + kPlotWidth + 40, kPlotTop + kPlotHeight + 50);
  for (int i = 0; i <= 4; ++i) {
    const double v = top * i / 4;
    out += fmt::format(
        "<line class=\"grid\" x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\"/><text "
        "x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.0f}{6}</text>\n",
        kPlotLeft, kPlotLeft + kPlotWidth, Y(v), kPlotLeft - 6, Y(v) + 4, v * scale, unit);
  }
  out += fmt::format(
      "<line class=\"axis\" x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><text x=\"{3}\" "
      "y=\"{4}\" text-anchor=\"middle\">GPUs (log scale)</text><text x=\"10\" y=\"12\">{5}"
      "</text>\n",
      kPlotLeft, kPlotLeft + kPlotWidth, kPlotTop + kPlotHeight, kPlotLeft + kPlotWidth / 2,
      kPlotTop + kPlotHeight + 40, esc(y_label));
  for (const auto& [g, what] : changes) {
    out += fmt::format(
        "<line class=\"change\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2}\" "
        "data-tip=\"{3}\"/>\n",
        X(g), kPlotTop, kPlotTop + kPlotHeight, esc(fmt::format("at {} GPUs: {}", g, what)));
  }
  std::string line;
  for (const SweepValue& v : values) line += fmt::format("{:.1f},{:.1f} ", X(v.gpus), Y(v.value));
  if (!values.empty()) out += "<polyline class=\"series\" points=\"" + line + "\"/>\n";
  for (const SweepValue& v : values) {
    out += fmt::format(
        "<circle class=\"point\" cx=\"{0:.1f}\" cy=\"{1:.1f}\" r=\"5\" data-tip=\"{2}\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        X(v.gpus), Y(v.value), esc(v.tip), kPlotTop + kPlotHeight + 16, v.gpus);
  }
  return out + "</svg>\n";
}

}  // namespace

std::string sweep_html(const Json& sweep, const std::string& command) {
  const Json& points = sweep.at("points");
  std::string b = "<header><h1>Sweep: the best layout at each GPU count</h1>\n";
  const Json gbs = sweep.value("gbs", Json());
  b += fmt::format(
      "<p class=\"meta\">model <b>{}</b> &middot; cluster <b>{}</b> &middot; seq {} &middot; "
      "{} &middot; framework {}</p>\n",
      esc(sweep.value("model", "")), esc(sweep.value("cluster", "")), sweep.value("seq", 0),
      gbs.is_number() ? fmt::format("gbs {} at every count", gbs.get<int64_t>())
                      : fmt::format("gbs {} per GPU", sweep.value("gbs_per_gpu", 0.0)),
      esc(sweep.value("framework", "")));
  b += "<p class=\"meta\">command: <code>" + esc(command) + "</code></p></header>\n";

  const bool with_time = sweep.value("train_tokens", 0.0) > 0;
  const bool with_cost = sweep.contains("gpu_hour_cost") && sweep["gpu_hour_cost"].is_number();
  b += "<h2>Points</h2>\n<table id=\"points\"><tr><th>GPUs</th><th>gbs</th><th>iteration s</th>"
       "<th>tokens/s/GPU</th><th>MFU</th><th>peak memory GiB</th>";
  if (with_time) b += "<th>days</th><th>GPU-hours</th>";
  if (with_cost) b += "<th>cost</th>";
  b += "<th>best layout</th><th>changes</th></tr>\n";
  const double gib = 1024.0 * 1024.0 * 1024.0;
  std::vector<SweepValue> tps, mfu;
  std::vector<std::pair<double, std::string>> changes;
  for (const Json& p : points) {
    const double g = p.value("gpus", 0.0);
    const std::string change = p.value("layout_change", "");
    if (!change.empty()) changes.push_back({g, change});
    if (!p["layout"].is_string()) {
      b += fmt::format(
          "<tr class=\"data-row\"><td>{}</td><td>{}</td><td colspan=\"{}\">nothing fits: {}"
          "</td></tr>\n",
          p.value("gpus", 0), p.value("gbs", 0), 6 + 2 * with_time + with_cost,
          esc(p.value("no_fit", "")));
      continue;
    }
    const double t = p.value("tokens_per_s_per_gpu", 0.0), m = p.value("mfu", 0.0);
    const std::string layout = p.value("layout", "");
    tps.push_back({g, t, fmt::format("{} GPUs: {:.0f} tokens/s/GPU, {}", g, t, layout)});
    mfu.push_back({g, m, fmt::format("{} GPUs: MFU {:.1f}%, {}", g, 100 * m, layout)});
    b += fmt::format(
        "<tr class=\"data-row{}\"><td>{}</td><td>{}</td><td>{:.4f}</td><td>{:.0f}</td>"
        "<td>{:.1f}%</td><td>{:.2f}</td>",
        change.empty() ? "" : " changed", p.value("gpus", 0), p.value("gbs", 0),
        p.value("iteration_s", 0.0), t, 100 * m, p.value("peak_memory_bytes", 0.0) / gib);
    if (with_time)
      b += fmt::format("<td>{}</td><td>{}</td>", format_amount(p.value("days_to_train", 0.0)),
                       format_amount(p.value("gpu_hours", 0.0)));
    if (with_cost) b += fmt::format("<td>{}</td>", format_amount(p.value("cost", 0.0)));
    b += fmt::format("<td><code>{}</code></td><td>{}</td></tr>\n", esc(layout), esc(change));
  }
  b += "</table>\n";
  if (!changes.empty())
    b += "<p class=\"meta\">Dashed lines: where the best layout's shape changes (besides dp); "
         "hover for what changed.</p>\n";
  b +=
      "<h2>Tokens/s per GPU</h2>\n" + line_chart("throughput", tps, changes, "tokens/s/GPU", 1, "");
  b += "<h2>MFU</h2>\n" + line_chart("mfu", mfu, changes, "MFU", 100, "%");
  return page("scaleplan sweep", b, "");
}

}  // namespace scaleplan::cli
