#pragma once

// ProviderLog: what the providers did (agents started over ssh with their command lines, exits,
// restarts; later gcloud calls), newest last, bounded. Shown by `taectl agents --provider`; the
// same lines are in taed.log. Lives on taed's core thread like everything it records; no locking.

#include <chrono>
#include <cstddef>
#include <deque>
#include <string>
#include <utility>

namespace tae::provider {

struct ProviderEvent {
  double time = 0;       // seconds since the epoch
  std::string provider;  // "local", "ssh", "gcloud-tpu"
  std::string subject;   // the agent (or VM) it concerns
  std::string event;     // "start", "exit", "restart", "stop", a gcloud verb...
  std::string detail;    // the command line, an exit status, an error
};

class ProviderLog {
 public:
  explicit ProviderLog(size_t capacity = 500) : capacity_(capacity) {}

  void Add(std::string provider, std::string subject, std::string event, std::string detail) {
    const double now =
        std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
    events_.push_back(
        {now, std::move(provider), std::move(subject), std::move(event), std::move(detail)});
    while (events_.size() > capacity_) {
      events_.pop_front();
    }
  }
  const std::deque<ProviderEvent>& events() const { return events_; }

 private:
  size_t capacity_;
  std::deque<ProviderEvent> events_;
};

}  // namespace tae::provider
