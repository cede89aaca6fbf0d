#pragma once

// Runner: runs each run under its own supervisor (tae-job), which puts the job in a new process
// group with stdout, stderr and the metrics fd appended to files in the run's job directory
// (work_dir/runs/r<ID>-a<ATTEMPT>.job) and records its exit there. The Runner tails those files
// and turns them into events (stdout/stderr lines -> log events; JSON lines on the metrics fd ->
// metric and run-metadata events; for command jobs, key=value stdout lines -> metric events too),
// each tagged with the file offset it ends at, so that an agent restarted mid-run adopts the job
// (Adopt) and resumes every file exactly where its journal says. The exit is reported once the
// job's group is gone and every file is read to the end. Single threaded: everything happens on
// the agent's io_context.

#include <sys/types.h>

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "agent/runner/disk.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/signal_set.hpp"
#include "boost/asio/steady_timer.hpp"
#include "common/metrics/metric_line.h"
#include "tae/v1/agent_link.pb.h"

namespace tae::agent {

// Every regular file below `dir` (symlinks and the rest left out) with its size and modification
// time, in path order, as one string: what job.checkpoints = "watch" compares from look to look.
// Empty for a missing or empty directory.
std::string CheckpointDirSignature(const std::string& dir);

namespace sysstat {
class AcceleratorProbe;
}

struct RunnerOptions {
  std::string work_dir;      // runs live in work_dir/runs/r<ID>-a<ATTEMPT>
  std::string train_binary;  // tae-train
  int threads_per_run = 1;   // exported as TAE_THREADS
  int kill_grace_ms = 5000;  // SIGTERM -> SIGKILL
  std::string python_dir;    // tae_log.py's directory, put on command jobs' PYTHONPATH
  std::string job_binary;    // tae-job, the per-run supervisor
  int poll_ms = 50;          // how often job files are read
  // How often the directories of runs with a resources.max_disk are measured; one past it is
  // stopped and reported failed.
  double disk_check_s = 5;
  // How often each job's sys/* points are sampled (CPU, memory, accelerators); 0: never.
  double sys_interval_s = 5;
};

// Where an event's bytes end in the job's output files: journaled with the event, so a restarted
// agent resumes reading there. stream: 0 stdout, 1 stderr, 2 metrics.
struct OutputMark {
  int stream = 0;
  uint64_t offset = 0;
};

// A job left by an earlier agent process, found on disk.
struct OrphanJob {
  tae::v1::StartRun start;
  bool finished = false;  // its exit is recorded
};

class Runner {
 public:
  // Receives every event (without seq) in the order it happened, with the output position it
  // accounts for (none for events that come from no file, e.g. started/exited).
  using EventSink = std::function<void(tae::v1::Event, std::optional<OutputMark>)>;

  Runner(boost::asio::io_context* io, RunnerOptions options, EventSink sink);
  ~Runner();

  // Starts tae-train, or for a StartRun with a command, `/bin/sh -c COMMAND`, in the run
  // directory (which already holds the run's code when it has a snapshot).
  absl::Status Start(const tae::v1::StartRun& start);
  // Takes over a job an earlier agent process started (Orphans()), reading each output file
  // from `offsets` (stdout, stderr, metrics; what the journal has already recorded).
  // Event files (job.tensorboard) resume at `event_file_offsets` (journal stream -> offset).
  absl::Status Adopt(const tae::v1::StartRun& start, std::array<uint64_t, 3> offsets,
                     const std::map<int, uint64_t>& event_file_offsets = {});
  // Job directories whose exit was not yet delivered to taed (no `done` file).
  std::vector<OrphanJob> Orphans() const;
  // MarkDone's removal of ended attempts beyond kKeepEndedAttempts.
  void PruneEndedAttempts();
  // The exit of this run was acked by taed: its job directory is done with. Then the attempts
  // that ended longest ago, beyond the newest kKeepEndedAttempts, have their run and job
  // directories removed (a worker runs for months), and runs/rN (TAE_CHECKPOINT_DIR) of a run
  // none of whose attempts is kept or live, unless its checkpoints stay only on the worker
  // (resources.keep_checkpoints = 0); one with an upload in flight (runs/rN/.captures) is marked
  // and goes at a later attempt's end once the upload is done.
  void MarkDone(int64_t run_id, int attempt);
  static constexpr size_t kKeepEndedAttempts = 32;

  // SIGTERM to the run's process group, SIGKILL after the grace; the exit is reported with
  // cancelled = true. Unknown runs are ignored.
  void Cancel(int64_t run_id, int attempt, const std::string& reason);
  // Stops every run because the agent is going away; their exits say `interrupted`, so taed
  // requeues them instead of marking them cancelled.
  void InterruptAll(const std::string& reason);

  std::vector<std::pair<int64_t, int>> Held() const;
  // What each held run has written into its directories (measured now), with what was free when
  // it started and its resources.max_disk (agent/runner/disk.h).
  std::vector<RunDisk> DiskUse() const;
  // The attempt's resources.max_disk (0: none, or not held).
  int64_t MaxDisk(int64_t run_id, int attempt) const;
  // The attempt's directories (its run directory, and the run's checkpoint directory here) are
  // removed once its exit is acked (MarkDone): a run that failed for its disk use gives the
  // space back to the runs after it.
  void ReclaimDisk(int64_t run_id, int attempt);
  // A job that filled the worker's disk: stopped and reported failed with `reason`, and its
  // directories removed now (its output is in its job directory), so the agent's journal and
  // the other runs get the space back before it has even exited.
  void StopAndReclaim(int64_t run_id, int attempt, const std::string& reason);
  // Whether the agent stopped the attempt for its disk use (past max_disk, or it filled the
  // disk): its failure is its own, whatever else is seen on the worker.
  bool StoppedForDisk(int64_t run_id, int attempt) const;
  bool idle() const { return jobs_.empty(); }
  std::string RunDir(int64_t run_id, int attempt) const;
  std::string JobDir(int64_t run_id, int attempt) const;
  // TAE_CHECKPOINT_DIR: work_dir/runs/r<ID>/checkpoint, shared by the run's attempts here.
  std::string CheckpointDir(int64_t run_id) const;

