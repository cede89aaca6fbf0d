#pragma once

// What the gcloud-tpu provider needs to know of taed's queue each round, and the hand-over of it
// from the core thread (where the controller computes it after every scheduling pass and on its
// liveness timer) to the provider's thread. The provider never waits for the core: it reads the
// latest published demand, and skips a round when there is none recent enough.

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace tae::provider {

struct TpuDemand {
  std::map<std::string, int> waiting;   // pool -> queued runs whose labels its agents satisfy
  std::map<std::string, int> busy_vms;  // VM name (agents' slice label) -> busy slots
  std::map<std::string, int> agents;    // slice label -> its connected agents
};

class DemandBoard {
 public:
  using Clock = std::chrono::steady_clock;

  // Called on the core thread.
  void Publish(TpuDemand demand) {
    absl::MutexLock lock(&mu_);
    latest_ = std::move(demand);
    published_at_ = Clock::now();
  }

  // The latest demand if it was published less than max_age ago; else nothing (a core that has
  // not spoken for that long is wedged or not started: without its word every VM would look
  // idle and nothing wanted).
  std::optional<TpuDemand> Latest(Clock::duration max_age) const {
    absl::MutexLock lock(&mu_);
    if (!latest_.has_value() || Clock::now() - published_at_ > max_age) {
      return std::nullopt;
    }
    return latest_;
  }

 private:
  mutable absl::Mutex mu_;
  std::optional<TpuDemand> latest_ ABSL_GUARDED_BY(mu_);
  Clock::time_point published_at_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tae::provider
