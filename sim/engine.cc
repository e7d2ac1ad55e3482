#include "sim/engine.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "sim/event_heap.h"

namespace scaleplan::sim {
namespace {

constexpr OpId kNone = 0xFFFFFFFFu;
constexpr uint32_t kDone = 0xFFFFFFFFu;  // the pending count of an op that has finished
constexpr int kMaxLinks = 8;             // link ids per rank, 1..7 shared, 0 unshared

// An event orders by (time, seq) as one 128-bit key, time in the high half (times are never
// negative: the clock starts at 0 and saturates at INT64_MAX), so that comparing two events is one
// comparison without a branch. Keys are distinct (seq is), so any heap pops them in one order.
using Key = EventKey;
struct Event {
  Key key;
  OpId op;
  uint32_t version;  // the version of the op's stream (StreamRun) when it was scheduled
  uint32_t stream;   // Hot::stream of op
  int64_t time() const { return static_cast<int64_t>(static_cast<uint64_t>(key >> 64)); }
};
Key event_key(int64_t time, uint64_t seq) {
  return (static_cast<Key>(static_cast<uint64_t>(time)) << 64) | seq;
}

// Progress of an op whose speed may change while it runs: `work` ticks of full-speed work are left
// at `since`, progressing at `rate` (<= 1) full-speed ticks per tick.
struct Fluid {
  double work = 0;
  double rate = 1;
  int64_t since = 0;
};

// Per-run state of a stream. A stream runs one op at a time (from its reach to its finish), so
// the progress of the op it runs and the version of that op's events live here, not per op: a few
// hundred records that stay in cache instead of 32 bytes per op of the program allocated, cleared
// and read at random each run. The version is bumped when the running op is rescheduled (the
// fluid path); an event whose version differs from its stream's is stale. Versions only grow, so
// an event of an op that has finished never matches again.
struct StreamRun {
  Fluid fluid;
  uint32_t version = 0;
};

}  // namespace

class EngineRun {
 public:
  EngineRun(const Program& p, const Engine::Topology& t, const EngineOptions& o,
            Engine::Storage* storage)
      : p_(p),
        topo_(t),
        slowdown_(std::max(1.0, o.compute_slowdown_under_comm)),
        slow_(slowdown_ > 1.0),
        storage_(storage) {
    if (storage_ != nullptr) {  // every array below is filled again before it is read
      state_ = std::move(storage_->state_);
      arrived_ = std::move(storage_->arrived_);
      tl_ = std::move(storage_->timeline_);
      tl_.events = 0;
      tl_.makespan = Time();
    }
  }
  ~EngineRun() {
    if (storage_ != nullptr) {
      storage_->state_ = std::move(state_);
      storage_->arrived_ = std::move(arrived_);
    }
  }
  EngineRun(const EngineRun&) = delete;
  EngineRun& operator=(const EngineRun&) = delete;

