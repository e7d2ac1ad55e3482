#include "sim/recorded.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <utility>

#include "core/json_util.h"
#include "sim/kineto_ops.h"

namespace scaleplan::sim {

// The file's text; gzip-compressed files (PyTorch's tensorboard_trace_handler(use_gzip=True)
// writes .json.gz) are inflated, anything else is read as it is (gzread passes it through).
Result<std::string> read_trace_text(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    return Status::invalid(path + ": not a regular file");
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return Status::not_found(path + ": cannot open the file");
  std::string out;
  std::string buf(1 << 16, '\0');
  int n = 0;
  while ((n = gzread(f, buf.data(), static_cast<unsigned>(buf.size()))) > 0) {
    out.append(buf.data(), static_cast<size_t>(n));
    if (static_cast<int64_t>(out.size()) > kMaxInputFileBytes) {
      gzclose(f);
      return Status::invalid(path + ": larger than " + std::to_string(kMaxInputFileBytes >> 20) +
                             " MiB (uncompressed); profile fewer steps per trace");
    }
  }
  int err = Z_OK;
  const std::string message = n < 0 ? gzerror(f, &err) : "";
  gzclose(f);
  if (n < 0) return Status::invalid(path + ": cannot read the file: " + message);
  return out;
}

namespace {

uint32_t intern(RecordedTimeline& t, std::unordered_map<std::string, uint32_t>& index,
                const std::string& name) {
  auto [it, inserted] = index.try_emplace(name, static_cast<uint32_t>(t.names.size()));
  if (inserted) t.names.push_back(name);
  return it->second;
}

std::unordered_map<std::string, uint32_t> name_index(const RecordedTimeline& t) {
  std::unordered_map<std::string, uint32_t> index;
  for (uint32_t i = 0; i < t.names.size(); ++i) index.emplace(t.names[i], i);
  return index;
}

double number_or(const Json& obj, const char* key, double fallback) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_number() ? it->get<double>() : fallback;
}

// An integer field (ids, streams, byte counts); `fallback` where it is missing, not a number, or
// outside int64 (a cast of such a double would be undefined).
int64_t int_or(const Json& obj, const char* key, int64_t fallback) {
  const auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  if (it->is_number_integer()) return it->get<int64_t>();
  if (!it->is_number_float()) return fallback;
  const double v = it->get<double>();
  return std::isfinite(v) && std::fabs(v) < 9.2e18 ? static_cast<int64_t>(v) : fallback;
}

std::string string_or(const Json& obj, const char* key) {
  const auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const Json& object_or_empty(const Json& obj, const char* key) {
  static const Json kEmpty = Json::object();
  const auto it = obj.find(key);
  return it != obj.end() && it->is_object() ? *it : kEmpty;
}

// Timestamps and durations (microseconds) a timeline can hold: at most ~100 days, so that the
// picosecond ticks of Duration (int64, about 106 days) cannot overflow.
constexpr double kMaxTraceUs = 100.0 * 86400 * 1e6;

bool valid_span(double ts_from_origin, double dur) {
  return std::isfinite(ts_from_origin) && std::isfinite(dur) && dur >= 0 &&
         std::fabs(ts_from_origin) <= kMaxTraceUs && dur <= kMaxTraceUs;
}

Status bad_time(const std::string& source, const std::string& name, double ts, double dur) {
  return Status::invalid(source + ": event '" + text_brief(name) + "': ts " + std::to_string(ts) +
                         " us, dur " + std::to_string(dur) +
                         " us: not a time span a trace of at most 100 days holds");
}

const Json* trace_events(const Json& j) {
  if (j.is_array()) return &j;
  if (j.is_object()) {
    const auto it = j.find("traceEvents");
    if (it != j.end() && it->is_array()) return &*it;
  }
  return nullptr;
}

bool is_scaleplan(const Json& j) {
  if (!j.is_object()) return false;
  const auto od = j.find("otherData");
  if (od == j.end() || !od->is_object()) return false;
  const auto g = od->find("generator");
  return g != od->end() && g->is_string() && g->get<std::string>().rfind("scaleplan", 0) == 0;
}

// Microseconds (Kineto and scaleplan traces both write `ts` and `dur` in microseconds, whatever
// displayTimeUnit says) to picoseconds.
Duration us(double v) { return Duration::ticks(std::llround(v * 1e6)); }

void sort_slices(RecordedRank& r) {
  std::stable_sort(r.slices.begin(), r.slices.end(),
                   [](const RecordedSlice& a, const RecordedSlice& b) {
                     return a.lane != b.lane ? a.lane < b.lane : a.start < b.start;
                   });
}

// A span of a CPU thread during which its ops belong to one pass: autograd's
// `autograd::engine::evaluate_function: XBackward0` nodes (torch/csrc/autograd/engine.cpp names
// each node it runs so), and the `Optimizer.step#AdamW.step` / `Optimizer.zero_grad#...`
// annotations torch.optim writes (torch/optim/optimizer.py, profile_hook_step).
struct PassSpan {
  double start, end;
  StepPass pass;
};

void note_pass_span(std::vector<PassSpan>& spans, std::string_view name, double ts, double dur) {
  if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0) return;
  if (name.rfind("autograd::engine::evaluate_function:", 0) == 0)
    spans.push_back({ts, ts + dur, StepPass::kBackward});
  else if (name.rfind("Optimizer.", 0) == 0)
    spans.push_back({ts, ts + dur, StepPass::kOptimizer});
}

// Sorted by start, nested spans dropped (the outermost decides).
void merge_pass_spans(std::vector<PassSpan>& spans) {
  std::sort(spans.begin(), spans.end(), [](const PassSpan& a, const PassSpan& b) {
    return a.start != b.start ? a.start < b.start : a.end > b.end;
  });
  std::vector<PassSpan> out;
  for (const PassSpan& s : spans)
    if (out.empty() || s.start >= out.back().end) out.push_back(s);
  spans = std::move(out);
}

// The pass of an op that starts at `ts` on a thread with these (merged) spans: forward outside
// every span.
StepPass pass_at(const std::vector<PassSpan>& spans, double ts) {
  const auto it = std::upper_bound(spans.begin(), spans.end(), ts,
                                   [](double v, const PassSpan& s) { return v < s.start; });
  if (it == spans.begin()) return StepPass::kForward;
  const PassSpan& s = *(it - 1);
  return ts < s.end ? s.pass : StepPass::kForward;
}

Status kineto_from_json(const Json& j, const std::string& source, int64_t fallback_rank,
                        RecordedTimeline& into) {
  const Json* events = trace_events(j);
  if (events == nullptr) return Status::invalid(source + ": traceEvents: missing (not a trace)");
  auto index = name_index(into);
  RecordedRank rank;
  rank.rank = fallback_rank;
  rank.label = std::filesystem::path(source).filename().string();
  if (j.is_object()) {
    const auto d = j.find("distributedInfo");
    if (d != j.end() && d->is_object()) {
      const auto r = d->find("rank");
      if (r != d->end()) rank.rank = int_or(*d, "rank", rank.rank);
    }
  }
  struct Gpu {
    double ts, dur;
    const std::string* name;
    int64_t stream;
    int64_t correlation;
    OpClass cls;
    int64_t external;  // the kernel's External id: the PyTorch op that launched it; -1: none
  };
  std::vector<Gpu> gpu;
  // PyTorch ops by External id (record_shapes adds "Input type"): the launching op of a kernel.
  struct CpuOp {
    const std::string* name;
    std::string in0, in1;
    std::pair<int64_t, int64_t> thread;  // (pid, tid)
    double ts = 0;
    std::array<int64_t, 4> gemm{};
  };
  // Spans of each CPU thread that make a pass: autograd's backward nodes and the optimizer's
  // annotations (op_match.h reads the pass of each op from them).
  std::map<std::pair<int64_t, int64_t>, std::vector<PassSpan>> pass_spans;
  std::unordered_map<int64_t, CpuOp> cpu_ops;
  struct Step {
    double ts, dur;
    std::string name;
  };
  std::vector<Step> steps;
  std::unordered_map<int64_t, double> launch_ts;  // correlation -> CUDA runtime call
  for (const Json& e : *events) {
    if (!e.is_object()) continue;
    const auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string()) continue;
    if (ph->get_ref<const std::string&>() != "X") {
      // PyTorch's memory instant events (profile_memory=True): `[memory]`, args "Device Type"
      // (c10::DeviceType: 1 is CUDA), "Total Allocated", "Total Reserved" in bytes.
      const auto name_it = e.find("name");
      const auto args_it = e.find("args");
      if (name_it == e.end() || *name_it != "[memory]" || args_it == e.end() ||
          !args_it->is_object() || number_or(*args_it, "Device Type", -1) != 1)
        continue;
      rank.peak_allocated = std::max(rank.peak_allocated, int_or(*args_it, "Total Allocated", -1));
      rank.peak_reserved = std::max(rank.peak_reserved, int_or(*args_it, "Total Reserved", -1));
      continue;
    }
    const auto cat_it = e.find("cat");
    const auto name_it = e.find("name");
    if (cat_it == e.end() || !cat_it->is_string() || name_it == e.end() || !name_it->is_string())
      continue;
    // Categories as current PyTorch writes them; early Kineto (PyTorch 1.8-1.9) wrote "Kernel",
    // "Memcpy", "Memset", "Runtime" and "Operator". Holistic Trace Analysis accepts the old GPU
    // categories too (hta/analyzers/breakdown_analysis.py, kernel_cats).
    std::string cat = cat_it->get_ref<const std::string&>();
    if (cat == "Kernel") cat = "kernel";
    if (cat == "Memcpy") cat = "gpu_memcpy";
    if (cat == "Memset") cat = "gpu_memset";
    if (cat == "Runtime") cat = "cuda_runtime";
    if (cat == "Operator") cat = "cpu_op";
    const std::string& name = name_it->get_ref<const std::string&>();
    const double ts = number_or(e, "ts", NAN);
    const double dur = number_or(e, "dur", 0);
    if (std::isnan(ts)) continue;
    const auto args_it = e.find("args");
    static const Json kEmpty = Json::object();
    const Json& args = args_it != e.end() && args_it->is_object() ? *args_it : kEmpty;
    const int64_t correlation = int_or(args, "correlation", -1);
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") {
      if (!valid_span(0, dur) || !std::isfinite(ts)) return bad_time(source, name, ts, dur);
      const int64_t stream = int_or(args, "stream", int_or(e, "tid", 0));
      const OpClass cls = cat == "kernel" ? classify_kernel(name) : OpClass::kMemcpy;
      gpu.push_back({ts, dur, &name, stream, correlation, cls, int_or(args, "External id", -1)});
    } else if (cat == "cuda_runtime" || cat == "cuda_driver") {
      if (correlation >= 0) launch_ts[correlation] = ts;
    } else if (cat == "cpu_op" && name.rfind("ProfilerStep#", 0) != 0) {
      const std::pair<int64_t, int64_t> thread{int_or(e, "pid", 0), int_or(e, "tid", 0)};
      note_pass_span(pass_spans[thread], name, ts, dur);
      const int64_t ext = int_or(args, "External id", -1);
      if (ext >= 0) {
        CpuOp op{&name, {}, {}, thread, ts, aten_gemm_dims(name, args)};
        const auto types = args.find("Input type");
        if (types != args.end() && types->is_array()) {
          // The first two tensor inputs' dtypes; scalars, lists and absent (None) inputs are
          // recorded as "Scalar", "ScalarList", "TensorList", "GenericList" and "".
          for (const Json& ty : *types) {
            if (!ty.is_string()) continue;
            const std::string& v = ty.get_ref<const std::string&>();
            if (v.empty() || v == "Scalar" || v == "ScalarList" || v == "TensorList" ||
                v == "GenericList")
              continue;
            (op.in0.empty() ? op.in0 : op.in1) = v;
            if (!op.in1.empty()) break;
          }
        }
        // The first op of an External id is the outermost; a kernel is tied to the innermost
        // (later, nested) op of the id, so later entries replace earlier ones.
        cpu_ops[ext] = std::move(op);
      }
    } else if (cat == "user_annotation" && name.rfind("ProfilerStep#", 0) != 0) {
      note_pass_span(pass_spans[{int_or(e, "pid", 0), int_or(e, "tid", 0)}], name, ts, dur);
    } else if ((cat == "user_annotation" || cat == "cpu_op") &&
               name.rfind("ProfilerStep#", 0) == 0) {
      if (!valid_span(0, dur) || !std::isfinite(ts)) return bad_time(source, name, ts, dur);
      steps.push_back({ts, dur, name});
    }
  }
  if (gpu.empty())
    return Status::invalid(source +
                           ": no GPU kernels (record the trace with "
                           "torch.profiler.ProfilerActivity.CUDA)");
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.ts < b.ts; });
  double t0 = gpu.front().ts;
  for (const Gpu& g : gpu) t0 = std::min(t0, g.ts);
  for (const Step& s : steps) t0 = std::min(t0, s.ts);
  for (const Gpu& g : gpu)
    if (!valid_span(g.ts - t0 + g.dur, 0)) return bad_time(source, *g.name, g.ts, g.dur);
  for (const Step& s : steps)
    if (!valid_span(s.ts - t0 + s.dur, 0)) return bad_time(source, s.name, s.ts, s.dur);
  for (const Step& s : steps)
    rank.iterations.push_back({s.name, Time::at(us(s.ts - t0)), Time::at(us(s.ts + s.dur - t0))});
  std::map<int64_t, uint16_t> lanes;
  for (const Gpu& g : gpu) lanes.emplace(g.stream, 0);
  for (auto& [stream, lane] : lanes) {
    lane = static_cast<uint16_t>(rank.lanes.size());
    rank.lanes.push_back({"stream " + std::to_string(stream), stream});
  }
  for (auto& [thread, spans] : pass_spans) merge_pass_spans(spans);
  std::unordered_map<int64_t, int32_t> unit_of;  // External id -> index into rank.ops
  for (const Gpu& g : gpu) {
    RecordedSlice s;
    s.start = Time::at(us(g.ts - t0));
    s.end = s.start + us(g.dur);
    s.name = intern(into, index, *g.name);
    s.lane = lanes[g.stream];
    s.cls = g.cls;
    if (const auto op = cpu_ops.find(g.external); op != cpu_ops.end()) {
      const CpuOp& c = op->second;
      s.op = static_cast<int32_t>(intern(
          into, index,
          c.in0.empty() ? *c.name
                        : *c.name + " (" + c.in0 + (c.in1.empty() ? "" : ", " + c.in1) + ")"));
      // A kernel the name rules do not know takes its class from the op that launched it: the
      // helper kernels of an attention op (cuDNN's dO·O and dQ conversion kernels of
      // _cudnn_attention_backward), and those of the memory-bound ops the kinds name (the
      // weight-gradient reduction of _fused_rms_norm_backward, embedding_dense_backward's
      // sort and segment kernels).
      if (s.cls == OpClass::kOtherCompute) {
        const std::string_view n = *c.name;
        const MemOp kind = classify_aten_op(n, c.in0, c.in1);
        const auto has = [&](std::string_view part) {
          return n.find(part) != std::string_view::npos;
        };
        if (has("attention") || has("flash")) {
          s.cls = has("backward") ? OpClass::kAttentionBwd : OpClass::kAttentionFwd;
        } else if (kind == MemOp::kAdamW || kind == MemOp::kL2Norm) {
          s.cls = OpClass::kOptimizer;
        } else if (kind != MemOp::kElementwise) {
          s.cls = OpClass::kMemoryBound;
        }
      }
      if (s.cls == OpClass::kMemoryBound || s.cls == OpClass::kOptimizer)
        s.mem_op = static_cast<int8_t>(classify_aten_op(*c.name, c.in0, c.in1));
      auto [unit, fresh] = unit_of.try_emplace(g.external, static_cast<int32_t>(rank.ops.size()));
      if (fresh) {
        RecordedOp o;
        o.name = static_cast<uint32_t>(s.op);
        o.pass = pass_at(pass_spans[c.thread], c.ts);
        o.launch = Time::at(us(std::clamp(c.ts - t0, 0.0, kMaxTraceUs)));
        o.gemm = c.gemm;
        rank.ops.push_back(o);
      }
      s.unit = unit->second;
    }
    // The step during which the kernel was launched; a kernel without its launch record counts
    // where it started.
    const auto l = launch_ts.find(g.correlation);
    const double at = l != launch_ts.end() ? l->second : g.ts;
    const auto it = std::upper_bound(steps.begin(), steps.end(), at,
                                     [](double v, const Step& st) { return v < st.ts; });
    if (it != steps.begin()) {
      const Step& st = *(it - 1);
      if (at < st.ts + st.dur) s.iteration = static_cast<int32_t>(it - 1 - steps.begin());
    }
    rank.slices.push_back(s);
  }
  sort_slices(rank);
  into.format = TraceFormat::kKineto;
  into.ranks.push_back(std::move(rank));
  return Status::ok();
}

