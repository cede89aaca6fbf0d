#pragma once

// Logs that cannot fill a disk: a daemon's stderr, when it is a file (taectl up makes taed's
// $TAE_HOME/logs/taed.log, taed makes each local agent's logs/agents/ID.log), is rotated by size.
// RotateStderr renames NAME to NAME.1 (NAME.1 to NAME.2, ..., dropping NAME.KEEP), opens NAME
// afresh with the same mode and makes it stderr (dup2: a line being written goes to one file or
// the other, whole). So a process writes at most about (keep + 1) * max_bytes. StderrRotation
// does it on a timer of the daemon's io_context.

#include <cstdint>

#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"

namespace tae::log {

// Whether it rotated; nothing when stderr is not a regular file or is below max_bytes.
bool RotateStderr(uint64_t max_bytes, int keep);

class StderrRotation {
 public:
  // Looks every `every_s` seconds (the default limits: 64 MiB, 3 kept: at most 256 MiB).
  StderrRotation(boost::asio::io_context* io, uint64_t max_bytes = uint64_t{64} << 20, int keep = 3,
                 double every_s = 30);
  ~StderrRotation();

 private:
  void Schedule();
  boost::asio::steady_timer timer_;
  const uint64_t max_bytes_;
  const int keep_;
  const double every_s_;
};

}  // namespace tae::log
