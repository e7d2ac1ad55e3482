#include "runtime/executor.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <numeric>
#include <thread>

#include "runtime/exec_ops.h"
#include "runtime/exec_plan.h"

namespace scaleplan::runtime {
namespace {

using Clock = std::chrono::steady_clock;
using sim::OpId;
using sim::OpKind;

// The steady clock, which every process of one machine shares, in ps: it aligns the ranks' step
// starts (each rank times its ops from its own start, which leaves the barrier at its own time).
int64_t absolute_ps(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count() * 1000;
}

int64_t ps_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count() * 1000;
}

// What every rank of this process shares.
struct Shared {
  const sim::Program& program;
  const exec::Plan& plan;
  const ExecuteOptions& options;
  Duration timeout;
  std::atomic<bool> aborted{false};
  std::mutex mu;
  ExecutionResult result;  // filled by world rank 0
};

// One rank's records: per timed step and local op, when it was ready and when it ended (ps since
// the rank's step start); per local op, the times it ran.
struct Records {
  std::vector<int64_t> t0;  // per timed step: the step's start on the steady clock, ps
  std::vector<int64_t> ready, end;
  std::vector<uint32_t> runs;
  int warmup = 0;  // untimed steps run
  RankMeasurement m;
};

class RankRunner {
 public:
  RankRunner(Shared& shared, int rank, Backend& backend)
      : sh_(shared),
        p_(shared.program),
        plan_(shared.plan),
        rank_(rank),
        be_(backend),
        ops_(shared.program, shared.plan, rank, backend),
        local_(shared.plan.rank_ops[static_cast<size_t>(rank)]) {}

  Status run() {
    const ExecuteOptions& o = sh_.options;
    std::vector<Group> groups;
    for (const exec::Split& s : plan_.splits) {
      const int g = be_.rank();
      SP_ASSIGN_OR_RETURN(Group group, be_.split(be_.world(), s.color[static_cast<size_t>(g)],
                                                 s.key[static_cast<size_t>(g)]));
      groups.push_back(group);
    }
    SP_RETURN_IF_ERROR(ops_.setup(std::move(groups)).with_context("setup"));
    const size_t n = local_.size();
    rec_.runs.assign(n, 0);
    rec_.ready.assign(n * static_cast<size_t>(o.steps), 0);
    rec_.end.assign(n * static_cast<size_t>(o.steps), 0);
    rec_.t0.assign(static_cast<size_t>(o.steps), 0);
    ready_.assign(n, 0);
    end_.assign(n, 0);
    int warmup = o.warmup, total = o.warmup + o.steps, warmup_rounds = 0;
    const auto first = Clock::now();
    for (int step = 0; step < total; ++step) {
      const bool check = o.check && step == 0;
      if (step == warmup) be_.reset_peak();
      SP_RETURN_IF_ERROR(barrier());
      SP_RETURN_IF_ERROR(be_.concurrent_streams() ? step_threaded(step, check)
                                                  : step_async(step, check));
      if (check) SP_RETURN_IF_ERROR(ops_.reset_states());
      if (step >= warmup) {
        const size_t at = static_cast<size_t>(step - warmup) * n;
        std::copy(ready_.begin(), ready_.end(), rec_.ready.begin() + static_cast<ptrdiff_t>(at));
        std::copy(end_.begin(), end_.end(), rec_.end.begin() + static_cast<ptrdiff_t>(at));
        rec_.t0[static_cast<size_t>(step - warmup)] = t0_;
      }
      // At the end of the warm-up so far, more steps if the time is not up. Asked again at the
      // end of those (the first step, which checks, is slower than the rest, so the pace it gives
      // runs short), a few times at most.
      if (step + 1 == warmup && o.warmup_seconds > 0 && warmup_rounds < kWarmupRounds) {
        ++warmup_rounds;
        SP_ASSIGN_OR_RETURN(const int more, more_warmup(first, warmup));
        warmup += more;
        total += more;
      }
      if (o.progress && be_.rank() == 0) o.progress(step + 1, total);
    }
    rec_.warmup = warmup;
    SP_RETURN_IF_ERROR(be_.synchronize());
    const sim::RankInfo& info = p_.ranks()[static_cast<size_t>(rank_)];
    rec_.m = RankMeasurement{.global_rank = info.global_rank,
                             .stage = info.stage,
                             .peak = be_.memory_stats().peak,
                             .static_memory = ops_.static_bytes(),
                             .activations = ops_.activation_peak(),
                             .workspace = ops_.workspace_bytes(),
                             .checked = ops_.checked()};
    ops_.release_all();
    return gather();
  }

