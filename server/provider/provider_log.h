#pragma once

// ProviderLog: what the providers did (agents started over ssh with their command lines, exits,
// restarts; later gcloud calls), newest last, bounded. Shown by `taectl agents --provider`; the
// same lines are in taed.log. Lives on taed's core thread like everything it records; no locking.

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "common/clock/clock.h"

namespace tae::provider {

struct ProviderEvent {
  double time = 0;       // seconds since the epoch
  std::string provider;  // "local", "ssh", "gcloud-tpu"
  std::string subject;   // the agent (or VM) it concerns
  std::string event;     // "start", "exit", "restart", "stop", a gcloud verb...
  std::string detail;    // the command line, an exit status, an error
};

// A cloud VM as its provider last listed it.
struct CloudVm {
  std::string provider;  // "gcloud-tpu", "gke"
  std::string pool;
  std::string name;
  std::string zone;    // gke: the namespace
  std::string state;   // gke: SliceStateName
  std::string detail;  // gke: Kueue's or the JobSet's words (gke_status.h)
};

class ProviderLog {
 public:
  explicit ProviderLog(size_t capacity = 500) : capacity_(capacity) {}

  void Add(std::string provider, std::string subject, std::string event, std::string detail) {
    const double now = clock::WallNow();
    events_.push_back(
        {now, std::move(provider), std::move(subject), std::move(event), std::move(detail)});
    while (events_.size() > capacity_) {
      events_.pop_front();
    }
  }
  const std::deque<ProviderEvent>& events() const { return events_; }

  // The VMs of one pool, as its provider's last complete listing found them. Returns whether
  // anything shown of them changed.
  bool SetVms(const std::string& pool, std::vector<CloudVm> vms) {
    auto key = [](const CloudVm& vm) {
      return std::tie(vm.provider, vm.pool, vm.name, vm.zone, vm.state, vm.detail);
    };
    std::vector<CloudVm>& now = vms_[pool];
    bool changed = now.size() != vms.size();
    for (size_t i = 0; !changed && i < vms.size(); ++i) {
      changed = key(now[i]) != key(vms[i]);
    }
    now = std::move(vms);
    return changed;
  }
  std::vector<CloudVm> vms() const {
    std::vector<CloudVm> all;
    for (const auto& [pool, vms] : vms_) {
      all.insert(all.end(), vms.begin(), vms.end());
    }
    return all;
  }

 private:
  size_t capacity_;
  std::deque<ProviderEvent> events_;
  std::map<std::string, std::vector<CloudVm>> vms_;  // by pool
};

}  // namespace tae::provider