  Result<Timeline> go() {
    if (!topo_.status.is_ok()) return topo_.status;
    const size_t n = p_.num_ops();
    const int nr = p_.num_ranks();
    tl_.ready.assign(n, Time());
    tl_.start.assign(n, Time());
    tl_.end.assign(n, Time());
    state_ = topo_.num_deps;
    stream_head_ = topo_.stream_first;
    stream_cur_.assign(stream_head_.size(), kNone);
    streams_.assign(stream_head_.size(), StreamRun());
    arrived_.assign(p_.match_members().size(), 0);
    memory_.resize(nr);
    tl_.peak_memory.resize(nr);
    for (int r = 0; r < nr; ++r) {
      memory_[r] = p_.ranks()[r].static_memory.value();
      tl_.peak_memory[r] = Bytes(memory_[r]);
    }
    fluid_needed_ = topo_.fluid || slow_;
    if (fluid_needed_) {
      comm_active_.assign(nr, 0);
      running_compute_.assign(nr, kNone);
      link_ops_.assign(static_cast<size_t>(nr) * kMaxLinks, {});
    }

    heap_.reserve(1024);
    now_ = 0;
    for (size_t s = 0; s < stream_head_.size(); ++s) try_reach(stream_head_[s], 0);
    // Events run in (time, seq) order. Those scheduled for the current time go to a FIFO instead
    // of the heap: every heap event due now was scheduled before the clock reached now, so it
    // precedes them all, and the FIFO keeps their own order.
    for (;;) {
      Event ev;
      if (fifo_pos_ < fifo_.size() && (heap_.empty() || heap_.top().time() != now_)) {
        ev = fifo_[fifo_pos_++];
        if (fifo_pos_ == fifo_.size()) {
          fifo_.clear();
          fifo_pos_ = 0;
        }
      } else if (!heap_.empty()) {
        ev = heap_.pop();
        now_ = ev.time();
      } else {
        break;
      }
      ++tl_.events;
      if (ev.version != streams_[ev.stream].version) continue;  // rescheduled since
      finish(ev.op, ev.time());
    }
    for (OpId i = 0; i < n; ++i) {
      if (state_[i] != kDone) {
        const Op& op = p_.op(i);
        return Status::internal("simulation deadlocked: op " + std::to_string(i) + " (" +
                                p_.label(i).name + ", rank " + std::to_string(op.rank) + ", " +
                                std::string(to_string(op.stream)) + ") never finished");
      }
    }
    tl_.makespan = Time::at(Duration::ticks(makespan_));
    return std::move(tl_);
  }

 private:
  using Hot = Engine::Hot;

  void push(OpId op, int64_t time) {
    const uint32_t s = topo_.hot[op].stream;
    const Event e{event_key(time, seq_++), op, streams_[s].version, s};
    if (time == now_) {
      fifo_.push_back(e);
    } else {
      heap_.push(e);
    }
  }

  // Reaches `id` if it heads a free stream and its dependencies are done.
  void try_reach(OpId id, int64_t now) {
    if (id == kNone || state_[id] != 0) return;
    const Hot& op = topo_.hot[id];
    const size_t s = op.stream;
    if (stream_cur_[s] != kNone || stream_head_[s] != id) return;
    stream_cur_[s] = id;
    stream_head_[s] = op.next;
    tl_.ready[id] = Time::at(Duration::ticks(now));
    switch (op.kind) {
      case OpKind::kCompute:
      case OpKind::kSend:
      case OpKind::kHost:
        begin(id, now);
        break;
      case OpKind::kAlloc:
      case OpKind::kFree: {
        int64_t& m = memory_[op.rank];
        const int64_t bytes = op.duration;  // Hot::duration holds an allocation's bytes
        m += op.kind == OpKind::kAlloc ? bytes : -bytes;
        if (m > tl_.peak_memory[op.rank].value()) tl_.peak_memory[op.rank] = Bytes(m);
        tl_.start[id] = tl_.ready[id];
        push(id, now);
        break;
      }
      case OpKind::kCollective: {
        const uint32_t m = op.match;
        if (op.peer == 1) {
          begin(id, now);
        } else if (op.peer > 1 && ++arrived_[m] == op.peer) {
          for (uint32_t k = topo_.match_begin[m]; k < topo_.match_begin[m + 1]; ++k)
            begin(topo_.match_ops[k], now);
        }
        break;
      }
      case OpKind::kRecv: {
        const OpId send = op.peer;
        if (send != kNone && state_[send] == kDone) complete_recv(id, send, now);
        break;  // otherwise the send's end completes it
      }
    }
  }

  void complete_recv(OpId recv, OpId send, int64_t now) {
    tl_.start[recv] = std::max(tl_.ready[recv], tl_.start[send]);
    push(recv, now);
  }

  static bool is_transfer(OpKind k) { return k == OpKind::kCollective || k == OpKind::kSend; }

