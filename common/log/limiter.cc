#include "common/log/limiter.h"

namespace tae::log {

std::optional<int64_t> LineLimiter::Admit(const std::string& key, double now) {
  absl::MutexLock lock(&mu_);
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= max_keys_) {
      // Old keys whose interval is over go first; if none has, the rest share one key.
      for (auto old = keys_.begin(); old != keys_.end();) {
        old = now - old->second.written_at >= interval_s_ && old->second.dropped == 0
                  ? keys_.erase(old)
                  : std::next(old);
      }
    }
    const std::string use = keys_.size() >= max_keys_ ? std::string("(other peers)") : key;
    it = keys_.find(use);
    if (it == keys_.end()) {
      keys_[use] = State{now, 0};
      return 0;
    }
  }
  State& state = it->second;
  if (now - state.written_at < interval_s_) {
    state.dropped += 1;
    return std::nullopt;
  }
  const int64_t dropped = state.dropped;
  state = State{now, 0};
  return dropped;
}

std::string LineLimiter::PeerKey(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  const size_t first = peer.find(':');
  if (colon == std::string::npos || colon == first) {
    return peer;  // no port (a unix socket peer, "unix:...")
  }
  return peer.substr(0, colon);
}

}  // namespace tae::log