// The value of `key=` in a Program op's shape text ("m=4096 n=6144 k=4096 batch=1 dtype=bf16",
// "bytes=67108864 op=embedding"; sim::payload_text); -1 where absent.
int64_t shape_field(std::string_view shape, std::string_view key) {
  for (size_t at = 0; at < shape.size();) {
    const size_t end = std::min(shape.find(' ', at), shape.size());
    const std::string_view word = shape.substr(at, end - at);
    if (word.size() > key.size() && word.substr(0, key.size()) == key && word[key.size()] == '=') {
      int64_t v = 0;
      for (const char c : word.substr(key.size() + 1)) {
        if (c < '0' || c > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (c - '0');
      }
      return v;
    }
    at = end + 1;
  }
  return -1;
}

// The op of a scaleplan trace's slice: its pass (args.phase, sim::Phase), micro-batch, and the
// GEMM dims or bytes of its shape.
RecordedOp program_op(const RecordedSlice& s, const Json& args) {
  RecordedOp o;
  o.name = s.name;
  o.launch = s.start;
  // sim::Op::microbatch is an int16; anything else is not a micro-batch this writer wrote.
  const int64_t mb = int_or(args, "microbatch", -1);
  o.microbatch = mb >= 0 && mb <= INT16_MAX ? static_cast<int32_t>(mb) : -1;
  const std::string phase = string_or(args, "phase");
  o.pass = phase == "forward"                                        ? StepPass::kForward
           : phase.rfind("backward", 0) == 0 || phase == "recompute" ? StepPass::kBackward
           : phase == "optimizer"                                    ? StepPass::kOptimizer
                                                                     : StepPass::kOther;
  const std::string shape = string_or(args, "shape");
  const int64_t m = shape_field(shape, "m"), n = shape_field(shape, "n"),
                k = shape_field(shape, "k"), batch = shape_field(shape, "batch");
  if (m > 0 && n > 0 && k > 0) o.gemm = {m, n, k, batch > 0 ? batch : 1};
  o.bytes = shape_field(shape, "bytes");
  return o;
}

// "rank 12 · stage 3" -> 12.
int64_t global_rank_of(const std::string& process_name, int64_t fallback) {
  if (process_name.rfind("rank ", 0) != 0) return fallback;
  try {
    return std::stoll(process_name.substr(5));
  } catch (...) {
    return fallback;
  }
}

Result<RecordedTimeline> scaleplan_from_json(const Json& j, const std::string& source) {
  const Json* events = trace_events(j);
  if (events == nullptr) return Status::invalid(source + ": traceEvents: missing (not a trace)");
  RecordedTimeline t;
  t.format = TraceFormat::kScaleplan;
  std::vector<int64_t> peaks;
  if (const auto od = j.find("otherData"); od != j.end() && od->is_object()) {
    t.title = string_or(*od, "title");
    t.model = string_or(*od, "model");
    t.cluster = string_or(*od, "cluster");
    const auto p = od->find("peak_memory_bytes");
    if (p != od->end() && p->is_array())
      for (const Json& v : *p) peaks.push_back(v.is_number_integer() ? v.get<int64_t>() : -1);
  }
  std::unordered_map<std::string, uint32_t> index;
  std::map<int64_t, RecordedRank> ranks;                       // by pid
  std::map<std::pair<int64_t, int64_t>, std::string> threads;  // (pid, tid) -> stream name
  std::map<std::pair<int64_t, int64_t>, uint16_t> lane_of;
  for (const Json& e : *events) {
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) continue;
    const std::string& ph = e["ph"].get_ref<const std::string&>();
    const int64_t pid = int_or(e, "pid", 0);
    if (ph == "M") {
      const std::string what = string_or(e, "name");
      const Json& args = object_or_empty(e, "args");
      if (what == "process_name" && args.contains("name") && args["name"].is_string()) {
        RecordedRank& r = ranks[pid];
        r.label = args["name"].get<std::string>();
        r.rank = global_rank_of(r.label, pid);
      } else if (what == "thread_name" && args.contains("name") && args["name"].is_string()) {
        threads[{pid, int_or(e, "tid", 0)}] = args["name"].get<std::string>();
      }
      continue;
    }
    if (ph != "X") continue;
    const int64_t tid = int_or(e, "tid", 0);
    RecordedRank& r = ranks[pid];
    auto [lane_it, new_lane] = lane_of.try_emplace({pid, tid}, 0);
    if (new_lane) {
      lane_it->second = static_cast<uint16_t>(r.lanes.size());
      const auto name = threads.find({pid, tid});
      r.lanes.push_back(
          {name != threads.end() ? name->second : "stream " + std::to_string(tid), tid});
    }
    const double ts = number_or(e, "ts", 0), dur = number_or(e, "dur", 0);
    const std::string name = string_or(e, "name");
    if (!valid_span(ts, dur) || ts + dur > kMaxTraceUs) return bad_time(source, name, ts, dur);
    RecordedSlice s;
    s.start = Time::at(us(ts));
    s.end = s.start + us(dur);
    s.name = intern(t, index, name);
    s.lane = lane_it->second;
    s.iteration = 0;
    s.op = static_cast<int32_t>(s.name);
    const std::string mem_op = string_or(object_or_empty(e, "args"), "mem_op");
    for (int k = 0; k < kNumMemOps && !mem_op.empty(); ++k)
      if (to_string(static_cast<MemOp>(k)) == mem_op) s.mem_op = static_cast<int8_t>(k);
    const Json& args = object_or_empty(e, "args");
    s.unit = static_cast<int32_t>(r.ops.size());
    r.ops.push_back(program_op(s, args));
    const std::string cls = string_or(args, "class");
    if (auto c = parse_op_class(cls)) {
      s.cls = *c;
    } else {
      const std::string cat = string_or(e, "cat");
      s.cls = cat == "host"                    ? OpClass::kHost
              : cat == "send" || cat == "recv" ? OpClass::kSendRecv
              : cat == "collective"            ? OpClass::kOtherComm
                                               : OpClass::kOtherCompute;
    }
    r.slices.push_back(s);
  }
  if (ranks.empty()) return Status::invalid(source + ": traceEvents: no ranks");
  Time end;
  for (const auto& [pid, r] : ranks)
    for (const RecordedSlice& s : r.slices) end = std::max(end, s.end);
  for (auto& entry : ranks) {
    const int64_t pid = entry.first;
    RecordedRank& r = entry.second;
    // Lanes in stream order, as the trace sorts them.
    std::vector<uint16_t> order(r.lanes.size());
    for (uint16_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(),
              [&](uint16_t a, uint16_t b) { return r.lanes[a].id < r.lanes[b].id; });
    std::vector<uint16_t> new_index(order.size());
    std::vector<RecordedLane> lanes;
    for (uint16_t i = 0; i < order.size(); ++i) {
      new_index[order[i]] = i;
      lanes.push_back(r.lanes[order[i]]);
    }
    r.lanes = std::move(lanes);
    for (RecordedSlice& s : r.slices) s.lane = new_index[s.lane];
    sort_slices(r);
    r.iterations.push_back({"iteration", Time::zero(), end});
    if (pid >= 0 && static_cast<size_t>(pid) < peaks.size())
      r.peak_allocated = peaks[static_cast<size_t>(pid)];
    t.ranks.push_back(std::move(r));
  }
  return t;
}

}  // namespace

