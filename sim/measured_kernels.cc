#include "sim/measured_kernels.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_map>

#include "core/json_util.h"
#include "sim/kineto_ops.h"
#include "sim/op_class.h"
#include "sim/program.h"
#include "sim/recorded.h"

namespace scaleplan::sim {
namespace {

// A scaleplan trace's compute ops, by the shape text of their args.
Status scaleplan_kernels(const Json& j, const std::string& source, const std::string& generator,
                         MeasuredKernels& into) {
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

// ---- PyTorch profiler (Kineto) traces recorded with record_shapes -------------------------------

constexpr std::string_view kRecordShapes =
    "record the trace with torch.profiler.profile(record_shapes=True), which writes each aten "
    "op's \"Input Dims\" and \"Input type\"";

// A PyTorch op of the trace (cat "cpu_op").
struct AtenOp {
  const Json* args;
  const std::string* name;
  std::string thread;  // pid/tid: ops nest by time on one thread
  double ts, end;
  int parent = -1;  // the innermost op on the same thread whose span holds this one
};

std::string arg_text(const Json& args, const char* field, size_t i) {
  const auto it = args.find(field);
  if (it == args.end() || !it->is_array() || i >= it->size() || !(*it)[i].is_string()) return "";
  return (*it)[i].get<std::string>();
}

// The GEMM an aten::mm / addmm / bmm computed, from its input dims; nullopt when the op is none of
// these or its dims do not multiply. `unread` is set for a GEMM whose dtype has no model.
std::optional<GemmShape> kineto_gemm(const AtenOp& op, bool& unread) {
  const std::string& n = *op.name;
  if (n != "aten::mm" && n != "aten::addmm" && n != "aten::bmm") return std::nullopt;
  size_t a = 0;
  const std::array<int64_t, 4> dims = aten_gemm_dims(n, *op.args, &a);
  if (dims[0] == 0) {
    unread = true;
    return std::nullopt;
  }
  // bf16 and fp16 run on the tensor cores at one rate (DType has no fp16 of its own); fp32 (TF32
  // or not) and fp8 (aten::_scaled_mm, not read here) have no model here.
  const std::string ty = arg_text(*op.args, "Input type", a);
  if (ty != "c10::BFloat16" && ty != "c10::Half") {
    unread = true;
    return std::nullopt;
  }
  GemmShape g;
  g.m = dims[0];
  g.n = dims[1];
  g.k = dims[2];
  g.batch = dims[3];
  g.dtype = DType::kBf16;
  return g;
}

// Bytes of one element of a record_shapes "Input type"; 0 for a type not known here.
int64_t element_bytes(std::string_view t) {
  if (t == "float" || t == "int" || t == "unsigned int") return 4;
  if (t == "c10::BFloat16" || t == "c10::Half" || t == "short") return 2;
  if (t == "double" || t == "long int" || t == "long" || t == "c10::complex<float>") return 8;
  if (t == "bool" || t == "unsigned char" || t == "signed char" ||
      t.find("Float8") != std::string_view::npos)
    return 1;
  return 0;
}

// The elementwise aten ops whose bytes follow from their inputs alone: each tensor input read
// once, and the output written once, as large as the largest input in the widest input dtype
// (broadcasting and type promotion), or in place into the first input (a trailing underscore);
// copy_ and the fills write their first input without reading it.
std::optional<MemoryBoundShape> kineto_elementwise(const AtenOp& op) {
  static constexpr std::string_view kOps[] = {
      "aten::copy_", "aten::add",   "aten::add_",          "aten::sub",   "aten::sub_",
      "aten::mul",   "aten::mul_",  "aten::div",           "aten::div_",  "aten::neg",
      "aten::silu",  "aten::silu_", "aten::silu_backward", "aten::fill_", "aten::zero_"};
  const std::string& n = *op.name;
  if (std::find(std::begin(kOps), std::end(kOps), n) == std::end(kOps)) return std::nullopt;
  const auto dims = op.args->find("Input Dims");
  if (dims == op.args->end() || !dims->is_array()) return std::nullopt;
  int64_t read = 0, largest = 0, widest = 0, first = -1;
  std::string in0, in1;
  for (size_t i = 0; i < dims->size(); ++i) {
    const std::string ty = arg_text(*op.args, "Input type", i);
    if (ty.empty() || ty == "Scalar" || ty == "ScalarList" || ty.find("List") != std::string::npos)
      continue;
    const int64_t size = element_bytes(ty);
    if (size == 0 || !(*dims)[i].is_array()) return std::nullopt;
    int64_t numel = 1;
    for (const int64_t d : aten_input_dims(*op.args, i)) numel *= d;
    if (first < 0) first = numel * size;
    read += numel * size;
    largest = std::max(largest, numel);
    widest = std::max(widest, size);
    (in0.empty() ? in0 : in1) = ty;
  }
  if (first < 0) return std::nullopt;
  const bool writes_only = n == "aten::fill_" || n == "aten::zero_";
  const bool in_place = n.back() == '_';
  int64_t bytes = read + (in_place ? first : largest * widest);
  if (writes_only) bytes = first;
  if (n == "aten::copy_") bytes = read;  // dst written, src read
  MemoryBoundShape m;
  m.bytes = Bytes(bytes);
  m.op = classify_aten_op(n, in0, in1);
  return m;
}

// PyTorch's SDPA ops (aten/src/ATen/native/native_functions.yaml): query, key, value are
// [batch, heads, seq, head dim] in every one, at input `q` (0, or 1 in the backward after
// grad_out); `causal` is the index of is_causal among the inputs.
struct SdpaOp {
  std::string_view name;
  bool backward;
  AttentionKernel kernel;
  size_t q, causal;
};
constexpr SdpaOp kSdpaOps[] = {
    {"aten::_scaled_dot_product_cudnn_attention", false, AttentionKernel::kCudnn, 0, 6},
    {"aten::_scaled_dot_product_cudnn_attention_backward", true, AttentionKernel::kCudnn, 1, 14},
    {"aten::_scaled_dot_product_flash_attention", false, AttentionKernel::kFlash2, 0, 4},
    {"aten::_scaled_dot_product_flash_attention_backward", true, AttentionKernel::kFlash2, 1, 11},
};

const SdpaOp* sdpa_op(std::string_view name) {
  for (const SdpaOp& s : kSdpaOps)
    if (s.name == name) return &s;
  return nullptr;
}

// The attention an SDPA op computed; nullopt when its dims are not [b, h, s, d].
std::optional<AttentionShape> kineto_attention(const AtenOp& op, const SdpaOp& k) {
  const std::vector<int64_t> q = aten_input_dims(*op.args, k.q),
                             kk = aten_input_dims(*op.args, k.q + 1),
                             v = aten_input_dims(*op.args, k.q + 2);
  if (q.size() != 4 || kk.size() != 4 || v.size() != 4 || q[0] != kk[0] || kk[2] != v[2])
    return std::nullopt;
  AttentionShape a;
  a.batch = q[0];
  a.heads = q[1];
  a.kv_heads = kk[1];
  a.q_len = q[2];
  a.kv_len = kk[2];
  a.head_dim = q[3];
  a.v_head_dim = v[3];
  // "Concrete Inputs" (PyTorch >= 2.3) holds is_causal as "True"/"False"; a trace without it is
  // taken as causal, as every decoder LLM scaleplan models trains.
  const std::string causal = arg_text(*op.args, "Concrete Inputs", k.causal);
  a.causal = causal != "False";
  a.kernel = k.kernel;
  return a;
}

Status kineto_kernels(const Json& j, const std::string& source, MeasuredKernels& into) {
  std::vector<AtenOp> ops;
  std::unordered_map<int64_t, int> op_of_external;  // External id -> innermost op of that id
  std::map<int64_t, double> kernel_us;              // External id -> summed kernel time
  // External id -> its first kernel's name (an element-wise op launches one kernel; its name
  // says which implementation ran, memory_path_of_kernel)
  std::unordered_map<int64_t, const std::string*> kernel_name;
  bool any_dims = false, any_kernel = false;
  size_t index = 0;
  for (const Json& e : j["traceEvents"]) {
    const std::string ctx = source + ": traceEvents[" + std::to_string(index++) + "]";
    if (!e.is_object() || e.value("ph", "") != "X" || !e.contains("args") ||
        !e["args"].is_object() || !e.contains("name") || !e["name"].is_string())
      continue;
    const std::string cat = e.value("cat", "");
    const Json& a = e["args"];
    const auto ext = a.find("External id");
    if (ext == a.end() || !ext->is_number_integer()) continue;
    const double ts = e.contains("ts") && e["ts"].is_number() ? e["ts"].get<double>() : NAN;
    const double dur = e.contains("dur") && e["dur"].is_number() ? e["dur"].get<double>() : -1;
    // Early Kineto (PyTorch 1.8-1.9) wrote "Kernel" and "Operator".
    if (cat == "kernel" || cat == "Kernel") {
      if (!(dur >= 0))
        return Status::invalid(ctx + ": dur: expected a non-negative number of microseconds, got " +
                               json_brief(e.contains("dur") ? e["dur"] : Json()));
      kernel_us[ext->get<int64_t>()] += dur;
      kernel_name.try_emplace(ext->get<int64_t>(), &e["name"].get_ref<const std::string&>());
      any_kernel = true;
    } else if ((cat == "cpu_op" || cat == "Operator") && std::isfinite(ts) && dur >= 0) {
      any_dims = any_dims || a.contains("Input Dims");
      // Nested ops of one External id: the kernel belongs to the innermost, the later entry.
      op_of_external[ext->get<int64_t>()] = static_cast<int>(ops.size());
      ops.push_back({&a, &e["name"].get_ref<const std::string&>(),
                     json_brief(e.value("pid", Json())) + "/" + json_brief(e.value("tid", Json())),
                     ts, ts + dur});
    }
  }
  if (!any_dims)
    return Status::invalid(source +
                           ": no aten op carries \"Input Dims\", so no kernel time has a " +
                           "shape; " + std::string(kRecordShapes));
  if (!any_kernel)
    return Status::invalid(source +
                           ": no GPU kernel with an External id (record the trace with "
                           "torch.profiler.ProfilerActivity.CUDA)");
  // Each op's parent: the innermost earlier op of its thread whose span holds it.
  std::vector<int> order(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const AtenOp &a = ops[x], &b = ops[y];
    if (a.thread != b.thread) return a.thread < b.thread;
    return a.ts != b.ts ? a.ts < b.ts : a.end > b.end;
  });
  std::vector<int> stack;
  for (const int i : order) {
    while (!stack.empty() &&
           (ops[stack.back()].thread != ops[i].thread || ops[stack.back()].end < ops[i].end))
      stack.pop_back();
    ops[i].parent = stack.empty() ? -1 : stack.back();
    stack.push_back(i);
  }
  // Kernel time per sample op: a GEMM op itself, or the SDPA op above the one that launched it.
  std::map<int, double> attention_us;
  if (into.generator.empty()) into.generator = "pytorch profiler";
  for (const auto& [ext, us] : kernel_us) {
    const auto it = op_of_external.find(ext);
    if (it == op_of_external.end()) continue;
    bool unread = false;
    if (const auto g = kineto_gemm(ops[it->second], unread)) {
      calibrate::KernelSample s;
      s.kind = KernelKind::kGemm;
      s.family = "gemm";
      s.gemm = *g;
      s.time = Duration::seconds(us * 1e-6);
      into.ops.push_back(s);
      continue;
    }
    if (unread) {
      ++into.skipped_unread;
      continue;
    }
    if (const auto mb = kineto_elementwise(ops[it->second])) {
      calibrate::KernelSample s;
      s.kind = KernelKind::kMemoryBound;
      s.memory = *mb;
      s.memory.path = memory_path_of_kernel(*kernel_name.at(ext), *ops[it->second].name);
      s.family = std::string(to_string(mb->op));
      s.time = Duration::seconds(us * 1e-6);
      into.ops.push_back(s);
      continue;
    }
    for (int i = it->second; i >= 0; i = ops[i].parent) {
      const std::string_view n = *ops[i].name;
      if (sdpa_op(n) != nullptr) {
        attention_us[i] += us;
        break;
      }
      if (n.find("efficient_attention") != std::string_view::npos) {
        ++into.skipped_unread;  // memory-efficient attention: no model of its own
        break;
      }
    }
  }
  for (const auto& [i, us] : attention_us) {
    const SdpaOp& k = *sdpa_op(*ops[i].name);
    const auto a = kineto_attention(ops[i], k);
    if (!a) {
      ++into.skipped_unread;
      continue;
    }
    calibrate::KernelSample s;
    s.kind = k.backward ? KernelKind::kAttentionBwd : KernelKind::kAttentionFwd;
    s.family = std::string(to_string(s.kind));
    s.attention = *a;
    s.implementation = std::string(to_string(a->kernel));
    s.time = Duration::seconds(us * 1e-6);
    into.ops.push_back(s);
  }
  return Status::ok();
}

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
  if (generator.rfind("scaleplan", 0) == 0) return scaleplan_kernels(j, source, generator, into);
  return kineto_kernels(j, source, into);
}

Status read_measured_kernels(const std::string& path, MeasuredKernels& into) {
  // Gzip is told by content, not by the name: a gzipped scaleplan trace is a scaleplan trace,
  // and a PyTorch trace (gzipped or not) is refused by its content below.
  SP_ASSIGN_OR_RETURN(const std::string text, read_trace_text(path));
  return parse_measured_kernels(text, path, into);
}

}  // namespace scaleplan::sim