  void fail(const Status& st) {
    {
      std::lock_guard lock(mu_);
      if (failed_) return;
      failed_ = true;
      error_ = st;
    }
    cv_.notify_all();
    sh_.aborted.store(true);
    be_.abort(st.message());
  }

 private:
  static constexpr int kWarmupRounds = 16;  // all-reduces of the warm-up count at most

  // The untimed steps still to run for ExecuteOptions::warmup_seconds, from the pace of the
  // `done` steps since `first`; every rank takes the largest count (an all-reduce of the max).
  Result<int> more_warmup(Clock::time_point first, int done) {
    SP_RETURN_IF_ERROR(be_.synchronize());
    const double elapsed = std::chrono::duration<double>(Clock::now() - first).count();
    const double left = sh_.options.warmup_seconds - elapsed, pace = elapsed / done;
    const float mine =
        left > 0 && pace > 0 ? static_cast<float>(std::min(std::ceil(left / pace), 10000.0)) : 0;
    SP_ASSIGN_OR_RETURN(Buffer b, be_.allocate(1, ElemType::kF32));
    SP_RETURN_IF_ERROR(be_.upload(b, &mine));
    CollectiveArgs a;
    a.op = CollectiveOp::kAllReduce;
    a.reduce = ReduceOp::kMax;
    a.send = b;
    a.recv = b;
    a.count = 1;
    SP_RETURN_IF_ERROR(be_.collective(be_.world(), a).with_context("warm-up length"));
    float all = 0;
    SP_RETURN_IF_ERROR(be_.download(b, &all));
    be_.release(b);
    return static_cast<int>(all);
  }

  Status barrier() {
    CollectiveArgs a;
    a.op = CollectiveOp::kBarrier;
    return be_.collective(be_.world(), a).with_context("step barrier");
  }

  bool is_comm(OpId id) const { return plan_.split_of[id] >= 0; }

  // Fault injection: the stalled rank waits until the run is aborted, as a rank that never
  // arrives (bounded, so that a test can never hang on it).
  Status stall() {
    const auto limit = Clock::now() + std::chrono::seconds(600);
    while (!sh_.aborted.load() && Clock::now() < limit)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return Status::internal("aborted: stalled on purpose (ExecuteOptions::stall_rank)");
  }
  bool should_stall(int step, OpId id) {
    return step == 0 && sh_.options.stall_rank == be_.rank() && is_comm(id) &&
           !stalled_.exchange(true);
  }

  Status run_op(OpId id, bool check) {
    bool checked = false;
    if (check) {
      SP_ASSIGN_OR_RETURN(checked, ops_.prepare_check(id));
    }
    SP_RETURN_IF_ERROR(ops_.run(id));
    if (checked) SP_RETURN_IF_ERROR(ops_.check_now(id));
    return Status::ok();
  }