  // Starts the work of `id` now.
  void begin(OpId id, int64_t now) {
    const Hot& op = topo_.hot[id];
    tl_.start[id] = Time::at(Duration::ticks(now));
    // What finishing this op will touch: its successors and the next op of its stream. The op
    // lasts a while, so the lines are in cache by then (no effect on results).
    // data() + offset, not &succ[offset]: an op without successors may sit at the end of an empty
    // or fully used array, where operator[] is undefined (UBSan, the `asan` suite).
    __builtin_prefetch(topo_.succ.data() + op.succ_begin);
    if (op.next != kNone) {
      __builtin_prefetch(&topo_.hot[op.next]);
      __builtin_prefetch(&state_[op.next]);
      __builtin_prefetch(&tl_.ready[op.next], 1);
    }
    // Fixed speed, one event at the end: without a compute slowdown, everything but a transfer on
    // a shared link (compute would only ever run at rate 1, which the fluid path computes exactly:
    // ceil(d / 1 - 1e-9) = d); with one, host ops (the CPU does not share GPU resources) and
    // transfers that neither share a link nor slow compute.
    const bool plain_transfer = is_transfer(op.kind) && op.link == 0;
    if (!fluid_needed_ || op.kind == OpKind::kHost ||
        (!slow_ && (op.link == 0 || !is_transfer(op.kind))) ||
        (plain_transfer && op.spares_compute)) {
      // Saturating: a duration at the clock's end (units.h) must not wrap; simulate() refuses it.
      int64_t end = 0;
      push(id, __builtin_add_overflow(now, op.duration, &end) ? INT64_MAX : end);
      return;
    }
    Fluid& f = streams_[op.stream].fluid;
    f.work = static_cast<double>(op.duration);
    f.since = now;
    f.rate = 1.0;
    if (op.kind == OpKind::kCompute) {
      running_compute_[op.rank] = id;
      if (comm_active_[op.rank] > 0) f.rate = 1.0 / slowdown_;
      schedule_fluid(id);
      return;
    }
    // A transfer: it may share a link, and it slows this rank's compute.
    if (op.link != 0) {
      auto& on_link = link_ops_[static_cast<size_t>(op.rank) * kMaxLinks + op.link];
      on_link.push_back(id);
      reshare(on_link, now);
    } else {
      schedule_fluid(id);
    }
    if (slow_ && !op.spares_compute && comm_active_[op.rank]++ == 0)
      compute_rate_changed(op.rank, now);
  }

  void schedule_fluid(OpId id) {
    StreamRun& r = streams_[topo_.hot[id].stream];
    const Fluid& f = r.fluid;
    ++r.version;
    // Through Duration: a double past int64 and a sum past the clock's end saturate (UBSan).
    // x / 1.0 is x: the division, the slowest instruction of the loop, only for a slowed op.
    const Duration left = Duration::ticks(
        Duration::from_double(std::ceil((f.rate == 1.0 ? f.work : f.work / f.rate) - 1e-9)));
    push(id, (Duration::ticks(f.since) + std::max(left, Duration::zero())).count());
  }

  // Brings `id`'s progress up to `now` and gives it a new rate.
  void set_rate(OpId id, double rate, int64_t now) {
    Fluid& f = streams_[topo_.hot[id].stream].fluid;
    f.work = std::max(0.0, f.work - static_cast<double>(now - f.since) * f.rate);
    f.since = now;
    f.rate = rate;
    schedule_fluid(id);
  }

  void reshare(const std::vector<OpId>& on_link, int64_t now) {
    const double rate = on_link.empty() ? 1.0 : 1.0 / static_cast<double>(on_link.size());
    for (OpId o : on_link) set_rate(o, rate, now);
  }

  void compute_rate_changed(int rank, int64_t now) {
    const OpId c = running_compute_[rank];
    if (c == kNone) return;
    set_rate(c, comm_active_[rank] > 0 ? 1.0 / slowdown_ : 1.0, now);
  }