std::string_view to_string(StepPass p) {
  switch (p) {
    case StepPass::kForward:
      return "forward";
    case StepPass::kBackward:
      return "backward";
    case StepPass::kOptimizer:
      return "optimizer";
    case StepPass::kOther:
      break;
  }
  return "other";
}

std::string_view to_string(TraceFormat f) {
  return f == TraceFormat::kScaleplan ? "scaleplan" : "kineto";
}

Result<RecordedTimeline> parse_scaleplan_trace(std::string_view text, const std::string& source) {
  SP_ASSIGN_OR_RETURN(const Json j, parse_json(text, source));
  return scaleplan_from_json(j, source);
}

Status parse_kineto_trace(std::string_view text, const std::string& source, int64_t fallback_rank,
                          RecordedTimeline& into) {
  SP_ASSIGN_OR_RETURN(const Json j, parse_json(text, source));
  return kineto_from_json(j, source, fallback_rank, into);
}

Result<RecordedTimeline> load_recorded(const std::vector<std::string>& paths) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> in_dir;
      for (const auto& entry : fs::directory_iterator(p, ec)) {
        const std::string name = entry.path().filename().string();
        const auto ends = [&](std::string_view suffix) {
          return name.size() >= suffix.size() &&
                 name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
        };
        if (entry.is_regular_file() && (ends(".json") || ends(".json.gz")))
          in_dir.push_back(entry.path().string());
      }
      std::sort(in_dir.begin(), in_dir.end());
      if (in_dir.empty()) return Status::invalid(p + ": no *.json or *.json.gz trace files");
      files.insert(files.end(), in_dir.begin(), in_dir.end());
    } else if (fs::exists(p, ec)) {
      files.push_back(p);
    } else {
      return Status::not_found(p + ": no such file or directory");
    }
  }
  if (files.empty()) return Status::invalid("no trace files given");
  RecordedTimeline t;
  bool scaleplan = false;
  for (size_t i = 0; i < files.size(); ++i) {
    SP_ASSIGN_OR_RETURN(const std::string text, read_trace_text(files[i]));
    SP_ASSIGN_OR_RETURN(const Json j, parse_json(text, files[i]));
    const bool this_scaleplan = is_scaleplan(j);
    if (this_scaleplan) {
      if (files.size() > 1)
        return Status::invalid(files[i] +
                               ": a scaleplan trace holds every rank; give it alone, not with "
                               "other traces");
      SP_ASSIGN_OR_RETURN(t, scaleplan_from_json(j, files[i]));
      scaleplan = true;
    } else {
      SP_RETURN_IF_ERROR(kineto_from_json(j, files[i], static_cast<int64_t>(i), t));
    }
  }
  if (!scaleplan) {
    t.title = fs::path(files.front()).filename().string();
    std::stable_sort(t.ranks.begin(), t.ranks.end(),
                     [](const RecordedRank& a, const RecordedRank& b) { return a.rank < b.rank; });
    for (size_t i = 1; i < t.ranks.size(); ++i)
      if (t.ranks[i].rank == t.ranks[i - 1].rank)
        return Status::invalid(t.ranks[i].label + ": distributedInfo.rank " +
                               std::to_string(t.ranks[i].rank) + " is also the rank of " +
                               t.ranks[i - 1].label);
  }
  return t;
}

