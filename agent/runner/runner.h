#pragma once

// Runner: runs each run as a child process in its own process group, turns its output into
// events (stdout/stderr lines -> log events, JSON lines on TAE_METRICS_FD -> metric events and,
// for a line's "meta" object, a run metadata event), and reports its exit once every pipe is
// drained and no process of the group remains. Single threaded: everything happens on the agent's
// io_context.

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/posix/stream_descriptor.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/steady_timer.hpp"
#include "common/metrics/metric_line.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::agent {

struct RunnerOptions {
  std::string work_dir;      // runs live in work_dir/runs/r<ID>-a<ATTEMPT>
  std::string train_binary;  // tae-train
  int threads_per_run = 1;   // exported as TAE_THREADS
  int kill_grace_ms = 5000;  // SIGTERM -> SIGKILL
  std::string python_dir;    // tae_log.py's directory, put on command jobs' PYTHONPATH
};

class Runner {
 public:
  // Receives every event (without seq) in the order it happened.
  using EventSink = std::function<void(tae::v1::Event)>;

  Runner(boost::asio::io_context* io, RunnerOptions options, EventSink sink);
  ~Runner();

  // Starts tae-train, or for a StartRun with a command, `/bin/sh -c COMMAND`, in the run
  // directory (which already holds the run's code when it has a snapshot).
  absl::Status Start(const tae::v1::StartRun& start);
  std::string RunDir(int64_t run_id, int attempt) const;
  // SIGTERM to the run's process group, SIGKILL after the grace; the exit is reported with
  // cancelled = true. Unknown runs are ignored.
  void Cancel(int64_t run_id, int attempt, const std::string& reason);
  // Stops every run because the agent is going away; their exits say `interrupted`, so taed
  // requeues them instead of marking them cancelled.
  void InterruptAll(const std::string& reason);

  std::vector<std::pair<int64_t, int>> Held() const;
  bool idle() const { return jobs_.empty(); }

 private:
  struct Job;
  void Terminate(std::shared_ptr<Job> job, const std::string& reason);
  void WatchChildren();
  void ReadPipe(std::shared_ptr<Job> job, int index);
  void OnLine(Job& job, int index, std::string line);
  void EmitMetrics(Job& job, metrics::MetricRecord record);
  void MaybeFinish(std::shared_ptr<Job> job);
  void VerifyGroupGone(std::shared_ptr<Job> job, int tries);
  void Emit(const Job& job, tae::v1::Event event);

  boost::asio::io_context* io_;
  RunnerOptions options_;
  EventSink sink_;
  boost::asio::signal_set sigchld_;
  // By (run id, attempt): a requeued run can arrive while its old attempt is still stopping.
  std::map<std::pair<int64_t, int>, std::shared_ptr<Job>> jobs_;
};

}  // namespace tae::agent
