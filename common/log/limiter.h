#pragma once

// A bound on what one peer can make a daemon write: per key (a peer's address), the first line
// of each interval is written, and the others are counted and said in one line with the next one
// written ("... and 41,230 more like it from 10.0.0.7 since 12:00:01"). At most `max_keys` keys
// are kept; past that the rest share one key, so neither the log nor the limiter's memory grows
// with the number of peers. Thread-safe (gRPC threads call it). Pure apart from its lock: the
// caller passes the time.

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/synchronization/mutex.h"

namespace tae::log {

class LineLimiter {
 public:
  LineLimiter(double interval_s, size_t max_keys) : interval_s_(interval_s), max_keys_(max_keys) {}

  // Whether to write a line for `key` at `now`: nullopt to drop it (counted), else how many lines
  // for it were dropped since the last one written (0 for the first).
  std::optional<int64_t> Admit(const std::string& key, double now);

  // The key lines from `peer` share: a gRPC peer ("ipv4:10.0.0.7:51234", "ipv6:[::1]:4433")
  // without its port, so that a peer opening new connections does not get a key for each.
  static std::string PeerKey(const std::string& peer);

 private:
  struct State {
    double written_at = 0;
    int64_t dropped = 0;
  };
  const double interval_s_;
  const size_t max_keys_;
  absl::Mutex mu_;
  std::map<std::string, State> keys_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tae::log
