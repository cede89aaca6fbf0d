#pragma once

// A cloud provider's thread (gcloud-tpu, gke): `round` every poll_s until Stop(), with every
// signal blocked on it (it spawns CLIs; no handler of taed's may run there). Stop() also aborts
// the CLI calls in flight: they poll Aborted() (cli_call.h).

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tae::provider {

class RoundLoop {
 public:
  RoundLoop() = default;
  ~RoundLoop() { Stop(); }
  RoundLoop(const RoundLoop&) = delete;
  RoundLoop& operator=(const RoundLoop&) = delete;

  void Start(double poll_s, std::function<void()> round);
  // Ends the wait between rounds and the calls in flight (Aborted() turns true), and joins.
  void Stop();
  // After Stop(), before calls that are wanted all the same (deleting everything at down).
  void AllowCalls();
  // Any thread.
  bool Aborted();

 private:
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool aborted_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tae::provider
