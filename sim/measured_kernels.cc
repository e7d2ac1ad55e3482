#include "sim/measured_kernels.h"

#include <nlohmann/json.hpp>

#include "core/json_util.h"
#include "sim/program.h"
#include "sim/recorded.h"

namespace scaleplan::sim {
namespace {
constexpr std::string_view kNoShapes =
    "refit reads `scaleplan run --trace` files, whose ops carry their kernel shapes (a PyTorch "
    "profiler trace names its kernels but not their shapes)";
}  // namespace

Status parse_measured_kernels(std::string_view text, const std::string& source,
                              MeasuredKernels& into) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::parse_error& e) {
    return Status::invalid(source + ": not JSON: " + e.what());
  }
  if (!j.is_object() || !j.contains("traceEvents") || !j["traceEvents"].is_array())
    return Status::invalid(source + ": traceEvents: missing (not a Chrome trace)");
  std::string generator;
  if (j.contains("otherData") && j["otherData"].is_object() &&
      j["otherData"].contains("generator") && j["otherData"]["generator"].is_string())
    generator = j["otherData"]["generator"].get<std::string>();
  if (generator.rfind("scaleplan", 0) != 0)
    return Status::invalid(source + ": otherData.generator: \"" + generator +
                           "\" is not a scaleplan trace; " + std::string(kNoShapes));
  if (into.generator.empty()) into.generator = generator;
  size_t index = 0;
  for (const Json& e : j["traceEvents"]) {
    const std::string ctx = source + ": traceEvents[" + std::to_string(index++) + "]";
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    if (!e.contains("args") || !e["args"].is_object()) continue;
    const Json& a = e["args"];
    if (!a.contains("shape") || !a["shape"].is_string() || a.contains("collective")) continue;
    const std::string cls = a.value("class", "");
    const std::string shape = a["shape"].get<std::string>();
    KernelKind kind;
    if (cls == "attention_fwd") {
      kind = KernelKind::kAttentionFwd;
    } else if (cls == "attention_bwd") {
      kind = KernelKind::kAttentionBwd;
    } else if (cls == "gemm" || cls == "memory_bound" || cls == "optimizer" ||
               cls == "other_compute") {
      if (shape.rfind("m=", 0) == 0) {
        kind = KernelKind::kGemm;
      } else if (shape.rfind("bytes=", 0) == 0) {
        kind = KernelKind::kMemoryBound;
      } else {
        continue;
      }
    } else {
      continue;
    }
    auto payload = parse_kernel_text(kind, shape);
    if (!payload.is_ok()) return payload.status().with_context(ctx + ": args");
    if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0)
      return Status::invalid(ctx + ": dur: expected a non-negative number of microseconds, got " +
                             json_brief(e.contains("dur") ? e["dur"] : Json()));
    calibrate::KernelSample s;
    s.kind = kind;
    s.time = Duration::seconds(e["dur"].get<double>() * 1e-6);
    if (const auto* g = std::get_if<GemmShape>(&payload->shape)) {
      s.gemm = *g;
      s.family = "gemm";
    } else if (const auto* at = std::get_if<AttentionShape>(&payload->shape)) {
      if (at->kernel == AttentionKernel::kUnfused) {
        ++into.skipped_unfused;
        continue;
      }
      s.attention = *at;
      s.family = std::string(to_string(kind));
    } else {
      s.memory = std::get<MemoryBoundShape>(payload->shape);
      if (a.contains("flops") && a["flops"].is_number())
        s.memory.flops = Flops(a["flops"].get<double>());
      s.family = std::string(to_string(s.memory.op));
    }
    into.ops.push_back(s);
  }
  return Status::ok();
}

Status read_measured_kernels(const std::string& path, MeasuredKernels& into) {
  // Gzip is told by content, not by the name: a gzipped scaleplan trace is a scaleplan trace,
  // and a PyTorch trace (gzipped or not) is refused by its content below.
  SP_ASSIGN_OR_RETURN(const std::string text, read_trace_text(path));
  return parse_measured_kernels(text, path, into);
}

}  // namespace scaleplan::sim
