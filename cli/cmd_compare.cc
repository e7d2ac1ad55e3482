// `scaleplan compare`: a predicted timeline (simulate --trace) beside a measured one (a PyTorch
// profiler trace per rank, or a trace in scaleplan's format): iteration time, time by op class
// and by stream, exposed communication, and, between two scaleplan traces, the op-for-op match.
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "api/compare.h"
#include "cli/command.h"
#include "cli/html_report.h"
#include "cli/output.h"
#include "sim/compare.h"
#include "sim/recorded.h"

namespace scaleplan::cli {
namespace {

struct CompareCliOptions {
  api::CompareRequest request;
  bool json = false;
};

using Row = sim::CompareRow;

double error_of(Duration p, Duration m) { return sim::relative_error(p, m); }

std::string ms(Duration d) { return fmt::format("{:.3f}", d.to_seconds() * 1e3); }

std::string pct(double e) { return std::isnan(e) ? "-" : fmt::format("{:+.1f}%", 100 * e); }
std::string pct(Duration p, Duration m) { return pct(error_of(p, m)); }

void print_rows(const std::string& title, const std::vector<Row>& rows) {
  fmt::print("\n{:<22} {:>12} {:>12} {:>9}\n", title, "predicted", "measured", "error");
  for (const Row& r : rows)
    fmt::print("  {:<20} {:>12} {:>12} {:>9}\n", r.name, ms(r.predicted), ms(r.measured),
               pct(r.error()));
}

// The match by structure against a Kineto trace (sim/op_match.h).
void print_structured(const sim::StructuredMatch& s) {
  const int layers = std::min(s.layers_predicted, s.layers_measured);
  fmt::print(
      "\nops matched by structure: {} micro-batch{} predicted, {} measured; {} layer{} "
      "predicted, {} measured\n",
      s.microbatches_predicted, s.microbatches_predicted == 1 ? "" : "es", s.microbatches_measured,
      s.layers_predicted, s.layers_predicted == 1 ? "" : "s", s.layers_measured);
  fmt::print(
      "  predicted ops: {} matched, {} only predicted; measured ops: {} matched, {} only "
      "measured ({} groups)\n",
      s.matched_predicted, s.predicted_only, s.matched_measured, s.measured_only, s.groups.size());
  const auto matched = [](const std::string& title, const std::vector<sim::MatchedTime>& v) {
    fmt::print("\n{:<22} {:>12} {:>12} {:>9} {:>7}\n", title, "predicted", "measured", "error",
               "groups");
    for (const sim::MatchedTime& r : v)
      fmt::print("  {:<20} {:>12} {:>12} {:>9} {:>7}\n", r.name, ms(r.predicted), ms(r.measured),
                 pct(r.predicted, r.measured), r.groups);
  };
  matched("matched ops by class", s.by_class);
  matched("matched ops by kind", s.by_kind);
  const auto rows = [&](const std::string& title, const std::vector<sim::SegmentRow>& v) {
    fmt::print("\n{:<34} {:>12} {:>12} {:>9}\n", title, "predicted", "measured", "error");
    for (const sim::SegmentRow& r : v)
      fmt::print("  {:<32} {:>12} {:>12} {:>9}\n", sim::to_string(r.segment, layers),
                 ms(r.predicted), ms(r.measured), pct(r.predicted, r.measured));
  };
  rows("per layer (all micro-batches)", s.layers);
  rows("per micro-batch", s.microbatches);
  if (!s.reasons.empty()) {
    fmt::print("\nunmatched ops by reason (count, ms)\n");
    for (const auto& r : s.reasons)
      fmt::print("  {:<9} {:<66} {:>5} {:>10}\n", r.predicted ? "predicted" : "measured", r.reason,
                 r.count, ms(r.time));
  }
  if (!s.largest.empty()) {
    fmt::print("\nlargest errors (ms; predicted op | measured op, ops per side)\n");
    for (size_t i : s.largest) {
      const sim::OpGroup& g = s.groups[i];
      const auto cut = [](const std::string& n, size_t w) {
        return n.size() > w ? n.substr(0, w - 3) + "..." : n;
      };
      fmt::print("  {:<31} {:<22} {:>2} | {:<34} {:>3} {:>9} {:>9} {:>8}\n",
                 sim::to_string(g.segment, layers), cut(g.predicted_name, 22), g.predicted.size(),
                 cut(g.measured_name, 34), g.measured.size(), ms(g.predicted_time),
                 ms(g.measured_time), pct(g.predicted_time, g.measured_time));
    }
  }
}

Status run(const CompareCliOptions& cli, const std::string& command) {
  SP_ASSIGN_OR_RETURN(const api::CompareOutcome out, api::compare(cli.request));
  const api::CompareRequest& o = out.request;
  const sim::Comparison& c = out.comparison;
  const sim::RecordedTimeline* measured = &out.measured;
  // Every file is rendered before any is written, so that a failure leaves none behind.
  SP_RETURN_IF_ERROR(
      out.write_files(o.html.empty() ? "" : compare_html(out.predicted, out.measured, c, command)));
  const std::vector<Row>&classes = out.classes, &exposed = out.exposed, &lanes = out.lanes,
        &mem_ops = out.mem_ops;
  if (cli.json) {
    print_json(out.to_json());
    return Status::ok();
  }
  const auto side_line = [](const char* what, const sim::SideSummary& s) {
    fmt::print("{:<10} {} trace {}: {} rank{}, {} rank-iteration{} averaged\n", what,
               sim::to_string(s.format), s.title, s.ranks, s.ranks == 1 ? "" : "s", s.samples,
               s.samples == 1 ? "" : "s");
  };
  side_line("predicted", c.predicted);
  side_line("measured", c.measured);
  fmt::print("{}\n", c.ops.note);
  fmt::print("\n{:<22} {:>12} {:>12} {:>9}\n", "ms per rank-iteration", "predicted", "measured",
             "error");
  fmt::print("  {:<20} {:>12} {:>12} {:>9}\n", "iteration", ms(c.predicted.iteration),
             ms(c.measured.iteration), pct(c.predicted.iteration, c.measured.iteration));
  fmt::print("  {:<20} {:>12} {:>12} {:>9}\n", "GPU span", ms(c.predicted.gpu_span),
             ms(c.measured.gpu_span), pct(c.predicted.gpu_span, c.measured.gpu_span));
  fmt::print("  {:<20} {:>12} {:>12} {:>9}\n", "exposed comm", ms(c.predicted.exposed_total()),
             ms(c.measured.exposed_total()),
             pct(c.predicted.exposed_total(), c.measured.exposed_total()));
  fmt::print("  {:<20} {:>12} {:>12} {:>9}\n", "GPU idle", ms(c.predicted.idle),
             ms(c.measured.idle), pct(c.predicted.idle, c.measured.idle));
  if (measured->format == sim::TraceFormat::kKineto) {
    fmt::print("\n{:<28} {:>10} {:>10} {:>10} {:>10} {:>10}\n", "measured iterations (ms)",
               "iteration", "GPU span", "compute", "exposed", "GPU idle");
    // A job of many ranks would print pages: the first lines, the rest in --json.
    constexpr int kMaxLines = 16;
    int lines = 0;
    for (const sim::RecordedRank& r : measured->ranks) {
      for (const sim::IterationSummary& it : sim::summarize(r)) {
        if (it.gpu_span <= Duration::zero()) continue;
        if (lines++ >= kMaxLines) continue;
        fmt::print("  rank {:<4} {:<18} {:>10} {:>10} {:>10} {:>10} {:>10}\n", r.rank, it.name,
                   ms(it.wall), ms(it.gpu_span), ms(it.compute_busy), ms(it.exposed_total()),
                   ms(it.idle()));
      }
    }
    if (lines > kMaxLines)
      fmt::print("  ... {} more rank-iterations in --json (measured.per_iteration)\n",
                 lines - kMaxLines);
  }
  const auto memory_line = [](const char* what, const sim::SideSummary& s, const char* none) {
    if (s.memory.empty()) {
      fmt::print("  {:<10} {}\n", what, none);
      return;
    }
    const auto top =
        std::max_element(s.memory.begin(), s.memory.end(),
                         [](const auto& a, const auto& b) { return a.allocated < b.allocated; });
    fmt::print("  {:<10} {:.2f} GiB allocated at most (rank {}; {} rank{} recorded)\n", what,
               static_cast<double>(top->allocated) / (1 << 30), top->rank, s.memory.size(),
               s.memory.size() == 1 ? "" : "s");
  };
  fmt::print("\npeak memory\n");
  memory_line("predicted", c.predicted, "not in the trace (write it with this simulate --trace)");
  // The advice is the measured trace's own: PyTorch's profiler records memory only when asked;
  // a scaleplan run trace carries it when the run recorded it.
  memory_line("measured", c.measured,
              measured->format == sim::TraceFormat::kKineto
                  ? "not recorded (profile with profile_memory=True for PyTorch's [memory] events)"
                  : "not in the trace (this run did not record memory)");
  print_rows("by op class", classes);
  print_rows("memory-bound by kind", mem_ops);
  // The largest operators of each compute class, side by side.
  for (const sim::OpClass cls :
       {sim::OpClass::kGemm, sim::OpClass::kAttentionFwd, sim::OpClass::kAttentionBwd,
        sim::OpClass::kMemoryBound, sim::OpClass::kOptimizer, sim::OpClass::kOtherCompute}) {
    const auto& p = c.predicted.top[static_cast<size_t>(cls)];
    const auto& m = c.measured.top[static_cast<size_t>(cls)];
    if (p.empty() && m.empty()) continue;
    fmt::print("\nlargest {} ops (ms per rank-iteration, count)\n", sim::to_string(cls));
    const auto cell = [](const std::vector<sim::SideSummary::Named>& v, size_t i, size_t width) {
      if (i >= v.size()) return std::string(width + 19, ' ');
      std::string name =
          v[i].name.size() > width ? v[i].name.substr(0, width - 3) + "..." : v[i].name;
      return fmt::format("{:<{}} {:>9} {:>8.0f}", name, width, ms(v[i].time), v[i].count);
    };
    for (size_t i = 0; i < 5 && (i < p.size() || i < m.size()); ++i)
      fmt::print("  {}  | {}\n", cell(p, i, 28), cell(m, i, 44));
  }
  print_rows("exposed comm by class", exposed);
  print_rows("by stream", lanes);
  if (c.ops.by_structure) {
    print_structured(c.ops.structured);
  } else if (c.ops.possible) {
    fmt::print("\nops: {} matched, {} only predicted, {} only measured\n", c.ops.matched,
               c.ops.predicted_only, c.ops.measured_only);
    if (!c.ops.largest.empty()) {
      fmt::print("largest errors:\n");
      for (size_t i : c.ops.largest) {
        const sim::OpPair& p = c.ops.pairs[i];
        fmt::print("  rank {} {:<10} {:<36} #{:<4} {:>10} {:>10} ms\n", p.rank, p.lane, p.name,
                   p.occurrence, ms(p.predicted), ms(p.measured));
      }
    }
  }
  if (measured->format == sim::TraceFormat::kKineto) {
    fmt::print(
        "\nstreams are not matched across a foreign trace: its CUDA stream ids are not "
        "scaleplan's streams\n");
  }
  if (!o.trace.empty())
    fmt::print("trace written to {} (open in https://ui.perfetto.dev)\n", o.trace);
  if (!o.html.empty()) fmt::print("report written to {}\n", o.html);
  return Status::ok();
}

SCALEPLAN_COMMAND(
    compare, "compare",
    "Predicted vs measured: a simulate --trace beside a PyTorch profiler or run trace",
    [](CLI::App& sub) -> Runner {
      auto o = std::make_shared<CompareCliOptions>();
      api::CompareRequest& r = o->request;
      sub.add_option("--predicted", r.predicted, "a simulate --trace file")->required();
      sub.add_option("--measured", r.measured,
                     "PyTorch profiler (Kineto) traces, one per rank (.json or .json.gz), or "
                     "directories of them, or one scaleplan trace (run --trace)")
          ->required();
      sub.add_option("--trace", r.trace,
                     "write both timelines, rank beside rank, as one Perfetto trace here");
      sub.add_option("--html", r.html, "write a self-contained HTML report here");
      sub.add_flag("--json", o->json, "machine-readable output");
      return [o] { return run(*o, command_line()); };
    },
    45);

}  // namespace
}  // namespace scaleplan::cli