  // One thread per stream, each running its ops in order once their dependencies have ended.
  Status step_threaded(int step, bool check) {
    const auto& streams = plan_.stream_ops[static_cast<size_t>(rank_)];
    done_.assign(local_.size(), 0);
    failed_ = false;
    bool go = false;
    Clock::time_point t0;
    auto loop = [&](int s) {
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return go; });
      }
      for (OpId id : streams[static_cast<size_t>(s)]) {
        const uint32_t li = plan_.local_index[id];
        {
          std::unique_lock lock(mu_);
          while (!failed_ && !deps_done(id)) {
            cv_.wait_for(lock, std::chrono::milliseconds(100));
            if (sh_.aborted.load() && !failed_) {
              lock.unlock();
              fail(Status::internal("aborted: another rank failed"));
              lock.lock();
            }
          }
          if (failed_) return;
        }
        if (should_stall(step, id)) {
          fail(stall());
          return;
        }
        ready_[li] = ps_since(t0);
        const Status st = run_op(id, check);
        end_[li] = ps_since(t0);
        if (!st.is_ok()) {
          fail(st.with_context(exec::describe_op(p_, id) + " on global rank " +
                               std::to_string(be_.rank())));
          return;
        }
        ++rec_.runs[li];
        {
          std::lock_guard lock(mu_);
          done_[li] = 1;
        }
        cv_.notify_all();
      }
    };
    std::vector<std::thread> threads;
    for (int s = 0; s < kNumStreams; ++s) {
      if (!streams[static_cast<size_t>(s)].empty()) threads.emplace_back(loop, s);
    }
    {
      std::lock_guard lock(mu_);
      t0 = Clock::now();
      t0_ = absolute_ps(t0);
      go = true;
    }
    cv_.notify_all();
    for (auto& t : threads) t.join();
    if (failed_) return error_;
    return Status::ok();
  }

  bool deps_done(OpId id) const {
    for (OpId d : p_.deps(id)) {
      if (!done_[plan_.local_index[d]]) return false;
    }
    return true;
  }

  // Every op enqueued in program order on its stream; an event wait for each dependency on
  // another stream. Then the step's events are polled until done or the timeout.
  Status step_async(int step, bool check) {
    const size_t n = local_.size();
    std::vector<Event> ready(n), end(n);
    // The previous step's events have been read (its times are in ready_/end_): reuse them.
    be_.recycle_events();
    SP_ASSIGN_OR_RETURN(const Event t0, be_.record(StreamKind::kCompute));
    t0_ = absolute_ps(Clock::now());  // the host's clock when the step was issued
    for (size_t li = 0; li < n; ++li) {
      const OpId id = local_[li];
      const sim::Op& op = p_.op(id);
      for (OpId d : p_.deps(id)) {
        // Why: the Program orders these ops across streams; CUDA orders only within one.
        if (p_.op(d).stream != op.stream)
          SP_RETURN_IF_ERROR(be_.wait(op.stream, end[plan_.local_index[d]]));
      }
      if (should_stall(step, id)) return stall();
      bool checked = false;
      if (check) {
        SP_ASSIGN_OR_RETURN(checked, ops_.prepare_check(id));
      }
      SP_ASSIGN_OR_RETURN(ready[li], be_.record(op.stream));
      SP_RETURN_IF_ERROR(ops_.run(id).with_context(exec::describe_op(p_, id)));
      SP_ASSIGN_OR_RETURN(end[li], be_.record(op.stream));
      if (checked) SP_RETURN_IF_ERROR(ops_.capture(id));
      ++rec_.runs[li];
    }
    // Wait for the step's last op on every stream, within the timeout.
    const auto deadline = sh_.timeout > Duration::zero()
                              ? Clock::now() + std::chrono::nanoseconds(sh_.timeout.count() / 1000)
                              : Clock::time_point::max();
    for (size_t li = n; li-- > 0;) {
      for (;;) {
        SP_ASSIGN_OR_RETURN(const bool done, be_.query(end[li]));
        if (done) break;
        if (Clock::now() >= deadline) return stuck(end);
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
    }
    SP_ASSIGN_OR_RETURN(const Duration base, be_.since_start(t0));
    for (size_t li = 0; li < n; ++li) {
      SP_ASSIGN_OR_RETURN(const Duration r, be_.since_start(ready[li]));
      SP_ASSIGN_OR_RETURN(const Duration e, be_.since_start(end[li]));
      ready_[li] = (r - base).count();
      end_[li] = (e - base).count();
    }
    if (check) SP_RETURN_IF_ERROR(ops_.verify_captured());
    return Status::ok();
  }

  // The first op, in program order, that has not ended by the timeout.
  Status stuck(const std::vector<Event>& end) {
    for (size_t li = 0; li < end.size(); ++li) {
      auto done = be_.query(end[li]);
      if (!done.is_ok()) return done.status();
      if (!*done) {
        return Status::internal(exec::describe_op(p_, local_[li]) + " on global rank " +
                                std::to_string(be_.rank()) + ": not done after " +
                                std::to_string(sh_.timeout.to_seconds()) +
                                " s (a peer did not arrive)");
      }
    }
    return Status::internal("timed out");
  }

  // Every rank's records to world rank 0, through the backend's own collectives (in process,
  // MPI or NCCL alike): the lengths first, then one gather padded to the longest.
  Status gather() {
    std::vector<int64_t> words = {rec_.m.global_rank,
                                  rec_.m.stage,
                                  rec_.m.peak.value(),
                                  rec_.m.static_memory.value(),
                                  rec_.m.activations.value(),
                                  rec_.m.workspace.value(),
                                  rec_.m.checked,
                                  static_cast<int64_t>(local_.size())};
    words.insert(words.end(), rec_.t0.begin(), rec_.t0.end());
    words.insert(words.end(), rec_.ready.begin(), rec_.ready.end());
    words.insert(words.end(), rec_.end.begin(), rec_.end.end());
    for (uint32_t r : rec_.runs) words.push_back(r);
    const int world = be_.world_size();
    SP_ASSIGN_OR_RETURN(Buffer len, be_.allocate(1, ElemType::kI32));
    SP_ASSIGN_OR_RETURN(Buffer lens, be_.allocate(world, ElemType::kI32));
    const int32_t mine = static_cast<int32_t>(words.size());
    SP_RETURN_IF_ERROR(be_.upload(len, &mine));
    CollectiveArgs a;
    a.op = CollectiveOp::kAllGather;
    a.send = len;
    a.recv = lens;
    a.count = 1;
    SP_RETURN_IF_ERROR(be_.collective(be_.world(), a));
    std::vector<int32_t> all(static_cast<size_t>(world));
    SP_RETURN_IF_ERROR(be_.download(lens, all.data()));
    const int64_t longest = *std::max_element(all.begin(), all.end());
    words.resize(static_cast<size_t>(longest), 0);
    SP_ASSIGN_OR_RETURN(Buffer send, be_.allocate(2 * longest, ElemType::kI32));
    const bool root = be_.rank() == 0;
    SP_ASSIGN_OR_RETURN(Buffer recv, be_.allocate(root ? 2 * longest * world : 0, ElemType::kI32));
    SP_RETURN_IF_ERROR(be_.upload(send, words.data()));
    a.op = CollectiveOp::kGather;
    a.send = send;
    a.recv = recv;
    a.count = 2 * longest;
    SP_RETURN_IF_ERROR(be_.collective(be_.world(), a));
    std::vector<int64_t> gathered(root ? static_cast<size_t>(longest * world) : 0);
    if (root) SP_RETURN_IF_ERROR(be_.download(recv, gathered.data()));
    for (Buffer* b : {&len, &lens, &send, &recv}) be_.release(*b);
    if (!root) return Status::ok();
    return assemble(gathered, longest);
  }

  Status assemble(const std::vector<int64_t>& words, int64_t stride) {
    const int steps = sh_.options.steps;
    const size_t nops = p_.num_ops();
    ExecutionResult& r = sh_.result;
    r.reporter = true;
    r.warmup_steps = rec_.warmup;
    r.backend = be_.name();
    r.device = be_.device_name();
    r.ranks.assign(static_cast<size_t>(p_.num_ranks()), {});
    r.runs.assign(nops, 0);
    std::vector<int64_t> ready(nops * static_cast<size_t>(steps)),
        end(nops * static_cast<size_t>(steps));
    // Each step's times from the earliest rank's start of it (machines share no clock: across
    // nodes the alignment is only as good as the barrier before the step).
    std::vector<int64_t> base(static_cast<size_t>(steps), std::numeric_limits<int64_t>::max());
    for (int w = 0; w < be_.world_size(); ++w) {
      const int64_t* x = words.data() + static_cast<size_t>(w) * static_cast<size_t>(stride);
      for (int t = 0; t < steps; ++t)
        base[static_cast<size_t>(t)] = std::min(base[static_cast<size_t>(t)], x[8 + t]);
    }
    const bool shared_clock = be_.local_size() == be_.world_size();  // one machine
    for (int w = 0; w < be_.world_size(); ++w) {
      const int64_t* x = words.data() + static_cast<size_t>(w) * static_cast<size_t>(stride);
      const int rank = plan_.rank_of_global[static_cast<size_t>(x[0])];
      const auto& local = plan_.rank_ops[static_cast<size_t>(rank)];
      if (x[7] != static_cast<int64_t>(local.size()))
        return Status::internal("executor: global rank " + std::to_string(x[0]) + " reported " +
                                std::to_string(x[7]) + " ops, its program has " +
                                std::to_string(local.size()));
      r.ranks[static_cast<size_t>(rank)] = RankMeasurement{
          x[0], static_cast<int>(x[1]), Bytes(x[2]), Bytes(x[3]), Bytes(x[4]), Bytes(x[5]), x[6]};
      const size_t n = local.size();
      const int64_t* t0 = x + 8;
      const int64_t* rd = t0 + steps;
      const int64_t* en = rd + n * static_cast<size_t>(steps);
      const int64_t* runs = en + n * static_cast<size_t>(steps);
      for (int t = 0; t < steps; ++t) {
        const int64_t shift = shared_clock ? t0[t] - base[static_cast<size_t>(t)] : 0;
        for (size_t li = 0; li < n; ++li) {
          const size_t at = static_cast<size_t>(t) * nops + local[li];
          ready[at] = rd[static_cast<size_t>(t) * n + li] + shift;
          end[at] = en[static_cast<size_t>(t) * n + li] + shift;
        }
      }
      for (size_t li = 0; li < n; ++li) r.runs[local[li]] = static_cast<uint32_t>(runs[li]);
    }
    // When each op started: a collective when its last member was ready, a receive when it and
    // its send were (sim/timeline.h's definitions).
    std::vector<std::vector<OpId>> members(p_.match_members().size());
    for (OpId i = 0; i < nops; ++i) {
      if (p_.op(i).match != sim::kNoMatch) members[p_.op(i).match].push_back(i);
    }
    auto start_of = [&](int t, OpId i) {
      const size_t base = static_cast<size_t>(t) * nops;
      int64_t s = ready[base + i];
      const sim::Op& op = p_.op(i);
      if (op.match != sim::kNoMatch && op.kind != OpKind::kSend) {
        for (OpId m : members[op.match]) s = std::max(s, ready[base + m]);
      }
      return std::min(s, end[base + i]);
    };
    r.iterations.resize(static_cast<size_t>(steps));
    for (int t = 0; t < steps; ++t) {
      int64_t last = 0;
      for (size_t i = 0; i < nops; ++i)
        last = std::max(last, end[static_cast<size_t>(t) * nops + i]);
      r.iterations[static_cast<size_t>(t)] = Duration::ticks(last);
    }
    std::vector<int> order(static_cast<size_t>(steps));
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return r.iterations[static_cast<size_t>(a)] < r.iterations[static_cast<size_t>(b)];
    });
    r.median_step = order[static_cast<size_t>((steps - 1) / 2)];
    const int m = r.median_step;
    sim::Timeline& tl = r.timeline;
    tl.ready.resize(nops);
    tl.start.resize(nops);
    tl.end.resize(nops);
    r.op_median.resize(nops);
    std::vector<int64_t> durations(static_cast<size_t>(steps));
    for (OpId i = 0; i < nops; ++i) {
      const size_t at = static_cast<size_t>(m) * nops + i;
      tl.ready[i] = Time::at(Duration::ticks(ready[at]));
      tl.start[i] = Time::at(Duration::ticks(start_of(m, i)));
      tl.end[i] = Time::at(Duration::ticks(end[at]));
      for (int t = 0; t < steps; ++t)
        durations[static_cast<size_t>(t)] = end[static_cast<size_t>(t) * nops + i] - start_of(t, i);
      std::nth_element(durations.begin(), durations.begin() + (steps - 1) / 2, durations.end());
      r.op_median[i] = Duration::ticks(durations[static_cast<size_t>((steps - 1) / 2)]);
    }
    tl.makespan = Time::at(r.iterations[static_cast<size_t>(m)]);
    for (const RankMeasurement& rm : r.ranks) tl.peak_memory.push_back(rm.peak);
    return Status::ok();
  }

  Shared& sh_;
  const sim::Program& p_;
  const exec::Plan& plan_;
  int rank_;
  Backend& be_;
  exec::RankOps ops_;
  const std::vector<OpId>& local_;
  Records rec_;
  std::vector<int64_t> ready_, end_;  // the current step, per local op
  int64_t t0_ = 0;                    // the current step's start, absolute_ps
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char> done_;
  bool failed_ = false;
  Status error_;
  std::atomic<bool> stalled_{false};
};

