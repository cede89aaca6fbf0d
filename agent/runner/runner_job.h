#pragma once

// The Runner's record of one job (agent/runner/runner.h), shared by its source files: runner.cc
// (start, adopt, read, finish) and runner_disk.cc (what a job writes on the worker's disk).

#include <sys/types.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/runner/event_files.h"
#include "agent/runner/runner.h"
#include "agent/sysstat/sysstat.h"
#include "boost/asio/steady_timer.hpp"
#include "common/metrics/metric_line.h"
#include "common/metrics/patterns.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::agent {

// A metrics event: `values` at `step`, in their order.
tae::v1::Event MetricsEvent(int64_t step,
                            const std::vector<std::pair<std::string, double>>& values);

struct Runner::Job {
  explicit Job(boost::asio::io_context* io) : kill_timer(*io) {}
  ~Job() {
    for (int fd : fds) {
      if (fd >= 0) {
        close(fd);
      }
    }
  }
  tae::v1::StartRun spec;
  std::string run_dir;
  std::string job_dir;
  pid_t supervisor = 0;  // tae-job; our child unless adopted
  bool adopted = false;
  bool supervisor_reaped = false;
  pid_t pgid = 0;  // the job's group, from job_dir/pgid
  bool started_emitted = false;
  std::array<int, 3> fds = {-1, -1, -1};
  std::array<uint64_t, 3> offsets = {0, 0, 0};  // of the first byte not yet in `partial`
  std::array<std::string, 3> partial;
  bool cancel_requested = false;
  bool interrupted = false;
  bool signalled = false;
  std::string cancel_reason;
  // Stopped by the agent for the job's own doing (past resources.max_disk): reported failed with
  // this reason, not cancelled.
  std::string fail_reason;
  uint64_t free_at_start = 0;  // the work dir's free bytes when the job started
  // Its supervisor died without an exit while its group lived: since when, and whether the
  // group outlived it by kOrphanGraceMs (Finish).
  std::optional<std::chrono::steady_clock::time_point> orphaned_at;
  bool outlived_supervisor = false;
  bool finishing = false;
  bool command = false;  // the user's command: its stdout's key=value lines are metrics too
  int64_t last_step = 0;
  std::string last_stderr;                                 // the likely explanation of a failure
  std::optional<metrics::CheckpointMark> checkpoint_mark;  // the newest of the current read
  // job.checkpoints = "watch" (Runner::WatchCheckpoints): the directory's signature as last
  // captured (at start: what the attempt began with), as last seen, and since when seen so.
  bool watch_checkpoints = false;
  std::string watch_captured;
  std::string watch_seen;
  std::chrono::steady_clock::time_point watch_since{};
  std::chrono::steady_clock::time_point watch_due{};
  boost::asio::steady_timer kill_timer;
  std::unique_ptr<sysstat::JobSampler> sys;  // from the first sample that knows the group
  std::optional<int64_t> sys_step;           // the step of the last sys/* point
  // [job.metrics]: its patterns, over stdout (bit 0) and/or stderr (bit 1) (runner_sources.cc).
  std::unique_ptr<metrics::LinePatterns> patterns;
  int pattern_streams = 0;
  std::string patterns_matched;  // their MatchedFlags as kept in job_dir/patterns_matched
  // job.tensorboard: its event files, and when they are next looked at.
  std::unique_ptr<EventFileFollower> event_files;
  std::chrono::steady_clock::time_point event_files_due{};
  std::set<std::string> tags_renamed;  // tags already said to be stored under another name
};

}  // namespace tae::agent
