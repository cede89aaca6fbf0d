#pragma once

// Agent: the tae-agent object graph. The Link carries messages, the Runner runs jobs, the Journal
// keeps every event until taed acks it. All state lives on one io_context thread; the link's
// threads only post to it.

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "agent/checkpoints/checkpoint_sync.h"
#include "agent/journal/journal.h"
#include "agent/link/link.h"
#include "agent/runner/event_files.h"
#include "agent/runner/runner.h"
#include "agent/stager/stager.h"
#include "boost/asio/io_context.hpp"
#include "boost/asio/steady_timer.hpp"
#include "common/host/host.h"

namespace tae::agent {

struct AgentOptions {
  std::string id;
  std::string taed;  // host:port of taed's agent listener
  std::string token;
  tls::ClientConfig tls;  // TLS to taed (link and stager); required beyond loopback
  int slots = 1;
  std::map<std::string, std::string> labels;
  std::string work_dir;
  std::string train_binary;
  int threads_per_run = 1;
  double heartbeat_s = 5;
  std::string python_dir;       // tae_log.py, on command jobs' PYTHONPATH
  std::string job_binary;       // tae-job, the per-run supervisor
  bool durable_journal = true;  // work_dir/journal on disk (false: in memory, for tests)
  double sys_interval_s = 5;    // sys/* points of each run every this many seconds; 0: off
};

class Agent {
 public:
  Agent(boost::asio::io_context* io, AgentOptions options);

  // Obtains the agent's credential (enrolling when it has none: agent/link/enrol.h), opens its
  // journal and starts its link. Blocking, before the io loop runs; `stopping` is asked while it
  // waits for taed (a stop signal): then it returns Cancelled.
  absl::Status Start(const std::function<bool()>& stopping = {});
  // Cancels every run, waits (up to grace) for their exits to be acked, then calls done.
  void Shutdown(std::function<void()> done, int grace_ms = 8000);
  // Exits without stopping runs: journals what is pending so a later agent adopts the jobs.
  void Abandon();
  // Set once the agent stopped for a fault of its own (Fatal): main exits with it.
  void set_on_fatal(std::function<void()> on_fatal) { on_fatal_ = std::move(on_fatal); }
  bool fatal() const { return fatal_; }

  // How long journal writes may keep failing (disk full, EIO) before the agent gives up.
  static constexpr double kJournalFailingS = 5;

 private:
  void OnConnected();
  void OnDisconnected(const std::string& why);
  void OnMessage(const tae::v1::TaedMessage& message);
  void OnEvent(tae::v1::Event event, std::optional<OutputMark> mark = std::nullopt);
  // Appends the pending events (with their output marks) to the journal and makes them durable.
  bool JournalPending();
  void AdoptOrphans();
  void ScheduleFlush();
  void Flush();
  void Heartbeat();
  void CheckShutdown();
  void StartRun(const tae::v1::StartRun& start);
  void OnStaged(const tae::v1::StartRun& start, StageResult result);
  // Restores the run's last checkpoint (StartRun.checkpoint) before it starts.
  void RestoreCheckpoint(const tae::v1::StartRun& start);
  void OnRestored(const tae::v1::StartRun& start, RestoreResult result);
  // Ends the run's staging; false (with its exit reported) when it was cancelled meanwhile.
  bool EndStaging(const tae::v1::StartRun& start);
  // The job marked its checkpoint directory complete: capture it now, upload it in turn.
  bool OnCheckpointMarked(const tae::v1::StartRun& start, metrics::CheckpointMark mark);
  // Profiles on demand (docs/profiles.md): taed's request to the job, and the job's answer.
  void RequestProfile(const tae::v1::ProfileRun& request);
  void OnProfileMarked(const tae::v1::StartRun& start, metrics::ProfileMark mark);
  void ProfileFailed(int64_t run_id, int attempt, const std::string& id, const std::string& error);
  // interrupted: the agent is going away; infra: the worker failed it before the job ran (a start
  // fault, docs/reliability.md). Either way taed requeues the run without counting the attempt,
  // until the same start fault repeats.
  void RunFailedToStart(const tae::v1::StartRun& start, const std::string& why, bool interrupted,
                        bool infra = true);
  // The agent cannot go on (its journal or work dir failed): tells taed (which quarantines it
  // and requeues its runs), stops its runs, and ends the process through on_fatal.
  void Fatal(const std::string& why);
  // A job's failure is the worker's (marked infra, with why) when, as it failed, the agent's
  // journal was failing, the run's directory had been removed, or the work dir's disk was full.
  void BlameWorker(tae::v1::Event* event);
  // The work dir's disk is full and a job here filled it (agent/runner/disk.h DiskFiller): that
  // job is stopped, failed with how much it wrote, and its directories removed at once. Returns
  // whether the disk was relieved now or within the last kReliefS: journal writes that failed
  // meanwhile are the job's doing, not a reason for the agent to stop.
  bool RelieveDisk();
  static constexpr double kReliefS = 15;
  // Whether a fill was given back within the last kReliefS.
  bool ReliefUnderWay() const;
  // `filler` filled the disk and its space is being given back; `uses`: every run's disk use
  // then. Starts a relief (RelieveDisk) and keeps who was beside the filler for BlameWorker.
  void NoteFill(const RunDisk& filler, const std::vector<RunDisk>& uses);
  void LogAgentLine(const tae::v1::StartRun& start, std::string text);

  // Runs whose code is being staged (fetched and materialised) before they start.
  struct Staging {
    bool cancelled = false;
    bool interrupted = false;
    std::string reason;
  };

  boost::asio::io_context* io_;
  AgentOptions options_;
  std::unique_ptr<Journal> journal_;
  // Events of the current burst, journaled together with the marks of the output they consumed.
  std::vector<tae::v1::Event> pending_events_;
  std::vector<SourceMark> pending_marks_;
  // seq of each run's exit event -> the run: once acked, its job directory is done with.
  std::map<uint64_t, std::pair<int64_t, int>> exits_;
  Runner runner_;
  std::unique_ptr<Link> link_;
  std::unique_ptr<Stager> stager_;
  std::unique_ptr<CheckpointSync> checkpoints_;
  std::map<std::pair<int64_t, int>, Staging> staging_;
  boost::asio::steady_timer heartbeat_timer_;
  boost::asio::steady_timer retry_timer_;
  bool fatal_ = false;
  std::function<void()> on_fatal_;
  std::optional<std::chrono::steady_clock::time_point> journal_failing_since_;
  // The last fill NoteFill saw given back, and when.
  struct GivenBack {
    DiskFill fill;
    std::chrono::steady_clock::time_point at;
  };
  std::optional<GivenBack> last_fill_;
  tae::v1::AgentFacts facts_;  // gathered once in Start, sent with every Register
  bool connected_ = false;
  bool flush_scheduled_ = false;
  std::function<void()> shutdown_done_;
};

}  // namespace tae::agent