// What this machine can still give (MemAvailable of /proc/meminfo); 0 when unknown.
int64_t host_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (f >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// Host memory the ranks of this machine need: per rank its static memory and the peak of the
// Program's live allocations in program order (the executor's workspace comes on top, sized for
// the largest op: small beside them). A model too large for the host is an input error before
// anything is allocated, not an out-of-memory kill halfway through.
Status check_host_memory(const sim::Program& program, const exec::Plan& plan, int ranks_here) {
  const int64_t available = host_available_bytes();
  if (available <= 0) return Status::ok();
  int64_t largest = 0;
  int64_t largest_static = 0;
  for (int r = 0; r < program.num_ranks(); ++r) {
    int64_t live = 0, peak = 0;
    for (OpId id : plan.rank_ops[static_cast<size_t>(r)]) {
      const sim::Op& op = program.op(id);
      if (op.kind == OpKind::kAlloc) peak = std::max(peak, live += op.bytes);
      if (op.kind == OpKind::kFree) live -= op.bytes;
    }
    const int64_t st = program.ranks()[static_cast<size_t>(r)].static_memory.value();
    if (st + peak > largest) {
      largest = st + peak;
      largest_static = st;
    }
  }
  const int64_t need = largest * ranks_here;
  if (need <= available) return Status::ok();
  auto gib = [](int64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(b) / (1LL << 30));
    return std::string(buf);
  };
  return Status::invalid(
      "the layout needs about " + gib(need) + " GiB of host memory for the " +
      std::to_string(ranks_here) + " rank(s) on this machine (the largest rank: " +
      gib(largest_static) + " GiB of weights, gradients and optimizer states, " +
      gib(largest - largest_static) + " GiB of activations); " + gib(available) +
      " GiB are available. Run a smaller model (llama-tiny, mixtral-tiny, deepseek-tiny) or "
      "fewer ranks per machine");
}

}  // namespace

