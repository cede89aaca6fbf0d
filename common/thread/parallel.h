#pragma once

// ParallelFor: a pure computation the calling thread would otherwise do alone, spread over a few
// threads for the length of one call (taed's core building a curve of 10 million points). The
// caller works too and returns only when every part has: what `fn` reads must not change meanwhile
// and what it writes must be its part's alone. Threads are started per call (tens of
// microseconds), so give it work of milliseconds, not microseconds.

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <vector>

namespace tae::thread {

// The threads ParallelFor should use here: the machine's cores, at most `cap`.
inline int UsefulThreads(int cap) {
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores, 1, std::max(1, cap));
}

// Calls fn(i) for every i in [0, n), each once, on up to `threads` threads (the caller's among
// them), and returns when all have returned. Parts are taken in order as threads come free.
template <typename Fn>
void ParallelFor(int n, int threads, const Fn& fn) {
  threads = std::clamp(threads, 1, std::max(1, n));
  std::atomic<int> next{0};
  auto work = [&] {
    for (int i = next.fetch_add(1); i < n; i = next.fetch_add(1)) {
      fn(i);
    }
  };
  std::vector<std::thread> helpers;
  helpers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(work);
    } catch (const std::system_error&) {
      break;  // no thread to be had: fewer do it
    }
  }
  work();
  for (std::thread& helper : helpers) {
    helper.join();
  }
}

}  // namespace tae::thread