std::vector<IterationSummary> summarize(const RecordedRank& rank) {
  std::vector<IterationSummary> out(rank.iterations.size());
  struct Edge {
    Time at;
    int delta;  // +1 start, -1 end
    OpClass cls;
  };
  std::vector<std::vector<Edge>> edges(rank.iterations.size());
  std::vector<Time> first(rank.iterations.size(), Time::at(Duration::infinite()));
  std::vector<Time> last(rank.iterations.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].name = rank.iterations[i].name;
    out[i].wall = rank.iterations[i].end - rank.iterations[i].start;
    out[i].lane_time.assign(rank.lanes.size(), Duration::zero());
  }
  for (const RecordedSlice& s : rank.slices) {
    if (s.iteration < 0 || static_cast<size_t>(s.iteration) >= out.size()) continue;
    IterationSummary& it = out[static_cast<size_t>(s.iteration)];
    const auto c = static_cast<size_t>(s.cls);
    it.time[c] += s.end - s.start;
    it.count[c] += 1;
    it.lane_time[s.lane] += s.end - s.start;
    if (s.cls == OpClass::kHost) continue;
    first[static_cast<size_t>(s.iteration)] =
        std::min(first[static_cast<size_t>(s.iteration)], s.start);
    last[static_cast<size_t>(s.iteration)] =
        std::max(last[static_cast<size_t>(s.iteration)], s.end);
    if (is_compute(s.cls) || is_comm(s.cls)) {
      edges[static_cast<size_t>(s.iteration)].push_back({s.start, +1, s.cls});
      edges[static_cast<size_t>(s.iteration)].push_back({s.end, -1, s.cls});
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    IterationSummary& it = out[i];
    if (last[i] > first[i]) it.gpu_span = last[i] - first[i];
    auto& ev = edges[i];
    std::sort(ev.begin(), ev.end(), [](const Edge& a, const Edge& b) { return a.at < b.at; });
    std::array<int, kNumOpClasses> active{};
    int compute = 0;
    for (size_t k = 0; k < ev.size(); ++k) {
      const Edge& e = ev[k];
      if (is_compute(e.cls)) {
        compute += e.delta;
      } else {
        active[static_cast<size_t>(e.cls)] += e.delta;
      }
      if (k + 1 == ev.size()) break;
      const Duration dt = ev[k + 1].at - e.at;
      if (dt <= Duration::zero()) continue;
      if (compute > 0) {
        it.compute_busy += dt;
        continue;
      }
      int kinds = 0;
      for (int a : active) kinds += a > 0 ? 1 : 0;
      if (kinds == 0) continue;
      // Split equally; the remainder of a picosecond division goes to the first class.
      Duration share = Duration::ticks(dt.count() / kinds);
      Duration rest = dt - share * static_cast<int64_t>(kinds);
      for (int c = 0; c < kNumOpClasses; ++c) {
        if (active[static_cast<size_t>(c)] <= 0) continue;
        it.exposed[static_cast<size_t>(c)] += share + rest;
        rest = Duration::zero();
      }
    }
  }
  return out;
}

}  // namespace scaleplan::sim
