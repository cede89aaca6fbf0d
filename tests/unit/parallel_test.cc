// ParallelFor (common/thread/parallel.h): every part runs once, on more than one thread where
// asked, and the call returns only when all have.

#include "common/thread/parallel.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace tae::thread {
namespace {

TEST_CASE("ParallelFor runs every part once and returns when all have") {
  for (int n : {0, 1, 7, 1000}) {
    for (int threads : {1, 2, 4, 64}) {
      std::vector<std::atomic<int>> calls(static_cast<size_t>(n));
      std::mutex mu;
      std::set<std::thread::id> seen;
      ParallelFor(n, threads, [&](int i) {
        calls[static_cast<size_t>(i)].fetch_add(1);
        std::lock_guard<std::mutex> lock(mu);
        seen.insert(std::this_thread::get_id());
      });
      INFO(n << " parts on " << threads << " threads");
      for (const std::atomic<int>& c : calls) {
        CHECK(c.load() == 1);  // once each, all done on return
      }
      CHECK(static_cast<int>(seen.size()) <= std::max(1, std::min(n, threads)));
    }
  }
}

TEST_CASE("ParallelFor's parts run at once on the threads it is given") {
  // Two parts that each wait for the other to start: they can only both finish if they ran on
  // two threads at the same time.
  std::atomic<int> started{0};
  std::atomic<bool> both{true};
  ParallelFor(2, 2, [&](int) {
    started.fetch_add(1);
    for (int spins = 0; started.load() < 2; ++spins) {
      if (spins > 100'000'000) {
        both = false;  // the other never started alongside
        return;
      }
      std::this_thread::yield();
    }
  });
  CHECK(both.load());
  CHECK(UsefulThreads(4) >= 1);
  CHECK(UsefulThreads(4) <= 4);
  CHECK(UsefulThreads(0) == 1);
}

}  // namespace
}  // namespace tae::thread
