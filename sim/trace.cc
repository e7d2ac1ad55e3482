#include "sim/trace.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

#include "sim/op_class.h"

namespace scaleplan::sim {
namespace {

constexpr OpId kNoOpId = 0xFFFFFFFFu;

void append_escaped(std::string& out, std::string_view s) {
  out.push_back('"');
  for (char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

// Picoseconds as exact microseconds: "12.345678".
void append_us(std::string& out, int64_t ps) {
  char buf[40];
  const char* sign = ps < 0 ? "-" : "";
  const int64_t a = ps < 0 ? -ps : ps;
  std::snprintf(buf, sizeof buf, "%s%" PRId64 ".%06" PRId64, sign, a / 1000000, a % 1000000);
  out += buf;
}

void append_num(std::string& out, double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  out += buf;
}

void metadata(std::string& out, const char* name, int pid, int tid, const char* key,
              const std::string& value, bool quoted) {
  out += "{\"ph\":\"M\",\"name\":\"";
  out += name;
  out += "\",\"pid\":" + std::to_string(pid);
  if (tid >= 0) out += ",\"tid\":" + std::to_string(tid);
  out += ",\"args\":{\"";
  out += key;
  out += "\":";
  if (quoted) {
    append_escaped(out, value);
  } else {
    out += value;
  }
  out += "}},\n";
}

// Whether op i is written as a slice (chrome_trace skips allocations and instants).
bool has_slice(const Program& program, const Timeline& timeline, OpId i) {
  const Op& op = program.ops()[i];
  return op.kind != OpKind::kAlloc && op.kind != OpKind::kFree &&
         timeline.end[i] > timeline.start[i];
}

// Flow arrows (ph "s" / "f", bound to the enclosing slice) from each pipeline send to where its
// data is received: the receive's slice, or, where the receive took no time (the data had already
// arrived), the earliest slice that waits for it through ops without a slice.
template <typename Sep>
void append_p2p_flows(const Program& program, const Timeline& timeline, std::string& out,
                      Sep&& sep) {
  const auto& ops = program.ops();
  std::unordered_map<uint32_t, std::pair<OpId, OpId>> pairs;  // match -> (send, recv)
  bool instant_recv = false;
  for (OpId i = 0; i < ops.size(); ++i) {
    if (ops[i].kind != OpKind::kSend && ops[i].kind != OpKind::kRecv) continue;
    auto& [send, recv] = pairs.try_emplace(ops[i].match, kNoOpId, kNoOpId).first->second;
    (ops[i].kind == OpKind::kSend ? send : recv) = i;
    if (ops[i].kind == OpKind::kRecv && !has_slice(program, timeline, i)) instant_recv = true;
  }
  // Ops that wait for an op without a slice, for the walk from an instant receive.
  std::vector<std::vector<OpId>> waiting;
  if (instant_recv) {
    waiting.resize(ops.size());
    for (OpId i = 0; i < ops.size(); ++i) {
      for (OpId d : program.deps(i)) {
        if (!has_slice(program, timeline, d)) waiting[d].push_back(i);
      }
    }
  }
  auto target = [&](OpId recv) -> OpId {
    if (has_slice(program, timeline, recv)) return recv;
    OpId best = kNoOpId;
    std::vector<OpId> todo{recv};
    for (size_t k = 0; k < todo.size() && k < 256; ++k) {
      for (OpId w : waiting[todo[k]]) {
        if (!has_slice(program, timeline, w)) {
          todo.push_back(w);
        } else if (best == kNoOpId || timeline.start[w] < timeline.start[best]) {
          best = w;
        }
      }
    }
    return best;
  };
  std::vector<std::pair<OpId, OpId>> flows;
  for (const auto& [match, ends] : pairs) {
    const auto [send, recv] = ends;
    if (send == kNoOpId || recv == kNoOpId || !has_slice(program, timeline, send)) continue;
    const OpId to = target(recv);
    if (to != kNoOpId) flows.push_back({send, to});
  }
  std::sort(flows.begin(), flows.end());  // the map's order is not the file's
  uint64_t id = 0;
  for (const auto& [from, to] : flows) {
    for (const OpId i : {from, to}) {
      const Op& op = ops[i];
      sep();
      out += i == from ? "{\"ph\":\"s\"" : "{\"ph\":\"f\",\"bp\":\"e\"";
      out += ",\"id\":" + std::to_string(id) +
             ",\"name\":\"pp.p2p\",\"cat\":\"flow\",\"pid\":" + std::to_string(op.rank) +
             ",\"tid\":" + std::to_string(static_cast<int>(op.stream)) + ",\"ts\":";
      append_us(out, timeline.start[i].since_start().count());
      out += "}";
    }
    ++id;
  }
}

}  // namespace

std::string chrome_trace(const Program& program, const Timeline& timeline,
                         const TraceOptions& options) {
  std::string out;
  out.reserve(256 * program.num_ops() + 4096);
  out += "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"generator\":";
  append_escaped(out, options.generator);
  out += ",\"title\":";
  append_escaped(out, options.title);
  for (const auto& e : options.metadata) {
    out += ",";
    append_escaped(out, e.key);
    out += ":";
    if (e.raw) {
      out += e.value;
    } else {
      append_escaped(out, e.value);
    }
  }
  if (!options.peak_memory_bytes.empty()) {
    out += ",\"peak_memory_bytes\":[";
    for (size_t i = 0; i < options.peak_memory_bytes.size(); ++i) {
      if (i > 0) out += ",";
      out += std::to_string(options.peak_memory_bytes[i]);
    }
    out += "]";
  }
  out += "},\"traceEvents\":[\n";
  const auto& ops = program.ops();
  // Which streams each rank uses: only those get a thread.
  std::vector<uint8_t> used(static_cast<size_t>(program.num_ranks()) * kNumStreams, 0);
  for (const Op& op : ops) {
    if (op.kind != OpKind::kAlloc && op.kind != OpKind::kFree) {
      used[static_cast<size_t>(op.rank) * kNumStreams + static_cast<int>(op.stream)] = 1;
    }
  }
  for (int r = 0; r < program.num_ranks(); ++r) {
    const RankInfo& info = program.ranks()[r];
    std::string name = "rank " + std::to_string(info.global_rank) + " \xC2\xB7 stage " +
                       std::to_string(info.stage);
    if (info.represents > 1) name += " (stands for " + std::to_string(info.represents) + " ranks)";
    metadata(out, "process_name", r, -1, "name", name, true);
    metadata(out, "process_sort_index", r, -1, "sort_index", std::to_string(r), false);
    for (int s = 0; s < kNumStreams; ++s) {
      if (!used[static_cast<size_t>(r) * kNumStreams + s]) continue;
      metadata(out, "thread_name", r, s, "name", std::string(to_string(static_cast<StreamKind>(s))),
               true);
      metadata(out, "thread_sort_index", r, s, "sort_index", std::to_string(s), false);
    }
  }
  std::vector<int64_t> memory(program.num_ranks());
  for (int r = 0; r < program.num_ranks(); ++r)
    memory[r] = program.ranks()[r].static_memory.value();
  bool first = true;
  auto sep = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Memory counters: allocations and frees in time order per rank (ops of different streams
  // interleave in time, not in program order).
  std::vector<OpId> mem_ops;
  for (OpId i = 0; i < ops.size(); ++i) {
    if (ops[i].kind == OpKind::kAlloc || ops[i].kind == OpKind::kFree) mem_ops.push_back(i);
  }
  std::stable_sort(mem_ops.begin(), mem_ops.end(), [&](OpId a, OpId b) {
    if (ops[a].rank != ops[b].rank) return ops[a].rank < ops[b].rank;
    return timeline.start[a] < timeline.start[b];
  });
  for (int r = 0; r < program.num_ranks(); ++r) {
    sep();
    out += "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":" + std::to_string(r) +
           ",\"ts\":0.000000,\"args\":{\"bytes\":" + std::to_string(memory[r]) + "}}";
  }
  for (OpId i : mem_ops) {
    const Op& op = ops[i];
    memory[op.rank] += op.kind == OpKind::kAlloc ? op.bytes : -op.bytes;
    sep();
    out += "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":" + std::to_string(op.rank) + ",\"ts\":";
    append_us(out, timeline.start[i].since_start().count());
    out += ",\"args\":{\"bytes\":" + std::to_string(memory[op.rank]) + "}}";
  }
  for (OpId i = 0; i < ops.size(); ++i) {
    const Op& op = ops[i];
    const int64_t s = timeline.start[i].since_start().count();
    const int64_t e = timeline.end[i].since_start().count();
    if (op.kind == OpKind::kAlloc || op.kind == OpKind::kFree) continue;
    if (e <= s) continue;
    const OpLabel& label = program.label(i);
    // Synchronisation points (pass starts, joins) do no work: zero long in a simulation, they
    // take the executor's bookkeeping time when measured; neither trace shows them, so a
    // predicted and a measured trace of one Program hold the same slices.
    if (std::holds_alternative<SyncPayload>(label.payload)) continue;
    sep();
    out += "{\"ph\":\"X\",\"name\":";
    append_escaped(out, label.name);
    out += ",\"cat\":\"";
    out += to_string(op.kind);
    out += "\",\"pid\":" + std::to_string(op.rank) +
           ",\"tid\":" + std::to_string(static_cast<int>(op.stream));
    out += ",\"ts\":";
    append_us(out, s);
    out += ",\"dur\":";
    append_us(out, e - s);
    out += ",\"args\":{\"op\":" + std::to_string(i) + ",\"phase\":\"";
    out += to_string(op.phase);
    out += "\",\"class\":\"";
    out += to_string(classify_op(program, i));
    out += "\"";
    // The memory-bound kind, for compare's table by kind (sim::classify_aten_op on the measured
    // side).
    if (const auto* k = std::get_if<KernelPayload>(&label.payload)) {
      if (const auto* mb = std::get_if<MemoryBoundShape>(&k->shape)) {
        out += ",\"mem_op\":\"";
        out += to_string(mb->op);
        out += "\"";
      }
    }
    if (op.microbatch >= 0) out += ",\"microbatch\":" + std::to_string(op.microbatch);
    out += ",\"chunk\":" + std::to_string(op.chunk);
    if (!label.shape.empty()) {
      out += ",\"shape\":";
      append_escaped(out, label.shape);
    }
    if (label.flops.value() > 0) {
      out += ",\"flops\":";
      append_num(out, label.flops.value());
    }
    if (op.is_comm()) {
      out += ",\"bytes\":" + std::to_string(op.bytes) + ",\"collective\":\"";
      out += to_string(op.collective);
      out += "\"";
    }
    out += ",\"wait_us\":";
    append_us(out, s - timeline.ready[i].since_start().count());
    out += "}}";
  }
  append_p2p_flows(program, timeline, out, sep);
  out += "\n]}\n";
  return out;
}

}  // namespace scaleplan::sim
