#pragma once

// How taed's core talks to one connected agent. Implemented by the AgentLink stream
// (server/rpc) and by fakes in tests. Called only on the core thread.

#include "tae/v1/agent_link.pb.h"

namespace tae::registry {

class AgentChannel {
 public:
  virtual ~AgentChannel() = default;
  // Queues a message for the agent; never blocks. Dropped once the channel is closed.
  virtual void Send(const tae::v1::TaedMessage& message) = 0;
  // Ends the stream (e.g. when the agent reconnected on a new stream).
  virtual void Close() = 0;
};

}  // namespace tae::registry
