#include "planner/parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace scaleplan::planner {

int resolve_threads(int threads) {
  return threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

Status parallel_for(int64_t n, const ParallelOptions& options,
                    const std::function<void(int64_t)>& body) {
  if (n <= 0) return Status::ok();
  const int threads = static_cast<int>(std::min<int64_t>(resolve_threads(options.threads), n));
  const int64_t chunk = std::max<int64_t>(1, options.chunk);
  std::atomic<int64_t> next{0};
  std::atomic<int> running{threads};
  std::mutex mu;
  std::condition_variable cv;
  std::mutex error_mu;
  std::string error;  // the first failure's message
  auto fail = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(error_mu);
    if (error.empty()) error = what;
    next.store(n);  // the other workers stop at their next index
  };
  auto worker = [&] {
    int64_t i = -1;
    try {
      for (;;) {
        const int64_t begin = next.fetch_add(chunk);
        if (begin >= n) break;
        const int64_t end = std::min(n, begin + chunk);
        for (i = begin; i < end; ++i) body(i);
      }
    } catch (const std::exception& e) {
      fail(options.item + " " + std::to_string(i) + ": " + e.what());
    } catch (...) {
      fail(options.item + " " + std::to_string(i) + ": unknown exception");
    }
    if (running.fetch_sub(1) == 1) {
      std::lock_guard<std::mutex> lock(mu);
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {
      // The threads never started count as finished; those running see `next` at the end.
      fail(std::string("cannot start worker thread ") + std::to_string(t + 1) + " of " +
           std::to_string(threads) + ": " + e.what());
      running.fetch_sub(threads - t);
      break;
    }
  }
  std::exception_ptr
      tick_error;  // the caller's own exception: rethrown once the workers are joined
  {
    std::unique_lock<std::mutex> lock(mu);
    while (running.load() > 0) {
      cv.wait_for(lock, options.interval, [&] { return running.load() == 0; });
      if (options.tick && !tick_error) {
        lock.unlock();
        try {
          options.tick();
        } catch (...) {
          tick_error = std::current_exception();
          next.store(n);
        }
        lock.lock();
      }
    }
  }
  for (auto& t : pool) t.join();
  if (tick_error) std::rethrow_exception(tick_error);
  if (!error.empty()) return Status::internal(error);
  return Status::ok();
}

}  // namespace scaleplan::planner