  void finish(OpId id, int64_t now) {
    const Hot& op = topo_.hot[id];
    state_[id] = kDone;
    tl_.end[id] = Time::at(Duration::ticks(now));
    if (now > makespan_) makespan_ = now;
    if (fluid_needed_ && op.kind != OpKind::kHost) {
      if (slow_ && op.kind == OpKind::kCompute) {
        running_compute_[op.rank] = kNone;
      } else if (is_transfer(op.kind)) {
        if (op.link != 0) {
          auto& on_link = link_ops_[static_cast<size_t>(op.rank) * kMaxLinks + op.link];
          on_link.erase(std::find(on_link.begin(), on_link.end(), id));
          reshare(on_link, now);
        }
        if (slow_ && !op.spares_compute && --comm_active_[op.rank] == 0)
          compute_rate_changed(op.rank, now);
      }
    }
    if (op.kind == OpKind::kSend) {
      const OpId recv = op.peer;
      // The receive was reached and waits on its stream: it ends now.
      if (recv != kNone && stream_cur_[topo_.hot[recv].stream] == recv) {
        complete_recv(recv, id, now);
      }
    }
    const size_t s = op.stream;
    stream_cur_[s] = kNone;
    try_reach(stream_head_[s], now);
    const uint32_t succ_end = topo_.hot[id + 1].succ_begin;
    for (uint32_t k = op.succ_begin; k < succ_end; ++k) {
      const OpId t = topo_.succ[k];
      if (--state_[t] == 0) try_reach(t, now);
    }
  }

