// `compare` as a library call; contract in compare.h.
#include "api/compare.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "core/kernel_shapes.h"

namespace scaleplan::api {
namespace {

using Row = sim::CompareRow;

double error_of(Duration p, Duration m) { return sim::relative_error(p, m); }

Json number_or_null(double v) { return std::isnan(v) ? Json(nullptr) : Json(v); }

Json side_json(const sim::SideSummary& s) {
  Json classes = Json::object();
  for (int c = 0; c < sim::kNumOpClasses; ++c) {
    const auto i = static_cast<size_t>(c);
    if (s.count[i] == 0 && s.exposed[i] == Duration::zero()) continue;
    Json e = {{"time_s", s.time[i].to_seconds()}, {"count", s.count[i]}};
    if (sim::is_comm(static_cast<sim::OpClass>(c))) e["exposed_s"] = s.exposed[i].to_seconds();
    classes[std::string(sim::to_string(static_cast<sim::OpClass>(c)))] = e;
  }
  Json lanes = Json::object();
  for (const auto& [name, t] : s.lanes) lanes[name] = t.to_seconds();
  Json memory = Json::array();
  for (const auto& m : s.memory) {
    Json e = {{"rank", m.rank}, {"peak_allocated_bytes", m.allocated}};
    if (m.reserved >= 0) e["peak_reserved_bytes"] = m.reserved;
    memory.push_back(e);
  }
  Json top = Json::object();
  for (int c = 0; c < sim::kNumOpClasses; ++c) {
    const auto& ops = s.top[static_cast<size_t>(c)];
    if (ops.empty()) continue;
    Json a = Json::array();
    for (const auto& n : ops)
      a.push_back({{"name", n.name}, {"time_s", n.time.to_seconds()}, {"count", n.count}});
    top[std::string(sim::to_string(static_cast<sim::OpClass>(c)))] = a;
  }
  return {{"format", std::string(sim::to_string(s.format))},
          {"top_ops", top},
          {"title", s.title},
          {"model", s.model},
          {"cluster", s.cluster},
          {"peak_memory", memory},
          {"ranks", s.ranks},
          {"samples", s.samples},
          {"iteration_s", s.iteration.to_seconds()},
          {"gpu_span_s", s.gpu_span.to_seconds()},
          {"exposed_comm_s", s.exposed_total().to_seconds()},
          {"gpu_idle_s", s.idle.to_seconds()},
          {"classes", classes},
          {"streams", lanes}};
}

using Row = sim::CompareRow;

// Every (rank, iteration) with GPU work, summed by class and by stream: the per-iteration
// figures the averages come from.
Json iterations_json(const sim::RecordedTimeline& t) {
  Json out = Json::array();
  for (const sim::RecordedRank& r : t.ranks) {
    for (const sim::IterationSummary& it : sim::summarize(r)) {
      if (it.gpu_span <= Duration::zero()) continue;
      Json classes = Json::object();
      for (int c = 0; c < sim::kNumOpClasses; ++c) {
        const auto i = static_cast<size_t>(c);
        if (it.count[i] == 0) continue;
        Json e = {{"time_s", it.time[i].to_seconds()}, {"count", it.count[i]}};
        if (sim::is_comm(static_cast<sim::OpClass>(c))) e["exposed_s"] = it.exposed[i].to_seconds();
        classes[std::string(sim::to_string(static_cast<sim::OpClass>(c)))] = e;
      }
      Json streams = Json::object();
      for (size_t l = 0; l < r.lanes.size(); ++l)
        streams[r.lanes[l].name] = it.lane_time[l].to_seconds();
      out.push_back({{"rank", r.rank},
                     {"iteration", it.name},
                     {"iteration_s", it.wall.to_seconds()},
                     {"gpu_span_s", it.gpu_span.to_seconds()},
                     {"compute_busy_s", it.compute_busy.to_seconds()},
                     {"exposed_comm_s", it.exposed_total().to_seconds()},
                     {"gpu_idle_s", it.idle().to_seconds()},
                     {"classes", classes},
                     {"streams", streams}});
    }
  }
  return out;
}

Json rows_json(const std::vector<Row>& rows, bool counts) {
  Json out = Json::array();
  for (const Row& r : rows) {
    Json e = {{"name", r.name},
              {"predicted_s", r.predicted.to_seconds()},
              {"measured_s", r.measured.to_seconds()},
              {"error", number_or_null(r.error())}};
    if (counts) {
      e["predicted_count"] = r.predicted_count;
      e["measured_count"] = r.measured_count;
    }
    out.push_back(e);
  }
  return out;
}

// The match by structure against a Kineto trace (sim/op_match.h).
Json structured_json(const sim::StructuredMatch& s) {
  const int layers = std::min(s.layers_predicted, s.layers_measured);
  const auto seg = [&](const sim::StepSegment& g) {
    return Json{{"pass", std::string(sim::to_string(g.pass))},
                {"microbatch", g.microbatch},
                {"layer", g.layer},
                {"name", sim::to_string(g, layers)}};
  };
  const auto kind = [](int8_t mem_op) {
    return mem_op >= 0 && mem_op < kNumMemOps
               ? Json(std::string(to_string(static_cast<MemOp>(mem_op))))
               : Json(nullptr);
  };
  Json groups = Json::array();
  for (const sim::OpGroup& g : s.groups)
    groups.push_back({{"rank", g.rank},
                      {"segment", seg(g.segment)},
                      {"class", std::string(sim::to_string(g.cls))},
                      {"kind", kind(g.mem_op)},
                      {"how", g.how},
                      {"predicted_ops", g.predicted.size()},
                      {"measured_ops", g.measured.size()},
                      {"predicted_name", g.predicted_name},
                      {"measured_name", g.measured_name},
                      {"predicted_s", g.predicted_time.to_seconds()},
                      {"measured_s", g.measured_time.to_seconds()},
                      {"error", number_or_null(error_of(g.predicted_time, g.measured_time))}});
  Json unmatched = Json::array();
  for (const sim::UnmatchedOp& u : s.unmatched)
    unmatched.push_back({{"rank", u.rank},
                         {"side", u.predicted ? "predicted" : "measured"},
                         {"segment", seg(u.segment)},
                         {"class", std::string(sim::to_string(u.cls))},
                         {"kind", kind(u.mem_op)},
                         {"name", u.name},
                         {"time_s", u.time.to_seconds()},
                         {"reason", u.reason}});
  const auto rows = [&](const std::vector<sim::SegmentRow>& v) {
    Json a = Json::array();
    for (const sim::SegmentRow& r : v)
      a.push_back({{"segment", seg(r.segment)},
                   {"predicted_s", r.predicted.to_seconds()},
                   {"measured_s", r.measured.to_seconds()},
                   {"error", number_or_null(error_of(r.predicted, r.measured))}});
    return a;
  };
  const auto matched = [](const std::vector<sim::MatchedTime>& v) {
    Json a = Json::array();
    for (const sim::MatchedTime& r : v)
      a.push_back({{"name", r.name},
                   {"groups", r.groups},
                   {"predicted_s", r.predicted.to_seconds()},
                   {"measured_s", r.measured.to_seconds()},
                   {"error", number_or_null(error_of(r.predicted, r.measured))}});
    return a;
  };
  Json reasons = Json::array();
  for (const auto& r : s.reasons)
    reasons.push_back({{"side", r.predicted ? "predicted" : "measured"},
                       {"reason", r.reason},
                       {"count", r.count},
                       {"time_s", r.time.to_seconds()}});
  Json largest = Json::array();
  for (size_t i : s.largest) largest.push_back(groups[i]);
  return {{"microbatches_predicted", s.microbatches_predicted},
          {"microbatches_measured", s.microbatches_measured},
          {"layers_predicted", s.layers_predicted},
          {"layers_measured", s.layers_measured},
          {"matched_predicted_ops", s.matched_predicted},
          {"matched_measured_ops", s.matched_measured},
          {"groups", groups},
          {"unmatched", unmatched},
          {"unmatched_by_reason", reasons},
          {"by_class", matched(s.by_class)},
          {"by_kind", matched(s.by_kind)},
          {"per_layer", rows(s.layers)},
          {"per_microbatch", rows(s.microbatches)},
          {"largest_errors", largest}};
}

}  // namespace

Status CompareOutcome::write_files(std::string_view html) const {
  if (!request.trace.empty()) SP_RETURN_IF_ERROR(write_file_atomic(request.trace, trace_content));
  if (!request.html.empty()) SP_RETURN_IF_ERROR(write_file_atomic(request.html, html));
  return Status::ok();
}

Json CompareOutcome::to_json() const {
  const CompareRequest& o = request;
  const sim::Comparison& c = comparison;
  Json largest = Json::array();
  for (size_t i : c.ops.largest) {
    const sim::OpPair& p = c.ops.pairs[i];
    largest.push_back({{"rank", p.rank},
                       {"stream", p.lane},
                       {"name", p.name},
                       {"occurrence", p.occurrence},
                       {"predicted_s", p.predicted.to_seconds()},
                       {"measured_s", p.measured.to_seconds()},
                       {"error_s", (p.predicted - p.measured).to_seconds()}});
  }
  Json p = side_json(c.predicted), m = side_json(c.measured);
  p["per_iteration"] = iterations_json(predicted);
  m["per_iteration"] = iterations_json(measured);
  Json j = {{"predicted", p},
            {"measured", m},
            {"iteration",
             {{"predicted_s", c.predicted.iteration.to_seconds()},
              {"measured_s", c.measured.iteration.to_seconds()},
              {"error", number_or_null(error_of(c.predicted.iteration, c.measured.iteration))}}},
            {"classes", rows_json(classes, true)},
            {"memory_bound_kinds", rows_json(mem_ops, true)},
            {"exposed_comm", rows_json(exposed, false)},
            {"streams", rows_json(lanes, false)},
            {"op_for_op",
             {{"possible", c.ops.possible},
              {"by_structure", c.ops.by_structure},
              {"note", c.ops.note},
              {"matched", c.ops.matched},
              {"predicted_only", c.ops.predicted_only},
              {"measured_only", c.ops.measured_only},
              {"largest_errors", largest}}}};
  if (c.ops.by_structure) j["op_for_op"]["structured"] = structured_json(c.ops.structured);
  if (!o.trace.empty()) j["trace"] = o.trace;
  if (!o.html.empty()) j["html"] = o.html;
  return j;
}

Result<CompareOutcome> compare(const CompareRequest& o) {
  if (o.predicted.empty()) return Status::invalid("--predicted is required");
  if (o.measured.empty()) return Status::invalid("--measured is required");
  CompareOutcome out;
  Result<sim::RecordedTimeline> predicted = sim::load_recorded({o.predicted});
  if (!predicted) return predicted.status().with_context("--predicted");
  if (predicted->format != sim::TraceFormat::kScaleplan)
    return Status::invalid("--predicted: " + o.predicted +
                           ": not a scaleplan trace (write one with simulate --trace)");
  Result<sim::RecordedTimeline> measured = sim::load_recorded(o.measured);
  if (!measured) return measured.status().with_context("--measured");
  out.comparison = sim::compare(*predicted, *measured);
  const sim::Comparison& c = out.comparison;
  if (c.measured.samples == 0)
    return Status::invalid(
        "--measured: no iteration with GPU work (a Kineto trace needs "
        "ProfilerStep annotations: call prof.step() each iteration)");
  if (!o.trace.empty()) out.trace_content = sim::comparison_trace(*predicted, *measured, c);
  out.classes = sim::class_rows(c);
  out.exposed = sim::exposed_rows(c);
  out.lanes = sim::stream_rows(c);
  out.mem_ops = sim::mem_op_rows(c);
  out.request = o;
  out.predicted = std::move(*predicted);
  out.measured = std::move(*measured);
  return out;
}

}  // namespace scaleplan::api
