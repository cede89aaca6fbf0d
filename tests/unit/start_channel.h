#pragma once

// An agent channel for controller tests that keeps the StartRun messages taed sends down it.

#include <vector>

#include "server/registry/agent_channel.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::controller {

class FakeChannel : public registry::AgentChannel {
 public:
  void Send(const tae::v1::TaedMessage& message) override {
    if (message.has_start_run()) {
      starts.push_back(message.start_run());
    }
  }
  void Close() override {}
  std::vector<tae::v1::StartRun> starts;
};

}  // namespace tae::controller
