#pragma once

// The wall clock, once: every time TAE records (transitions, metric points, log lines, provider
// events, snapshots) is read here. Code that decides by time takes a clock as a parameter
// (controller::Options::clock) so that tests can fix it; this is the default it falls back to.

#include <chrono>
#include <cstdint>

namespace tae::clock {

// Seconds since the Unix epoch.
inline double WallNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Seconds on the monotonic clock (since an arbitrary point): for durations and deadlines, which
// a wall-clock step must not stretch or cut short.
inline double SteadyNow() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Nanoseconds since the Unix epoch (file-time comparisons: mtimes are in nanoseconds).
inline int64_t WallNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace tae::clock
