#include "server/provider/round_loop.h"

#include <signal.h>

namespace tae::provider {

void RoundLoop::Start(double poll_s, std::function<void()> round) {
  thread_ = std::thread([this, poll_s, round = std::move(round)] {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, nullptr);
    while (true) {
      round();
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Seconds(poll_s))) {
        return;
      }
    }
  });
}

void RoundLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    aborted_ = true;
  }
  if (thread_.joinable()) {
    thread_.join();
  }
}

void RoundLoop::AllowCalls() {
  absl::MutexLock lock(&mu_);
  aborted_ = false;
}

bool RoundLoop::Aborted() {
  absl::MutexLock lock(&mu_);
  return aborted_;
}

}  // namespace tae::provider