Result<ExecutionResult> execute(const sim::Program& program, const LaunchOptions& launch,
                                const ExecuteOptions& options) {
  if (options.steps < 1 || options.warmup < 0) {
    return Status::invalid("steps must be >= 1 and warmup >= 0, got " +
                           std::to_string(options.steps) + " and " +
                           std::to_string(options.warmup));
  }
  SP_ASSIGN_OR_RETURN(const exec::Plan plan, exec::make_plan(program));
  LaunchOptions lo = launch;
  lo.ranks = plan.world;
  if (launched_by_mpi() && launched_world_size() != plan.world) {
    return Status::invalid("the layout has " + std::to_string(plan.world) +
                           " ranks but the MPI launcher started " +
                           std::to_string(launched_world_size()) + " processes (mpirun -np " +
                           std::to_string(plan.world) + ")");
  }
  if (launch.kind == BackendKind::kHost) {
    SP_RETURN_IF_ERROR(
        check_host_memory(program, plan, launched_by_mpi() ? launched_local_size() : plan.world));
  }
  Shared shared{program, plan, options, launch.timeout};
  SP_RETURN_IF_ERROR(run_ranks(lo, [&](Backend& be) -> Status {
    if (be.world_size() != plan.world) {
      return Status::invalid("the layout has " + std::to_string(plan.world) + " ranks, the " +
                             be.name() + " backend runs " + std::to_string(be.world_size()));
    }
    RankRunner runner(shared, plan.rank_of_global[static_cast<size_t>(be.rank())], be);
    const Status st = runner.run();
    if (!st.is_ok()) runner.fail(st);
    return st;
  }));
  shared.result.processes = launched_by_mpi() ? launched_world_size() : 1;
  return std::move(shared.result);
}

}  // namespace scaleplan::runtime
