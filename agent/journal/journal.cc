#include "agent/journal/journal.h"

#include <algorithm>

namespace tae::agent {

uint64_t Journal::Append(tae::v1::Event event) {
  uint64_t seq = next_seq_++;
  event.set_seq(seq);
  events_.push_back(std::move(event));
  return seq;
}

std::vector<tae::v1::Event> Journal::TakeUnsent(size_t max) {
  std::vector<tae::v1::Event> out;
  for (const tae::v1::Event& event : events_) {
    if (out.size() >= max) {
      break;
    }
    if (event.seq() > sent_up_to_) {
      out.push_back(event);
      sent_up_to_ = event.seq();
    }
  }
  return out;
}

void Journal::Ack(uint64_t seq) {
  while (!events_.empty() && events_.front().seq() <= seq) {
    events_.pop_front();
  }
  acked_ = std::max(acked_, seq);
  sent_up_to_ = std::max(sent_up_to_, acked_);
}

}  // namespace tae::agent
