#pragma once

// ThreadOwner: the check that code written for one thread (taed's core: the controller, the
// store and the query) runs on it. The first checked call binds the owner to its thread; a later
// call from any other thread is a programming error and aborts with what and where, instead of
// racing on SQLite or the registry. Cheap enough for every entry point (one atomic load).

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <thread>

namespace tae::thread {

class ThreadOwner {
 public:
  // Aborts unless called on the owning thread (binding it on the first call).
  void Check(const char* what) const {
    const size_t self = std::hash<std::thread::id>()(std::this_thread::get_id());
    size_t owner = owner_.load(std::memory_order_relaxed);
    if (owner == 0 && owner_.compare_exchange_strong(owner, self)) {
      return;
    }
    if (owner != self) {
      std::fprintf(stderr, "fatal: %s called off its owning thread (docs/threading.md)\n", what);
      std::abort();
    }
  }

  // Forgets the owner: the next checked call binds it again (after the owning thread is joined).
  void Release() { owner_.store(0); }

 private:
  mutable std::atomic<size_t> owner_{0};
};

}  // namespace tae::thread

// Aborts unless the enclosing object's `owner` is the calling thread.
#define TAE_CHECK_OWNER(owner) (owner).Check(__func__)