  const Program& p_;
  const Engine::Topology& topo_;
  const double slowdown_;
  const bool slow_;  // compute slows under communication: compute ops take the fluid path
  Engine::Storage* const storage_;  // where the per-op arrays come from and go back to, or null
  Timeline tl_;
  int64_t makespan_ = 0;
  std::vector<uint32_t> state_;  // per op: dependencies not yet finished; kDone once finished
  std::vector<OpId> stream_head_;
  std::vector<OpId> stream_cur_;  // op occupying each stream, or kNone
  std::vector<int64_t> memory_;
  std::vector<uint32_t> arrived_;
  EventHeap<Event> heap_;
  std::vector<Event> fifo_;  // events due at now_, in scheduling order, from fifo_pos_ on
  size_t fifo_pos_ = 0;
  int64_t now_ = 0;
  uint64_t seq_ = 0;
  bool fluid_needed_ = false;
  std::vector<StreamRun> streams_;  // per stream (Hot::stream)
  std::vector<int> comm_active_;
  std::vector<OpId> running_compute_;
  std::vector<std::vector<OpId>> link_ops_;
};

Engine::Engine(const Program& program, EngineOptions options, Storage* storage)
    : program_(program), options_(options), storage_(storage) {
  const Program& p = program;
  const size_t n = p.num_ops();
  const auto& ops = p.ops();
  Topology& t = topo_;
  if (storage_ != nullptr) {  // its arrays' memory; every entry is written below
    t = std::move(storage_->topo_);
    t.fluid = false;
    t.status = Status::ok();
  }
  t.hot.assign(n + 2, Hot{});
  t.num_deps.resize(n);
  t.stream_first.assign(static_cast<size_t>(p.num_ranks()) * kNumStreams, kNone);
  std::vector<OpId> tail(t.stream_first.size(), kNone);
  // The op array is read once (it is the largest array, 48 bytes an op): this pass fills the hot
  // records, the stream order and the match members, and counts successors.
  const auto& members = p.match_members();
  t.match_begin.assign(members.size() + 1, 0);
  for (size_t m = 0; m < members.size(); ++m) t.match_begin[m + 1] = t.match_begin[m] + members[m];
  t.match_ops.assign(t.match_begin.back(), kNone);
  std::vector<uint32_t> fill(t.match_begin.begin(), t.match_begin.end() - 1);
  Status link_status, match_status;  // the last of each kind; a match error is reported first
  // Program::add_op appends each op's dependencies to all_deps() in op order, so the second pass
  // reads them from there in order, without the ops; checked here.
  size_t dep_cursor = 0;
  // Successor counts first, op d's in hot[d + 2].succ_begin: prefix-summed below, hot[d + 1] then
  // holds where d's successors start, and serves as the cursor that fills them, which leaves it
  // where d's end and d + 1's start (a counting sort that needs no array of cursors).
  for (OpId i = 0; i < n; ++i) {
    const Op& op = ops[i];
    if (op.first_dep != dep_cursor) {
      link_status =
          Status::internal("op " + std::to_string(i) + ": dependencies not stored in op order");
    }
    dep_cursor += op.num_deps;
    for (OpId d : p.deps(i)) ++t.hot[d + 2].succ_begin;
    const size_t s = static_cast<size_t>(op.rank) * kNumStreams + static_cast<size_t>(op.stream);
    Hot& h = t.hot[i];
    // Allocations and frees take no time: their slot holds the bytes, which the loop would
    // otherwise read from the (colder) op array.
    h.duration =
        op.kind == OpKind::kAlloc || op.kind == OpKind::kFree ? op.bytes : op.duration.count();
    h.stream = static_cast<uint32_t>(s);
    h.match = op.match;
    h.next = kNone;
    t.num_deps[i] = op.num_deps;
    h.rank = op.rank;
    h.kind = op.kind;
    h.link = op.link;
    h.spares_compute = op.spares_compute ? 1 : 0;
    (tail[s] == kNone ? t.stream_first[s] : t.hot[tail[s]].next) = i;
    tail[s] = i;
    if (op.link >= kMaxLinks) {
      link_status = Status::internal("op " + std::to_string(i) + ": link id " +
                                     std::to_string(op.link) + " >= 8");
    }
    if (op.link != 0) t.fluid = true;
    if (op.match == kNoMatch || !op.is_comm()) continue;
    if (op.match >= members.size() || fill[op.match] >= t.match_begin[op.match + 1]) {
      match_status =
          Status::internal("op " + std::to_string(i) + ": match " + std::to_string(op.match) +
                           " is undeclared or has more members than declared");
      continue;
    }
    t.match_ops[fill[op.match]++] = i;
  }
  t.status = !match_status.is_ok() ? match_status : link_status;
  if (!t.status.is_ok()) return;  // run() reports it
  t.hot[n].next = kNone;
  for (size_t i = 2; i < n + 2; ++i) t.hot[i].succ_begin += t.hot[i - 1].succ_begin;
  t.succ.resize(t.hot[n + 1].succ_begin);
  const OpId* dep = p.all_deps().data();
  for (OpId i = 0; i < n; ++i) {
    for (const OpId* end = dep + t.num_deps[i]; dep != end; ++dep)
      t.succ[t.hot[*dep + 1].succ_begin++] = i;
    Hot& h = t.hot[i];
    const bool declared = h.match < members.size();
    if (h.kind == OpKind::kCollective) {
      h.peer = declared ? members[h.match] : 0;
    } else if (h.kind == OpKind::kSend || h.kind == OpKind::kRecv) {
      h.peer = kNone;  // the first other member, as the match lists them
      for (uint32_t k = declared ? t.match_begin[h.match] : 0;
           declared && k < t.match_begin[h.match + 1]; ++k) {
        if (t.match_ops[k] != i) {
          h.peer = t.match_ops[k];
          break;
        }
      }
    }
  }
}

Engine::~Engine() {
  if (storage_ != nullptr) storage_->topo_ = std::move(topo_);
}

Result<Timeline> Engine::run() const { return EngineRun(program_, topo_, options_, storage_).go(); }

}  // namespace scaleplan::sim
