#pragma once

// Journal: every event of every run, numbered with the agent's sequence, kept until taed acks
// it. A reconnect resends everything unacked; taed stores events idempotently, so a resend is
// harmless. This first version keeps the journal in memory: events survive a lost connection or
// a taed restart, not a restart of the agent process itself.

#include <cstdint>
#include <deque>
#include <vector>

#include "tae/v1/agent_link.pb.h"

namespace tae::agent {

class Journal {
 public:
  // Numbers the event and keeps it. Returns its seq.
  uint64_t Append(tae::v1::Event event);
  // Up to max events not yet sent on the current connection, in seq order; marks them sent.
  std::vector<tae::v1::Event> TakeUnsent(size_t max);
  // Drops every event with seq <= `seq`.
  void Ack(uint64_t seq);
  // A new connection: everything unacked is to be sent again.
  void ResetSent() { sent_up_to_ = acked_; }

  size_t unacked() const { return events_.size(); }
  bool has_unsent() const { return next_seq_ - 1 > sent_up_to_; }
  uint64_t acked() const { return acked_; }

 private:
  std::deque<tae::v1::Event> events_;
  uint64_t next_seq_ = 1;
  uint64_t sent_up_to_ = 0;
  uint64_t acked_ = 0;
};

}  // namespace tae::agent