  // Called (on the io_context) when a job marks its checkpoint directory complete
  // (tae_log.checkpoint, tae-train's saves): rank 0's only, and of the marks one read of the
  // job's output finds, only the newest. With job.checkpoints = "watch", also when the files in
  // TAE_CHECKPOINT_DIR changed and then stayed unchanged for kWatchQuietS (or the job ended): a
  // mark with `watched` set, at the run's last reported step. Returns whether the directory was
  // captured (or need not be); a watched one that was not is tried again when it next settles.
  using CheckpointHandler =
      std::function<bool(const tae::v1::StartRun& start, metrics::CheckpointMark mark)>;
  static constexpr double kWatchQuietS = 2.0;
  void set_checkpoint_handler(CheckpointHandler handler) {
    checkpoint_handler_ = std::move(handler);
  }

  // Profiles on demand (docs/profiles.md). TAE_PROFILE_DIR (job_dir/profile) is where the job
  // writes a profile; TAE_PROFILE_REQUEST (job_dir/profile-request.json) appears when one is
  // asked for. Both belong to one attempt.
  std::string ProfileDir(int64_t run_id, int attempt) const;
  std::string ProfileRequestPath(int64_t run_id, int attempt) const;
  // Writes the request file for the attempt's job (atomically); NotFound when this agent does not
  // run that attempt, FailedPrecondition when it is being stopped or is not rank 0.
  absl::Status RequestProfile(int64_t run_id, int attempt, const std::string& id, int steps,
                              double seconds);
  // Called (on the io_context) for each profile mark of rank 0's job, in output order.
  using ProfileHandler =
      std::function<void(const tae::v1::StartRun& start, metrics::ProfileMark mark)>;
  void set_profile_handler(ProfileHandler handler) { profile_handler_ = std::move(handler); }

 private:
  struct Job;
  void Terminate(std::shared_ptr<Job> job, const std::string& reason);
  void WatchChildren();
  void SchedulePoll();
  void Poll();
  // Reads what is new in the job's files; returns true once the job is over and fully read.
  bool Pump(Job& job);
  void ReadStream(Job& job, int index, bool final);
  void DeliverCheckpointMark(Job& job);
  // job.checkpoints = "watch": looks at TAE_CHECKPOINT_DIR (about once a second; at once when
  // `final`) and delivers a watched mark once what changed has settled.
  void WatchCheckpoints(Job& job, bool final);
  void OnLine(Job& job, int index, std::string line, uint64_t end);
  // The record's values at its step, or at the job's last step when it has none; the step becomes
  // the job's last step.
  void EmitMetrics(Job& job, metrics::MetricRecord record, std::optional<OutputMark> mark);
  // The `started` event (the job's process group and run dir), once per attempt.
  void EmitStarted(Job& job);
  void Finish(std::shared_ptr<Job> job);
  void Emit(const Job& job, tae::v1::Event event, std::optional<OutputMark> mark);
  void ScheduleSysSample();
  // Measures the runs with a resources.max_disk every disk_check_s; stops those past it.
  void ScheduleDiskCheck();
  void CheckDisk();
  // The directories a run's disk use is measured in (its run directory and r<ID>/).
  std::vector<std::string> DiskDirs(int64_t run_id, int attempt) const;
  // One scan of /proc for every held job; emits the sys/* points of those whose step advanced.
  void SampleSys();
  absl::Status OpenOutputs(Job& job, std::array<uint64_t, 3> offsets);
  // runner_sources.cc: [job.metrics] patterns and job.tensorboard event files, from the run's
  // config; event files resume at `event_file_offsets` (journal stream -> offset).
  void SetUpSources(Job& job, const std::map<int, uint64_t>& event_file_offsets);
  // The patterns' values of an output line (nullopt: none, or the stream is not theirs).
  std::optional<metrics::MetricRecord> MatchPatterns(Job& job, int index, std::string_view line);
  // Reads the job's event files (at most once a second unless `final`) and emits their points.
  void PollEventFiles(Job& job, bool final);
  // The patterns that never matched a line of the attempt, as a warning in its log.
  void WarnUnmatchedPatterns(Job& job);

  boost::asio::io_context* io_;
  RunnerOptions options_;
  EventSink sink_;
  CheckpointHandler checkpoint_handler_;
  ProfileHandler profile_handler_;
  boost::asio::signal_set sigchld_;
  boost::asio::steady_timer poll_timer_;
  bool polling_ = false;
  boost::asio::steady_timer sys_timer_;
  bool sampling_ = false;
  boost::asio::steady_timer disk_timer_;
  bool disk_checking_ = false;
  std::set<std::pair<int64_t, int>> reclaim_;  // attempts whose directories go at MarkDone
  std::unique_ptr<sysstat::AcceleratorProbe> accelerators_;  // null when sampling is off
  // By (run id, attempt): a requeued run can arrive while its old attempt is still stopping.
  std::map<std::pair<int64_t, int>, std::shared_ptr<Job>> jobs_;
};

}  // namespace tae::agent
