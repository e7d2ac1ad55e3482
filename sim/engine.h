// sim::Engine: a deterministic discrete-event simulation of one Program.
//
// The engine owns the clock and the event queue and nothing else (STYLE.md #3): op durations were
// put into the Program by cost models, and the only resource models here are the two that depend
// on what runs at the same moment:
//   - links shared by concurrent transfers: comm ops of one rank with the same nonzero `link` share
//     its bandwidth equally (a fluid model, as SimGrid's max-min sharing with equal weights);
//   - compute slowdown under communication: while any collective or send of a rank is transferring,
//     that rank's compute op progresses at 1/compute_slowdown_under_comm of its speed (NCCL kernels
//     take SMs and HBM bandwidth), except a transfer marked Op::spares_compute (Transformer
//     Engine's userbuffers: the copy engine, or SMs the GEMM beside it was launched without).
// Ops whose speed never changes take the fast path: one event at their end.
//
// Semantics: a stream runs its ops one at a time, in program order. An op is reached when it heads
// its stream, the stream is free and its dependencies have ended. A collective member waits on its
// stream until every member has been reached, then all run together. A send runs when reached
// (eager); its receive ends when both the send has ended and the receive has been reached.
// Allocations and frees take no time and move the rank's memory counter. Host ops (OpKind::kHost,
// the CPU issuing kernels: sim/builder.h HostIssue) run like compute on their own stream but are
// never slowed by communication and are not GPU work.
//
// Determinism (STYLE.md #4): time is integer picoseconds; the event queue is a heap (4-ary) ordered
// by (time, sequence number), so equal-time events run in the order they were scheduled (events
// scheduled for the current tick wait in a FIFO behind the heap's events due now, which keeps that
// order without heap operations). The same Program gives the same Timeline on any machine and with
// any number of engines running at once.
// An Engine is a value: it holds no globals and may be used from one thread at a time; run() may be
// called again and gives the same result.
#pragma once

#include <cstdint>
#include <vector>

#include "core/status.h"
#include "sim/program.h"
#include "sim/timeline.h"

namespace scaleplan::sim {

struct EngineOptions {
  // Factor (>= 1) by which compute slows while communication of the same rank transfers; 1 turns
  // interference off. Default 1; the simulate() front end takes it from the kernel cost model.
  double compute_slowdown_under_comm = 1.0;
};

class Engine {
 private:
  // Static structure of the program, shared by every run (CSR arrays indexed by OpId / match id).
  // What the event loop reads about an op, in one 32-byte record, so that reaching and finishing
  // an op reads one place of the topology rather than one per array.
  struct Hot {
    int64_t duration;     // ticks; for an allocation or a free (no time) its bytes
    uint32_t stream;      // rank · kNumStreams + stream
    uint32_t match;       // Op::match
    uint32_t next;        // the op after this one on its stream, or 0xFFFFFFFF
    uint32_t succ_begin;  // successors: succ[succ_begin .. hot[i + 1].succ_begin)
    // A send's or a receive's partner (the other member of its match, or 0xFFFFFFFF); a
    // collective's member count (0 for an undeclared match: it never begins, run() reports it).
    // Read here so that reaching or finishing a matched op touches no match array, and a
    // collective of one member (every group collective of a program of representative ranks)
    // begins without counting arrivals.
    uint32_t peer;
    uint16_t rank;
    OpKind kind;
    uint8_t link : 7;            // Op::link (< 8)
    uint8_t spares_compute : 1;  // Op::spares_compute: a transfer that does not slow compute
  };
  static_assert(sizeof(Hot) == 32, "Hot is a 32-byte record");
  struct Topology {
    // num_ops + 2 entries: entry num_ops only closes the successor ranges, the last is scratch
    // for the constructor's counting sort.
    std::vector<Hot> hot;
    std::vector<OpId> succ;
    std::vector<uint32_t> num_deps;     // per op: each run's initial count of pending dependencies
    std::vector<OpId> stream_first;     // first op of each (rank, stream), or kNone
    std::vector<uint32_t> match_begin;  // members of match m: match_ops[match_begin[m] .. +1)
    std::vector<OpId> match_ops;
    bool fluid = false;  // some op needs the fluid (rate-sharing) path
    Status status;       // a malformed program, reported by run()
  };

 public:
  // The arrays an engine and its runs fill, per op of the program (its topology, a run's state,
  // the timeline): kept by a caller that simulates many programs one after another
  // (SimulationScratch) so that the next engine writes over memory already mapped instead of
  // faulting in and zeroing fresh pages. It holds no result: every engine fills what it reads.
  // An Engine built on it takes its arrays and gives them back when destroyed; a run takes the
  // timeline's, which the caller gives back with recycle() once done with the timeline.
  class Storage {
   public:
    void recycle(Timeline&& timeline) { timeline_ = std::move(timeline); }

   private:
    friend class Engine;
    friend class EngineRun;
    Topology topo_;
    std::vector<uint32_t> state_;
    std::vector<uint32_t> arrived_;
    Timeline timeline_;
  };

  // Precomputes the program's topology (successor lists, stream order, collective members), so
  // that repeated runs pay only for the simulation. `program` must outlive the Engine, and
  // `storage`, where given, too; one Engine at a time may use a Storage.
  explicit Engine(const Program& program, EngineOptions options = {}, Storage* storage = nullptr);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Simulates the program. Returns an internal error naming an op that never ran if the program
  // deadlocks (a dependency cycle through matched ops), which is a builder bug.
  Result<Timeline> run() const;

 private:
  const Program& program_;
  EngineOptions options_;
  Storage* storage_;
  Topology topo_;
  friend class EngineRun;
};

}  // namespace scaleplan::sim
